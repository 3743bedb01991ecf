"""Readers: a consistent, lock-free view of the whole store.

A snapshot reads every partition's manifest once, at open, and builds an in-memory DuckDB
connection with one view per table over exactly the segment files those manifests name. The
writer never changes a named file and deletes replaced ones only after a grace period, so a
snapshot never takes a lock, never blocks the agent, and never sees half a batch; reopen one
to see newer data (and within `retire_grace_s`). Jobs, attempts and checkpoints are views
derived from the append-only facts, so nothing has to keep them up to date.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, TypeVar

import duckdb

from triage.store.collective_summary import SCHEMA as SUMMARY_SCHEMA
from triage.store.collective_summary import SUMMARISED_TABLE, SUMMARY_SQL, summary_path
from triage.store.config import StoreConfig
from triage.store.layout import (
    MANIFEST_NAME,
    parquet_unreadable,
    partition_dir,
    partitions,
    unlisted_partitions,
)
from triage.store.manifest import ManifestError, load_manifest
from triage.store.schema import TABLES
from triage.store.sql import parquet_source


@dataclass(frozen=True)
class AttemptSummary:
    job_id: str
    run_id: str | None
    attempt: int
    status: str  # schema.ATTEMPT_STATUSES
    ranks: int
    nodes: int | None
    world_size: int | None
    start_time: float | None
    max_step: int | None
    last_progress: float | None  # end time of the newest step of any rank
    last_heartbeat: float | None
    exceptions: int


@dataclass(frozen=True)
class RunSummary:
    """One `triage run` launch of a job (run_id None: telemetry written without one)."""

    job_id: str
    run_id: str | None
    status: str  # the supervisor's final word on the run, else its newest attempt's status
    attempts: int
    ranks: int  # of the newest attempt
    max_step: int | None
    last_progress: float | None
    last_heartbeat: float | None
    start_time: float | None
    end_time: float | None  # when the supervisor ended it


@dataclass(frozen=True)
class JobSummary:
    """A job as its newest run shows it."""

    job_id: str
    run_id: str | None  # the newest run
    runs: int
    status: str  # the status of its newest run
    attempts: int  # of the newest run
    ranks: int  # of the newest attempt
    max_step: int | None
    last_progress: float | None
    last_heartbeat: float | None
    start_time: float | None


@dataclass(frozen=True)
class RankProgress:
    rank: int
    node: str | None
    gpu: int | None
    max_step: int | None
    last_step_end: float | None
    last_heartbeat: float | None
    heartbeat_step: int | None


@dataclass(frozen=True)
class LastArrival:
    """Who arrived last at one collective (same `group` and `seq` on every rank)."""

    group: str
    seq: int
    op: str | None
    last_rank: int
    spread_s: float  # last enter time minus first
    ranks: int


_VALID_DETAIL = "CASE WHEN json_valid(detail) THEN detail END"

# The status words in the views' SQL are `Status` values (schema.ATTEMPT_STATUSES for an
# attempt), spelled out so the SQL reads as SQL; tests/test_store_snapshot.py checks them.
_ATTEMPTS_SQL = """
CREATE VIEW attempts AS
WITH keys AS (
    SELECT job_id, coalesce(run_id, '') AS run_id, attempt FROM ranks UNION SELECT job_id, coalesce(run_id, '') AS run_id, attempt FROM heartbeats
    UNION SELECT job_id, coalesce(run_id, '') AS run_id, attempt FROM events
    UNION SELECT job_id, coalesce(run_id, '') AS run_id, attempt FROM attempt_outcomes),
r AS (SELECT job_id, coalesce(run_id, '') AS run_id, attempt, count(DISTINCT rank) AS ranks, count(DISTINCT node) AS nodes,
             max(world_size) AS world_size, min(start_time) AS start_time
      FROM ranks GROUP BY ALL),
s AS (SELECT job_id, coalesce(run_id, '') AS run_id, attempt, max(step) AS max_step, max(end_time) AS last_progress
      FROM steps GROUP BY ALL),
h AS (SELECT job_id, coalesce(run_id, '') AS run_id, attempt, max(time) AS last_heartbeat, min(time) AS first_heartbeat
      FROM heartbeats GROUP BY ALL),
e AS (SELECT job_id, coalesce(run_id, '') AS run_id, attempt,
             count(*) FILTER (WHERE kind = 'exception') AS exceptions,
             count(*) FILTER (WHERE kind = 'sigterm') AS sigterms,
             count(DISTINCT rank) FILTER (WHERE kind = 'exit') AS exited_ranks,
             bool_or(kind = 'exit' AND coalesce(TRY_CAST(json_extract_string({detail}, '$.exit_code')
                     AS INTEGER), 0) <> 0) AS bad_exit,
             max(time) AS last_event, min(time) AS first_event
      FROM events GROUP BY ALL),
