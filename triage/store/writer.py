"""The one writer of a node partition: segments in, manifest replaced, nothing rewritten.

The writer holds an exclusive, non-blocking `flock` on the partition for its lifetime, so the
agent and a CLI that ingests "where no agent runs" never both write; readers take no lock at all
(see `snapshot`). Every change is: write new segment files, fsync them and their folders, then
replace the manifest; files that leave the manifest are deleted only after `retire_grace_s`.

Writing needs only pyarrow, never DuckDB: the node agent is a writer with a small memory budget,
and DuckDB (~55 MB resident) is left to the readers.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from triage.config import node_name
from triage.durable import fsync_path
from triage.store.collective_summary import (
    SUMMARISED_TABLE,
    SUMMARY_SUFFIX,
    summarise,
    summary_path,
    write_summary,
)
from triage.store.config import StoreConfig
from triage.store.layout import LOCK_NAME, MANIFEST_NAME, QUARANTINE_DIR, partition_dir
from triage.store.manifest import (
    Manifest,
    ManifestError,
    Retired,
    Segment,
    load_manifest,
    save_manifest,
)
from triage.store.migrations import MIGRATIONS
from triage.store.schema import RECORD_TABLES, SCHEMA_VERSION, table_spec

#: Row groups of DuckDB's own size let readers skip by job and time. Dictionaries pay only for
#: strings (job, node, op, group...): on numbers they cost a third of the write time and grow
#: the files by half (`triage bench ingest` measures the writer).
log = logging.getLogger(__name__)

_ROW_GROUP_ROWS = 122_880
_WRITE_THREADS = 2


#: `<generation>-<id>.parquet`, the names `write_segments` gives.
_SEGMENT_FILE_RE = re.compile(r"^(?P<gen>\d{8})-[0-9a-f]{12}\.parquet$")


class PartitionBusy(RuntimeError):
    """Another process (normally the node's agent) is writing this partition."""


class StoreError(RuntimeError):
    """The partition cannot be written by this version of Triage."""


#: How often, and how far apart, `partition_holder` reads a just-taken lock for its pid.
_PID_READS = 5
_PID_READ_WAIT_S = 0.02


def partition_holder(data_dir: str | os.PathLike[str], node: str) -> str | None:
    """The pid (as its lock file says) of the process writing `node`'s partition, None where
    none does: a look that takes the lock for an instant, never waits, and creates nothing."""
    lock = partition_dir(data_dir, node) / LOCK_NAME
    try:
        fd = os.open(lock, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        # the holder writes its pid just after it takes the lock: give it a moment
        for _ in range(_PID_READS):
            if pid := os.pread(fd, 32, 0).decode(errors="replace").strip():
                return pid
            time.sleep(_PID_READ_WAIT_S)
        return "?"
    finally:
        os.close(fd)
    return None


class StoreWriter:
    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        node: str | None = None,
        config: StoreConfig | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.node = node or node_name()
        self.config = config or StoreConfig()
        self.clock = clock
        self.dir = partition_dir(self.data_dir, self.node)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock_fd = os.open(self.dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self._lock_fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(self._lock_fd)
            raise PartitionBusy(
                f"store partition {self.dir} is being written by process {holder} "
                "(normally the node's `triage agent`); read it instead, or stop that "
                "process to write it here"
            ) from None
        os.ftruncate(self._lock_fd, 0)
        os.pwrite(self._lock_fd, f"{os.getpid()}\n".encode(), 0)
        try:
            self.manifest = self._open_manifest()
            self._remove_orphans()
        except BaseException:
            os.close(self._lock_fd)  # a refused partition is not left locked
            raise

    def _open_manifest(self) -> Manifest:
        try:
            manifest = load_manifest(self.dir)
        except ManifestError as exc:
            raise StoreError(f"{exc}. Not writing partition {self.dir}") from None
        if manifest is None:
            found = self._segment_files()
            if found:
                raise StoreError(
                    f"store partition {self.dir} holds {len(found)} segment file(s) (e.g. "
                    f"{found[0]}) but no {MANIFEST_NAME}: refusing to start it empty, which "
                    "would discard them. Restore the manifest (from a backup), or move the "
                    "partition aside to start a new one"
                )
            manifest = Manifest(schema_version=SCHEMA_VERSION)
            save_manifest(self.dir, manifest)
            return manifest
        if manifest.schema_version > SCHEMA_VERSION:
            raise StoreError(
                f"store partition {self.dir} has schema v{manifest.schema_version}, newer "
                f"than this Triage (v{SCHEMA_VERSION}); upgrade Triage on this node"
            )
        self.manifest = manifest
        if manifest.schema_version < SCHEMA_VERSION:
            self._migrate()
        return self.manifest

    def _migrate(self) -> None:
        """Bring the partition to `SCHEMA_VERSION` through the `MIGRATIONS` after its version,
        one commit per step."""
        for step in MIGRATIONS:
            if step.to_version <= self.manifest.schema_version:
                continue
            added, removed = [], []
            for table, rewrite in step.rewrites.items():
                for old in self.manifest.table_segments(table):
                    new = self.write_segment(table, (rewrite(p) for p in self.read_parts([old])))
                    added += [new] if new else []
                    removed.append(old)
            self.commit(added, removed, schema_version=step.to_version)

    def _segment_files(self) -> list[str]:
        """`table/file` of every file in the partition's table folders."""
        return sorted(
            f"{d.name}/{p.name}"
            for d in self.dir.iterdir()
            if d.is_dir() and not d.name.startswith(".") and d.name != QUARANTINE_DIR
            for p in d.iterdir()
        )

    def _remove_orphans(self) -> None:
        """Delete the leftovers of a crash before a commit: segment files the manifest does
        not name, of a generation after its own (this writer's naming; a commit would have
        made it the manifest's), and summaries of segments it does not name (derived data,
        never the only copy). Anything else it does not name may be data and stays."""
        known = {s.file for s in self.manifest.segments} | {r.file for r in self.manifest.retired}
        for rel in self._segment_files():
            if rel in known:
                continue
            if SUMMARY_SUFFIX in rel:  # a summary, or one a crash left half written
                if rel.removesuffix(SUMMARY_SUFFIX) not in known:
                    (self.dir / rel).unlink(missing_ok=True)
                continue
            m = _SEGMENT_FILE_RE.match(rel.rsplit("/", 1)[1])
            if m and int(m["gen"]) > self.manifest.generation:
                (self.dir / rel).unlink(missing_ok=True)

    # -- segments ---------------------------------------------------------------------------

    def conform(self, table: str, data: pa.Table) -> tuple[pa.Table, list[str]]:
        """`data` with exactly the table's current columns and types (a missing one from the
        table's default or NULL), and the columns of `data` the table does not have. Raises
        `pyarrow.ArrowException` when a column cannot take the table's type."""
        spec = table_spec(table)
        n = data.num_rows
        columns = []
        for f in spec.schema:
            if f.name in data.column_names:
                column = data.column(f.name)
                columns.append(column if column.type == f.type else column.cast(f.type))
            elif f.name in spec.defaults:
                columns.append(pa.repeat(pa.scalar(spec.defaults[f.name], f.type), n))
            else:
                columns.append(pa.nulls(n, f.type))
        dropped = sorted(set(data.column_names) - set(spec.schema.names))
        return pa.Table.from_arrays(columns, schema=spec.schema), dropped

    def read_parts(self, segments: Iterable[Segment]) -> Iterator[pa.Table]:
        """The rows of `segments`, file after file, in parts of `_ROW_GROUP_ROWS` rows, so
        compaction and migrations never hold a whole merged segment in memory yet write full
        row groups from many small files. A part is shorter only at the end, or where a file's
        columns differ from the previous one's (a part has one schema, for `conform`)."""
        pending: pa.Table | None = None
        for batch in self._batches(segments):
            part = pa.Table.from_batches([batch])
            if pending is not None and not part.schema.equals(pending.schema):
                if pending.num_rows:
                    yield pending
                pending = None
            pending = part if pending is None else pa.concat_tables([pending, part])
            while pending.num_rows >= _ROW_GROUP_ROWS:
                yield pending.slice(0, _ROW_GROUP_ROWS)
                pending = pending.slice(_ROW_GROUP_ROWS)
        if pending is not None and pending.num_rows:
            yield pending

    def _batches(self, segments: Iterable[Segment]) -> Iterator[pa.RecordBatch]:
        """The record batches of the segments' files in order, each file open only while read."""
        for segment in segments:
            with pq.ParquetFile(self.segment_path(segment)) as file:
                yield from file.iter_batches(batch_size=_ROW_GROUP_ROWS)

    def write_segment(
        self, table: str, data: pa.Table | Iterable[pa.Table], *, with_summary: bool = True
    ) -> Segment | None:
        """Write `data` (already in the table's layout; one table or a stream of parts) as a
        new, not yet committed segment; None if it has no rows. A collectives segment gets its
        summary (`collective_summary`) unless `with_summary` is false."""
        rel = f"{table}/{self.manifest.generation + 1:08d}-{uuid.uuid4().hex[:12]}.parquet"
        path = self.dir / rel
        time_column = table_spec(table).time_column
        rows, lo, hi = 0, None, None
        out: pq.ParquetWriter | None = None
        summaries: list[pa.Table | None] = []
        try:
            for part in [data] if isinstance(data, pa.Table) else data:
                if part.num_rows == 0:
                    continue
                if out is None:
                    path.parent.mkdir(exist_ok=True)
                    out = pq.ParquetWriter(path, part.schema, compression="zstd", **_encodings(part.schema))
                out.write_table(part, row_group_size=_ROW_GROUP_ROWS)
                if with_summary and table == SUMMARISED_TABLE:
                    summaries.append(_summary_or_none(part))
                rows += part.num_rows
                bounds = pc.min_max(part.column(time_column))
                lo = _extreme(min, lo, bounds["min"].as_py())
                hi = _extreme(max, hi, bounds["max"].as_py())
            if out is None:
                return None
            out.close()
            fsync_path(path)
            if with_summary and table == SUMMARISED_TABLE:
                try:
                    write_summary(path, summaries)
                except OSError as exc:  # derived data: the segment stands, readers summarise its rows
                    log.warning("no summary for %s: %s", path, exc)
        except BaseException:
            if out is not None:
                out.close()
            path.unlink(missing_ok=True)
            summary_path(path).unlink(missing_ok=True)
            raise
        return Segment(table, rel, rows, path.stat().st_size, lo, hi, self.clock())

    def write_segments(self, tables: Mapping[str, pa.Table], *, with_summary: bool = True) -> list[Segment]:
        """Write several tables' rows as new, not yet committed segments, two files at a time:
        Parquet encoding runs on one core and bounds ingest, so a table of more than two row
        groups is also split in two segments for both cores to work on."""
        parts = []
        for table, data in tables.items():
            half = (data.num_rows // 2 // _ROW_GROUP_ROWS) * _ROW_GROUP_ROWS
            parts += [(table, data.slice(0, half)), (table, data.slice(half))] if half else [(table, data)]
        with ThreadPoolExecutor(_WRITE_THREADS, thread_name_prefix="triage-store-write") as pool:
            written = list(pool.map(lambda part: self.write_segment(*part, with_summary=with_summary), parts))
        return [s for s in written if s is not None]

    def commit(
        self,
        added: Iterable[Segment] = (),
        removed: Iterable[Segment] = (),
        *,
        watermarks: Mapping[str, int] | None = None,
        schema_version: int | None = None,
    ) -> None:
        """Make `added` live and `removed` retired in one manifest replacement; then delete the
        retired files whose grace period is over."""
        now = self.clock()
        gone = {s.file for s in removed}
        expired = [r for r in self.manifest.retired if r.at + self.config.retire_grace_s <= now]
        manifest = Manifest(
            schema_version=schema_version or self.manifest.schema_version,
            generation=self.manifest.generation + 1,
            segments=[s for s in self.manifest.segments if s.file not in gone] + list(added),
            watermarks={**self.manifest.watermarks, **(watermarks or {})},
            retired=[r for r in self.manifest.retired if r not in expired]
            + [Retired(f, now) for f in sorted(gone)],
        )
        # The new files' directory entries must be durable before a manifest names them (a
        # crash could otherwise keep the manifest and lose the file's name).
        for directory in sorted({(self.dir / s.file).parent for s in added} | {self.dir}):
            fsync_path(directory)
        save_manifest(self.dir, manifest)
        self.manifest = manifest
        for r in expired:
            (self.dir / r.file).unlink(missing_ok=True)
            summary_path(self.dir / r.file).unlink(missing_ok=True)

    def segment_path(self, segment: Segment) -> Path:
        return self.dir / segment.file

    # -- appends ----------------------------------------------------------------------------

    def stage_arrow(self, table: str, data: pa.Table) -> Segment | None:
        """Write in-memory rows as a new, not yet committed segment."""
        return self.write_segment(table, self.conform(table, data)[0])

    def append_rows(self, table: str, rows: pa.Table | Sequence[Mapping[str, Any]]) -> int:
        """Append rows (Arrow, or dicts keyed by column) to `table` as one committed segment.
        Used by the agent, the supervisor (incidents, attempt_outcomes) and recorders."""
        schema = table_spec(table).schema
        if isinstance(rows, pa.Table):
            data = rows
        else:
            rows = list(rows)
            names = list(dict.fromkeys(k for r in rows for k in r))
            unknown = [n for n in names if n not in schema.names]
            if unknown:
                raise ValueError(
                    f"table {table} has no column {', '.join(unknown)}; "
                    f"its columns: {', '.join(schema.names)}"
                )
            data = pa.table({n: pa.array([r.get(n) for r in rows], schema.field(n).type) for n in names})
        if data.num_rows == 0:
            return 0
        segment = self.stage_arrow(table, data)
        self.commit([segment] if segment else [])
        return int(data.num_rows)

    def append_records(self, records: Iterable[Any]) -> dict[str, int]:
        """Store collector records (`collectors.records`), each type in its table, in one commit."""
        by_type: dict[type, list[Any]] = defaultdict(list)
        for r in records:
            by_type[type(r)].append(r)
        staged, counts = [], {}
        for cls, group in by_type.items():
            table = RECORD_TABLES.get(cls)
            if table is None:
                raise TypeError(f"{cls.__name__} has no store table; add it to schema.RECORD_TABLES")
            schema = table_spec(table).schema
            columns = {f.name: pa.array([_plain(getattr(r, f.name)) for r in group], f.type) for f in schema}
            segment = self.stage_arrow(table, pa.table(columns, schema=schema))
            staged += [segment] if segment else []
            counts[table] = len(group)
        self.commit(staged)
        return counts

    def close(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = -1

    def __enter__(self) -> StoreWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _summary_or_none(part: pa.Table) -> pa.Table | None:
    """A part's collectives summary; None (the reader summarises the rows) where summarising
    fails: a summary is derived data and never fails the segment's write."""
    try:
        return summarise(part)
    except (pa.ArrowException, ValueError) as exc:
        log.warning("collectives rows left unsummarised: %s", exc)
        return None


def _encodings(schema: pa.Schema) -> dict[str, Any]:
    """Parquet encodings by column type. Ranks, steps and sequence numbers move by small
    steps and timestamps share their leading bytes, so delta-packed integers and byte-split
    floats leave zstd little to do: on the collectives of `triage bench analyze-scale`, against
    plain pages, they write a third faster in 57% of the bytes and DuckDB scans them 2.5x
    faster. Strings keep dictionaries; booleans and lists the default. Segments written before
    (plain pages) read as they always did."""
    encoding = {}
    for f in schema:
        if pa.types.is_integer(f.type):
            encoding[f.name] = "DELTA_BINARY_PACKED"
        elif pa.types.is_floating(f.type):
            encoding[f.name] = "BYTE_STREAM_SPLIT"
    return {
        "use_dictionary": [f.name for f in schema if pa.types.is_string(f.type)],
        "column_encoding": encoding,
    }


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _extreme(pick: Callable[[float, float], float], a: float | None, b: float | None) -> float | None:
    """`pick` of two bounds, either of which may be unknown (a part with no times)."""
    return b if a is None else a if b is None else pick(a, b)
