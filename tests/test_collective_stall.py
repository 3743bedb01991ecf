"""The collective-stall rule (`triage.supervisor.stall`): a hang named seconds after it starts,
from the ranks' newest heartbeats, and none where the wait is legitimate."""

from __future__ import annotations

import duckdb
import pytest

from triage.supervisor.stall import (
    SAVING_SQL,
    STALL_MIN_S,
    WORK_SQL,
    Beat,
    find_stall,
    is_working,
    read_working,
)

NOW = 1_800_000_000.0


def beat(
    rank: int, *, seq: int | None = 40, since_ago: float = 4.0, group: str = "0", age: float = 0.5
) -> Beat:
    inside = seq is not None
    return Beat(
        rank,
        f"node{rank // 2}",
        rank % 2,
        NOW - age,
        8,
        group if inside else None,
        seq,
        "all_reduce" if inside else None,
        NOW - since_ago if inside else None,
    )


def stall(beats: list[Beat], **kw: object):
    args = dict(
        members={"0": {b.rank for b in beats}},
        p99_wait_s={"all_reduce": 0.05},
        step_p50_s=0.3,
        saving=frozenset(),
    )
    args.update(kw)
    return find_stall(beats, now=NOW, **args)  # type: ignore[arg-type]


@pytest.mark.parametrize("culprit", [0, 1, 3])
def test_the_rank_that_never_entered_is_the_culprit_wherever_it_is(culprit):
    beats = [beat(r, seq=None) if r == culprit else beat(r) for r in range(4)]
    s = stall(beats)
    assert s is not None and [b.rank for b in s.missing] == [culprit]
    assert s.waiting == tuple(r for r in range(4) if r != culprit) and s.seq == 40
    assert s.missing[0].node == f"node{culprit // 2}"
    assert "never entered" in s.summary(NOW)


def test_a_wait_within_the_bound_learned_from_the_job_is_no_stall():
    beats = [beat(0), beat(1), beat(2), beat(3, seq=None)]
    assert stall([beat(r, since_ago=STALL_MIN_S - 0.5) if r < 3 else b for r, b in enumerate(beats)]) is None
    # a job whose collectives or steps are slow earns a longer bound: 5 x p99 wait, 3 x step
    assert stall(beats, p99_wait_s={"all_reduce": 1.0}) is None
    assert stall(beats, step_p50_s=2.0) is None
    assert stall(beats, p99_wait_s={"all_reduce": 0.7}) is not None  # bound 3.5 s < 4 s waited


def test_no_stall_while_saving_or_with_a_member_silent_or_when_all_are_inside():
    beats = [beat(0), beat(1), beat(2), beat(3, seq=None)]
    assert stall(beats, saving=frozenset({3})) is None  # the late rank saves: its peers wait for it
    assert stall(beats, saving=frozenset({0})) is not None  # another rank's save excuses no one
    assert stall([*beats[:3], beat(3, seq=None, age=8.0)]) is None  # rank 3 may be dead
    assert stall([beat(r) for r in range(4)]) is None  # all inside: not a missing rank
    assert stall([beat(0), beat(1), beat(2, seq=None), beat(3, seq=None)]) is None  # half: unclear
    assert stall([beat(0), beat(1), beat(2), beat(3, seq=41)]) is None  # rank 3 is ahead, not late


def test_groups_are_judged_by_their_own_members():
    # ranks 0 and 1 wait in group "tp0" for rank 2, its third member; rank 3 is elsewhere
    beats = [beat(0, group="tp0"), beat(1, group="tp0"), beat(2, seq=None), beat(3, seq=None)]
    s = stall(beats, members={"tp0": {0, 1, 2}, "0": {0, 1, 2, 3}})
    assert s is not None and s.group == "tp0" and [b.rank for b in s.missing] == [2]


def test_the_ranks_saving_are_those_with_a_save_of_either_kind_still_open():
    """A checkpoint still open while a file is written and closed on the same rank; a failed
    checkpoint and a finished file save are closed; begin and end at once are closed."""
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE events (job_id VARCHAR, run_id VARCHAR, attempt BIGINT, rank BIGINT, time DOUBLE, kind VARCHAR)"
    )
    rows = [
        (1, 10.0, "checkpoint_save_begin"),  # rank 1: its checkpoint is still being written
        (1, 11.0, "file_save_begin"),
        (1, 12.0, "file_save_end"),
        (2, 10.0, "checkpoint_save_begin"),  # rank 2: the checkpoint failed
        (2, 11.0, "checkpoint_save_failed"),
        (3, 10.0, "file_save_begin"),  # rank 3: a file write under way
        (4, 10.0, "checkpoint_save_begin"),  # rank 4: begun and ended at one timestamp
        (4, 10.0, "checkpoint_save_end"),
        (None, 10.0, "checkpoint_save_begin"),  # a job-level event names no rank
    ]
    con.executemany("INSERT INTO events VALUES ('j', NULL, 0, ?, ?, ?)", rows)
    saving = {r for (r,) in con.execute(SAVING_SQL, {"job": "j", "run": None, "attempt": 0}).fetchall()}
    assert saving == {1, 3}


