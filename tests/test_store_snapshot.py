"""Readers: job/attempt status derived from the facts, checkpoints, per-rank helpers."""

from __future__ import annotations

import json
import re

from store_spools import write_rank

from triage.store import StoreWriter, ingest_spools, open_snapshot

T0 = 1000.0  # write_rank's first step; the last heartbeat of a 3-step rank is at T0 + 2.95


def _status(data_dir, now):
    with open_snapshot(data_dir, now=now) as snap:
        return {j.job_id: j.status for j in snap.jobs()}


def test_status_follows_events_and_heartbeats(tmp_path):
    for rank in (0, 1):
        write_rank(tmp_path, "n0", "done", 0, rank, steps=3, events=("exit",))
        write_rank(tmp_path, "n0", "live", 0, rank, steps=3)
        write_rank(tmp_path, "n0", "crash", 0, rank, steps=3, events=("exception",) if rank else ())
        write_rank(tmp_path, "n0", "evicted", 0, rank, steps=3, events=("sigterm",))
    write_rank(tmp_path, "n0", "halfdone", 0, 0, steps=3, events=("exit",))
    write_rank(tmp_path, "n0", "halfdone", 0, 1, steps=3)
    ingest_spools(tmp_path)
    assert _status(tmp_path, now=T0 + 10) == {
        "done": "completed",
        "live": "running",
        "crash": "failed",
        "evicted": "preempted",
        "halfdone": "running",
    }
    later = _status(tmp_path, now=T0 + 1000)  # heartbeats stopped long ago, no exit
    assert later["live"] == "failed" and later["halfdone"] == "failed" and later["done"] == "completed"


def test_supervisor_outcome_and_newest_attempt_decide(tmp_path):
    write_rank(tmp_path, "n0", "j", 0, 0, steps=3, events=("exception",))
    write_rank(tmp_path, "n0", "j", 1, 0, steps=5)
    ingest_spools(tmp_path)
    with open_snapshot(tmp_path, now=T0 + 10) as snap:
        (job,) = snap.jobs()
        assert (job.status, job.attempts, job.ranks, job.max_step) == ("running", 2, 1, 4)
        assert [a.status for a in snap.attempts("j")] == ["failed", "running"]
    with StoreWriter(tmp_path, "n0") as w:
        w.append_rows(
            "attempt_outcomes",
            [{"job_id": "j", "attempt": 1, "time": T0 + 9, "status": "preempted", "reason": "maintenance"}],
        )
    with open_snapshot(tmp_path, now=T0 + 10) as snap:
        assert snap.jobs()[0].status == "preempted"


def test_the_views_status_words_are_status_values():
    """The attempts and run_summaries views spell their statuses in SQL; each word is a
    `Status` (the attempts view's one of ATTEMPT_STATUSES), so a new word fails here."""
    from triage.display import Status
    from triage.store.schema import ATTEMPT_STATUSES
    from triage.store.snapshot import _ATTEMPTS_SQL, _RUNS_SQL

    def words(sql: str) -> set[str]:
        case = re.search(r"CASE(.*?)END AS status", sql, re.S)
        assert case, sql
        return set(re.findall(r"'(\w*)'", case.group(1)))

    assert {"running", "completed", "failed", "preempted"} <= words(_ATTEMPTS_SQL) <= set(ATTEMPT_STATUSES)
    assert {"running"} <= words(_RUNS_SQL) <= set(Status)


def test_exit_with_a_nonzero_code_is_a_failure(tmp_path):
    write_rank(tmp_path, "n0", "j", 0, 0, steps=2)
    with StoreWriter(tmp_path, "n0") as w:
        w.append_rows(
            "events",
            [
                {
                    "job_id": "j",
                    "attempt": 0,
                    "rank": 0,
                    "time": T0 + 3,
                    "kind": "exit",
                    "detail": json.dumps({"exit_code": 3}),
                }
            ],
        )
    ingest_spools(tmp_path)
    assert _status(tmp_path, now=T0 + 4) == {"j": "failed"}


def test_checkpoints_view_pairs_begin_and_end(tmp_path):
    with StoreWriter(tmp_path, "n0") as w:
        w.append_rows(
            "events",
            [
                {
                    "job_id": "j",
                    "attempt": 0,
                    "rank": 0,
                    "step": 100,
                    "time": 50.0,
                    "kind": "checkpoint_save_begin",
                },
                {
                    "job_id": "j",
                    "attempt": 0,
                    "rank": 0,
                    "step": 100,
                    "time": 52.5,
                    "kind": "checkpoint_save_end",
                    "detail": json.dumps({"bytes": 4096, "path": "/ckpt/100"}),
                },
                {
                    "job_id": "j",
                    "attempt": 0,
                    "rank": 1,
                    "step": 100,
                    "time": 53.0,
                    "kind": "checkpoint_save_end",
                    "detail": "not json",
                },
            ],
        )
    with open_snapshot(tmp_path) as snap:
        rows = snap.sql("SELECT rank, step, duration_s, bytes, path FROM checkpoints ORDER BY rank")
    assert rows == [
        {"rank": 0, "step": 100, "duration_s": 2.5, "bytes": 4096, "path": "/ckpt/100"},
        {"rank": 1, "step": 100, "duration_s": None, "bytes": None, "path": None},
    ]


def test_rank_helpers(tmp_path):
    for rank in range(3):
        write_rank(tmp_path, "n0", "j", 0, rank, steps=4 - rank, collectives_per_step=2)
    ingest_spools(tmp_path)
    with open_snapshot(tmp_path) as snap:
        progress = snap.rank_progress("j", 0)
        assert [(p.rank, p.max_step, p.heartbeat_step, p.node) for p in progress] == [
            (0, 3, 3, "n0"),
            (1, 2, 2, "n0"),
            (2, 1, 1, "n0"),
        ]
        medians = snap.step_time_medians("j", 0)
        assert sorted(medians) == [0, 1, 2] and all(abs(v - 0.9) < 1e-9 for v in medians.values())
        first = snap.last_arrivals("j", 0)[0]
        # write_rank delays rank r by 10 ms at every collective: the highest rank arrives last.
        assert (first.group, first.seq, first.last_rank, first.ranks) == ("0", 0, 2, 3)
        assert abs(first.spread_s - 0.02) < 1e-9


def test_newer_than_leaves_out_segments_whose_rows_are_all_older(tmp_path):
    """A probe about the last minutes opens only the segments that can hold them; a segment
    that reaches past the bound is read whole (rows older than it included: only files are
    pruned, never rows)."""

    def steps(times):
        return [
            {"job_id": "j", "attempt": 0, "rank": 0, "step": i, "end_time": t} for i, t in enumerate(times)
        ]

    with StoreWriter(tmp_path, "node0") as w:
        w.append_rows("steps", steps([100.0, 200.0]))  # history
        w.append_rows("steps", steps([900.0, 1100.0]))  # reaches past the bound
        w.append_rows("steps", steps([1500.0]))
        w.append_rows("events", [{"job_id": "j", "time": 50.0, "kind": "init_done"}])
    with open_snapshot(tmp_path) as snap:
        assert snap.count("steps") == 5 and snap.count("events") == 1
    with open_snapshot(tmp_path, newer_than=1000.0) as snap:
        times = sorted(t for (t,) in snap.con.execute("SELECT end_time FROM steps").fetchall())
        assert times == [900.0, 1100.0, 1500.0]
        assert snap.count("events") == 0  # the view is there, empty
        assert not snap.problems
