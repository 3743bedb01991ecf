"""A synthetic fleet history: many supervised runs on many nodes, a few of them lemons.

What `triage report` reads is each run's accounting (`attempt_usage`, `lost_time`, `runs`), so
the generator writes exactly those rows, as `triage run` would, for runs simulated from a
failure model: each node fails (hardware: lost GPU, HBM ECC, NVLink, host, NIC) at a base rate
per node-hour, a lemon node at `lemon_factor` times it; each run also meets software failures
at a rate per run-hour, culprit on a node of its own but not that node's fault. A failed
attempt loses its progress since its last checkpoint, pays detection and restart, and the next
attempt pays start-up and a checkpoint load, leaving out a hardware culprit's node. A fail-fast
failure ends the run, except that `loop_share` of them are restarted anyway and fail again (an
avoidable restart). The truth (which nodes are lemons) comes back for scoring the lemon test.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from triage.config import ConfigError
from triage.display import Status
from triage.store.schema import table_spec
from triage.store.shared_writer import shared_writer
from triage.taxonomy import Category

HARDWARE = (
    Category.GPU_FALLEN_OFF_BUS,
    Category.GPU_MEMORY_ERROR,
    Category.NVLINK_ERROR,
    Category.NODE_FAILURE,
    Category.NETWORK_ERROR,
    Category.HOST_OOM,
)
SOFTWARE = (
    Category.USER_CODE_ERROR,
    Category.GPU_OOM,
    Category.DATA_PIPELINE_ERROR,
    Category.NUMERICAL_INSTABILITY,
    Category.CHECKPOINT_ERROR,
)
#: GPUs a run asks for, and how often
SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
SIZE_WEIGHTS = (0.14, 0.1, 0.12, 0.24, 0.14, 0.1, 0.07, 0.05, 0.03, 0.01)
GPUS_PER_NODE = 8
MAX_ATTEMPTS = 6


@dataclass(frozen=True)
class FleetSpec:
    jobs: int = 10_000
    nodes: int = 1_000
    lemons: int = 5
    seed: int = 0
    days: float = 7.0
    end: float | None = None  # unix time the history ends at; None: now
    node_failures_per_hour: float = 1 / 2000  # a healthy node: 12 hardware failures per 1000 node-days
    lemon_factor: float = 100.0  # a lemon fails a job about every 20 node-hours
    software_failures_per_hour: float = 1 / 40  # per run, whatever its size
    loop_share: float = 0.1

    def __post_init__(self) -> None:
        if self.jobs < 1 or self.nodes < 2:
            raise ConfigError("a fleet needs at least 1 job and 2 nodes")
        if not 0 <= self.lemons < self.nodes:
            raise ConfigError(f"lemons must be in [0, nodes), got {self.lemons}")
        if self.days <= 0:
            raise ConfigError("days must be > 0")


@dataclass
class FleetTruth:
    nodes: list[str]
    lemons: list[str]
    rows: dict[str, int] = field(default_factory=dict)


class _Rows:
    def __init__(self) -> None:
        self.tables: dict[str, list[dict[str, object]]] = {"attempt_usage": [], "lost_time": [], "runs": []}

    def table(self, name: str) -> pa.Table:
        return pa.Table.from_pylist(self.tables[name], schema=table_spec(name).schema)


def _node_name(i: int) -> str:
    return f"node{i:04d}"


class _Simulator:
    def __init__(self, spec: FleetSpec) -> None:
        self.spec = spec
        self.rng = np.random.default_rng(spec.seed)
        self.nodes = [_node_name(i) for i in range(spec.nodes)]
        lemon_idx = self.rng.choice(spec.nodes, size=spec.lemons, replace=False)
        self.rate = np.full(spec.nodes, spec.node_failures_per_hour / 3600.0)
        self.rate[lemon_idx] *= spec.lemon_factor
        self.lemons = sorted(self.nodes[i] for i in lemon_idx)
        self.rows = _Rows()
        self.end = time.time() if spec.end is None else spec.end

    def run(self, job: int) -> None:
        s, rng = self.spec, self.rng
        # at most half the fleet, so that a run can always be placed after exclusions
        gpus = min(int(rng.choice(SIZES, p=SIZE_WEIGHTS)), s.nodes // 2 * GPUS_PER_NODE)
        n_nodes = math.ceil(gpus / GPUS_PER_NODE)
        per_node = min(gpus, GPUS_PER_NODE)
        work = float(min(rng.lognormal(math.log(2 * 3600), 0.8), 24 * 3600))
        interval = float(rng.choice([600.0, 1800.0, 3600.0]))
        cost = float(rng.uniform(10, 120))
        t = self.end - s.days * 86400 + float(rng.uniform(0, s.days * 86400 * 0.9))
        job_id, run_id = f"job-{job:05d}", f"run-{job:05d}"
        key = {"job_id": job_id, "run_id": run_id, "time": self.end}
        excluded: set[int] = set()
        previous: dict[str, object] | None = None
        start = t
        loops_left = 1 if rng.random() < s.loop_share else 0
        bug: Category | None = None  # a fail-fast bug restarted anyway: it comes back soon
        for attempt in range(MAX_ATTEMPTS):
            pool = [i for i in range(s.nodes) if i not in excluded] or list(range(s.nodes))
            placed = rng.choice(pool, size=n_nodes, replace=False)
            init = float(rng.uniform(60, 300))
            load = cost * 0.5 if attempt else 0.0
            hw = float(self.rate[placed].sum())
            sw = s.software_failures_per_hour / 3600.0
            need = init + load + work * (1 + cost / interval)
            fail_after = (
                float(rng.uniform(init, init + 1800)) if bug else float(rng.exponential(1.0 / (hw + sw)))
            )
            failed = fail_after < need and attempt + 1 < MAX_ATTEMPTS
            ran = fail_after if failed else need
            computing = max(0.0, ran - init - load)
            progress = computing * interval / (interval + cost)
            saves = math.floor(progress / interval)
            kept = progress if not failed else saves * interval
            badput: dict[str, float] = {
                "initialization": min(init, ran),
                "checkpoint_load": min(load, max(0.0, ran - init)),
                "checkpoint_save": saves * cost,
                "lost_progress": progress - kept,
            }
            cause: dict[str, object] | None = None
            if failed:
                detect = float(rng.uniform(30, 600))
                badput["detection_and_restart"] = detect
                if bug is not None:
                    cat, culprit = bug, int(rng.choice(placed))
                elif rng.random() < hw / (hw + sw):
                    cat = HARDWARE[int(rng.integers(len(HARDWARE)))]
                    weights = self.rate[placed] / hw
                    culprit = int(rng.choice(placed, p=weights))
                else:
                    cat = SOFTWARE[int(rng.integers(len(SOFTWARE)))]
                    culprit = int(rng.choice(placed))
                cause = {
                    "attempt": attempt,
                    "cause_category": cat.value,
                    "cause_layer": cat.layer.value,
                    "culprit_node": self.nodes[culprit],
                    "culprit_gpu": int(rng.integers(per_node)),
                    "prescribed_action": cat.action.value,
                }
            span = ran + badput.get("detection_and_restart", 0.0)
            badput["other"] = max(0.0, span - kept - sum(badput.values()))
            status = Status.FAILED if failed else Status.COMPLETED
            for i in placed:
                self.rows.tables["attempt_usage"].append(
                    {
                        **key,
                        "attempt": attempt,
                        "node": self.nodes[i],
                        "gpus": per_node,
                        "start_time": t,
                        "end_time": t + span,
                        "productive_s": kept,
                        "status": str(status),
                        "job_gpus": gpus,
                        "checkpoint_cost_s": cost,
                        "checkpoint_interval_s": interval,
                        **(cause or {}),
                    }
                )
                for bucket, seconds in badput.items():
                    if seconds <= 0:
                        continue
                    charged = {
                        "lost_progress": cause,
                        "detection_and_restart": cause,
                        "initialization": previous,
                        "checkpoint_load": previous,
                    }.get(bucket)
                    self.rows.tables["lost_time"].append(
                        {
                            **key,
                            "attempt": attempt,
                            "bucket": bucket,
                            "node": self.nodes[i],
                            "seconds": seconds,
                            "gpu_seconds": seconds * per_node,
                            "cause_attempt": None if charged is None else charged["attempt"],
                            "category": "overhead" if charged is None else charged["cause_category"],
                            "layer": None if charged is None else charged["cause_layer"],
                            "culprit_node": None if charged is None else charged["culprit_node"],
                            "culprit_gpu": None if charged is None else charged["culprit_gpu"],
                        }
                    )
            t += span
            work -= kept
            if cause is None:
                break
            previous = cause
            cat = Category(str(cause["cause_category"]))
            if cat in HARDWARE:
                excluded.add(self.nodes.index(str(cause["culprit_node"])))
            elif cat.action.value == "fail_fast":
                if not loops_left:
                    break
                loops_left -= 1
                bug = cat
        self.rows.tables["runs"].append(
            {
                **key,
                "start_time": start,
                "end_time": t,
                "status": str(Status.COMPLETED if cause is None else Status.FAILED),
                "reason": "",
                "command": "synthetic",
                "host": "bench",
                "pid": 0,
                "user": "bench",
            }
        )


def generate_fleet(data_dir: str | os.PathLike[str], spec: FleetSpec) -> FleetTruth:
    """Simulate `spec.jobs` runs and write their accounting into `data_dir`'s supervisor
    partition in one segment per table."""
    sim = _Simulator(spec)
    for job in range(spec.jobs):
        sim.run(job)
    truth = FleetTruth(sim.nodes, sim.lemons)
    with shared_writer(data_dir) as writer:
        for name in sim.rows.tables:
            truth.rows[name] = writer.append_rows(name, sim.rows.table(name))
    return truth
