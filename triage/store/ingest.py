"""Spool -> store: moving what ranks wrote into the node's partition, exactly once.

Each run lists the spool writer directories of the node, takes the segments above each
directory's watermark in sequence order, and turns every batch into one store segment per table.
The manifest that adds those segments also advances the watermarks; only once it is durable
are the spool files deleted. So a crash anywhere repeats at most the uncommitted batch (its
orphan segment is deleted on the next open), and spool files at or below a watermark are known
to be stored and just deleted. Each spool segment is read on its own, so one that cannot be
(truncated, garbage, a column that does not fit its table) is moved to the partition's
quarantine, reported, and recorded as a `telemetry_error` event while the rest of its batch is
stored. Segments in the spool layout of this version are concatenated and conformed to their
store table once per batch; only those of another version are conformed one by one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from triage.names import is_valid_name
from triage.store.config import StoreConfig
from triage.store.layout import QUARANTINE_DIR, spool_node_dir, spool_nodes
from triage.store.schema import EVENT_SOURCE_STORE, TABLES, table_spec
from triage.store.writer import PartitionBusy, StoreError, StoreWriter
from triage.trainer_hooks.spool_schema import (
    SPOOL_TABLES,
    parse_job_dir_name,
    parse_segment_name,
    read_segment,
)

#: Where directories with names no spool writer makes go (under the partition's quarantine).
_BAD_NAMES = "bad-names"
#: `rank<R>-<pid>-<incarnation>`, or `rank<R>-<pid>` as written before incarnations.
_WRITER_DIR_RE = re.compile(r"^rank(?P<rank>\d+)-(?P<pid>\d+)(?:-(?P<incarnation>[0-9a-f]+))?$")


@dataclass(frozen=True)
class SpoolFile:
    writer: str  # "<job>@<run>/<attempt>/rank<R>-<pid>-<incarnation>", the watermark key
    seq: int
    path: Path
    size: int


@dataclass
class SpoolError:
    path: str
    error: str
    quarantined_to: str


@dataclass
class IngestReport:
    rows: dict[str, int] = field(default_factory=dict)
    spool_segments: int = 0
    store_segments: int = 0
    commits: int = 0
    errors: list[SpoolError] = field(default_factory=list)
    busy: list[str] = field(default_factory=list)  # partitions another process was writing
    refused: list[str] = field(default_factory=list)  # why a partition could not be written
    dropped_columns: list[str] = field(default_factory=list)  # "table.column" no store table has

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())

    def add(self, other: IngestReport) -> None:
        for table, n in other.rows.items():
            self.rows[table] = self.rows.get(table, 0) + n
        self.spool_segments += other.spool_segments
        self.store_segments += other.store_segments
        self.commits += other.commits
        self.errors += other.errors
        self.busy += other.busy
        self.refused += other.refused
        self.dropped_columns = sorted(set(self.dropped_columns) | set(other.dropped_columns))

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "total_rows": self.total_rows}


def ingest_spools(
    data_dir: str | os.PathLike[str], node: str | None = None, config: StoreConfig | None = None
) -> IngestReport:
    """Ingest the spools of `node` (every node with a spool when None), skipping partitions
    another process writes (`report.busy`) and those that refuse writes (`report.refused`:
    a damaged manifest, a newer schema)."""
    report = IngestReport()
    for n in [node] if node else spool_nodes(data_dir):
        try:
            with StoreWriter(data_dir, n, config) as writer:
                report.add(ingest_partition(writer))
        except PartitionBusy:
            report.busy.append(n)
        except StoreError as exc:  # this partition refuses writes; the other nodes go on
            report.refused.append(str(exc))
    return report


def ingest_partition(writer: StoreWriter) -> IngestReport:
    """Ingest the writer's node spool; the agent calls this periodically while it holds it."""
    report = IngestReport()
    batch: list[SpoolFile] = []
    size = 0
    for f in _pending(writer, report):
        batch.append(f)
        size += f.size
        if size >= writer.config.ingest_batch_bytes:
            _ingest_batch(writer, batch, report)
            batch, size = [], 0
    if batch:
        _ingest_batch(writer, batch, report)
    return report


def _valid_job_dir(name: str) -> bool:
    job, run = parse_job_dir_name(name)
    return is_valid_name(job) and (run is None or is_valid_name(run))


#: What each level of a node's spool must be called: `<job>[@<run>]/<attempt>/rank<R>-...`.
_LEVELS = (_valid_job_dir, str.isdigit, lambda name: _WRITER_DIR_RE.match(name) is not None)


def _named(path: Path, level: int, writer: StoreWriter, report: IngestReport) -> list[os.DirEntry[str]]:
    """The subdirectories of `path` whose names this level allows. Any other directory (a
    name that is not UTF-8, `..`-like, another tool's folder) and any entry that cannot be
    looked at (a symlink loop) is moved to the partition's quarantine and reported, so that no
    path and no watermark key is ever built from it; plain files are not ours and stay."""
    kept = []
    for entry in sorted(os.scandir(path), key=lambda e: e.name):
        if entry.name.startswith("."):
            continue
        try:
            if not entry.is_dir():
                continue
            why = (
                None
                if _LEVELS[level](entry.name) and entry.name.isascii()
                else (f"not a spool directory name at this level ({entry.name!a})")
            )
        except OSError as exc:
            why = f"cannot be read ({exc.strerror or exc})"
        if why is None:
            kept.append(entry)
            continue
        dest = writer.dir / QUARANTINE_DIR / _BAD_NAMES / f"{_printable(entry.name)}-{time.time_ns()}"
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(entry.path, dest)
        report.errors.append(
            SpoolError(
                os.fsdecode(entry.path).encode("utf-8", "backslashreplace").decode(),
                f"{why}; moved aside unread",
                str(dest),
            )
        )
    return kept


