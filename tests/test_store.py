"""Ingestion: every spool row lands in the store exactly once, whatever crashes or corrupts."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from store_spools import PID, write_rank, write_segment

import triage.store.writer as writer_mod
from triage.store import (
    PartitionBusy,
    StoreConfig,
    StoreWriter,
    ingest_spools,
    open_snapshot,
)
from triage.store.layout import partition_dir
from triage.store.manifest import load_manifest
from triage.trainer_hooks import spool_schema
from triage.trainer_hooks.spool_schema import parse_segment_name, read_segment, writer_dir

TABLES = ("ranks", "steps", "collectives", "heartbeats", "events")


def _spools(data_dir: Path) -> dict[str, int]:
    """Two nodes x two ranks; returns expected rows per table."""
    total: dict[str, int] = {}
    for node in ("node0", "node1"):
        for rank in (0, 1) if node == "node0" else (2, 3):
            counts, _ = write_rank(data_dir, node, "jobA", 0, rank, steps=5, events=("init_done",))
            for t, n in counts.items():
                total[t] = total.get(t, 0) + n
    return total


def _counts(data_dir: Path) -> dict[str, int]:
    with open_snapshot(data_dir) as snap:
        return {t: snap.count(t) for t in TABLES}


def _spool_files(data_dir: Path) -> list[Path]:
    return [p for p in (data_dir / "spool").rglob("*") if parse_segment_name(p.name) is not None]


def test_ingest_puts_every_row_in_exactly_once(tmp_path):
    expected = _spools(tmp_path)
    report = ingest_spools(tmp_path)
    assert report.rows == expected and not report.errors
    assert _counts(tmp_path) == expected
    with open_snapshot(tmp_path) as snap:
        keys = snap.sql("SELECT rank, step, count(*) AS n FROM steps GROUP BY ALL")
        assert sorted((k["rank"], k["step"]) for k in keys) == [(r, s) for r in range(4) for s in range(5)]
        assert {k["n"] for k in keys} == {1}
        assert {r["source"] for r in snap.sql("SELECT DISTINCT source FROM events")} == {"rank"}
        assert {r["node"] for r in snap.sql("SELECT DISTINCT node FROM steps")} == {"node0", "node1"}
    assert _spool_files(tmp_path) == []  # ingested spool segments are gone


def test_ingest_batches_many_spool_segments_into_one_store_segment_per_table(tmp_path):
    _spools(tmp_path)
    ingest_spools(tmp_path, "node0")
    manifest = load_manifest(partition_dir(tmp_path, "node0"))
    tables = [s.table for s in manifest.segments]
    assert sorted(tables) == sorted(TABLES)  # 2 ranks x ~16 spool files -> one per table


def test_small_batch_budget_commits_several_times_and_keeps_every_row(tmp_path):
    expected = _spools(tmp_path)
    report = ingest_spools(tmp_path, config=StoreConfig(ingest_batch_bytes=20_000))
    assert report.commits > 2
    assert _counts(tmp_path) == expected


def test_ingesting_twice_adds_nothing(tmp_path):
    expected = _spools(tmp_path)
    ingest_spools(tmp_path)
    generation = load_manifest(partition_dir(tmp_path, "node0")).generation
    again = ingest_spools(tmp_path)
    assert again.total_rows == 0 and again.commits == 0
    assert _counts(tmp_path) == expected
    assert load_manifest(partition_dir(tmp_path, "node0")).generation == generation


def test_resumes_from_the_watermark_with_new_segments(tmp_path):
    first, next_seq = write_rank(tmp_path, "node0", "jobA", 0, 0, steps=3)
    ingest_spools(tmp_path)
    more, _ = write_rank(tmp_path, "node0", "jobA", 0, 0, steps=4, first_seq=next_seq)
    report = ingest_spools(tmp_path)
    assert report.rows == more
    with open_snapshot(tmp_path) as snap:
        assert snap.count("steps") == first["steps"] + more["steps"]


def test_crash_between_segment_write_and_manifest_leaves_an_orphan_not_a_duplicate(tmp_path, monkeypatch):
    expected = _spools(tmp_path)
    real_save = writer_mod.save_manifest
    calls = {"n": 0}

    def crash_on_commit(partition, manifest):
        if manifest.segments:  # the writer's first save (an empty partition) goes through
            calls["n"] += 1
            raise OSError("simulated crash before the manifest")
        real_save(partition, manifest)

    monkeypatch.setattr(writer_mod, "save_manifest", crash_on_commit)
    with pytest.raises(OSError, match="simulated crash"):
        ingest_spools(tmp_path, "node0")
    part = partition_dir(tmp_path, "node0")
    orphans = list(part.rglob("*.parquet"))
    assert calls["n"] == 1 and orphans  # segments written, manifest not
    assert len(_spool_files(tmp_path)) > 0  # the spool is intact
    monkeypatch.setattr(writer_mod, "save_manifest", real_save)
    ingest_spools(tmp_path)
    assert _counts(tmp_path) == expected
    assert not any(p.exists() for p in orphans)  # cleaned on the next open
    live = {part / s.file for s in load_manifest(part).segments}
    assert set(part.rglob("*.parquet")) == live


def test_spool_segments_left_after_a_commit_are_not_ingested_again(tmp_path):
    """A crash after the manifest but before the spool files were deleted."""
    write_rank(tmp_path, "node0", "jobA", 0, 0, steps=2)
    kept = {p: p.read_bytes() for p in _spool_files(tmp_path)}
    ingest_spools(tmp_path)
    for p, data in kept.items():
        p.write_bytes(data)
    report = ingest_spools(tmp_path)
    assert report.total_rows == 0
    assert _spool_files(tmp_path) == []
    with open_snapshot(tmp_path) as snap:
        assert snap.count("steps") == 2


def test_corrupt_and_truncated_segments_are_reported_and_skipped(tmp_path):
    expected, next_seq = write_rank(tmp_path, "node0", "jobA", 0, 0, steps=4)
    truncated = write_segment(
        tmp_path,
        "node0",
        "jobA",
        0,
        0,
        next_seq,
        "steps",
        [{"step": 99, "start_time": 1.0, "end_time": 2.0}] * 500,
    )
    truncated.write_bytes(truncated.read_bytes()[: truncated.stat().st_size // 2])
    garbage = write_segment(tmp_path, "node0", "jobA", 0, 0, next_seq + 1, "collectives", [{"seq": 1}])
    garbage.write_bytes(b"PAR1" + b"\x00garbage" * 50)
    report = ingest_spools(tmp_path)
    assert sorted(Path(e.path).name for e in report.errors) == sorted([truncated.name, garbage.name])
    assert all(Path(e.quarantined_to).exists() for e in report.errors)
    assert _spool_files(tmp_path) == []
    with open_snapshot(tmp_path) as snap:
        assert snap.count("steps") == expected["steps"]
        assert snap.count("collectives") == expected["collectives"]
        errors = snap.sql("SELECT * FROM events WHERE kind = 'telemetry_error'")
    assert len(errors) == 2 and {e["source"] for e in errors} == {"store"}
    assert {e["rank"] for e in errors} == {0} and {e["job_id"] for e in errors} == {"jobA"}
    assert any(truncated.name in e["message"] for e in errors)
    assert json.loads(errors[0]["detail"])["quarantined_to"]


def test_one_writer_per_partition(tmp_path):
    _spools(tmp_path)
    with StoreWriter(tmp_path, "node0"):
        with pytest.raises(PartitionBusy, match="being written by process"):
            StoreWriter(tmp_path, "node0")
        report = ingest_spools(tmp_path)
    assert report.busy == ["node0"]
    assert set(report.rows) == set(TABLES)  # node1 was ingested
    with StoreWriter(tmp_path, "node0"):  # the lock went with the writer
        pass


def test_per_table_parquet_segments_of_older_ranks_are_still_ingested(tmp_path):
    """A rank of the Triage before the flush segments wrote `<seq>.<table>.parquet` files."""
    import pyarrow.parquet as pq

    counts, next_seq = write_rank(tmp_path, "node0", "jobA", 0, 0, steps=2)
    new = next(p for p in _spool_files(tmp_path) if parse_segment_name(p.name) == next_seq - 1)
    rows = read_segment(new)["heartbeats"]
    legacy = new.with_name(f"{next_seq:08d}.heartbeats.parquet")
    pq.write_table(rows, legacy)
    report = ingest_spools(tmp_path)
    assert not report.errors and report.rows["heartbeats"] == counts["heartbeats"] + rows.num_rows
    assert _spool_files(tmp_path) == []


def test_segments_of_another_spool_version_are_conformed_and_a_misfit_quarantined(tmp_path):
    """A newer rank adds a column, an older one lacks one; a segment whose column cannot take
    its table's type is quarantined alone and the rest of the batch is stored."""
    counts, seq = write_rank(tmp_path, "node0", "jobA", 0, 0, steps=2)
    d = writer_dir(tmp_path, "node0", "jobA", 0, 0, PID)
    ident = {"job_id": ["jobA"], "attempt": [0], "rank": [0], "node": ["node0"]}
    newer = pa.table({**ident, "step": [7], "end_time": [5.0], "future_metric": [1.5]})
    older = pa.table({**ident, "time": [6.0], "kind": ["exit"]})  # no step, message, detail
    misfit = pa.table({**ident, "step": ["seven"], "end_time": [5.0]})
    spool_schema.write_segment(d, seq, {"steps": newer, "events": older, "gpu_telemetry_v9": newer})
    spool_schema.write_segment(d, seq + 1, {"steps": misfit})
    report = ingest_spools(tmp_path)
    assert [Path(e.path).name for e in report.errors] == [spool_schema.segment_name(seq + 1)]
    assert report.rows["steps"] == counts["steps"] + 1
    assert report.dropped_columns == ["gpu_telemetry_v9.*", "steps.future_metric"]
    with open_snapshot(tmp_path) as snap:
        (step,) = snap.sql("SELECT * FROM steps WHERE step = 7")
        (event,) = snap.sql("SELECT * FROM events WHERE kind = 'exit'")
    assert step["end_time"] == 5.0 and step["gpu"] is None
    assert event["source"] == "rank" and event["message"] is None  # the table's default, else NULL


def test_a_large_batch_is_written_in_two_segments_without_losing_order(tmp_path):
    n = 3 * writer_mod._ROW_GROUP_ROWS
    steps = pa.table(
        {
            "job_id": ["j"] * n,
            "step": pa.array(range(n), pa.int64()),
            "end_time": pa.array(range(n), pa.float64()),
        }
    )
    with StoreWriter(tmp_path, "node0") as w:
        segments = w.write_segments({"steps": w.conform("steps", steps)[0]})
        w.commit(segments)
    assert [s.rows for s in segments] == [writer_mod._ROW_GROUP_ROWS, 2 * writer_mod._ROW_GROUP_ROWS]
    assert segments[0].max_time < segments[1].min_time
    with open_snapshot(tmp_path) as snap:
        assert snap.sql("SELECT count(*) AS n, count(DISTINCT step) AS d FROM steps") == [{"n": n, "d": n}]
