"""A store the dashboard tests read: one job whose GPU fell off the bus, and one clean job.

`job-xid`: 4 ranks on node0/node1; attempt 0 checkpoints at step 5, then rank 3's GPU (node1,
GPU 1) falls off the bus (Xid 79) and ranks 0-2 hit watchdog timeouts; the supervisor records the
incident and restarts without node1; attempt 1 runs on node0/node2 from step 6 and completes.
`job-ok`: 2 ranks, 5 steps, exits cleanly. Written through the store API, like an agent would.
"""

from __future__ import annotations

import json
from pathlib import Path

from jobdata_builder import T0, JobBuilder

from triage.store import StoreWriter

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
    """Both jobs, plus what the supervisor recorded: the incident and node1's exclusion."""
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
    return data_dir