o AS (SELECT job_id, coalesce(run_id, '') AS run_id, attempt, arg_max(status, time) AS outcome, min(time) AS outcome_time
      FROM attempt_outcomes GROUP BY ALL)
SELECT k.job_id, nullif(k.run_id, '') AS run_id, k.attempt,
       CASE WHEN o.outcome IS NOT NULL THEN o.outcome
            WHEN coalesce(e.sigterms, 0) > 0 THEN 'preempted'
            WHEN coalesce(e.exceptions, 0) > 0 OR coalesce(e.bad_exit, false) THEN 'failed'
            WHEN coalesce(e.exited_ranks, 0) >= greatest(coalesce(r.ranks, 0), 1) THEN 'completed'
            WHEN {now} - greatest(h.last_heartbeat, s.last_progress, e.last_event, r.start_time)
                 <= {timeout} THEN 'running'
            ELSE 'failed' END AS status,
       coalesce(r.ranks, 0) AS ranks, r.nodes, r.world_size,
       coalesce(r.start_time, h.first_heartbeat, e.first_event, o.outcome_time) AS start_time,
       s.max_step, s.last_progress, h.last_heartbeat, coalesce(e.exceptions, 0) AS exceptions
FROM keys k
LEFT JOIN r USING (job_id, run_id, attempt) LEFT JOIN s USING (job_id, run_id, attempt)
LEFT JOIN h USING (job_id, run_id, attempt) LEFT JOIN e USING (job_id, run_id, attempt)
LEFT JOIN o USING (job_id, run_id, attempt)
WHERE k.job_id IS NOT NULL AND k.attempt IS NOT NULL
"""

# A run's status: the supervisor's final row in `runs` where it wrote one (a run whose ranks
# wrote no telemetry has only that), else its newest attempt's.
_RUNS_SQL = """
CREATE VIEW run_summaries AS
WITH a AS (
    SELECT job_id, coalesce(run_id, '') AS run_id, arg_max(status, attempt) AS status,
           count(*) AS attempts,
           arg_max(ranks, attempt) AS ranks, max(max_step) AS max_step,
           max(last_progress) AS last_progress, max(last_heartbeat) AS last_heartbeat,
           min(start_time) AS start_time
    FROM attempts GROUP BY job_id, run_id),
l AS (
    SELECT job_id, coalesce(run_id, '') AS run_id, arg_max(status, time) AS status,
           min(start_time) AS start_time,
           max(end_time) AS end_time
    FROM runs WHERE job_id IS NOT NULL GROUP BY job_id, run_id)
SELECT job_id, nullif(run_id, '') AS run_id,
       CASE WHEN l.status IS NOT NULL AND l.status <> 'running' THEN l.status
            ELSE coalesce(a.status, l.status) END AS status,
       coalesce(a.attempts, 0) AS attempts, coalesce(a.ranks, 0) AS ranks, a.max_step,
       a.last_progress, a.last_heartbeat, coalesce(l.start_time, a.start_time) AS start_time,
       l.end_time
FROM a FULL JOIN l USING (job_id, run_id)
"""

_JOBS_SQL = """
CREATE VIEW jobs AS
SELECT job_id, arg_max(run_id, coalesce(start_time, 0)) AS run_id, count(*) AS runs,
       arg_max(status, coalesce(start_time, 0)) AS status,
       arg_max(attempts, coalesce(start_time, 0)) AS attempts,
       arg_max(ranks, coalesce(start_time, 0)) AS ranks,
       arg_max(max_step, coalesce(start_time, 0)) AS max_step,
       max(last_progress) AS last_progress, max(last_heartbeat) AS last_heartbeat,
       max(start_time) AS start_time
FROM run_summaries GROUP BY job_id
"""

_CHECKPOINTS_SQL = f"""
CREATE VIEW checkpoints AS
SELECT e.job_id, e.run_id, e.attempt, e.rank, e.node, e.step, b.begin_time, e.time AS end_time,
       e.time - b.begin_time AS duration_s,
       TRY_CAST(json_extract_string({_VALID_DETAIL.replace("detail", "e.detail")}, '$.bytes') AS BIGINT) AS bytes,
       json_extract_string({_VALID_DETAIL.replace("detail", "e.detail")}, '$.path') AS path,
       e.detail
FROM events e
LEFT JOIN (SELECT job_id, run_id, attempt, rank, step, max(time) AS begin_time FROM events
           WHERE kind = 'checkpoint_save_begin' GROUP BY ALL) b
       ON b.job_id = e.job_id AND b.run_id IS NOT DISTINCT FROM e.run_id
          AND b.attempt = e.attempt AND b.rank = e.rank AND b.step = e.step
