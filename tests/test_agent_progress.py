"""`aggregate_progress_segments`: the agent's pyarrow aggregation of new store segments, rule by
rule, on Parquet files written by hand with the store's schemas."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from triage.agent import job_progress
from triage.agent.job_progress import (
    RECENT_STEPS,
    STEP_TIME_BUCKETS,
    RankUpdate,
    RecentStep,
    aggregate_progress_segments,
)
from triage.store.schema import TABLES

INF_BUCKET = len(STEP_TIME_BUCKETS)


def write(
    tmp_path: Path, table: str, rows: list[dict], name: str | None = None, drop: tuple[str, ...] = ()
) -> Path:
    """A segment file of `table` with `rows` (absent columns NULL); `drop` leaves columns out
    of the file, as in a segment older than them."""
    schema = TABLES[table].schema
    schema = pa.schema([f for f in schema if f.name not in drop])
    path = tmp_path / f"{name or table}.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


def key(job_id: str = "j", attempt: int | None = 0, rank: int | None = 0, **row) -> dict:
    return {"job_id": job_id, "attempt": attempt, "rank": rank, **row}


def ranks_of(batch) -> dict[tuple[str, int, int], RankUpdate]:
    return {(u.job_id, u.attempt, u.rank): u for u in batch.ranks}


def buckets(*indexes: int) -> list[int]:
    counts = [0] * (len(STEP_TIME_BUCKETS) + 1)
    for i in indexes:
        counts[i] += 1
    return counts


def test_ranks_table_takes_node_local_gpu_and_pid_from_the_latest_start(tmp_path):
    rows = [  # not in time order: neither the file's first nor its last row is the newest
        key(node="n0", local_rank=1, gpu=6, pid=10, world_size=8, start_time=100.0),
        key(node="n1", local_rank=2, gpu=7, pid=20, world_size=4, start_time=200.0),
        key(node="n5", local_rank=5, gpu=5, pid=50, world_size=2, start_time=150.0),
        # No start time: ignored by the arg-max picks, yet counted by max(world_size).
        key(node="n9", local_rank=9, gpu=9, pid=99, world_size=16, start_time=None),
    ]
    batch = aggregate_progress_segments({"ranks": [write(tmp_path, "ranks", rows)]})
    assert batch.ranks == [
        RankUpdate("j", "", 0, 0, node="n1", local_gpu=2, pid=20, world_size=16, start_time=100.0)
    ]


def test_a_newer_ranks_row_without_a_value_keeps_the_older_value(tmp_path):
    rows = [
        key(node="n0", local_rank=1, pid=10, start_time=100.0),
        key(node=None, local_rank=None, gpu=None, pid=None, start_time=200.0),
    ]
    (u,) = aggregate_progress_segments({"ranks": [write(tmp_path, "ranks", rows)]}).ranks
    assert (u.node, u.local_gpu, u.pid, u.start_time) == ("n0", 1, 10, 100.0)


def test_local_gpu_is_local_rank_else_gpu_and_the_ranks_table_wins(tmp_path):
    ranks = [
        key(rank=0, node="n0", local_rank=None, gpu=5, start_time=1.0),
        key(rank=1, node="n0", local_rank=3, gpu=7, start_time=1.0),
    ]
    steps = [key(rank=1, node="n1", gpu=6, step=1), key(rank=2, node="n2", gpu=4, step=1)]
    batch = aggregate_progress_segments(
        {"ranks": [write(tmp_path, "ranks", ranks)], "steps": [write(tmp_path, "steps", steps)]}
    )
    by_key = ranks_of(batch)
    assert by_key["j", 0, 0].local_gpu == 5  # no LOCAL_RANK: the gpu index
    assert (by_key["j", 0, 1].local_gpu, by_key["j", 0, 1].node) == (3, "n0")  # ranks first
    assert (by_key["j", 0, 2].local_gpu, by_key["j", 0, 2].node) == (4, "n2")  # steps only


def test_steps_give_max_step_and_last_step_end_each_over_all_rows(tmp_path):
    rows = [
        key(node="n0", gpu=1, step=10, start_time=40.0, end_time=50.0),
        key(node="n0", gpu=1, step=9, start_time=55.0, end_time=60.0),
        key(node="n0", gpu=1, step=11, start_time=None, end_time=None),
    ]
    (u,) = aggregate_progress_segments({"steps": [write(tmp_path, "steps", rows)]}).ranks
    assert (u.node, u.local_gpu, u.max_step, u.last_step_end) == ("n0", 1, 11, 60.0)


def test_step_time_histogram_bounds_inf_bucket_and_sum_per_job(tmp_path):
    durations = {  # start at 0, so end_time - start_time is the duration exactly
        0.05: 0,  # on the first bound
        0.5: 3,  # on a bound: that bucket
        0.75: 4,  # just past 0.5: the next one
        300.0: INF_BUCKET - 1,  # on the last bound
        300.5: INF_BUCKET,  # past every bound: +Inf
    }
    rows = [key(step=i, start_time=0.0, end_time=d) for i, d in enumerate(durations)]
    rows += [
        key(job_id="k", rank=None, step=1, start_time=10.0, end_time=12.0),  # no rank
        key(job_id=None, step=1, start_time=0.0, end_time=1.0),  # no job: not counted
        key(step=99, start_time=None, end_time=1.0),  # no start: not counted
        key(step=98, start_time=0.0, end_time=None),
    ]  # no end: not counted
    batch = aggregate_progress_segments({"steps": [write(tmp_path, "steps", rows)]})
    assert batch.step_buckets == {"j": buckets(*durations.values()), "k": buckets(5)}
    assert batch.step_time_sum == {"j": pytest.approx(sum(durations), rel=1e-12), "k": 2.0}


def test_recent_steps_keep_each_ranks_highest_steps_ordered_by_attempt_then_step(tmp_path):
    rank0 = [
        key(step=s, start_time=float(s), end_time=s + 0.5, tokens=100) for s in reversed(range(25))
    ]  # more than RECENT_STEPS, newest first
    rank0 += [
        key(step=30, start_time=30.0, end_time=None),  # unfinished: not a recent step
        key(step=31, start_time=None, end_time=31.0),
    ]  # no start: no duration either
    other = [key(rank=1, step=s, start_time=float(s), end_time=s + 2.0, tokens=None) for s in (101, 100, 102)]
    other += [key(attempt=1, step=s, start_time=0.0, end_time=1.0, tokens=7) for s in (1, 0)]
    other += [
        key(rank=None, step=40, start_time=0.0, end_time=1.0),  # no rank's step
        key(step=None, start_time=0.0, end_time=1.0),
    ]
    batch = aggregate_progress_segments(
        {"steps": [write(tmp_path, "steps", rank0, "s0"), write(tmp_path, "steps", other, "s1")]}
    )
    kept = range(25 - RECENT_STEPS, 25)
    assert batch.recent_steps == (
        [RecentStep("j", "", 0, 0, s, 100, 0.5) for s in kept]
        + [RecentStep("j", "", 0, 1, s, 0, 2.0) for s in (100, 101, 102)]  # NULL tokens: 0
        + [RecentStep("j", "", 1, 0, s, 7, 1.0) for s in (0, 1)]
    )  # attempt before step
    assert ranks_of(batch)["j", 0, 0].max_step == 31  # steps without times still count here


def test_heartbeats_give_pid_of_the_latest_beat_and_its_time(tmp_path):
    rows = [
        key(node="n0", gpu=2, pid=10, time=100.0),
        key(node="n0", gpu=2, pid=20, time=200.0),
        key(node="n0", gpu=2, pid=15, time=150.0),
        key(node="n0", gpu=2, pid=99, time=None),
    ]
    (u,) = aggregate_progress_segments({"heartbeats": [write(tmp_path, "heartbeats", rows)]}).ranks
    assert (u.node, u.local_gpu, u.pid, u.last_heartbeat) == ("n0", 2, 20, 200.0)


def test_events_set_exited_and_the_jobs_last_checkpoint(tmp_path):
    rows = [
        key(rank=0, node="n0", gpu=0, kind="start", time=1.0),
        key(rank=0, node="n0", gpu=0, kind="exit", time=2.0),
        key(rank=1, node="n0", gpu=1, kind="start", time=1.0),
        key(rank=1, kind="checkpoint_save_end", time=5.0),
        key(rank=None, kind="checkpoint_save_end", time=9.0),  # job level: still counts
        key(rank=None, kind="checkpoint_save_begin", time=20.0),
        key(job_id="k", rank=None, kind="checkpoint_save_end", time=3.0),
        key(job_id=None, rank=None, kind="checkpoint_save_end", time=50.0),
    ]
    batch = aggregate_progress_segments({"events": [write(tmp_path, "events", rows)]})
    assert batch.ranks == [
        RankUpdate("j", "", 0, 0, node="n0", local_gpu=0, exited=True),
        RankUpdate("j", "", 0, 1, node="n0", local_gpu=1, exited=False),
    ]
    assert batch.last_checkpoint == {"j": 9.0, "k": 3.0}


@pytest.mark.parametrize(
    "table, row",
    [
        ("ranks", {"start_time": 1.0, "pid": 1}),
        ("steps", {"step": 1, "end_time": 1.0}),
        ("heartbeats", {"time": 1.0, "pid": 1}),
        ("events", {"kind": "exit", "time": 1.0}),
    ],
)
def test_rows_without_job_attempt_or_rank_update_no_rank(tmp_path, table, row):
    rows = [key(**row), key(job_id=None, **row), key(attempt=None, **row), key(rank=None, **row)]
    batch = aggregate_progress_segments({table: [write(tmp_path, table, rows)]})
    assert [(u.job_id, u.attempt, u.rank) for u in batch.ranks] == [("j", 0, 0)]


def test_tables_merge_ranks_first_and_exit_from_events(tmp_path):
    files = {
        "ranks": [
            write(tmp_path, "ranks", [key(node="n0", local_rank=1, pid=10, world_size=2, start_time=1.0)])
        ],
        "steps": [write(tmp_path, "steps", [key(node="nX", gpu=5, step=4, start_time=2.0, end_time=3.0)])],
        "heartbeats": [write(tmp_path, "heartbeats", [key(node="nY", gpu=6, pid=11, time=4.0)])],
        "events": [write(tmp_path, "events", [key(node="nZ", gpu=7, kind="exit", time=5.0)])],
    }
    assert aggregate_progress_segments(files).ranks == [
        RankUpdate(
            "j",
            "",
            0,
            0,
            node="n0",
            local_gpu=1,
            pid=10,
            world_size=2,
            start_time=1.0,
            max_step=4,
            last_step_end=3.0,
            last_heartbeat=4.0,
            exited=True,
        )
    ]


def test_several_files_of_one_table_are_aggregated_together(tmp_path):
    files = [
        write(tmp_path, "steps", [key(step=s, start_time=0.0, end_time=float(s))], name=f"s{s}")
        for s in (1, 3, 2)
    ]
    files.append(write(tmp_path, "steps", [], name="empty"))
    batch = aggregate_progress_segments({"steps": files})
    assert ranks_of(batch)["j", 0, 0].max_step == 3
    assert ranks_of(batch)["j", 0, 0].last_step_end == 3.0
    assert batch.step_buckets == {"j": buckets(4, 5, 6)}  # 1.0, 2.0 -> 2.5, 3.0 -> 5.0
    assert [s.step for s in batch.recent_steps] == [1, 2, 3]


def test_batches_of_a_file_aggregate_again_like_their_rows(tmp_path, monkeypatch):
    monkeypatch.setattr(job_progress, "_BATCH_ROWS", 2)
    ranks = [
        key(node="n0", pid=10, world_size=2, start_time=10.0),
        key(node="n3", pid=None, world_size=None, start_time=30.0),  # newest; no pid
        key(node=None, pid=20, world_size=8, start_time=20.0),  # the newest pid: next batch
        key(node="n9", pid=99, world_size=4, start_time=None),
    ]
    steps = [
        key(rank=1, node=None if s < 3 else f"n{s}", step=s, start_time=0.0, end_time=float(s % 3))
        for s in range(25)
    ]
    heartbeats = [key(pid=p, time=t) for p, t in ((1, 5.0), (2, 9.0), (3, 7.0), (None, 99.0))]
    events = [key(kind="checkpoint_save_end", time=t) for t in (4.0, 8.0, 6.0)]
    batch = aggregate_progress_segments(
        {
            t: [write(tmp_path, t, rows)]
            for t, rows in (
                ("ranks", ranks),
                ("steps", steps),
                ("heartbeats", heartbeats),
                ("events", events),
            )
        }
    )
    by_key = ranks_of(batch)
    u = by_key["j", 0, 0]
    assert (u.node, u.pid, u.world_size, u.start_time) == ("n3", 20, 8, 10.0)
    assert u.last_heartbeat == 99.0
    u = by_key["j", 0, 1]
    assert (u.node, u.max_step, u.last_step_end) == ("n3", 24, 2.0)  # node: the first there is
    assert [s.step for s in batch.recent_steps] == list(range(25 - RECENT_STEPS, 25))
    assert batch.step_buckets == {"j": buckets(*[0] * 9, *[4] * 8, *[5] * 8)}  # d = 0, 1, 2
    assert batch.last_checkpoint == {"j": 8.0}


def test_a_column_missing_from_an_older_file_reads_as_null(tmp_path):
    old = write(tmp_path, "ranks", [key(rank=0, gpu=5, start_time=1.0)], name="old", drop=("local_rank",))
    new = write(tmp_path, "ranks", [key(rank=1, gpu=5, local_rank=2, start_time=1.0)], "new")
    batch = aggregate_progress_segments({"ranks": [str(old), new]})
    assert [(u.rank, u.local_gpu) for u in batch.ranks] == [(0, 5), (1, 2)]


def test_progress_is_read_without_duckdb_and_with_pandas_kept_out(tmp_path):
    """As in `triage agent`, where importing pandas fails: pyarrow only asks for it to learn
    whether a value it converts is a pandas object."""
    files = {
        "steps": [str(write(tmp_path, "steps", [key(step=1, start_time=0.0, end_time=0.5)]))],
        "events": [str(write(tmp_path, "events", [key(kind="exit", time=1.0)]))],
        "heartbeats": [str(write(tmp_path, "heartbeats", [key(pid=1, time=1.0)]))],
    }
    code = f"""
import importlib.abc, sys
class NoPandas(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "pandas":
            raise ImportError(name)
sys.meta_path.insert(0, NoPandas())
from triage.agent.job_progress import aggregate_progress_segments
batch = aggregate_progress_segments({files!r})
print(batch.ranks[0].exited, batch.ranks[0].pid, len(batch.recent_steps),
      sorted({{m.partition(".")[0] for m in sys.modules}} & {{"duckdb", "pandas"}}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "1", "1", "[]"]
