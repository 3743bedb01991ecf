"""Per-segment summaries of the collectives table, written beside each collectives segment.

Who came last to a collective is a question across ranks, so answering it from the rows
groups every collective row of the job on every analysis (20M rows for 1024 ranks x 2000
steps x 10 collectives: most of `triage analyze`'s time at that scale). The rows of one
segment (a node's ranks in an ingest batch, or a compaction's merge) already share their
collectives, so a segment's summary holds one row per collective in it (how many of its ranks
entered it, the last of them and when, how long the others had waited for that one) and one
row per rank (how many collectives it entered): a fraction of the rows, which combine exactly
across segments (`ARRIVALS_SQL`). A summary is derived data: it is written with its segment,
deleted with it, and a segment without a readable one (written before summaries existed, or
damaged) is summarised from its rows when read.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from triage.durable import fsync_path

#: The table whose segments carry summaries.
SUMMARISED_TABLE = "collectives"

#: A collective's row (`size` set: its group size): `n` of its member ranks in the segment with
#: an enter time, the last of them to enter (`rank`, at `last_enter`) and `deficit_s`, the sum
#: over those ranks of how long before the last one each entered. A rank's row (`size` null):
#: `n` collectives it entered. Only collectives of more than one rank count, as in
#: `ARRIVALS_SQL`; a row without an enter time cannot say who came last, so its collective
#: counts as incomplete. A change to this layout or its meaning takes a new `SUMMARY_SUFFIX`.
SCHEMA = pa.schema(
    [
        pa.field("job_id", pa.string()),
        pa.field("run_id", pa.string()),
        pa.field("attempt", pa.int32()),
        pa.field("group", pa.string()),
        pa.field("seq", pa.int64()),
        pa.field("rank", pa.int32()),
        pa.field("n", pa.int64()),
        pa.field("size", pa.int32()),
        pa.field("last_enter", pa.float64()),
        pa.field("deficit_s", pa.float64()),
    ]
)

# Times are taken from the rows' first enter before n x last - sum, which in Unix seconds
# would lose microseconds.
SUMMARY_SQL = """
WITH origin AS (SELECT coalesce(min(enter_time), 0.0) AS t0 FROM {source})
SELECT job_id, run_id, attempt, "group", seq, arg_max(rank, enter_time)::INTEGER AS rank,
       count(*) AS n, max(group_size)::INTEGER AS size, max(enter_time) AS last_enter,
       count(*) * (max(enter_time) - any_value(t0)) - fsum(enter_time - t0) AS deficit_s
FROM {source}, origin WHERE group_size > 1 AND enter_time IS NOT NULL
GROUP BY job_id, run_id, attempt, "group", seq
UNION ALL BY NAME
SELECT job_id, run_id, attempt, rank, count(*) AS n
FROM {source} WHERE group_size > 1 GROUP BY job_id, run_id, attempt, rank
"""

# Per (attempt, rank) of one run: collectives entered, times it came last to a collective all
# members recorded, and how long it kept the others waiting in those: for a collective of n
# ranks n/(n-1) x (last enter - mean enter), i.e. the deficit over n - 1. The summaries of a
# collective from several segments combine: the deficit to the overall last is each part's
# own plus its ranks' n x the gap between its last and the overall last.
ARRIVALS_SQL = """
WITH s AS (
  SELECT * FROM {summaries} WHERE job_id = $job AND run_id IS NOT DISTINCT FROM $run),
origin AS (SELECT coalesce(min(last_enter), 0.0) AS t0 FROM s),
per AS (
  SELECT attempt, "group", seq, arg_max(rank, last_enter) AS last_rank, sum(n)::BIGINT AS n,
         max(size) AS size,
         sum(deficit_s) + (max(last_enter) - any_value(t0)) * sum(n)::BIGINT
           - fsum(n * (last_enter - t0)) AS deficit_s
  FROM s, origin WHERE size IS NOT NULL GROUP BY attempt, "group", seq),
lasts AS (
  SELECT attempt, last_rank AS rank, count(*) AS last_arrivals,
         sum(deficit_s / (n - 1)) AS wait_caused_s
  FROM per WHERE n = size GROUP BY ALL),
counts AS (SELECT attempt, rank, sum(n)::BIGINT AS collectives FROM s WHERE size IS NULL GROUP BY ALL)
SELECT attempt, rank, collectives, coalesce(last_arrivals, 0) AS last_arrivals,
       coalesce(wait_caused_s, 0.0) AS wait_caused_s
