"""Test helper: spool segments written the way ranks write them (spool_schema's contract)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from triage.trainer_hooks import spool_schema
from triage.trainer_hooks.spool_schema import SPOOL_TABLES, writer_dir

PID = 4242


def write_segment(
    data_dir: Path,
    node: str,
    job: str,
    attempt: int,
    rank: int,
    seq: int,
    table: str,
    rows: list[dict],
    pid: int = PID,
) -> Path:
    schema = SPOOL_TABLES[table]
    ident = {"job_id": job, "attempt": attempt, "rank": rank, "node": node, "gpu": rank % 8}
    full = [{**ident, **r} for r in rows]
    arrow = pa.table({f.name: pa.array([r.get(f.name) for r in full], f.type) for f in schema}, schema=schema)
    d = writer_dir(data_dir, node, job, attempt, rank, pid)
    d.mkdir(parents=True, exist_ok=True)
    return spool_schema.write_segment(d, seq, {table: arrow})


def write_rank(
    data_dir: Path,
    node: str,
    job: str,
    attempt: int,
    rank: int,
    *,
    steps: int,
    first_seq: int = 0,
    t0: float = 1000.0,
    collectives_per_step: int = 3,
    events: tuple[str, ...] = (),
    pid: int = PID,
) -> tuple[dict[str, int], int]:
    """One flush per step (steps, collectives, heartbeats) numbered from `first_seq`, a `ranks`
    row first when `first_seq` is 0, `events` last. Returns rows per table and the next seq."""
    seq, counts = first_seq, {}

    def put(table: str, rows: list[dict]) -> None:
        nonlocal seq
        write_segment(data_dir, node, job, attempt, rank, seq, table, rows, pid)
        seq += 1
        counts[table] = counts.get(table, 0) + len(rows)

    if first_seq == 0:
        put("ranks", [{"pid": pid, "local_rank": rank, "world_size": 8, "start_time": t0}])
    base = first_seq
    for i in range(steps):
        step = base + i
        t = t0 + step
        put("steps", [{"step": step, "start_time": t, "end_time": t + 0.9, "tokens": 1024}])
        put(
            "collectives",
            [
                {
                    "seq": step * collectives_per_step + c,
                    "op": "all_reduce",
                    "group": "0",
                    "step": step,
                    "enter_time": t + 0.1 * c + 0.01 * rank,
                    "end_time": t + 0.1 * c + 0.05,
                    "bytes": 1 << 20,
                }
                for c in range(collectives_per_step)
            ],
        )
        put("heartbeats", [{"time": t + 0.95, "step": step, "pid": pid}])
    if events:
        put("events", [{"time": t0 + base + steps, "kind": k, "message": k, "detail": "{}"} for k in events])
    return counts, seq
