"""Schema migration, retention, compaction and the writer's append APIs."""

from __future__ import annotations

import ast
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import triage.store.migrations as migrations_mod
import triage.store.writer as writer_mod
from triage.collectors.records import GpuSample, HostSample
from triage.store import (
    SCHEMA_VERSION,
    StoreConfig,
    StoreError,
    StoreWriter,
    apply_retention,
    compact,
    open_snapshot,
)
from triage.store.collective_summary import summary_path
from triage.store.layout import partition_dir
from triage.store.manifest import Manifest, Segment, load_manifest, save_manifest
from triage.trainer_hooks.spool_schema import EVENTS, STEPS


class Clock:
    def __init__(self, t: float = 10_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _v1_partition(data_dir, node="node0"):
    """A partition as Triage v1 wrote it: events without `source`."""
    part = partition_dir(data_dir, node)
    (part / "events").mkdir(parents=True)
    (part / "steps").mkdir()
    events = pa.table(
        {
            f.name: pa.array(
                [
                    {
                        "job_id": "j",
                        "attempt": 0,
                        "rank": r,
                        "node": node,
                        "time": 5.0 + r,
                        "kind": "init_done",
                    }.get(f.name)
                    for r in range(3)
                ],
                f.type,
            )
            for f in EVENTS
        }
    )
    steps = pa.table(
        {
            f.name: pa.array(
                [
                    {
                        "job_id": "j",
                        "attempt": 0,
                        "rank": 0,
                        "node": node,
                        "step": s,
                        "end_time": float(s),
                    }.get(f.name)
                    for s in range(4)
                ],
                f.type,
            )
            for f in STEPS
        }
    )
    pq.write_table(events, part / "events/00000001-a.parquet")
    pq.write_table(steps, part / "steps/00000001-b.parquet")
    save_manifest(
        part,
        Manifest(
            schema_version=1,
            generation=1,
            watermarks={"j/0/rank0-1": 7},
            segments=[
                Segment("events", "events/00000001-a.parquet", 3, 1, 5.0, 7.0, 1.0),
                Segment("steps", "steps/00000001-b.parquet", 4, 1, 0.0, 3.0, 1.0),
            ],
        ),
    )
    return part


def test_previous_schema_version_is_migrated_keeping_every_row(tmp_path):
    part = _v1_partition(tmp_path)
    with StoreWriter(tmp_path, "node0") as w:
        assert w.manifest.schema_version == SCHEMA_VERSION == 2
    manifest = load_manifest(part)
    assert manifest.schema_version == 2 and manifest.watermarks == {"j/0/rank0-1": 7}
    assert [r.file for r in manifest.retired] == ["events/00000001-a.parquet"]  # kept for open readers
    assert (part / "events/00000001-a.parquet").exists()
    with open_snapshot(tmp_path) as snap:
        rows = snap.sql("SELECT rank, kind, source FROM events ORDER BY rank")
        assert rows == [{"rank": r, "kind": "init_done", "source": "rank"} for r in range(3)]
        assert [r["step"] for r in snap.sql("SELECT step FROM steps ORDER BY step")] == [0, 1, 2, 3]


def test_migrations_are_data_that_the_writer_applies():
    """One step per version after the first, and no import of the writer that applies them."""
    assert [m.to_version for m in migrations_mod.MIGRATIONS] == list(range(2, SCHEMA_VERSION + 1))
    tree = ast.parse(Path(migrations_mod.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not {m for m in imported if m and m.startswith("triage.store.writer")}


def test_reader_sees_current_columns_on_an_unmigrated_partition(tmp_path):
    _v1_partition(tmp_path)
    with open_snapshot(tmp_path) as snap:
        assert snap.partition_versions == {"node0": 1}
        assert [r["source"] for r in snap.sql("SELECT source FROM events")] == [None] * 3


def test_a_newer_partition_is_refused(tmp_path):
    part = partition_dir(tmp_path, "node0")
    part.mkdir(parents=True)
    save_manifest(part, Manifest(schema_version=SCHEMA_VERSION + 1))
    with pytest.raises(StoreError, match="upgrade Triage"):
        StoreWriter(tmp_path, "node0")


def _steps(times):
    return [{"job_id": "j", "attempt": 0, "rank": 0, "step": i, "end_time": t} for i, t in enumerate(times)]


def test_retention_drops_segments_older_than_the_age_bound(tmp_path):
    clock = Clock(100_000.0)
    config = StoreConfig(max_age=["*=30d", "steps=1h"], retire_grace_s=60)
    with StoreWriter(tmp_path, "node0", config, clock=clock) as w:
        w.append_rows("steps", _steps([90_000.0, 91_000.0]))  # older than 1 h
        w.append_rows("steps", _steps([99_000.0]))
        w.append_rows("events", [{"job_id": "j", "time": 90_000.0, "kind": "init_done"}])  # 30 d bound
        old = w.manifest.table_segments("steps")[0]
        dropped = apply_retention(w)
        assert dropped == [old]
        with open_snapshot(tmp_path) as snap:
            assert snap.count("steps") == 1 and snap.count("events") == 1
        assert w.segment_path(old).exists()  # grace period
        clock.t += 61
        w.append_rows("events", [{"job_id": "j", "time": clock.t, "kind": "exit"}])
        assert not w.segment_path(old).exists()


def test_retention_size_bound_drops_the_oldest_first(tmp_path):
    with StoreWriter(tmp_path, "node0", StoreConfig(max_age=[], max_bytes=["steps=5k"])) as w:
        for t in (1.0, 2.0, 3.0):
            w.append_rows("steps", _steps([t] * 20))
        newest = w.manifest.table_segments("steps")[-1]
        assert newest.bytes < 5 * 1024 < 2 * newest.bytes
        apply_retention(w, now=10.0)
        assert w.manifest.table_segments("steps") == [newest]


def test_retention_size_bound_counts_a_collectives_segments_summary(tmp_path):
    """A collectives segment's summary is deleted with it, so the bound counts both: a table
    whose segments alone fit under the bound is over it with their summaries."""

    def rows(t0: float) -> list[dict]:
        return [
            {
                "job_id": "j",
                "attempt": 0,
                "rank": r,
                "group": "0",
                "seq": s,
                "op": "all_reduce",
                "group_size": 4,
                "enter_time": t0 + s + r / 100,
                "end_time": t0 + s + 0.1,
            }
            for s in range(40)
            for r in range(4)
        ]

    def bound(w: StoreWriter) -> tuple[int, int]:
        segments = w.manifest.table_segments("collectives")
        summaries = [summary_path(w.segment_path(s)) for s in segments]
        assert all(p.exists() for p in summaries)
        return sum(s.bytes for s in segments), sum(s.bytes for s in segments) + sum(
            p.stat().st_size for p in summaries
        )

    with StoreWriter(tmp_path, "node0") as w:
        for t0 in (1000.0, 2000.0):
            w.commit(
                w.write_segments({"collectives": w.conform("collectives", pa.Table.from_pylist(rows(t0)))[0]})
            )
        segments, with_summaries = bound(w)
    # a bound between the two: the segments alone fit, with their summaries they do not
    limit = (segments + with_summaries) // 2
    config = StoreConfig(max_age=[], max_bytes=[f"collectives={limit}"])
    with StoreWriter(tmp_path, "node0", config) as w:
        oldest, newest = w.manifest.table_segments("collectives")
        assert apply_retention(w, now=3000.0) == [oldest]
        assert w.manifest.table_segments("collectives") == [newest]


def test_compaction_merges_small_segments_and_keeps_rows(tmp_path):
    with StoreWriter(tmp_path, "node0") as w:
        for k in range(6):
            w.append_rows("steps", _steps([float(k * 10 + i) for i in range(50)]))
        with open_snapshot(tmp_path) as before:
            n, total = before.con.execute("SELECT count(*), sum(end_time) FROM steps").fetchone()
            merged = compact(w)
            assert len(merged) == 1 and len(w.manifest.table_segments("steps")) == 1
            assert before.count("steps") == n  # an open snapshot still reads the replaced files
        with open_snapshot(tmp_path) as after:
            assert after.con.execute("SELECT count(*), sum(end_time) FROM steps").fetchone() == (n, total)
        assert merged[0].rows == 300 and (merged[0].min_time, merged[0].max_time) == (0.0, 99.0)
        assert compact(w) == []  # nothing small left to merge


def test_compaction_larger_than_a_row_group_is_written_part_by_part(tmp_path):
    """Merged segments are streamed a row group at a time (an agent must not hold a whole
    compacted segment in memory); the result is one segment with every row and true bounds."""
    n = writer_mod._ROW_GROUP_ROWS
    with StoreWriter(tmp_path, "node0") as w:
        for k in range(3):
            w.append_rows(
                "steps",
                pa.table(
                    {
                        "job_id": ["j"] * n,
                        "step": pa.array(range(n), pa.int64()),
                        "end_time": pa.array([float(k * n + i) for i in range(n)]),
                    }
                ),
            )
        (merged,) = compact(w)
    assert merged.rows == 3 * n and (merged.min_time, merged.max_time) == (0.0, 3.0 * n - 1)
    assert pq.ParquetFile(w.segment_path(merged)).metadata.num_row_groups == 3


def test_compaction_fills_whole_row_groups_from_many_small_segments(tmp_path, monkeypatch):
    """Parts span file boundaries, so merging small segments does not keep their small row
    groups (readers skip by row group)."""
    monkeypatch.setattr(writer_mod, "_ROW_GROUP_ROWS", 100)
    with StoreWriter(tmp_path, "node0") as w:
        for k in range(5):
            w.append_rows("steps", _steps([float(k * 60 + i) for i in range(60)]))
        (merged,) = compact(w)
        meta = pq.ParquetFile(w.segment_path(merged)).metadata
        rows = pq.read_table(w.segment_path(merged), columns=["end_time"]).column(0).to_pylist()
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [100, 100, 100]
    assert rows == [float(t) for t in range(300)]  # segments' rows in time order, none lost


def test_compaction_merges_segments_of_different_layouts(tmp_path):
    """A segment lacking columns (written by an older layout) merges with current ones: each
    part is conformed to the current layout, the missing column NULL."""
    with StoreWriter(tmp_path, "node0") as w:
        old = pa.table(
            {"job_id": ["j"] * 3, "step": pa.array([0, 1, 2], pa.int64()), "end_time": [0.0, 1.0, 2.0]}
        )
        rel = "steps/00000000-old.parquet"
        (w.dir / "steps").mkdir(exist_ok=True)
        pq.write_table(old, w.dir / rel)
        w.commit([Segment("steps", rel, 3, (w.dir / rel).stat().st_size, 0.0, 2.0, 1.0)])
        w.append_rows("steps", [{"job_id": "j", "step": 3, "end_time": 3.0, "rank": 1}])
        (merged,) = compact(w)
    assert merged.rows == 4 and (merged.min_time, merged.max_time) == (0.0, 3.0)
    with open_snapshot(tmp_path) as snap:
        assert snap.sql("SELECT step, rank FROM steps ORDER BY step") == [
            {"step": 0, "rank": None},
            {"step": 1, "rank": None},
            {"step": 2, "rank": None},
            {"step": 3, "rank": 1},
        ]


def test_append_records_stores_collector_records_in_their_tables(tmp_path):
    gpu = GpuSample(
        time=5.0,
        node="node0",
        gpu=1,
        uuid="GPU-1",
        name="H100",
        serial=None,
        pci_bus_id="0000:3b:00",
        simulated=True,
        temperature_celsius=71.0,
        unsupported=("fan_speed",),
    )
    host = HostSample(time=5.0, node="node0", load_1m=1.5)
    with StoreWriter(tmp_path, "node0") as w:
        assert w.append_records([gpu, host, gpu]) == {"gpu_samples": 2, "host_samples": 1}
    with open_snapshot(tmp_path) as snap:
        row = snap.sql("SELECT gpu, uuid, temperature_celsius, power_watts, unsupported FROM gpu_samples")[0]
        assert row == {
            "gpu": 1,
            "uuid": "GPU-1",
            "temperature_celsius": 71.0,
            "power_watts": None,
            "unsupported": ["fan_speed"],
        }
        assert snap.count("host_samples") == 1 and snap.count("kernel_events") == 0


def test_append_rows_rejects_an_unknown_table(tmp_path):
    with StoreWriter(tmp_path, "node0") as w, pytest.raises(KeyError, match="unknown store table"):
        w.append_rows("nonsense", [{"a": 1}])


def test_append_rows_takes_columns_from_every_row_and_rejects_unknown_ones(tmp_path):
    with StoreWriter(tmp_path, "node0") as w:
        w.append_rows("events", [{"job_id": "j", "kind": "a"}, {"job_id": "j", "kind": "b", "detail": "{}"}])
        with pytest.raises(ValueError, match="has no column typo"):
            w.append_rows("events", [{"job_id": "j", "typo": 1}])
    with open_snapshot(tmp_path) as snap:
        assert snap.sql("SELECT kind, detail FROM events ORDER BY kind") == [
            {"kind": "a", "detail": None},
            {"kind": "b", "detail": "{}"},
        ]