FROM counts LEFT JOIN lasts USING (attempt, rank) ORDER BY attempt, rank
"""


#: A summary is its segment's file name with this appended (Parquet, beside the segment).
SUMMARY_SUFFIX = ".summary"


def summary_path(segment: str | os.PathLike[str]) -> Path:
    """Where the summary of a collectives segment file lives."""
    return Path(f"{segment}{SUMMARY_SUFFIX}")


# The last rank is found with one hash aggregation: max of (microseconds since the part's first
# enter << 20 | rank), which needs ranks below 2**20 and a part spanning under 2**42 us (50 days).
_RANK_BITS = 20
_MAX_SPAN_US = 1 << (63 - _RANK_BITS - 1)
_KEYS = ["job_id", "run_id", "attempt", "group", "seq"]


def summarise(rows: pa.Table) -> pa.Table | None:
    """The summary rows of some collectives rows (in the table's layout), or None where they
    cannot be summarised here (a rank missing, ranks of 2**20 or more, a part spanning over 50
    days): the reader then summarises the segment from its rows. Where two ranks entered within
    the same microsecond, the higher one counts as last (the rows' own order decides for the
    reader)."""
    rows = rows.select([*_KEYS, "rank", "enter_time", "group_size"])
    rows = rows.filter(pc.greater(rows["group_size"], 1))  # a NULL size is no collective either
    if rows.num_rows == 0:
        return SCHEMA.empty_table()
    if rows["rank"].null_count:
        return None
    counts = _group(rows, ["job_id", "run_id", "attempt", "rank"], [([], "count_all")])
    timed = rows.filter(pc.is_valid(rows["enter_time"])) if rows["enter_time"].null_count else rows
    if timed.num_rows == 0:
        return _typed(
            {k: counts[k] for k in ("job_id", "run_id", "attempt", "rank")} | {"n": counts["count_all"]}
        )
    enter = timed["enter_time"].to_numpy()
    rank = timed["rank"].to_numpy().astype(np.int64)
    origin = float(enter.min())
    since = enter - origin
    if since.max() * 1e6 >= _MAX_SPAN_US or rank.min() < 0 or rank.max() >= 1 << _RANK_BITS:
        return None
    last = ((since * 1e6).astype(np.int64) << _RANK_BITS) | rank
    per = _group(
        pa.table({**{k: timed[k] for k in _KEYS}, "t": since, "last": last, "size": timed["group_size"]}),
        _KEYS,
        [("t", "max"), ("t", "sum"), ("t", "count"), ("size", "max"), ("last", "max")],
    )
    n = per["t_count"].to_numpy()
    t_max = per["t_max"].to_numpy()
    collectives = _typed(
        {
            **{k: per[k] for k in _KEYS},
            "rank": per["last_max"].to_numpy() & ((1 << _RANK_BITS) - 1),
            "n": n,
            "size": per["size_max"],
            "last_enter": t_max + origin,
            "deficit_s": n * t_max - per["t_sum"].to_numpy(),
        }
    )
    ranks = _typed(
        {k: counts[k] for k in ("job_id", "run_id", "attempt", "rank")} | {"n": counts["count_all"]}
    )
    return pa.concat_tables([collectives, ranks])


def _group(rows: pa.Table, keys: list[str], aggregates: list[Any]) -> pa.Table:
    """`rows` grouped by `keys` (on the caller's thread: the store writes segments on both cores
    already). A key with one value over all rows (the job, run, attempt and group mostly are)
    is not hashed but put back on the result."""
    constant = {k: rows[k][0] for k in keys[:-1] if _one_value(rows[k])}
    varying = [k for k in keys if k not in constant]
    out = rows.group_by(varying, use_threads=False).aggregate(aggregates)
    for k, value in constant.items():
        out = out.append_column(rows.schema.field(k), pa.repeat(value, out.num_rows))
    return out


def _one_value(column: pa.ChunkedArray) -> bool:
    if column.null_count == len(column):
        return True
    return bool(pc.count_distinct(column, mode="all").as_py() == 1)


def _typed(columns: dict[str, Any]) -> pa.Table:
    """`columns` as a table of `SCHEMA`, the ones it lacks null."""
    n = len(next(iter(columns.values())))
    return pa.table(
        [_column(columns[f.name], f.type) if f.name in columns else pa.nulls(n, f.type) for f in SCHEMA],
        schema=SCHEMA,
    )


def write_summary(segment: str | os.PathLike[str], parts: Iterable[pa.Table | None]) -> bool:
    """Write the summary of a segment from the summaries of its parts (they combine as rows),
    whole or not at all; none where a part has none. Returns whether it wrote one."""
    path = summary_path(segment)
    tables = list(parts)
    if any(t is None for t in tables):
        path.unlink(missing_ok=True)
        return False
    table = pa.concat_tables([SCHEMA.empty_table(), *[t for t in tables if t is not None]])
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        pq.write_table(table, tmp, compression="zstd")
        fsync_path(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return True


def _column(values: Any, type_: pa.DataType) -> pa.Array | pa.ChunkedArray:
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values.cast(type_)
    return pa.array(values, type_)
