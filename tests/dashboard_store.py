"""A store the dashboard tests read: one job whose GPU fell off the bus, and one clean job.

`job-xid`: 4 ranks on node0/node1; attempt 0 checkpoints at step 5, then rank 3's GPU (node1,
GPU 1) falls off the bus (Xid 79) and ranks 0-2 hit watchdog timeouts; the supervisor records the
incident and restarts without node1; attempt 1 runs on node0/node2 from step 6 and completes.
`job-ok`: 2 ranks, 5 steps, exits cleanly. Written through the store API, like an agent would.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from jobdata_builder import T0, JobBuilder

from triage.store import StoreWriter
from triage.store.node_health import QUARANTINED, SOURCE_VERDICT, HealthEntry, record_health
from triage.store.shared_writer import shared_writer

JOB = "job-xid"
OK_JOB = "job-ok"
XID_TIME = T0 + 22.0
WATCHDOG = (
    "RuntimeError: [Rank {r}] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=40, OpType=ALLGATHER, Timeout(ms)=30000) ran for 30001 milliseconds"
)


def _collectives(b: JobBuilder, attempt: int, steps: range, t0: float, first_seq: int) -> int:
    seq = first_seq
    for i, step in enumerate(steps):
        for r in b.ranks_of(attempt):
            b.collective(
                attempt, r, "default", seq, t0 + i + 0.3 + 0.01 * r, t0 + i + 0.35, op="all_reduce", step=step
            )
            b.rows["collectives"][-1]["busbw_bytes_per_s"] = 40e9 + 1e9 * r
        seq += 1
    return seq


def _gpu_samples(b: JobBuilder, node: str, t0: float, t1: float, lost: tuple[int, float] | None) -> None:
    t = t0
    while t <= t1:
        for gpu in (0, 1):
            if lost and gpu == lost[0] and t >= lost[1]:
                b.gpu_sample(node, gpu, t)
                b.rows["gpu_samples"][-1]["gpu_up"] = False
                continue
            b.gpu_sample(
                node,
                gpu,
                t,
                temperature_celsius=60.0 + gpu + (t - t0) * 0.2,
                power_watts=300.0 + 10 * gpu,
                sm_clock_hz=1.98e9,
                memory_clock_hz=2.6e9,
                clock_event_reasons=0x4 if gpu == 0 else 0x0,
                ecc_uncorrected_volatile=0,
                remapped_rows_uncorrectable=0,
                remapped_rows_failure=False,
            )
        t += 2.0


def fault_job() -> JobBuilder:
    b = JobBuilder(JOB).world(4, per_node=2)
    end = b.steps(0, range(10), T0 + 10)  # steps 0-9, 1 s each, ending at T0 + 20
    seq = _collectives(b, 0, range(10), T0 + 10, 1)
    for r in range(4):
        b.event(0, r, T0 + 15.2, "checkpoint_save_begin", "save", step=5)
        b.event(0, r, T0 + 15.6, "checkpoint_save_end", "saved", step=5, bytes=1 << 26, path="/ckpt/step5")
    b.gpu_event("node1", 1, XID_TIME, 79, "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.")
    for r in range(3):
        b.collective(0, r, "default", seq, end + 0.5, None, op="all_gather")
        for k in range(35):
            b.heartbeat(0, r, end + k, 9, ("all_gather", "default", seq, end + 0.5))
        b.event(0, r, end + 31, "exception", WATCHDOG.format(r=r))
    _gpu_samples(b, "node0", T0, end + 35, None)
    _gpu_samples(b, "node1", T0, end + 35, (1, XID_TIME))
    restart = end + 60
    for r, (node, gpu) in enumerate([("node0", 0), ("node0", 1), ("node2", 0), ("node2", 1)]):
        b.rank(r, node, gpu, attempt=1, start=restart, world_size=4)
    done = b.steps(1, range(6, 16), restart + 5)
    _collectives(b, 1, range(6, 16), restart + 5, 1)
    for r in range(4):
        b.event(1, r, done + 0.5, "exit", "exit", exit_code=0)
    _gpu_samples(b, "node2", restart, done + 2, None)
    return b


def ok_job() -> JobBuilder:
    b = JobBuilder(OK_JOB).world(2, per_node=2)
    done = b.steps(0, range(5), T0 + 500)
    for r in range(2):
        b.event(0, r, done + 0.5, "exit", "exit", exit_code=0)
    return b


def write_fault_store(data_dir: Path) -> Path:
    """Both jobs, plus what the supervisor recorded: the incident and node1's exclusion; and
    the accounting of a week of other runs, with a lemon node (`write_fleet_history`)."""
    write_fleet_history(data_dir, time.time())
    fault_job().write_store(data_dir)
    ok_job().write_store(data_dir)
    verdict = {"category": "gpu_fallen_off_bus", "summary": "GPU 1 of node1 fell off the bus"}
    with StoreWriter(data_dir, "node0") as w:
        w.append_rows(
            "incidents",
            [
                dict(
                    job_id=JOB,
                    attempt=0,
                    time=T0 + 55,
                    category="gpu_fallen_off_bus",
                    layer="gpu",
                    action="restart_excluding_node",
                    confidence=0.95,
                    summary=verdict["summary"],
                    culprit_rank=3,
                    culprit_node="node1",
                    culprit_gpu=1,
                    culprit_uuid="GPU-node1-1",
                    first_seen=XID_TIME,
                    verdict=json.dumps(verdict),
                )
            ],
        )
        w.append_rows(
            "attempt_outcomes",
            [
                dict(
                    job_id=JOB,
                    attempt=0,
                    time=T0 + 55,
                    status="failed",
                    exit_code=1,
                    reason="GPU fell off the bus on node1",
                ),
                dict(
                    job_id=JOB,
                    attempt=1,
                    time=T0 + 200,
                    status="completed",
                    exit_code=0,
                    reason="all ranks exited",
                ),
            ],
        )
    # ... and the ledger's quarantine of the lost GPU, as the supervisor writes it
    record_health(
        data_dir,
        [
            HealthEntry(
                T0 + 55,
                "node1",
                1,
                QUARANTINED,
                "gpu_fallen_off_bus on node1",
                SOURCE_VERDICT,
                "triage run",
                category="gpu_fallen_off_bus",
                job_id=JOB,
                run_id=None,
                attempt=0,
            )
        ],
    )
    return data_dir


# -- a week of fleet accounting ------------------------------------------------------------------

#: The node behind most hardware failures of `write_fleet_history`: a lemon in the last 7 days.
LEMON = "gpu-node-07"
FLEET_NODES = [f"gpu-node-{i:02d}" for i in range(13)]
_H = 3600.0
#: (nodes, hours before now it started, root cause of attempt 0 with its culprit's node or None).
#: A failed attempt runs 1 h; a restart without the culprit's node (on the spare, node 12) 8 h;
#: a run that never fails 9 h. Size 8 (2 nodes x 4 GPUs) but two of 16 GPUs.
_FLEET_RUNS: list[tuple[list[int], float, tuple[str, str, int] | None]] = [
    ([7, 0], 2, ("gpu_fallen_off_bus", "gpu", 7)),
    ([1, 2], 20, None),
    ([7, 3], 30, ("gpu_memory_error", "gpu", 7)),
    ([4, 5], 40, ("user_code_error", "application", 4)),
    ([7, 6], 50, ("nvlink_error", "gpu", 7)),
    ([8, 9], 60, ("node_failure", "host", 9)),
    ([7, 10], 70, ("gpu_fallen_off_bus", "gpu", 7)),
    ([11, 0], 80, None),
    ([7, 1], 90, ("gpu_memory_error", "gpu", 7)),
    ([2, 3, 4, 5], 100, ("network_error", "communication", 3)),
    ([6, 8, 10, 11], 110, None),
    ([1, 2], 120, None),
    ([3, 4], 130, None),
    ([9, 10], 200, ("gpu_fallen_off_bus", "gpu", 9)),  # 8.3 days ago: only in 30 days and all time
]
_GPUS_PER_NODE = 4


def _fleet_run(k: int, now: float) -> tuple[list[dict], list[dict]]:
    """One run's `attempt_usage` and `lost_time` rows, as `triage run` writes them at its end."""
    nodes_idx, ago_h, cause = _FLEET_RUNS[k]
    nodes = [FLEET_NODES[i] for i in nodes_idx]
    start = now - ago_h * _H
    job_gpus = _GPUS_PER_NODE * len(nodes)
    attempts: list[tuple[list[str], float, float, tuple[str, str, int] | None]] = []
    if cause is None:
        attempts.append((nodes, start, start + 9 * _H, None))
    else:
        attempts.append((nodes, start, start + _H, cause))
        if cause[1] != "application":  # a user's bug fails fast; the rest restart without the node
            spare = [FLEET_NODES[12] if n == FLEET_NODES[cause[2]] else n for n in nodes]
            attempts.append((spare, start + _H, start + 9 * _H, None))
    end = attempts[-1][2]
    key = {"job_id": f"hist-{k:02d}", "run_id": f"run-{k:02d}", "time": end + 5.0}
    usage, lost = [], []

    def charge(attempt: int, node: str, bucket: str, seconds: float, root: int | None) -> None:
        c = cause if root is not None else None
        lost.append(
            {
                **key,
                "attempt": attempt,
                "bucket": bucket,
                "node": node,
                "seconds": seconds,
                "gpu_seconds": seconds * _GPUS_PER_NODE,
                "cause_attempt": root,
                "category": c[0] if c else "overhead",
                "layer": c[1] if c else None,
                "culprit_rank": None,
                "culprit_node": FLEET_NODES[c[2]] if c else None,
                "culprit_gpu": 1 if c else None,
            }
        )

    for a, (on, t0, t1, failed) in enumerate(attempts):
        badput = 120.0 + (900.0 if failed else 300.0) + (60.0 if a else 0.0)
        for node in on:
            usage.append(
                {
                    **key,
                    "attempt": a,
                    "node": node,
                    "gpus": _GPUS_PER_NODE,
                    "start_time": t0,
                    "end_time": t1,
                    "productive_s": (t1 - t0) - badput,
                    "status": "failed" if failed else "completed",
                    "job_gpus": job_gpus,
                    "checkpoint_cost_s": 30.0,
                    "checkpoint_interval_s": 1800.0,
                    "cause_category": failed[0] if failed else None,
                    "cause_layer": failed[1] if failed else None,
                    "culprit_node": FLEET_NODES[failed[2]] if failed else None,
                    "culprit_gpu": 1 if failed else None,
                    "prescribed_action": (
                        "fail_fast" if failed and failed[1] == "application" else "restart_excluding_node"
                    )
                    if failed
                    else None,
                }
            )
            if a == 0:
                charge(a, node, "initialization", 120.0, None)
            else:  # the restart's start-up and checkpoint load are the failure's
                charge(a, node, "initialization", 120.0, 0)
                charge(a, node, "checkpoint_load", 60.0, 0)
            if failed:
                charge(a, node, "lost_progress", 600.0, a)
                charge(a, node, "detection_and_restart", 300.0, a)
            else:
                charge(a, node, "checkpoint_save", 300.0, None)
    return usage, lost


def write_fleet_history(data_dir: Path, now: float) -> Path:
    """14 runs' accounting over the last 8.3 days, as their supervisors recorded it when they
    ended: 8 runs failed, 5 of them on `LEMON` (gpu/host layers: the lemon test's), one on a
    user's bug (not the node's fault). Only accounting: these runs have no telemetry."""
    usage, lost = [], []
    for k in range(len(_FLEET_RUNS)):
        u, lt = _fleet_run(k, now)
        usage += u
        lost += lt
    with shared_writer(data_dir) as w:
        w.append_rows("attempt_usage", usage)
        w.append_rows("lost_time", lost)
    return data_dir
