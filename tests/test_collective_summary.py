"""Per-segment summaries of the collectives table: the arrivals they give equal those of the
rows, wherever the ranks of a collective were stored, whatever happened to the summary files."""

from __future__ import annotations

import random

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from jobdata_builder import T0, JobBuilder
from store_spools import write_segment

from triage.store import ingest_spools, open_snapshot
from triage.store.collective_summary import summarise, summary_path
from triage.store.config import StoreConfig
from triage.store.job_data import load_job
from triage.store.layout import parquet_unreadable
from triage.store.maintenance import compact, summarise_segments
from triage.store.writer import StoreWriter

# The query the summaries replaced, grouping every row: the reference the new paths must equal
# (to 10 us: its mean of Unix times is itself that exact, where the new paths are closer).
_ARRIVALS_FROM_ROWS = """
WITH c AS (
  SELECT attempt, "group", seq, rank, enter_time, group_size
  FROM collectives WHERE job_id = $job AND run_id IS NOT DISTINCT FROM $run AND group_size > 1),
per AS (
  SELECT attempt, "group", seq, arg_max(rank, enter_time) AS last_rank,
         max(enter_time) AS last_enter, avg(enter_time) AS mean_enter, count(*) AS n,
         max(group_size) AS size
  FROM c GROUP BY ALL),
lasts AS (
  SELECT attempt, last_rank AS rank, count(*) AS last_arrivals,
         sum((last_enter - mean_enter) * n / (n - 1)) AS wait_caused_s
  FROM per WHERE n = size GROUP BY ALL),
counts AS (SELECT attempt, rank, count(*) AS collectives FROM c GROUP BY ALL)
SELECT attempt, rank, collectives, coalesce(last_arrivals, 0) AS last_arrivals,
       coalesce(wait_caused_s, 0.0) AS wait_caused_s
FROM counts LEFT JOIN lasts USING (attempt, rank) ORDER BY attempt, rank
"""


def _reference(b: JobBuilder) -> pd.DataFrame:
    return b.connect().execute(_ARRIVALS_FROM_ROWS, {"job": b.job_id, "run": b.run_id}).df()


def _job(seed: int, late_rank: int, ranks: int = 6, per_node: int = 2) -> JobBuilder:
    """Two attempts on three nodes; `late_rank` enters most collectives last, by varying
    amounts; two groups, the second of half the ranks; some collectives one rank never
    recorded (those say nothing about who came last)."""
    rng = random.Random(seed)
    b = JobBuilder("job1").world(ranks, per_node=per_node)
    b.world(ranks, per_node=per_node, attempt=1, start=T0 + 500)
    for attempt in (0, 1):
        for seq in range(40):
            t = T0 + attempt * 500 + seq
            for group, members in (("dp", range(ranks)), ("tp", range(0, ranks, 2))):
                missing = rng.choice(list(members)) if seq % 13 == 7 else None
                for r in members:
                    if r == missing:
                        continue
                    late = rng.uniform(0.05, 0.3) if r == late_rank and seq % 5 else 0.0
                    enter = t + rng.uniform(0, 0.01) + late
                    b.collective(attempt, r, group, seq, enter, enter + 0.02, group_size=len(members))
    return b


def _arrivals_in_store(data_dir, job: str = "job1") -> pd.DataFrame:
    with open_snapshot(data_dir) as snap:
        return load_job(snap.con, job).arrivals


@pytest.mark.parametrize("late_rank", [0, 3, 5])
def test_arrivals_from_the_segments_summaries_equal_those_from_the_rows(tmp_path, late_rank):
    b = _job(late_rank, late_rank)
    b.write_store(tmp_path)
    segments = list((tmp_path / "store").glob("*/collectives/*.parquet"))
    assert len(segments) == 3 and all(summary_path(s).exists() for s in segments)
    written = sum(pq.read_table(summary_path(s)).column("seq").drop_null().__len__() for s in segments)
    with open_snapshot(tmp_path) as snap:  # the snapshot reads them (from rows, a collective is one row)
        (read,) = snap.con.execute("SELECT count(seq) FROM collective_summaries").fetchone()
    assert read == written > 2 * 40 * 2
    from_rows = _reference(b)
    from_summaries = _arrivals_in_store(tmp_path)
    pd.testing.assert_frame_equal(from_rows, from_summaries, check_dtype=False, rtol=1e-9, atol=1e-5)
    pd.testing.assert_frame_equal(from_rows, b.load().arrivals, check_dtype=False, rtol=1e-9, atol=1e-5)
    late = from_summaries.set_index(["attempt", "rank"])["last_arrivals"]
    # the late rank came last where it was late in a complete collective, in both groups
    # (where it is a member), in both attempts
    assert late.groupby("attempt").idxmax().tolist() == [(0, late_rank), (1, late_rank)]
    assert (from_summaries["wait_caused_s"] > 0).sum() >= 2


