"""The one way Triage writes times, culprits and statuses for people."""

import pytest

from triage.display import Status, clock, culprit_text, duration, status_colour, when
from triage.verdict import Culprit

T = 1_796_525_467.25  # 2026-12-06 02:51:07.25 UTC


def test_times_are_utc_whatever_the_local_zone(monkeypatch):
    import time

    monkeypatch.setenv("TZ", "America/Los_Angeles")
    time.tzset()
    try:
        assert when(T) == "2026-12-06 02:51:07 UTC"
        assert clock(T) == "02:51:07"
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    assert when(None) == "-" and clock(float("nan"), unknown="an unknown time") == "an unknown time"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.85, "850 ms"), (12.34, "12.3 s"), (245, "4 min 05 s"), (7380, "2 h 03 min"), (None, "-")],
)
def test_durations_use_the_unit_a_person_would(seconds, text):
    assert duration(seconds) == text


def test_culprit_reads_the_same_from_a_verdict_or_its_json():
    full = Culprit(rank=3, node="node1", gpu=1, uuid="GPU-8f1c")
    assert culprit_text(full) == culprit_text(vars(full)) == "rank 3 on node1, GPU 1 (GPU-8f1c)"
    assert culprit_text({"node": "node1", "gpu": 0, "rank": None}) == "node1, GPU 0"
    assert culprit_text(Culprit(rank=0)) == "rank 0"
    assert culprit_text(Culprit()) == culprit_text(None) == ""


def test_every_status_has_one_colour_and_unknown_words_are_grey():
    assert {s.value for s in Status} >= {"running", "completed", "failed", "hung", "preempted"}
    assert all(status_colour(s).startswith("#") for s in Status)
    assert status_colour("failed") == status_colour("hung") != status_colour("completed")
    assert status_colour("something-new") == "#7f7f7f"
    assert [s for s in Status if s.needs_attention] == [Status.FAILED, Status.HUNG, Status.GAVE_UP]


def test_every_status_tuple_holds_status_members():
    """The store's attempt and run statuses, the analysis's and the restart policy's outcomes
    are `Status` members, not words of their own: a new status word anywhere fails here."""
    from triage.analyzers.job_analysis import STATUSES
    from triage.store.schema import ATTEMPT_STATUSES, RUN_STATUSES
    from triage.supervisor.policy import OUTCOMES

    for statuses in (ATTEMPT_STATUSES, RUN_STATUSES, STATUSES, OUTCOMES):
        assert statuses and all(type(s) is Status for s in statuses), statuses
    assert set(STATUSES) == {*ATTEMPT_STATUSES, Status.HUNG}


def test_a_status_is_its_word_in_json():
    import json

    assert json.dumps({"status": Status.GAVE_UP}) == '{"status": "gave_up"}'
    assert Status.HUNG == "hung" and f"{Status.HUNG}" == str(Status.HUNG) == "hung"
