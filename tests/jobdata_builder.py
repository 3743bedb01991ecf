"""Build a job's store views by hand, row by row, for the analyzer tests.

Rows follow the store's schema (`triage.store.schema.TABLES`), so a column an analyzer reads that
the store does not have fails here as it would there. `connect()` gives an in-memory DuckDB
connection with one view per table, like a store snapshot; `load()` runs `load_job` over it.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import duckdb
import pyarrow as pa

from triage.store.job_data import JobData, load_job
from triage.store.schema import TABLES
from triage.store.writer import StoreWriter

T0 = 1_700_000_000.0
SPOOL = ("ranks", "steps", "collectives", "events", "heartbeats")


class JobBuilder:
    def __init__(self, job_id: str = "job1", run_id: str | None = None) -> None:
        self.job_id = job_id
        self.run_id = run_id
        self.rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._where: dict[tuple[int, int], tuple[str, int | None]] = {}
        self._pid = 1000

    # -- ranks and their identity ---------------------------------------------------------------
    def rank(
        self,
        rank: int,
        node: str,
        gpu: int | None,
        attempt: int = 0,
        start: float = T0,
        pid: int | None = None,
        world_size: int = 0,
    ) -> JobBuilder:
        self._pid += 1
        self._where[(attempt, rank)] = (node, gpu)
        self.rows["ranks"].append(
            dict(
                self._id(attempt, rank),
                pid=pid or self._pid,
                local_rank=gpu,
                world_size=world_size,
                hostname=node,
                device=f"cuda:{gpu}",
                gpu_uuid=f"GPU-{node}-{gpu}",
                start_time=start,
            )
        )
        self.event(attempt, rank, start, "process_start", f"rank {rank} on {node}")
        return self

    def world(self, n: int, per_node: int = 4, attempt: int = 0, start: float = T0) -> JobBuilder:
        for r in range(n):
            self.rank(r, f"node{r // per_node}", r % per_node, attempt, start, world_size=n)
        return self

    def ranks_of(self, attempt: int = 0) -> list[int]:
        return sorted(r for a, r in self._where if a == attempt)

    def _id(self, attempt: int, rank: int) -> dict[str, Any]:
        node, gpu = self._where.get((attempt, rank), ("node0", 0))
        return {
            "job_id": self.job_id,
            "run_id": self.run_id,
            "attempt": attempt,
            "rank": rank,
            "node": node,
            "gpu": gpu,
        }

    # -- spool rows -----------------------------------------------------------------------------
    def step(
        self,
        attempt: int,
        rank: int,
        step: int,
        start: float,
        end: float,
        *,
        compute_s: float | None = None,
        data_wait_s: float = 0.0,
        loss: float = 1.0,
        grad_norm: float = 1.0,
    ) -> JobBuilder:
        nonfinite = any(v != v or v in (float("inf"), float("-inf")) for v in (loss, grad_norm))
        self.rows["steps"].append(
            dict(
                self._id(attempt, rank),
                step=step,
                start_time=start,
                end_time=end,
                data_wait_s=data_wait_s,
                compute_s=(end - start - data_wait_s) * 0.6 if compute_s is None else compute_s,
                optimizer_s=0.01,
                collective_wait_s=0.0,
                tokens=1024,
                samples=8,
                loss=loss,
                grad_norm=grad_norm,
                nonfinite=nonfinite,
                peak_memory_bytes=1 << 30,
                mfu=None,
            )
        )
        return self

    def steps(
        self,
        attempt: int,
        steps: range,
        t0: float,
        step_s: float = 1.0,
        *,
        compute: Callable[[int, int], float] | None = None,
        loss: Callable[[int, int], float] | None = None,
        heartbeat: bool = True,
    ) -> float:
        """Every rank of the attempt runs `steps` in lockstep; returns the end time."""
        t = t0
        for s in steps:
            for r in self.ranks_of(attempt):
                self.step(
                    attempt,
                    r,
                    s,
                    t,
                    t + step_s,
                    compute_s=compute(r, s) if compute else None,
                    loss=loss(r, s) if loss else 2.0 / (1 + s),
                )
                if heartbeat:
                    self.heartbeat(attempt, r, t + step_s, s)
            t += step_s
        return t

    def collective(
        self,
        attempt: int,
        rank: int,
        group: str,
        seq: int,
        enter: float,
        end: float | None,
        op: str = "all_gather",
        group_size: int = 4,
        step: int | None = None,
    ) -> JobBuilder:
        self.rows["collectives"].append(
            dict(
                self._id(attempt, rank),
                seq=seq,
                op=op,
                group=group,
                group_size=group_size,
                bytes=1 << 20,
                dtype="float32",
                step=step,
                enter_time=enter,
                end_time=end,
                algbw_bytes_per_s=None,
                busbw_bytes_per_s=None,
            )
        )
        return self

    def heartbeat(
        self,
        attempt: int,
        rank: int,
        time: float,
        step: int | None,
        inflight: tuple[str, str, int, float] | None = None,
    ) -> JobBuilder:
        op, group, seq, since = inflight or (None, None, None, None)
        self.rows["heartbeats"].append(
            dict(
                self._id(attempt, rank),
                time=time,
                step=step,
                pid=0,
                inflight_op=op,
                inflight_group=group,
                inflight_seq=seq,
                inflight_since=since,
            )
        )
        return self

    def event(
        self,
        attempt: int,
        rank: int,
        time: float,
        kind: str,
        message: str = "",
        step: int | None = None,
        **detail: Any,
    ) -> JobBuilder:
        self.rows["events"].append(
            dict(
                self._id(attempt, rank),
                time=time,
                kind=kind,
                step=step,
                message=message,
                detail=json.dumps(detail) if detail else None,
                source="rank",
            )
        )
        return self

    # -- agent rows -----------------------------------------------------------------------------
    def gpu_sample(self, node: str, gpu: int, time: float, **fields: Any) -> JobBuilder:
        self.rows["gpu_samples"].append(
            {
                "time": time,
                "node": node,
                "gpu": gpu,
                "uuid": f"GPU-{node}-{gpu}",
                "simulated": True,
                "gpu_up": True,
                **fields,
            }
        )
        return self

    def gpu_event(
        self,
        node: str,
        gpu: int | None,
        time: float,
        xid: int | None,
        text: str,
        kind: str = "xid",
        source: str = "nvml_event",
    ) -> JobBuilder:
        self.rows["gpu_events"].append(
            dict(
                time=time,
                node=node,
                gpu=gpu,
                uuid=f"GPU-{node}-{gpu}",
                kind=kind,
                xid=xid,
                text=text,
                source=source,
                simulated=True,
            )
        )
        return self

    def disk_sample(self, node: str, time: float, path: str, free_bytes: int, total_bytes: int) -> JobBuilder:
        self.rows["disk_samples"].append(
            dict(time=time, node=node, path=path, free_bytes=free_bytes, total_bytes=total_bytes)
        )
        return self

    def nic_sample(
        self,
        node: str,
        time: float,
        nic: str,
        up: bool,
        gpu: int | None = None,
        link_downs: int | None = None,
    ) -> JobBuilder:
        self.rows["nic_samples"].append(
            dict(time=time, node=node, nic=nic, up=up, link_downs_total=link_downs, gpu=gpu)
        )
        return self

    def kernel_event(self, node: str, time: float, kind: str, message: str, **fields: Any) -> JobBuilder:
        self.rows["kernel_events"].append(
            dict(time=time, node=node, kind=kind, raw=f"[{time:.3f}] {message}", message=message, **fields)
        )
        return self

    # -- the snapshot ---------------------------------------------------------------------------
    def connect(self, tables: tuple[str, ...] | None = None) -> duckdb.DuckDBPyConnection:
        con = duckdb.connect()
        names = tables if tables is not None else tuple(sorted(set(SPOOL) | set(self.rows)))
        for name in names:
            schema = TABLES[name].schema
            arrow = pa.Table.from_pylist(self.rows.get(name, []), schema=schema)
            con.register(f"arrow_{name}", arrow)
            con.execute(f'CREATE VIEW "{name}" AS SELECT * FROM arrow_{name}')
        return con

    def write_store(self, data_dir: str | os.PathLike[str]) -> None:
        """The same rows as a real store: one partition per node, through the store's writer."""
        by_node: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
        for table, rows in self.rows.items():
            for row in rows:
                by_node[row["node"]][table].append(row)
        for node, tables in by_node.items():
            with StoreWriter(data_dir, node) as writer:
                for table, rows in tables.items():
                    writer.append_rows(table, rows)

    def load(self, **kwargs: Any) -> JobData:
        return load_job(self.connect(), self.job_id, **kwargs)
