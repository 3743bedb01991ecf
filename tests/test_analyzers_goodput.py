"""Goodput and badput on a hand-computed two-attempt job; Young/Daly checkpoint intervals."""

import math

import pandas as pd
import pytest
from jobdata_builder import T0, JobBuilder

from triage.analyzers.config import AnalyzerConfig
from triage.analyzers.goodput import daly_interval, ideal_step_time, young_interval
from triage.analyzers.job_analysis import analyze_job


def two_attempts(nodes: tuple[str, str] = ("node0", "node0"), run_id: str | None = None) -> JobBuilder:
    """Attempt 0: start T0, steps 0-9 from T0+10 (2 s each, 0.5 s data wait, step 5 takes 4 s),
    a 3 s checkpoint save after step 4, KeyError at T0+36, last heartbeat T0+40.
    Attempt 1: start T0+50, loads step 4 in 2 s, redoes steps 5-9 (step 7 takes 3 s), exits T0+66."""
    b = JobBuilder(run_id=run_id)
    for r in range(2):
        b.rank(r, nodes[r], r, attempt=0, start=T0).rank(r, nodes[r], r, attempt=1, start=T0 + 50)
    plan = {
        0: [(s, T0 + 10 + 2 * s, 2.0) for s in range(5)]
        + [(5, T0 + 23, 4.0)]
        + [(s, T0 + 27 + 2 * (s - 6), 2.0) for s in range(6, 10)],
        1: [(5, T0 + 54, 2.0), (6, T0 + 56, 2.0), (7, T0 + 58, 3.0), (8, T0 + 61, 2.0), (9, T0 + 63, 2.0)],
    }
    for attempt, steps in plan.items():
        for r in range(2):
            for s, start, wall in steps:
                b.step(attempt, r, s, start, start + wall, data_wait_s=0.5)
                b.heartbeat(attempt, r, start + wall, s)
    for r in range(2):
        b.event(0, r, T0 + 20, "checkpoint_save_begin", step=4)
        b.event(0, r, T0 + 23, "checkpoint_save_end", step=4)
        b.heartbeat(0, r, T0 + 40, 9)
        b.event(1, r, T0 + 52, "checkpoint_load_begin", step=4)
        b.event(1, r, T0 + 54, "checkpoint_load_end", step=4)
        b.event(1, r, T0 + 66, "exit")
    b.event(0, 1, T0 + 36, "exception", "KeyError: 'labels'")
    return b


def test_goodput_and_badput_match_the_hand_computation():
    a = analyze_job(two_attempts().load(), AnalyzerConfig())
    g = a.goodput
    assert g.total_s == pytest.approx(66.0)
    assert g.ideal_step_s == pytest.approx(1.5)
    assert g.productive_s == pytest.approx(15.0)  # 10 kept steps x 1.5 s ideal work
    assert g.badput == pytest.approx(
        {
            "initialization": 12.0,  # 10 s + (4 s - 2 s load)
            "checkpoint_save": 3.0,
            "checkpoint_load": 2.0,
            "data_wait": 5.0,  # 10 kept steps x 0.5 s
            "lost_progress": 12.0,  # attempt 0's steps 5-9, redone by attempt 1
            "detection_and_restart": 15.0,  # last step T0+35 -> next start T0+50
            "straggler_slowdown": 1.0,  # step 7 ran 1 s over the ideal
            "other": 1.0,
        }
    )  # last step end -> exit
    assert g.ratio == pytest.approx(15 / 66)
    assert g.interruptions == 1 and g.mtbf_s == pytest.approx(66.0)
    assert g.checkpoint_cost_s == pytest.approx(3.0)
    assert g.recommended_checkpoint_interval_s == pytest.approx(daly_interval(3.0, 66.0))
    assert [x.status for x in a.attempts] == ["failed", "completed"]


def test_each_attempt_accounts_for_its_own_span():
    g = analyze_job(two_attempts().load(), AnalyzerConfig()).goodput
    first, second = g.attempts
    assert (first.start, first.end, second.start, second.end) == (T0, T0 + 50, T0 + 50, T0 + 66)
    assert first.productive_s == pytest.approx(7.5) and second.productive_s == pytest.approx(7.5)
    assert first.badput["lost_progress"] == pytest.approx(12.0)
    assert first.badput["detection_and_restart"] == pytest.approx(15.0)
    assert second.badput["initialization"] == pytest.approx(2.0)  # 4 s to the first step, 2 s loading
    assert second.badput["straggler_slowdown"] == pytest.approx(1.0)
    for a in (first, second):  # each attempt's buckets fill its span exactly
        assert a.productive_s + sum(a.badput.values()) == pytest.approx(a.span_s)
    assert {k: first.badput[k] + second.badput[k] for k in g.badput} == pytest.approx(g.badput)


