"""What the ranks' newly ingested rows say about their jobs, boiled down in DuckDB.

After each ingest the agent hands over only the store segments that ingest just added, so each
step row is read once: the step-time histogram counts every step exactly once, and the cost per
ingest follows the new rows, not the size of the store. At start the agent hands over every
segment of its partition once, which rebuilds the state of jobs that were running before it.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Sequence

import duckdb

from triage.store.sql import parquet_source

#: Store tables whose rows carry job progress.
PROGRESS_TABLES = ("ranks", "steps", "heartbeats", "events")
#: Step-time histogram buckets (seconds): from sub-second steps of small models to minutes.
STEP_TIME_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
#: Newest steps per rank kept for the throughput estimate.
RECENT_STEPS = 20


@dataclass(frozen=True)
class RankUpdate:
    """One rank of one attempt, aggregated over the new rows; None where they say nothing."""

    job_id: str
    attempt: int
    rank: int
    node: str | None = None
    local_gpu: int | None = None  # LOCAL_RANK from the ranks table, else the row's gpu index
    pid: int | None = None
    world_size: int | None = None
    start_time: float | None = None
    max_step: int | None = None
    last_step_end: float | None = None
    last_heartbeat: float | None = None
    exited: bool = False


@dataclass(frozen=True)
class RecentStep:
    job_id: str
    attempt: int
    rank: int
    step: int
    tokens: int
    duration_s: float


@dataclass
class ProgressBatch:
    ranks: list[RankUpdate] = field(default_factory=list)
    #: job -> step count per histogram bucket (the last one is +Inf)
    step_buckets: dict[str, list[int]] = field(default_factory=dict)
    step_time_sum: dict[str, float] = field(default_factory=dict)
    recent_steps: list[RecentStep] = field(default_factory=list)  # oldest first
    last_checkpoint: dict[str, float] = field(default_factory=dict)


def _bucket_case(column: str) -> str:
    whens = " ".join(f"WHEN {column} <= {b!r} THEN {i}" for i, b in enumerate(STEP_TIME_BUCKETS))
    return f"CASE {whens} ELSE {len(STEP_TIME_BUCKETS)} END"


_SQL = {
    "ranks": """SELECT job_id, attempt, rank, arg_max(node, start_time) AS node,
                       arg_max(coalesce(local_rank, gpu), start_time) AS local_gpu,
                       arg_max(pid, start_time) AS pid, max(world_size) AS world_size,
                       min(start_time) AS start_time
                FROM {src} GROUP BY ALL""",
    "steps": """SELECT job_id, attempt, rank, any_value(node) AS node, any_value(gpu) AS local_gpu,
                       max(step) AS max_step, max(end_time) AS last_step_end
                FROM {src} GROUP BY ALL""",
    "heartbeats": """SELECT job_id, attempt, rank, any_value(node) AS node,
                            any_value(gpu) AS local_gpu, arg_max(pid, time) AS pid,
                            max(time) AS last_heartbeat
                     FROM {src} GROUP BY ALL""",
    "events": """SELECT job_id, attempt, rank, any_value(node) AS node, any_value(gpu) AS local_gpu,
                        bool_or(kind = 'exit') AS exited
                 FROM {src} WHERE rank IS NOT NULL GROUP BY ALL""",
}


def _merge(a: RankUpdate, row: dict) -> RankUpdate:
    """`a` with the values `row` adds. Tables are read ranks first, so the first value seen
    wins: the ranks table's LOCAL_RANK before another row's gpu index."""
    values = {k: v for k, v in row.items()
              if k in RankUpdate.__dataclass_fields__ and v is not None and getattr(a, k) is None}
    values["exited"] = a.exited or bool(row.get("exited"))
    return RankUpdate(**{**a.__dict__, **values})


def read_progress(con: duckdb.DuckDBPyConnection,
                  files: dict[str, Sequence[str | os.PathLike[str]]]) -> ProgressBatch:
    """Aggregate the given segment files (table -> paths) of the progress tables."""
    batch = ProgressBatch()
    merged: dict[tuple[str, int, int], RankUpdate] = {}
    for table in PROGRESS_TABLES:  # ranks first, so their local rank is seen first
        paths = files.get(table)
        if not paths:
            continue
        src = parquet_source(paths)
        cur = con.execute(_SQL[table].format(src=src))
        names = [d[0] for d in cur.description]
        for row in cur.fetchall():
            r = dict(zip(names, row))
            if r["job_id"] is None or r["attempt"] is None or r["rank"] is None:
                continue
            key = (r["job_id"], int(r["attempt"]), int(r["rank"]))
            base = merged.get(key) or RankUpdate(*key)
            merged[key] = _merge(base, r)
        if table == "steps":
            _read_steps(con, src, batch)
        elif table == "events":
            for job_id, t in con.execute(
                    f"SELECT job_id, max(time) FROM {src} WHERE kind = 'checkpoint_save_end' "
                    "AND job_id IS NOT NULL GROUP BY ALL").fetchall():
                batch.last_checkpoint[job_id] = float(t)
    batch.ranks = sorted(merged.values(), key=lambda u: (u.job_id, u.attempt, u.rank))
    return batch


def _read_steps(con: duckdb.DuckDBPyConnection, src: str, batch: ProgressBatch) -> None:
    buckets: dict[str, list[int]] = defaultdict(lambda: [0] * (len(STEP_TIME_BUCKETS) + 1))
    for job_id, b, n, total in con.execute(
            f"SELECT job_id, {_bucket_case('d')} AS b, count(*), sum(d) FROM "
            f"(SELECT job_id, end_time - start_time AS d FROM {src} "
            " WHERE job_id IS NOT NULL AND end_time IS NOT NULL AND start_time IS NOT NULL) "
            "GROUP BY ALL").fetchall():
        buckets[job_id][int(b)] += int(n)
        batch.step_time_sum[job_id] = batch.step_time_sum.get(job_id, 0.0) + float(total)
    batch.step_buckets = dict(buckets)
    batch.recent_steps = [
        RecentStep(job, int(attempt), int(rank), int(step), int(tokens or 0), float(d))
        for job, attempt, rank, step, tokens, d in con.execute(
            f"SELECT job_id, attempt, rank, step, tokens, end_time - start_time AS d FROM {src} "
            "WHERE job_id IS NOT NULL AND end_time IS NOT NULL AND start_time IS NOT NULL "
            f"QUALIFY row_number() OVER (PARTITION BY job_id, attempt, rank ORDER BY step DESC) "
            f"<= {RECENT_STEPS} ORDER BY attempt, step").fetchall()]
