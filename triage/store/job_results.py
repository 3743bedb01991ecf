"""The supervisor's conclusions about jobs, read with pyarrow alone: incident counts per
category and the newest job scores (goodput, straggler scores).

The node agent exports them. It must stay small (no DuckDB, no pandas in its process), and it
reads only the supervisor's partition, whose manifest it checks once per store batch: a
1000-node cluster's agents then read one small manifest each, not every node's partition.
Incidents are recounted only when that manifest changed (they are few, and compaction may
have rewritten them); scores are read from the segments that hold rows newer than the newest
one already taken, so each read costs what was added since.

A node's share of the fleet's accounting (`attempt_usage`, `lost_time`: what each run held,
made and lost, written once when it ends) is read as GPU-seconds to add to the agent's
counters: only segment files not read before (they are immutable; compaction writes new ones),
only rows stamped later than `ACCOUNTING_LAG_S` before the newest taken (a recording committed
later than that after a newer one is missed). A run's accounting is counted once: the first
recording of a run taken is its recording, and a later one (`triage report --backfill` writing
it again, with a newer `time`) or the same one rewritten by compaction is skipped; for that the
reader keeps one entry per run that touched the node (a few hundred bytes each). The node
health ledger's row for the node is re-read only when the ledger's segments changed.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from triage.store.layout import SUPERVISOR_PARTITION, partition_dir
from triage.store.manifest import Manifest, Segment, load_manifest
from triage.store.node_health import QUARANTINED, HealthEntry, current_state

#: Accounting recorded up to this long before the newest recording already taken is still
#: looked for: a supervisor stamps its rows with its own host's clock before it waits for the
#: partition's writer lock, so a recording can be committed after a newer-stamped one.
ACCOUNTING_LAG_S = 600.0

#: pyarrow filters in disjunctive normal form: OR of ANDs of (column, op, value)
_Filters = list[list[tuple[str, str, Any]]]


@dataclass(frozen=True)
class JobScore:
    """One row of `job_scores`: a figure of a job (`rank` None) or of one of its ranks."""

    job_id: str
    run_id: str  # "" where the row has none
    attempt: int
    time: float
    name: str
    rank: int | None
    node: str | None
    value: float


@dataclass
class NodeAccounting:
    """GPU-seconds of one node in the runs' accounting: held (`allocated`: ranks x the attempt's
    wall time), productive, lost on the node's GPUs by category (a taxonomy category or
    "overhead"), and lost anywhere in the fleet to incidents that name the node as culprit."""

    allocated: float = 0.0
    productive: float = 0.0
    lost: dict[str, float] = field(default_factory=dict)
    caused: dict[str, float] = field(default_factory=dict)

    def add(self, other: NodeAccounting) -> None:
        self.allocated += other.allocated
        self.productive += other.productive
        for mine, theirs in ((self.lost, other.lost), (self.caused, other.caused)):
            for category, seconds in theirs.items():
                mine[category] = mine.get(category, 0.0) + seconds


class JobResultsReader:
    """Incremental reader of one partition's `incidents`, `job_scores`, `attempt_usage`,
    `lost_time` and `node_health` tables."""

    def __init__(self, data_dir: str | os.PathLike[str], partition: str = SUPERVISOR_PARTITION) -> None:
        self.dir = partition_dir(data_dir, partition)
        self._manifest: Manifest | None = None
        self._counts: dict[str, dict[str, int]] = {}
        #: (jobs, manifest generation) the counts are of
        self._counted: tuple[frozenset[str], int] | None = None
        self._scores_after = float("-inf")
        self._missed = False
        #: table -> the newest `time` of the accounting rows taken, and its segment files read
        #: (immutable: a file read once has nothing new; compaction's output is a new file)
        self._accounting_after: dict[str, float] = {}
        self._accounting_seen: dict[str, frozenset[str]] = {}
        #: (job_id, run_id) -> the `time` of the run's recording counted, and its tables taken;
        #: one entry per run that touched the node, kept so a re-recording is never re-counted
        self._accounted: dict[tuple[str, str], tuple[float, frozenset[str]]] = {}
        #: (node, the ledger's segment files) the health row is of, and that row
        self._health_key: tuple[str, tuple[str, ...]] | None = None
        self._health: HealthEntry | None = None
        self._quarantined_parts = 0

    def refresh(self) -> None:
        """Load the partition's manifest: the reads that follow see what it names."""
        self._manifest = load_manifest(self.dir)

    def incident_counts(self, jobs: Collection[str]) -> dict[str, dict[str, int]]:
        """job -> category -> incident rows stored, for `jobs` (recounted after a change)."""
        wanted = frozenset(jobs)
        if self._manifest is None or not wanted:
            return {}
        key = (wanted, self._manifest.generation)
        if key != self._counted:
            self._missed = False
            table = self._read(
                self._manifest.table_segments("incidents"), ["job_id", "category"], _of_jobs(wanted)
            )
            self._counts = {}
            if table.num_rows:
                grouped = table.group_by(["job_id", "category"]).aggregate([([], "count_all")])
                for row in grouped.to_pylist():
                    self._counts.setdefault(row["job_id"], {})[row["category"]] = row["count_all"]
            self._counted = None if self._missed else key
        return {j: dict(c) for j, c in self._counts.items()}

    def new_scores(self, jobs: Collection[str]) -> list[JobScore]:
        """The `job_scores` rows of `jobs` newer than any returned before, oldest first."""
        wanted = frozenset(jobs)
        if self._manifest is None or not wanted:
            return []
        after = self._scores_after
        segments = [
            s for s in self._manifest.table_segments("job_scores") if s.max_time is None or s.max_time > after
        ]
        self._missed = False
        table = self._read(
            segments,
            ["job_id", "run_id", "attempt", "time", "name", "rank", "node", "value"],
            _of_jobs(wanted),
        )
        if table.num_rows:
            table = table.filter(pc.greater(table["time"], after))
        if not table.num_rows:
            return []
        table = table.sort_by("time")
        if not self._missed:  # else the missing rows are read again, from their new segment
            self._scores_after = pc.max(table["time"]).as_py()
        return [JobScore(**{**row, "run_id": row.get("run_id") or ""}) for row in table.to_pylist()]

    def new_accounting(self, node: str) -> NodeAccounting | None:
        """`node`'s GPU-seconds in the accounting recorded since the last call (at the first
        call: all the partition holds); None when part of it could not be read this time (a
        segment compacted away since `refresh`): nothing is taken then, the next call retries.

        Allocated, productive and lost seconds are those of rows whose `node` is `node`, so
        that summed over the fleet's agents each GPU-second counts once; caused seconds are
        those of `lost_time` rows whose `culprit_node` is `node`."""
        out = NodeAccounting()
        if self._manifest is None:
            return out
        self._missed = False
        usage = self._new_accounting_rows(
            "attempt_usage",
            ["job_id", "run_id", "time", "gpus", "start_time", "end_time", "productive_s"],
            [[("node", "=", node)]],
        )
        lost = self._new_accounting_rows(
            "lost_time",
            ["job_id", "run_id", "time", "node", "gpu_seconds", "category", "culprit_node"],
            [[("node", "=", node)], [("culprit_node", "=", node)]],
        )
        if self._missed:
            return None
        taken = self._take_recordings({"attempt_usage": usage, "lost_time": lost})
        for row in usage:
            if _recording(row) in taken["attempt_usage"]:
                gpus = row["gpus"] or 0
                if row["start_time"] is not None and row["end_time"] is not None:
                    out.allocated += gpus * max(row["end_time"] - row["start_time"], 0.0)
                out.productive += gpus * (row["productive_s"] or 0.0)
        for row in lost:
            if _recording(row) in taken["lost_time"]:
                category, seconds = row["category"] or "", row["gpu_seconds"] or 0.0
                if row["node"] == node:
                    out.lost[category] = out.lost.get(category, 0.0) + seconds
                if row["culprit_node"] == node:
                    out.caused[category] = out.caused.get(category, 0.0) + seconds
        for table, rows in (("attempt_usage", usage), ("lost_time", lost)):
            self._accounting_seen[table] = frozenset(s.file for s in self._manifest.table_segments(table))
            if rows:
                newest = max(r["time"] for r in rows)
                self._accounting_after[table] = max(self._accounting_after.get(table, newest), newest)
        return out

    def _new_accounting_rows(self, table: str, columns: list[str], where: _Filters) -> list[dict[str, Any]]:
        """Rows of `table` matching `where` in the segments not read yet, stamped after the
        newest taken less `ACCOUNTING_LAG_S`."""
        assert self._manifest is not None
        since = self._accounting_after.get(table, float("-inf")) - ACCOUNTING_LAG_S
        seen = self._accounting_seen.get(table, frozenset())
        segments = [
            s
            for s in self._manifest.table_segments(table)
            if s.file not in seen and (s.max_time is None or s.max_time > since)
        ]
        if not segments:
            return []
        filters = [[*conj, ("time", ">", since)] for conj in where] if since > float("-inf") else where
        data = self._read(segments, columns, filters)
        return [r for r in data.to_pylist() if r["time"] is not None]

    def _take_recordings(
        self, rows: dict[str, list[dict[str, Any]]]
    ) -> dict[str, set[tuple[str, str, float]]]:
        """Per table, the recordings (job, run, time) among `rows` to count: a run's first
        recording seen (its oldest, where one read finds several), once per table."""
        first: dict[tuple[str, str], float] = {}
        for table_rows in rows.values():
            for r in table_rows:
                job, run, t = _recording(r)
                if (job, run) not in self._accounted:
                    first[(job, run)] = min(t, first.get((job, run), t))
        for key, t in first.items():
            self._accounted[key] = (t, frozenset())
        taken: dict[str, set[tuple[str, str, float]]] = {}
        for table, table_rows in rows.items():
            taken[table] = set()
            for job, run, t in {_recording(r) for r in table_rows}:
                counted, tables = self._accounted[(job, run)]
                if t == counted and table not in tables:
                    taken[table].add((job, run, t))
                    self._accounted[(job, run)] = (counted, tables | {table})
        return taken

    def node_standing(self, node: str) -> HealthEntry | None:
        """The node health ledger's deciding row for `node` as a whole (`gpu` NULL): its newest,
        None where it has none. Re-read only when the ledger's segments changed."""
        if self._manifest is None:
            return None
        segments = self._manifest.table_segments("node_health")
        key = (node, tuple(sorted(s.file for s in segments)))
        if key != self._health_key:
            self._missed = False
            table = self._read(segments, ["time", "node", "gpu", "state", "source"], [[("node", "=", node)]])
            entries = [HealthEntry.from_row(r) for r in table.to_pylist() if r["time"] is not None]
            state = current_state(entries)
            self._health = state.get((node, None))
            self._quarantined_parts = sum(1 for e in state.values() if e.state == QUARANTINED)
            self._health_key = None if self._missed else key
        return self._health

    def quarantined_parts(self, node: str) -> int:
        """How many quarantines stand on `node`: the node as a whole and each of its GPUs (read
        with `node_standing`, whose cache it shares)."""
        self.node_standing(node)
        return self._quarantined_parts

    def _read(self, segments: list[Segment], columns: list[str], filters: _Filters) -> pa.Table:
        """The rows of `segments` that match `filters`; a segment retired and deleted since the
        manifest was read is skipped (its rows live on in the segment that replaced it, read
        next time) and noted in `_missed`."""
        parts = []
        for s in segments:
            try:
                parts.append(pq.read_table(self.dir / s.file, columns=columns, filters=filters))
            except FileNotFoundError:
                self._missed = True
        if not parts:
            return pa.table({c: pa.array([], pa.null()) for c in columns})
        return pa.concat_tables(parts, promote_options="permissive")


def _of_jobs(jobs: frozenset[str]) -> _Filters:
    return [[("job_id", "in", sorted(jobs))]]


def _recording(row: dict[str, Any]) -> tuple[str, str, float]:
    """The recording an accounting row belongs to: `record_accounting` stamps every row of a
    run's accounting with one `time`."""
    return (row["job_id"] or "", row["run_id"] or "", float(row["time"]))
