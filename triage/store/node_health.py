"""The fleet's memory of bad hardware: the node health ledger (table `node_health`).

A GPU lost under one job is still lost when the next job is placed; a node that failed two
jobs this week will likely fail a third. The supervisor writes a quarantine when a verdict
blames hardware (and `triage nodes clear` writes a clear), in the `supervisor` partition, so
every later `triage run` on the data dir leaves the node out and every analysis can tell "job
placed on a quarantined GPU" from a new fault. Append-only: the newest row per (node, GPU)
decides; a node-level row (`gpu` NULL) covers all its GPUs, and clearing a node clears its
GPUs too. Read with pyarrow alone, like `job_results`: cheap for a supervisor's start-up, and
open to the node agent, which must not load DuckDB.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq

from triage.store.layout import SUPERVISOR_PARTITION, partition_dir
from triage.store.manifest import load_manifest
from triage.store.schema import NODE_HEALTH, NODE_HEALTH_STATES
from triage.store.shared_writer import DEFAULT_WAIT_S, shared_writer

QUARANTINED, CLEARED = NODE_HEALTH_STATES
#: `source` of a row: a verdict's hardware fault, the repeat-offender rule, a person, the
#: lemon-node test over the fleet's history (`analyzers.lemons`).
SOURCE_VERDICT, SOURCE_REPEAT_OFFENDER, SOURCE_MANUAL = "verdict", "repeat_offender", "manual"
SOURCE_LEMON = "lemon"

#: (node, gpu) with gpu None for the node as a whole
Key = tuple[str, int | None]


@dataclass(frozen=True)
class HealthEntry:
    """One ledger row. `gpu` None: the node as a whole."""

    time: float
    node: str
    gpu: int | None
    state: str  # QUARANTINED or CLEARED
    reason: str
    source: str  # SOURCE_*
    by: str
    category: str | None = None
    xid: int | None = None
    evidence: list[Any] = field(default_factory=list)  # the verdict's Evidence dicts
    job_id: str | None = None
    run_id: str | None = None
    attempt: int | None = None

    @property
    def where(self) -> str:
        return self.node if self.gpu is None else f"{self.node} GPU {self.gpu}"

    def covers(self, gpu: int | None) -> bool:
        """Whether this row speaks for `gpu` of its node (a node-level row speaks for all)."""
        return self.gpu is None or self.gpu == gpu

    def to_row(self) -> dict[str, object]:
        return {**asdict(self), "evidence": json.dumps(self.evidence)}

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> HealthEntry:
        """From a stored row (pyarrow or pandas: integer columns may come back as floats)."""
        raw = row.get("evidence")
        try:
            evidence = json.loads(raw) if isinstance(raw, str) else []
        except ValueError:
            evidence = [raw]
        values: dict[str, Any] = {k: row.get(k) for k in cls.__dataclass_fields__ if k != "evidence"}
        for k in ("gpu", "xid", "attempt"):
            values[k] = None if values[k] is None else int(values[k])
        values["time"] = float(values["time"])
        values["reason"] = values["reason"] or ""
        values["source"] = values["source"] or ""
        values["by"] = values["by"] or ""
        return cls(**values, evidence=evidence if isinstance(evidence, list) else [])


def record_health(
    data_dir: str | os.PathLike[str], entries: Sequence[HealthEntry], *, wait_s: float = DEFAULT_WAIT_S
) -> None:
    """Append ledger rows (waiting up to `wait_s` for another supervisor's write)."""
    if entries:
        with shared_writer(data_dir, wait_s=wait_s) as writer:
            writer.append_rows("node_health", [e.to_row() for e in entries])


def _read(
    data_dir: str | os.PathLike[str], table: str, columns: Sequence[str], since: float | None = None
) -> list[dict[str, Any]]:
    """Rows of one table of the supervisor partition (time >= `since` where given), with
    `columns` (None where an older segment lacks one)."""
    part = partition_dir(data_dir, SUPERVISOR_PARTITION)
    manifest = load_manifest(part)
    if manifest is None:
        return []
    rows: list[dict[str, Any]] = []
    for seg in manifest.table_segments(table):
        if since is not None and seg.max_time is not None and seg.max_time < since:
            continue
        try:
            with pq.ParquetFile(part / seg.file) as file:
                present = [c for c in columns if c in file.schema_arrow.names]
                data = file.read(columns=present)
        except FileNotFoundError:  # compacted away since the manifest was read
            continue
        if since is not None:
            data = data.filter(pc.greater_equal(data["time"], since))
        rows += [{c: r.get(c) for c in columns} for r in data.to_pylist()]
    return rows


def read_ledger(data_dir: str | os.PathLike[str]) -> list[HealthEntry]:
    """Every ledger row, oldest first."""
    rows = _read(data_dir, "node_health", NODE_HEALTH.names)
    return sorted((HealthEntry.from_row(r) for r in rows), key=lambda e: e.time)


def current_state(entries: Iterable[HealthEntry], before: float | None = None) -> dict[Key, HealthEntry]:
    """The deciding row per (node, gpu) among the rows written before `before` (all by
    default): the newest, except that a node-level clear also ends its GPUs' rows."""
    state: dict[Key, HealthEntry] = {}
    for e in sorted(entries, key=lambda e: e.time):
        if before is not None and e.time >= before:
            break
        if e.gpu is None and e.state == CLEARED:
            for key in [k for k in state if k[0] == e.node]:
                del state[key]
        state[(e.node, e.gpu)] = e
    return state


def standing(state: dict[Key, HealthEntry], node: str, gpu: int | None = None) -> HealthEntry | None:
    """The quarantine that holds (node, gpu) out of service: the node's own first, then the
    GPU's; None if neither stands. `gpu` None asks about the node as a whole."""
    for key in ((node, None), (node, gpu)):
        e = state.get(key)
        if e is not None and e.state == QUARANTINED:
            return e
    return None


def quarantines(entries: Iterable[HealthEntry], before: float | None = None) -> dict[str, list[HealthEntry]]:
    """node -> the quarantines standing on it (node-level first, then by GPU)."""
    out: dict[str, list[HealthEntry]] = {}
    order = sorted(
        current_state(entries, before).items(),
        key=lambda kv: (kv[0][0], -1 if kv[0][1] is None else kv[0][1]),
    )
    for (node, _), e in order:
        if e.state == QUARANTINED:
            out.setdefault(node, []).append(e)
    return out


def quarantined_nodes(data_dir: str | os.PathLike[str]) -> dict[str, list[HealthEntry]]:
    """node -> its standing quarantines: what a job's placement must leave out."""
    return quarantines(read_ledger(data_dir))


def clear_node(
    data_dir: str | os.PathLike[str],
    node: str,
    *,
    by: str,
    gpu: int | None = None,
    now: float | None = None,
    wait_s: float = DEFAULT_WAIT_S,
) -> list[HealthEntry]:
    """Return a node (`gpu` None: with all its GPUs) or one GPU to service; the quarantines
    this ended, [] (and nothing written) where none stood. Clearing one GPU leaves a
    node-level quarantine standing."""
    state = current_state(read_ledger(data_dir))
    ended = [
        e for (n, g), e in state.items() if n == node and e.state == QUARANTINED and (gpu is None or g == gpu)
    ]
    if not ended:
        return []
    was = "; ".join(f"{e.where}: {e.reason}" for e in sorted(ended, key=lambda e: e.time))
    only = ended[0] if len(ended) == 1 else None
    record_health(
        data_dir,
        [
            HealthEntry(
                time=time.time() if now is None else now,
                node=node,
                gpu=gpu,
                state=CLEARED,
                reason=f"returned to service by {by}; was quarantined for {was}"[:1000],
                source=SOURCE_MANUAL,
                by=by,
                category=only.category if only else None,
                xid=only.xid if only else None,
            )
        ],
        wait_s=wait_s,
    )
    return ended


@dataclass(frozen=True)
class Implication:
    """An incident the supervisor recorded that named a culprit node."""

    time: float
    node: str
    gpu: int | None
    category: str
    job_id: str | None
    run_id: str | None
    attempt: int | None


def read_implications(data_dir: str | os.PathLike[str], since: float) -> list[Implication]:
    """Incidents with a culprit node recorded at or after `since`, oldest first."""
    rows = _read(
        data_dir,
        "incidents",
        ["time", "culprit_node", "culprit_gpu", "category", "job_id", "run_id", "attempt"],
        since,
    )
    return sorted(
        (
            Implication(
                float(r["time"]),
                str(r["culprit_node"]),
                r["culprit_gpu"],
                str(r["category"]),
                r["job_id"],
                r["run_id"],
                r["attempt"],
            )
            for r in rows
            if r["culprit_node"] and r["time"] is not None
        ),
        key=lambda i: i.time,
    )