def test_the_incident_is_charged_its_lost_progress_restart_and_the_next_start_up():
    a = analyze_job(two_attempts(("node0", "node1")).load(), AnalyzerConfig())
    charged = [r for r in a.lost_time if r.cause_attempt == 0]
    assert {r.category for r in charged} == {"user_code_error"}
    assert {r.culprit_rank for r in charged} == {1} and {r.culprit_node for r in charged} == {"node1"}
    assert {(r.attempt, r.bucket) for r in charged} == {
        (0, "lost_progress"),
        (0, "detection_and_restart"),
        (1, "initialization"),
        (1, "checkpoint_load"),
    }
    # one row per node that held a GPU, each of its GPU-seconds
    assert {r.node for r in charged} == {"node0", "node1"}
    assert sum(r.gpu_seconds for r in charged) == pytest.approx(2 * (12 + 15 + 2 + 2))
    overhead = {(r.attempt, r.bucket) for r in a.lost_time if r.cause_attempt is None}
    assert (0, "initialization") in overhead and (0, "checkpoint_save") in overhead
    assert sum(r.gpu_seconds for r in a.lost_time) == pytest.approx(2 * (66 - 15))
    incident = next(i for i in a.to_dict()["incidents"] if i["root_cause"])
    assert incident["lost"]["seconds"] == pytest.approx(31.0)
    assert incident["lost"]["gpu_seconds"] == pytest.approx(62.0)
    assert incident["lost"]["buckets"]["detection_and_restart"] == pytest.approx(15.0)


def test_no_failure_means_no_interval_and_says_so():
    b = JobBuilder().world(2)
    end = b.steps(0, range(5), T0 + 1)
    for r in range(2):
        b.event(0, r, T0 + 2, "checkpoint_save_begin", step=1)
        b.event(0, r, T0 + 3, "checkpoint_save_end", step=1)
        b.event(0, r, end, "exit")
    g = analyze_job(b.load(), AnalyzerConfig()).goodput
    assert g.recommended_checkpoint_interval_s is None
    assert any("no failure observed" in n for n in g.notes)


def test_young_and_daly_intervals():
    assert young_interval(30.0, 14400.0) == pytest.approx(math.sqrt(2 * 30 * 14400))
    x = 30.0 / (2 * 14400.0)
    assert daly_interval(30.0, 14400.0) == pytest.approx(
        math.sqrt(2 * 30 * 14400) * (1 + math.sqrt(x) / 3 + x / 9) - 30.0
    )
    assert daly_interval(30.0, 14400.0) == pytest.approx(young_interval(30.0, 14400.0), rel=0.05)
    assert daly_interval(500.0, 200.0) == 200.0  # cost above 2 x MTBF: checkpoint every MTBF


def test_ideal_step_time_ignores_outliers():
    assert ideal_step_time(pd.Series([1.0, 1.0, 1.1, 0.9, 1.0, 30.0])) == pytest.approx(1.0)


@pytest.mark.parametrize("n", [3, 5, 12])
def test_a_run_too_short_to_have_a_pace_books_no_straggler_slowdown(n):
    """A healthy 3-step run lost "14% to straggler slowdown": its steps' spread above their
    mean. With fewer than five steps after the first none is called slow; from five on, a step
    slower than the rest still is."""
    b = JobBuilder().world(2, per_node=2)
    t = T0 + 5
    for s in range(n):
        wall = 1.0 + (0.4 if s == n - 1 else 0.05 * (s % 2))  # jitter, and a slow last step
        for r in range(2):
            b.step(0, r, s, t, t + wall)
        t += wall
    g = analyze_job(b.load(), AnalyzerConfig()).goodput
    if n - 1 < 5:
        assert g.badput["straggler_slowdown"] == 0.0
        assert any("too few to tell a slow step" in note for note in g.notes)
    else:
        assert g.badput["straggler_slowdown"] >= 0.35
        assert not any("too few" in note for note in g.notes)
    assert g.productive_s + sum(g.badput.values()) == pytest.approx(g.total_s)
