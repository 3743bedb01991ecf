"""Retention, compaction and summaries, run by the partition's writer (the agent, periodically).

Retention and compaction only replace the manifest: retention retires whole segments whose
newest row is older than the table's age bound, or the oldest ones while the table is over its
size bound; compaction merges small segments (many short ingest batches) into a few big ones
so readers open fewer files. Replaced files stay on disk for `retire_grace_s` for snapshots
already open. `summarise_segments` gives collectives segments their summary where ingest left
it out (it is off the ingest path), where they were written before summaries existed or where
it was damaged: readers otherwise compute it on every read.
"""

from __future__ import annotations

from triage.store.collective_summary import SUMMARISED_TABLE, summarise, summary_path, write_summary
from triage.store.layout import parquet_unreadable
from triage.store.manifest import Segment
from triage.store.writer import StoreWriter


def apply_retention(writer: StoreWriter, now: float | None = None) -> list[Segment]:
    """Retire the segments past their table's bounds; returns them."""
    now = writer.clock() if now is None else now
    config = writer.config
    dropped: list[Segment] = []
    for table in sorted({s.table for s in writer.manifest.segments}):
        segments = sorted(
            writer.manifest.table_segments(table), key=lambda s: (s.max_time is None, s.max_time or 0.0)
        )
        age = config.age_bound(table)
        keep = [s for s in segments if age is None or s.max_time is None or s.max_time >= now - age]
        dropped += [s for s in segments if s not in keep]
        size = config.size_bound(table)
        if size is None:
            continue
        on_disk = {s.file: _bytes_on_disk(writer, s) for s in keep}
        total = sum(on_disk.values())
        while keep and total > size:
            oldest = keep.pop(0)
            total -= on_disk[oldest.file]
            dropped.append(oldest)
    if dropped:
        writer.commit(removed=dropped)
    return dropped


def _bytes_on_disk(writer: StoreWriter, segment: Segment) -> int:
    """A segment's bytes with its summary's (a collectives segment's summary lives and dies
    with it): the size bound is on what the partition takes on disk."""
    if segment.table != SUMMARISED_TABLE:
        return segment.bytes
    try:
        return segment.bytes + summary_path(writer.segment_path(segment)).stat().st_size
    except OSError:  # none (yet), or gone
        return segment.bytes


def compact(writer: StoreWriter) -> list[Segment]:
    """Merge runs of small segments per table, in time order; returns the new segments.
    Each run is streamed part by part (conformed to the table's current layout), never held
    whole in memory."""
    config = writer.config
    added: list[Segment] = []
    removed: list[Segment] = []
    for table in sorted({s.table for s in writer.manifest.segments}):
        small = sorted(
            (s for s in writer.manifest.table_segments(table) if s.bytes < config.compact_below_bytes),
            key=lambda s: (s.min_time is None, s.min_time or 0.0),
        )
        runs: list[list[Segment]] = [[]]
        for s in small:
            if runs[-1] and sum(x.bytes for x in runs[-1]) + s.bytes > config.compact_target_bytes:
                runs.append([])
            runs[-1].append(s)
        for run in runs:
            if len(run) < 2:
                continue
            parts = writer.read_parts(run)
            merged = writer.write_segment(table, (writer.conform(table, p)[0] for p in parts))
            added += [merged] if merged else []
            removed += run
    if removed:
        writer.commit(added, removed)
    return added


def summarise_segments(writer: StoreWriter, limit: int = 4, skip: set[str] | None = None) -> list[Segment]:
    """Write the missing or unreadable summaries of up to `limit` live collectives segments
    (a bounded amount of work per maintenance pass); returns the segments summarised. A
    segment that cannot be summarised (`summarise` says None) is added to `skip`, if given, and
    not read again by later passes that pass the same set."""
    done: list[Segment] = []
    skip = set() if skip is None else skip
    for segment in writer.manifest.table_segments(SUMMARISED_TABLE):
        if len(done) >= limit:
            break
        path = writer.segment_path(segment)
        if segment.file in skip or parquet_unreadable(summary_path(path)) is None:
            continue
        if parquet_unreadable(path) is not None:
            skip.add(segment.file)
            continue
        parts = (summarise(writer.conform(SUMMARISED_TABLE, p)[0]) for p in writer.read_parts([segment]))
        if write_summary(path, parts):
            done.append(segment)
        else:
            skip.add(segment.file)
    return done