def _printable(name: str) -> str:
    """A file name that says what the bad one was, in the characters names may use."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", ascii(name).strip("'"))[:100] or "_"


def _pending(writer: StoreWriter, report: IngestReport) -> list[SpoolFile]:
    """Spool segments above their writer's watermark, in sequence order per writer; those at
    or below it are already stored (a crash came after the commit) and are deleted."""
    root = spool_node_dir(writer.data_dir, writer.node)
    if not root.is_dir():
        return []
    out = []
    for job in _named(root, 0, writer, report):
        for attempt in _named(Path(job.path), 1, writer, report):
            for wdir in _named(Path(attempt.path), 2, writer, report):
                key = f"{job.name}/{attempt.name}/{wdir.name}"
                mark = writer.manifest.watermarks.get(key, -1)
                files = []
                for entry in os.scandir(wdir.path):
                    seq = parse_segment_name(entry.name)
                    if seq is None:
                        continue
                    if seq <= mark:
                        os.unlink(entry.path)
                    else:
                        files.append(SpoolFile(key, seq, Path(entry.path), entry.stat().st_size))
                out += sorted(files, key=lambda f: f.seq)
    return out


def _ingest_batch(writer: StoreWriter, batch: list[SpoolFile], report: IngestReport) -> None:
    current: dict[str, list[pa.Table]] = defaultdict(list)  # in this version's spool layout
    conformed: dict[str, list[pa.Table]] = defaultdict(list)
    bad: list[tuple[SpoolFile, str]] = []
    for f in batch:
        try:
            tables = read_segment(f.path)
            other = {
                t: _conform(writer, t, data, report)
                for t, data in tables.items()
                if t in TABLES and not _in_spool_layout(t, data)
            }
        except Exception as exc:  # noqa: BLE001 - whatever is wrong with one file stays with it
            bad.append((f, f"{type(exc).__name__}: {(str(exc) or 'unreadable').splitlines()[0][:300]}"))
            continue
        for table, data in tables.items():
            if table not in TABLES:
                report.dropped_columns = sorted(set(report.dropped_columns) | {f"{table}.*"})
            elif table in other:
                conformed[table].append(other[table])
            else:
                current[table].append(data)
    for table, parts in current.items():
        conformed[table].append(_conform(writer, table, pa.concat_tables(parts), report))
    # Ingest is on the path from a rank's records to the supervisor's detection: the summaries of
    # collectives segments (a third more CPU per row) come with compaction and maintenance.
    staged = writer.write_segments(
        {t: pa.concat_tables(parts) for t, parts in conformed.items()}, with_summary=False
    )
    if bad:
        errors = [_quarantine(writer, f, why) for f, why in bad]
        report.errors += errors
        segment = writer.stage_arrow("events", _error_events(writer, bad, errors))
        staged += [segment] if segment else []
    marks: dict[str, int] = {}
    for f in batch:
        marks[f.writer] = max(marks.get(f.writer, -1), f.seq)
    writer.commit(staged, watermarks=marks)
    # Durable now: the spool copies may go.
    for f in batch:
        f.path.unlink(missing_ok=True)
    for s in staged:
        report.rows[s.table] = report.rows.get(s.table, 0) + s.rows
    report.spool_segments += len(batch)
    report.store_segments += len(staged)
    report.commits += 1


def _in_spool_layout(table: str, data: pa.Table) -> bool:
    return table in SPOOL_TABLES and data.schema.equals(SPOOL_TABLES[table])


def _conform(writer: StoreWriter, table: str, data: pa.Table, report: IngestReport) -> pa.Table:
    rows, dropped = writer.conform(table, data)
    if dropped:
        report.dropped_columns = sorted(set(report.dropped_columns) | {f"{table}.{c}" for c in dropped})
    return rows


def _quarantine(writer: StoreWriter, f: SpoolFile, why: str) -> SpoolError:
    """Keep an unreadable segment for a human, out of the spool so it is not read again."""
    dest = writer.dir / QUARANTINE_DIR / f.writer / f.path.name
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(f.path, dest)
    return SpoolError(str(f.path), why, str(dest))


def _error_events(
    writer: StoreWriter, bad: list[tuple[SpoolFile, str]], errors: list[SpoolError]
) -> pa.Table:
    now = writer.clock()
    rows = []
    for (f, why), err in zip(bad, errors):
        job_dir, attempt, wdir = f.writer.split("/")
        job_id, run_id = parse_job_dir_name(job_dir)
        m = _WRITER_DIR_RE.match(wdir)
        rows.append(
            {
                "job_id": job_id,
                "run_id": run_id,
                "attempt": int(attempt) if attempt.isdigit() else None,
                "rank": int(m["rank"]) if m else None,
                "node": writer.node,
                "gpu": None,
                "time": now,
                "kind": "telemetry_error",
                "step": None,
                "message": f"unreadable spool segment {f.path.name} skipped: {why}",
                "detail": json.dumps(asdict(err)),
                "source": EVENT_SOURCE_STORE,
            }
        )
    return pa.Table.from_pylist(rows, schema=table_spec("events").schema)