@pytest.mark.parametrize(
    ("main_cpu", "children_cpu", "read", "working"),
    [
        (0.1, 0.0, 0, False),  # idle: a deadlock, a sleep
        (4.0, 0.0, 0, True),  # a long step on the main thread
        (0.1, 9.0, 0, True),  # data prepared in a pool of workers, the main thread waiting
        (0.1, None, 50 * 1024 * 1024, True),  # a download; hooks that cannot read children
        (0.1, 0.5, 20_000, False),  # an idle pool, the hooks' own reads of /proc
        (0.1, -9.0, -5_000_000, False),  # counters that went back (a child gone unreaped)
    ],
)
def test_a_late_rank_is_working_by_its_main_thread_its_children_or_what_it_reads(
    main_cpu, children_cpu, read, working
):
    """What the rule asks of a rank that has not entered the collective, over 10 s of heartbeats."""
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE heartbeats (job_id VARCHAR, run_id VARCHAR, attempt BIGINT, rank BIGINT, time DOUBLE, "
        "main_cpu_s DOUBLE, children_cpu_s DOUBLE, read_bytes BIGINT)"
    )
    rows = [
        (3, 100.0, 1.0, None if children_cpu is None else 2.0, 1000),
        (3, 110.0, 1.0 + main_cpu, None if children_cpu is None else 2.0 + children_cpu, 1000 + read),
    ]
    con.executemany("INSERT INTO heartbeats VALUES ('j', NULL, 0, ?, ?, ?, ?, ?)", rows)
    share, rate = con.execute(
        WORK_SQL, {"job": "j", "run": None, "attempt": 0, "rank": 3, "since": 99.0}
    ).fetchone()
    assert is_working(share, rate) is working


def _working(rows: list[tuple], *, since: float, main_since: float) -> tuple[int, ...]:
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE heartbeats (job_id VARCHAR, run_id VARCHAR, attempt BIGINT, rank BIGINT, time DOUBLE, "
        "main_cpu_s DOUBLE, children_cpu_s DOUBLE, read_bytes BIGINT, main_moves BIGINT, inflight_seq BIGINT, "
        "inflight_group VARCHAR)"
    )
    rows = [(*row, None if row[-1] is None else "0") for row in rows]
    con.executemany("INSERT INTO heartbeats VALUES ('j', NULL, 0, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    return read_working(con, {"job": "j", "run": None, "attempt": 0}, since=since, main_since=main_since)


def test_the_ranks_working_are_those_outside_a_collective_with_busy_children_or_reads():
    """Rank 0 maps data in a pool, rank 1 reads a file, rank 2 waits in a collective with busy
    DataLoader workers, rank 3 spins on its GPU (main thread busy in one call, its stack never
    changing), rank 4 sleeps, rank 5 prepared and then entered the collective."""
    rows = []
    for t in range(11):
        rows += [
            (0, 100.0 + t, 0.01 * t, 1.5 * t, 0, 0, None),
            (1, 100.0 + t, 0.01 * t, 0.0, 4_000_000 * t, 0, None),
            (2, 100.0 + t, 0.01 * t, 1.5 * t, 0, 0, 40),
            (3, 100.0 + t, 1.0 * t, 0.0, 2_000 * t, 0, None),
            (4, 100.0 + t, 0.0, 0.0, 2_000 * t, 0, None),
            # rank 5 worked in its pool, then entered the collective: it waits like its peers now
            (5, 100.0 + t, 0.01 * t, 1.5 * t, 0, 0, 40 if t == 10 else None),
        ]
    assert _working(rows, since=100.0, main_since=0.0) == (0, 1)


def test_a_main_thread_running_python_code_is_working_in_or_out_of_collectives():
    """Rank 0 evaluates (CPU, its stack changing at every look, in and out of FSDP's
    all-gathers), rank 1 tokenizes in long native calls (its stack changing at a third of the
    looks), rank 2 spins on its GPU (CPU, one stack), rank 3 polls for a file (its stack
    changing, little CPU), rank 4 changed its stack twice and then spun (too few looks), rank 5's
    hooks give no stack (an older version of them), rank 6 evaluates waiting on its peers'
    all-gathers (little CPU, one stack, a new collective at every look), rank 7 is stuck in one
    collective."""
    rows = []
    for t in range(11):
        rows += [
            (0, 100.0 + t, 0.9 * t, 0.0, 0, 3 * t, 40 if t % 2 else None),
            (1, 100.0 + t, 0.95 * t, 0.0, 0, t // 3, None),
            (2, 100.0 + t, 1.0 * t, 0.0, 0, 7, 40),
            (3, 100.0 + t, 0.02 * t, 0.0, 0, t, None),
            (4, 100.0 + t, 1.0 * t, 0.0, 0, min(t, 2), None),
            (5, 100.0 + t, 1.0 * t, 0.0, 0, None, None),
            (6, 100.0 + t, 0.1 * t, 0.0, 0, 4, 300 * t),
            (7, 100.0 + t, 0.1 * t, 0.0, 0, 4, 300),
        ]
    assert _working(rows, since=100.0, main_since=0.0) == (0, 1, 6)


def test_a_main_thread_s_work_counts_since_the_last_step_only():
    """A rank that ran steps until 106 and has spun on its GPU since (one stack) is not
    working: the steps' own Python code before the hang must not excuse it."""
    rows = [(0, 100.0 + t, 1.0 * t, 0.0, 0, 5 * t if t <= 6 else 30, None) for t in range(15)]
    assert _working(rows, since=100.0, main_since=0.0) == (0,)
    assert _working(rows, since=100.0, main_since=106.0) == ()