WHERE e.kind = 'checkpoint_save_end'
"""

T = TypeVar("T")


class Snapshot:
    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        now: float | None = None,
        config: StoreConfig | None = None,
        newer_than: float | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.now = time.time() if now is None else now
        config = config or StoreConfig()
        self.con = duckdb.connect()
        self.con.execute("SET parquet_metadata_cache = true")
        files: dict[str, list[str]] = {t: [] for t in TABLES}
        #: node -> schema version of its partition at open
        self.partition_versions: dict[str, int] = {}
        #: what was left out and why (a damaged manifest or file, a newer version's table):
        #: the rest is read; commands show these as warnings
        self.problems: list[str] = [
            f"partition {node} skipped: it has segment folders but no {MANIFEST_NAME}; "
            "restore the manifest from a backup, or move the partition aside"
            for node in unlisted_partitions(self.data_dir)
        ]
        for node in partitions(self.data_dir):
            part = partition_dir(self.data_dir, node)
            try:
                manifest = load_manifest(part)
            except ManifestError as exc:
                self.problems.append(f"partition {node} skipped: {exc}")
                continue
            if manifest is None:  # removed since listed
                continue
            self.partition_versions[node] = manifest.schema_version
            unknown = sorted({seg.table for seg in manifest.segments if seg.table not in TABLES})
            if unknown:
                self.problems.append(
                    f"partition {node}: table(s) {', '.join(unknown)} of a newer Triage ignored"
                )
            for seg in manifest.segments:
                if seg.table not in TABLES:
                    continue
                if newer_than is not None and seg.max_time is not None and seg.max_time < newer_than:
                    continue  # all its rows are older than the caller asks for
                path = part / seg.file
                why = parquet_unreadable(path)
                if why:
                    self.problems.append(f"{path} skipped: {why}")
                    continue
                files[seg.table].append(str(path))
        self.row_files = files
        for table, paths in files.items():
            empty = f"_empty_{table}"
            self.con.register(empty, TABLES[table].schema.empty_table())
            try:
                self._create_view(table, empty, paths)
            except duckdb.Error:  # a file damaged past `parquet_unreadable`'s look: find and drop it
                paths[:] = [p for p in paths if self._readable(p)]
                self._create_view(table, empty, paths)
        self._create_summaries_view(files.get(SUMMARISED_TABLE, []))
        self.con.execute(
            _ATTEMPTS_SQL.format(
                detail=_VALID_DETAIL,
                now=repr(float(self.now)),
                timeout=repr(float(config.heartbeat_timeout_s)),
            )
        )
        self.con.execute(_RUNS_SQL)
        self.con.execute(_JOBS_SQL)
        self.con.execute(_CHECKPOINTS_SQL)

    def _create_view(self, table: str, empty: str, paths: list[str]) -> None:
        # The empty typed side gives every current column even where no segment has it yet.
        body = f"SELECT * FROM {empty}"
        if paths:
            body += f" UNION ALL BY NAME SELECT * FROM {parquet_source(paths)}"
        self.con.execute(f'CREATE OR REPLACE VIEW "{table}" AS {body}')

    def _create_summaries_view(self, segments: list[str]) -> None:
        """`collective_summaries`: each collectives segment's summary, or where it has no
        readable one, the same rows summarised from the segment (slower, never wrong)."""
        summaries = [str(summary_path(p)) for p in segments]
        have = [s for s in summaries if parquet_unreadable(Path(s)) is None]
        body = "SELECT * FROM _empty_collective_summaries"
        self.con.register("_empty_collective_summaries", SUMMARY_SCHEMA.empty_table())
        try:
            if have:
                self.con.execute(f"SELECT * FROM {parquet_source(have)} LIMIT 0")
        except duckdb.Error:
            have = [s for s in have if self._readable(s, report=False)]
        if have:
            body += f" UNION ALL BY NAME SELECT * FROM {parquet_source(have)}"
        unsummarised = [p for p, s in zip(segments, summaries) if s not in have]
        if unsummarised:
            rows = (
                f"(SELECT * FROM _empty_{SUMMARISED_TABLE} UNION ALL BY NAME "
                f"SELECT * FROM {parquet_source(unsummarised)})"
            )
            body += f" UNION ALL BY NAME ({SUMMARY_SQL.format(source=rows)})"
        self.con.execute(f"CREATE OR REPLACE VIEW collective_summaries AS {body}")

    def _readable(self, path: str, *, report: bool = True) -> bool:
        """Whether DuckDB reads the file; where not and `report`, the problem is noted (a
        summary is derived data: its segment's rows stand in for it, nothing to report)."""
        try:
            self.con.execute(f"SELECT count(*) FROM {parquet_source([path])}").fetchone()
        except duckdb.Error as exc:
            if report:
                self.problems.append(f"{path} skipped: {str(exc).splitlines()[0][:200]}")
            return False
        return True

    # -- queries ----------------------------------------------------------------------------

    def sql(self, query: str, params: Sequence[Any] | None = None) -> list[dict[str, Any]]:
        cur = self.con.execute(query, params or [])
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]

    def _typed(self, cls: type[T], query: str, params: Sequence[Any] | None = None) -> list[T]:
        names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
        return [cls(**{n: row[n] for n in names}) for row in self.sql(query, params)]

    def is_empty(self) -> bool:
        return not any(self.row_files.values())

    def count(self, table: str) -> int:
        row = self.con.execute(f'SELECT count(*) FROM "{table}"').fetchone()
        assert row is not None  # count(*) always returns one row
        return int(row[0])

    def jobs(self) -> list[JobSummary]:
        return self._typed(JobSummary, "SELECT * FROM jobs ORDER BY start_time DESC NULLS LAST, job_id")

    def runs(self, job_id: str | None = None) -> list[RunSummary]:
        """Runs, newest first."""
        return self._typed(
            RunSummary,
            "SELECT * FROM run_summaries WHERE $1 IS NULL OR job_id = $1 "
            "ORDER BY start_time DESC NULLS LAST, job_id, run_id",
            [job_id],
        )

    def attempts(self, job_id: str | None = None, run_id: str | None = None) -> list[AttemptSummary]:
        """Attempts of a job (of one run of it when `run_id` is given)."""
        return self._typed(
            AttemptSummary,
            "SELECT * FROM attempts WHERE ($1 IS NULL OR job_id = $1) "
            "AND ($2 IS NULL OR run_id = $2) ORDER BY job_id, start_time, attempt",
            [job_id, run_id],
        )

    def rank_progress(self, job_id: str, attempt: int, run_id: str | None = None) -> list[RankProgress]:
        """Per rank: newest step and heartbeat, which tell a hang or a dead rank apart."""
        return self._typed(
            RankProgress,
            """
            WITH r AS (SELECT rank, arg_max(node, start_time) AS node, arg_max(gpu, start_time) AS gpu FROM ranks
                       WHERE job_id = $1 AND attempt = $2 AND run_id IS NOT DISTINCT FROM $3
                       GROUP BY rank),
                 s AS (SELECT rank, max(step) AS max_step, max(end_time) AS last_step_end FROM steps
                       WHERE job_id = $1 AND attempt = $2 AND run_id IS NOT DISTINCT FROM $3
                       GROUP BY rank),
                 h AS (SELECT rank, max(time) AS last_heartbeat, arg_max(step, time) AS heartbeat_step
                       FROM heartbeats WHERE job_id = $1 AND attempt = $2
                       AND run_id IS NOT DISTINCT FROM $3 GROUP BY rank)
            SELECT rank, r.node, r.gpu, s.max_step, s.last_step_end, h.last_heartbeat, h.heartbeat_step
            FROM r FULL JOIN s USING (rank) FULL JOIN h USING (rank) ORDER BY rank""",
            [job_id, attempt, run_id],
        )

    def step_time_medians(self, job_id: str, attempt: int, run_id: str | None = None) -> dict[int, float]:
        rows = self.con.execute(
            """
            SELECT rank, median(end_time - start_time) FROM steps
            WHERE job_id = $1 AND attempt = $2 AND run_id IS NOT DISTINCT FROM $3
            GROUP BY rank ORDER BY rank""",
            [job_id, attempt, run_id],
        ).fetchall()
        return dict(rows)

    def last_arrivals(self, job_id: str, attempt: int, run_id: str | None = None) -> list[LastArrival]:
        """Per collective, the rank whose enter time was last: the one the others waited for."""
        return self._typed(
            LastArrival,
            """
            SELECT "group", seq, any_value(op) AS op, arg_max(rank, enter_time) AS last_rank,
                   max(enter_time) - min(enter_time) AS spread_s, count(*) AS ranks
            FROM collectives WHERE job_id = $1 AND attempt = $2 AND run_id IS NOT DISTINCT FROM $3
            GROUP BY "group", seq ORDER BY "group", seq""",
            [job_id, attempt, run_id],
        )

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Snapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_snapshot(
    data_dir: str | os.PathLike[str],
    *,
    now: float | None = None,
    config: StoreConfig | None = None,
    newer_than: float | None = None,
) -> Snapshot:
    """A read-only view of the store as of now; use as a context manager. `newer_than`
    leaves out the segments whose rows are all older (by their manifest's time range): a
    reader that asks about the last minutes of a data dir with months of history opens and
    checks only the files that can hold them."""
    return Snapshot(data_dir, now=now, config=config, newer_than=newer_than)