def test_a_segment_without_a_readable_summary_is_summarised_from_its_rows(tmp_path):
    b = _job(1, 4)
    b.write_store(tmp_path)
    expected = _reference(b)
    first, second, third = sorted((tmp_path / "store").glob("*/collectives/*.parquet"))
    summary_path(first).unlink()  # e.g. written before summaries existed
    summary_path(second).write_bytes(b"PAR1 not really parquet PAR1")
    damaged = summary_path(third).read_bytes()
    summary_path(third).write_bytes(damaged[: len(damaged) // 2])  # truncated
    got = _arrivals_in_store(tmp_path)
    pd.testing.assert_frame_equal(expected, got, check_dtype=False, rtol=1e-9, atol=1e-5)


def test_compaction_rewrites_the_summary_and_old_summaries_go_with_their_segments(tmp_path):
    b = _job(2, 1, ranks=4, per_node=4)
    expected = _reference(b)
    rows = b.rows["collectives"]
    clock = [1000.0]
    config = StoreConfig(retire_grace_s=10.0)
    with StoreWriter(tmp_path, "node0", config=config, clock=lambda: clock[0]) as w:
        for k in range(0, len(rows), 97):  # small segments that split collectives between them
            w.append_rows("collectives", rows[k : k + 97])
        for other in ("ranks", "events"):
            w.append_rows(other, b.rows[other])
        old = [w.segment_path(s) for s in w.manifest.table_segments("collectives")]
        assert len(old) > 3 and all(summary_path(p).exists() for p in old)
        pd.testing.assert_frame_equal(
            expected, _arrivals_in_store(tmp_path), check_dtype=False, rtol=1e-9, atol=1e-5
        )
        merged = [s for s in compact(w) if s.table == "collectives"]
        assert len(merged) == 1 and summary_path(w.segment_path(merged[0])).exists()
        pd.testing.assert_frame_equal(
            expected, _arrivals_in_store(tmp_path), check_dtype=False, rtol=1e-9, atol=1e-5
        )
        clock[0] += 60.0
        w.commit()  # the retired segments' grace is over: they go, with their summaries
        assert not any(p.exists() or summary_path(p).exists() for p in old)
    stray = tmp_path / "store" / "node0" / "collectives" / "00000001-0123456789ab.parquet.summary"
    stray.write_bytes(b"left by a crash")
    with StoreWriter(tmp_path, "node0", config=config, clock=lambda: clock[0]):
        assert not stray.exists()  # a summary of no segment is removed when a writer opens
    pd.testing.assert_frame_equal(
        expected, _arrivals_in_store(tmp_path), check_dtype=False, rtol=1e-9, atol=1e-5
    )


def test_rows_it_cannot_summarise_are_left_to_the_reader(tmp_path):
    b = JobBuilder("job1")
    for r, late in ((1 << 20, 0.0), ((1 << 20) + 1, 0.2)):
        b.rank(r, "node0", 0, world_size=2)
        b.collective(0, r, "dp", 0, T0 + late, T0 + 1.0, group_size=2)
    assert summarise(pa.Table.from_pylist(b.rows["collectives"])) is None
    b.write_store(tmp_path)
    (segment,) = (tmp_path / "store").glob("*/collectives/*.parquet")
    assert not summary_path(segment).exists()
    skip: set[str] = set()
    with StoreWriter(tmp_path, "node0") as w:
        assert summarise_segments(w, skip=skip) == [] and skip == {f"collectives/{segment.name}"}
        assert summarise_segments(w, skip=skip) == []  # and not read again
    assert not summary_path(segment).exists()
    got = _arrivals_in_store(tmp_path).set_index("rank")
    assert got.loc[(1 << 20) + 1, "last_arrivals"] == 1
    assert got.loc[(1 << 20) + 1, "wait_caused_s"] == pytest.approx(0.2)


def test_maintenance_gives_older_segments_their_summaries_a_few_at_a_time(tmp_path):
    b = _job(3, 2)
    b.write_store(tmp_path)
    expected = _reference(b)
    segments = sorted((tmp_path / "store").glob("*/collectives/*.parquet"))
    for s in segments:  # as a store written before summaries existed
        summary_path(s).unlink()
    summary_path(segments[0]).write_bytes(b"damaged")
    done = []
    for node in ("node0", "node1", "node2"):
        with StoreWriter(tmp_path, node) as w:
            done += summarise_segments(w, limit=1)
            assert summarise_segments(w, limit=1) == []  # each partition has one
    assert len(done) == 3 and all(parquet_unreadable(summary_path(s)) is None for s in segments)
    pd.testing.assert_frame_equal(
        expected, _arrivals_in_store(tmp_path), check_dtype=False, rtol=1e-9, atol=1e-5
    )


def test_ingest_leaves_summaries_to_maintenance_and_the_arrivals_do_not_change(tmp_path):
    for rank in range(3):  # rank 2 comes last to every collective
        rows = [
            {
                "seq": k,
                "op": "all_reduce",
                "group": "0",
                "group_size": 3,
                "enter_time": 1000.0 + k + 0.01 * rank,
            }
            for k in range(8)
        ]
        write_segment(tmp_path, "n0", "j", 0, rank, 0, "ranks", [{"world_size": 3, "start_time": 1000.0}])
        write_segment(tmp_path, "n0", "j", 0, rank, 1, "collectives", rows)
    ingest_spools(tmp_path)
    (segment,) = (tmp_path / "store").glob("n0/collectives/*.parquet")
    assert not summary_path(segment).exists()  # off the ingest path
    with open_snapshot(tmp_path) as snap:
        before = load_job(snap.con, "j").arrivals
    with StoreWriter(tmp_path, "n0") as w:
        assert len(summarise_segments(w)) == 1
    assert summary_path(segment).exists()
    after = _arrivals_in_store(tmp_path, "j")
    pd.testing.assert_frame_equal(before, after, check_dtype=False, rtol=1e-9, atol=1e-5)
    assert after.set_index("rank")["last_arrivals"].to_dict() == {0: 0, 1: 0, 2: 8}


def test_rows_without_a_sequence_or_a_size_count_as_the_rows_query_counts_them(tmp_path):
    """A NULL seq is one collective to SQL's GROUP BY (so to the old query), never a rank's row
    of the summary; a NULL or 1 group size is no collective."""
    b = JobBuilder("job1").world(3, per_node=3)
    for r, late in ((0, 0.0), (1, 0.5), (2, 0.1)):
        b.collective(0, r, "dp", None, T0 + late, T0 + 1, group_size=3)  # type: ignore[arg-type]
        b.collective(0, r, "dp", 1, T0 + 2 - late, T0 + 3, group_size=3)
        b.collective(0, r, "solo", r, T0 + 4, T0 + 5, group_size=1)
        b.collective(0, r, "odd", 7, T0 + 6 + late, T0 + 7, group_size=None)  # type: ignore[arg-type]
    expected = _reference(b)
    assert expected.set_index("rank")["last_arrivals"].to_dict() == {0: 1, 1: 1, 2: 0}
    b.write_store(tmp_path)
    for got in (_arrivals_in_store(tmp_path), b.load().arrivals):
        pd.testing.assert_frame_equal(expected, got, check_dtype=False, rtol=1e-9, atol=1e-5)


def test_a_row_without_an_enter_time_leaves_its_collective_incomplete(tmp_path):
    b = JobBuilder("job1").world(2, per_node=2)
    b.collective(0, 0, "dp", 0, T0, T0 + 1, group_size=2)
    b.collective(0, 1, "dp", 0, None, T0 + 1, group_size=2)  # type: ignore[arg-type]
    b.collective(0, 0, "dp", 1, T0 + 2, T0 + 3, group_size=2)
    b.collective(0, 1, "dp", 1, T0 + 2.5, T0 + 3, group_size=2)
    b.write_store(tmp_path)
    for got in (_arrivals_in_store(tmp_path), b.load().arrivals):
        per = got.set_index("rank")
        assert per["collectives"].to_dict() == {0: 2, 1: 2}
        assert per["last_arrivals"].to_dict() == {0: 0, 1: 1}
        assert per.loc[1, "wait_caused_s"] == pytest.approx(0.5)  # (2.5 - 2.25) x 2 / 1


def test_jobs_side_by_side_and_a_reused_id_each_get_their_own_arrivals(tmp_path):
    """Three runs in one data dir: job1's first run (rank 1 late), a second run under the same
    id (rank 4 late) and another job (rank 2 late), their collectives in the same segments."""
    runs = [("job1", "runA", 1), ("job1", "runB", 4), ("other", None, 2)]
    builders = []
    for job, run, late in runs:
        b = JobBuilder(job, run_id=run).world(6, per_node=2)
        for seq in range(20):
            for r in range(6):
                enter = T0 + seq + (0.2 if r == late else 0.01 * r)
                b.collective(0, r, "dp", seq, enter, enter + 0.05, group_size=6)
        builders.append(b)
    merged = JobBuilder("job1")
    for b in builders:
        for table, rows in b.rows.items():
            merged.rows[table] += rows
    merged.write_store(tmp_path)
    with open_snapshot(tmp_path) as snap:
        for b, (job, run, late) in zip(builders, runs):
            got = load_job(snap.con, job, run=run or "-").arrivals
            pd.testing.assert_frame_equal(_reference(b), got, check_dtype=False, rtol=1e-9, atol=1e-5)
            assert got.set_index("rank")["last_arrivals"].idxmax() == late
