"""What the ranks' newly ingested rows say about their jobs, aggregated with pyarrow.

After each ingest the agent hands over only the store segments that ingest just added, so each
step row is read once: the step-time histogram counts every step exactly once, and the cost per
ingest follows the new rows, not the size of the store. At start the agent hands over every
segment of its partition once, which rebuilds the state of jobs that were running before it.

The agent runs on every node for months, so this reads Parquet with pyarrow and aggregates with
pyarrow.compute and numpy, which the store writer loads anyway: DuckDB would add ~55 MB resident
for a handful of group-bys. At start one call gets a whole partition (a million step rows and
more), so every aggregate is vectorized and the files are read a batch of rows at a time: each
batch is boiled down to a few rows per rank that aggregate again like the rows they stand for,
which bounds memory by the batch size instead of the partition size.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from triage.store.schema import TABLES

#: Store tables whose rows carry job progress.
PROGRESS_TABLES = ("ranks", "steps", "heartbeats", "events")
#: Step-time histogram buckets (seconds): from sub-second steps of small models to minutes.
STEP_TIME_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
#: Newest steps per rank kept for the throughput estimate.
RECENT_STEPS = 20


@dataclass(frozen=True)
class RankUpdate:
    """One rank of one attempt of a run, aggregated over the new rows; None where they say
    nothing. `run_id` "" stands for rows without one (a job started without `triage run`)."""

    job_id: str
    run_id: str
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
    run_id: str
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


_KEYS = ("job_id", "run_id", "attempt", "rank")
#: Rows per batch read, a quarter of a store row group: what a read of a whole partition holds
#: at once. In the agent's process a million step rows took +37 MB peak RSS at this size and
#: +51 MB at a whole row group, at about the same speed.
_BATCH_ROWS = 30_720
#: The columns each progress table is read for; the others are never decoded.
_COLUMNS = {
    "ranks": (*_KEYS, "node", "gpu", "local_rank", "pid", "world_size", "start_time"),
    "steps": (*_KEYS, "node", "gpu", "step", "start_time", "end_time", "tokens"),
    "heartbeats": (*_KEYS, "node", "gpu", "pid", "time"),
    "events": (*_KEYS, "node", "gpu", "kind", "time"),
}
#: Per table, RankUpdate field -> (column, aggregate). pyarrow's "first" skips NULLs like SQL's
#: any_value; "latest" is SQL's arg_max(column, time) with the table's `_TIME`, which ignores
#: rows where either is NULL.
_RANK_FIELDS = {
    "ranks": {
        "node": ("node", "latest"),
        "local_gpu": ("local_gpu", "latest"),
        "pid": ("pid", "latest"),
        "world_size": ("world_size", "max"),
        "start_time": ("start_time", "min"),
    },
    "steps": {
        "node": ("node", "first"),
        "local_gpu": ("gpu", "first"),
        "max_step": ("step", "max"),
        "last_step_end": ("end_time", "max"),
    },
    "heartbeats": {
        "node": ("node", "first"),
        "local_gpu": ("gpu", "first"),
        "pid": ("pid", "latest"),
        "last_heartbeat": ("time", "max"),
    },
    "events": {"node": ("node", "first"), "local_gpu": ("gpu", "first"), "exited": ("exited", "any")},
}
_TIME = {"ranks": "start_time", "heartbeats": "time"}


def _merge(a: RankUpdate, row: dict[str, Any]) -> RankUpdate:
    """`a` with the values `row` adds. Tables are read ranks first, so the first value seen
    wins: the ranks table's LOCAL_RANK before another row's gpu index."""
    values = {
        k: v
        for k, v in row.items()
        if k in RankUpdate.__dataclass_fields__ and v is not None and getattr(a, k) is None
    }
    values["exited"] = a.exited or bool(row.get("exited"))
    return RankUpdate(**{**a.__dict__, **values})


def aggregate_progress_segments(files: Mapping[str, Sequence[str | os.PathLike[str]]]) -> ProgressBatch:
    """Aggregate the given segment files (table -> paths) of the progress tables."""
    batch = ProgressBatch()
    merged: dict[tuple[str, str, int, int], RankUpdate] = {}
    for table in PROGRESS_TABLES:  # ranks first, so their local rank is seen first
        per_rank: list[pa.Table] = []
        newest: list[pa.Table] = []
        for rows in _batches(table, files.get(table, ())):
            per_rank.append(_per_rank(table, _keyed(table, rows)))
            if table == "steps":
                newest.append(_count_steps(rows, batch))
            elif table == "events":
                _note_checkpoints(rows, batch)
        if not per_rank:
            continue
        for r in _rank_fields(table, _per_rank(table, pa.concat_tables(per_rank))):
            key = (r["job_id"], r["run_id"], r["attempt"], r["rank"])
            merged[key] = _merge(merged.get(key) or RankUpdate(*key), r)
        if newest:
            batch.recent_steps = _recent_steps(_newest(pa.concat_tables(newest)))
    batch.ranks = sorted(merged.values(), key=lambda u: (u.job_id, u.run_id, u.attempt, u.rank))
    return batch


def _batches(table: str, paths: Sequence[str | os.PathLike[str]]) -> Iterator[pa.Table]:
    """The table's progress columns from every file, `_BATCH_ROWS` rows at a time, typed as the
    store schema says. A column that a file lacks (a segment older than the column) reads as
    NULL, so files of different schema versions aggregate together; a NULL run id reads as ""
    (a key must not be NULL to group by)."""
    schema = pa.schema([TABLES[table].schema.field(c) for c in _COLUMNS[table]])
    for path in paths:
        with pq.ParquetFile(os.fspath(path)) as f:
            present = set(f.schema_arrow.names)
            for b in f.iter_batches(_BATCH_ROWS, columns=[c for c in schema.names if c in present]):
                columns = [
                    b.column(c).cast(t.type) if c in present else pa.nulls(b.num_rows, t.type)
                    for c, t in zip(schema.names, schema)
                ]
                run = schema.get_field_index("run_id")
                columns[run] = pc.fill_null(columns[run], "")
                yield pa.table(columns, schema=schema)


def _keyed(table: str, rows: pa.Table) -> pa.Table:
    """The rows that name a rank, with the columns `_per_rank` aggregates. Rows without a full
    key (the supervisor's job-level events) describe no rank and are left out. A "latest"
    column is NULL where the time is, and gets a `<column>_time`: the time of its value."""
    rows = _valid(rows, *_KEYS)
    if table == "ranks":
        rows = rows.append_column("local_gpu", pc.coalesce(rows["local_rank"], rows["gpu"]))
    elif table == "events":
        rows = rows.append_column("exited", pc.equal(rows["kind"], "exit"))
    for column in _latest_columns(table):
        time = rows[_TIME[table]]
        value = pc.if_else(pc.is_valid(time), rows[column], None)
        rows = rows.set_column(rows.schema.get_field_index(column), column, value)
        rows = rows.append_column(f"{column}_time", pc.if_else(pc.is_valid(value), time, None))
    return rows


def _valid(rows: pa.Table, *columns: str) -> pa.Table:
    """The rows where none of `columns` is NULL; `rows` itself, uncopied, in the usual case
    where none is. A mask, not an expression: `Table.filter` plans an Acero query for one,
    which costs more than the filtering of a batch."""
    if all(rows[c].null_count == 0 for c in columns):
        return rows
    return rows.filter(functools.reduce(pc.and_, [pc.is_valid(rows[c]) for c in columns]))


def _latest_columns(table: str) -> list[str]:
    return [column for column, how in _RANK_FIELDS[table].values() if how == "latest"]


def _per_rank(table: str, rows: pa.Table) -> pa.Table:
    """One row per rank of `rows`, its columns aggregated and named as in `rows`, so the rows
    of many batches aggregate again into the rows of all of them: the first of firsts is the
    first, the max of maxes the max, and a "latest" value keeps its time to be compared by."""
    ranks = _group(rows, [(column, how) for column, how in _RANK_FIELDS[table].values() if how != "latest"])
    for column in _latest_columns(table):
        time = f"{column}_time"
        latest = _group(rows.sort_by(time), [(column, "last"), (time, "max")])
        ranks = ranks.append_column(column, latest[column]).append_column(time, latest[time])
    return ranks


def _group(rows: pa.Table, aggregates: list[tuple[str, str]]) -> pa.Table:
    """`rows` aggregated per rank, each column keeping its name, in key order, so that groupings
    of the same rows line up. One thread: "first" and "last" then follow the row order."""
    grouped = rows.group_by(list(_KEYS), use_threads=False).aggregate(aggregates)
    grouped = grouped.rename_columns({f"{column}_{how}": column for column, how in aggregates})
    return grouped.sort_by([(key, "ascending") for key in _KEYS])


def _rank_fields(table: str, ranks: pa.Table) -> list[dict[str, Any]]:
    """The rows of `_per_rank` as dicts of RankUpdate fields."""
    fields = _RANK_FIELDS[table]
    ranks = ranks.select([*_KEYS, *(column for column, _ in fields.values())])
    rows: list[dict[str, Any]] = ranks.rename_columns([*_KEYS, *fields]).to_pylist()
    return rows


def _count_steps(rows: pa.Table, batch: ProgressBatch) -> pa.Table:
    """Add the steps that have a job and both times to their job's step-time histogram and sum;
    return each rank's newest of them (see `_newest`), leaving out a step without attempt, rank
    or number: it is no step of a rank."""
    timed = _valid(rows, "job_id", "start_time", "end_time")
    timed = timed.append_column("d", pc.subtract(timed["end_time"], timed["start_time"]))
    # The first bucket whose bound is >= d; NaN sorts past every bound, into +Inf, as in SQL.
    bucket = np.searchsorted(STEP_TIME_BUCKETS, timed["d"].to_numpy(), side="left")
    counts = (
        pa.table({"job_id": timed["job_id"], "bucket": bucket, "d": timed["d"]})
        .group_by(["job_id", "bucket"])
        .aggregate([("d", "count"), ("d", "sum")])
    )
    for job_id, b, n, total in zip(
        *(counts[c].to_pylist() for c in ("job_id", "bucket", "d_count", "d_sum"))
    ):
        batch.step_buckets.setdefault(job_id, [0] * (len(STEP_TIME_BUCKETS) + 1))[b] += n
        batch.step_time_sum[job_id] = batch.step_time_sum.get(job_id, 0.0) + total
    return _newest(_valid(timed, "attempt", "rank", "step"))


def _newest(steps: pa.Table) -> pa.Table:
    """Per rank the RECENT_STEPS rows with the highest step number. Sorted by rank, then by step
    from the highest, each rank's rows form a run that starts with its newest steps: a row is
    kept when it is fewer than RECENT_STEPS rows into its run. The job is sorted by its index
    among the jobs here, because integer keys sort several times faster than strings."""
    jobs, runs = steps["job_id"], steps["run_id"]
    keys = [
        pc.index_in(jobs, value_set=pc.unique(jobs)).to_numpy(),
        pc.index_in(runs, value_set=pc.unique(runs)).to_numpy(),
        steps["attempt"].to_numpy(),
        steps["rank"].to_numpy(),
    ]
    order = np.lexsort((-steps["step"].to_numpy(), *reversed(keys)))  # last key sorts first
    starts = np.zeros(len(order), dtype=bool)
    starts[:1] = True
    for key in keys:
        ordered = key[order]
        starts[1:] |= ordered[1:] != ordered[:-1]
    index = np.arange(len(order))
    run_start = np.maximum.accumulate(np.where(starts, index, 0))
    return steps.take(order[index - run_start < RECENT_STEPS])


def _recent_steps(newest: pa.Table) -> list[RecentStep]:
    """`newest` as RecentSteps ordered by (attempt, step); NULL tokens count as none."""
    newest = newest.sort_by(
        [("attempt", "ascending"), ("step", "ascending"), ("job_id", "ascending"), ("rank", "ascending")]
    )
    columns = (
        newest["job_id"],
        newest["run_id"],
        newest["attempt"],
        newest["rank"],
        newest["step"],
        pc.fill_null(newest["tokens"], 0),
        newest["d"],
    )
    return [RecentStep(*values) for values in zip(*(c.to_pylist() for c in columns))]


def _note_checkpoints(rows: pa.Table, batch: ProgressBatch) -> None:
    """Keep per job the time of its newest finished checkpoint save."""
    saves = _valid(rows, "job_id", "time")
    saves = saves.filter(pc.equal(saves["kind"], "checkpoint_save_end"))
    latest = saves.group_by("job_id").aggregate([("time", "max")])
    for job_id, t in zip(latest["job_id"].to_pylist(), latest["time_max"].to_pylist()):
        batch.last_checkpoint[job_id] = max(t, batch.last_checkpoint.get(job_id, t))
