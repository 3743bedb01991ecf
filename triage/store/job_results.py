"""The supervisor's conclusions about jobs, read with pyarrow alone: incident counts per
category and the newest job scores (goodput, straggler scores).

The node agent exports them. It must stay small (no DuckDB, no pandas in its process), and it
reads only the supervisor's partition, whose manifest it checks once per store batch: a
1000-node cluster's agents then read one small manifest each, not every node's partition.
Incidents are recounted only when that manifest changed (they are few, and compaction may
have rewritten them); scores are read from the segments that hold rows newer than the newest
one already taken, so each read costs what was added since.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from triage.store.layout import SUPERVISOR_PARTITION, partition_dir
from triage.store.manifest import Manifest, Segment, load_manifest


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


class JobResultsReader:
    """Incremental reader of one partition's `incidents` and `job_scores` tables."""

    def __init__(self, data_dir: str | os.PathLike[str], partition: str = SUPERVISOR_PARTITION) -> None:
        self.dir = partition_dir(data_dir, partition)
        self._manifest: Manifest | None = None
        self._counts: dict[str, dict[str, int]] = {}
        #: (jobs, manifest generation) the counts are of
        self._counted: tuple[frozenset[str], int] | None = None
        self._scores_after = float("-inf")
        self._missed = False

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
            table = self._read(self._manifest.table_segments("incidents"), ["job_id", "category"], wanted)
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
            segments, ["job_id", "run_id", "attempt", "time", "name", "rank", "node", "value"], wanted
        )
        if table.num_rows:
            table = table.filter(pc.greater(table["time"], after))
        if not table.num_rows:
            return []
        table = table.sort_by("time")
        if not self._missed:  # else the missing rows are read again, from their new segment
            self._scores_after = pc.max(table["time"]).as_py()
        return [JobScore(**{**row, "run_id": row.get("run_id") or ""}) for row in table.to_pylist()]

    def _read(self, segments: list[Segment], columns: list[str], jobs: frozenset[str]) -> pa.Table:
        """The rows of `jobs` in `segments`; a segment retired and deleted since the manifest
        was read is skipped (its rows live on in the segment that replaced it, read next time)."""
        parts = []
        for s in segments:
            try:
                parts.append(
                    pq.read_table(
                        self.dir / s.file, columns=columns, filters=[("job_id", "in", sorted(jobs))]
                    )
                )
            except FileNotFoundError:
                self._missed = True
        if not parts:
            return pa.table({c: pa.array([], pa.null()) for c in columns})
        return pa.concat_tables(parts, promote_options="permissive")
