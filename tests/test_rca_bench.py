"""`triage bench rca`: its scores on made-up outcomes (exact numbers, by hand), its trial plan,
and, marked slow, one real trial judged end to end."""

from __future__ import annotations

import json
import subprocess

import pytest
from conftest import TRIAGE_CLI

from triage.benchmarks.rca_campaign import ALL_KINDS, KINDS, LAYOUTS, QUICK_KINDS, plan
from triage.benchmarks.rca_report import markdown
from triage.benchmarks.rca_scoring import (
    NONE,
    Culprit,
    Judgement,
    action_scores,
    confusion,
    culprit_accuracy,
    detection_latency,
    macro_f1,
    micro_f1,
    per_category,
    percentile,
    score,
)


def j(expected: str, got: str, **kw) -> Judgement:
    return Judgement(
        trial="t", kind=kw.pop("kind", expected), spec="s", attempt=0, expected=expected, got=got, **kw
    )


PAIRS = [
    ("gpu_oom", "gpu_oom"),
    ("gpu_oom", "gpu_oom"),
    ("gpu_oom", "user_code_error"),
    ("user_code_error", "user_code_error"),
    ("straggler", NONE),
]


def test_precision_recall_f1_support_per_expected_category():
    s = per_category(PAIRS)
    assert set(s) == {"gpu_oom", "user_code_error", "straggler"}
    assert (s["gpu_oom"].precision, s["gpu_oom"].recall, s["gpu_oom"].support) == (1.0, 2 / 3, 3)
    assert s["gpu_oom"].f1 == pytest.approx(0.8)
    # predicted twice, right once: precision 1/2, recall 1/1
    assert (s["user_code_error"].precision, s["user_code_error"].recall) == (0.5, 1.0)
    assert s["user_code_error"].f1 == pytest.approx(2 / 3)
    # never predicted: no precision, F1 0
    assert (s["straggler"].precision, s["straggler"].recall, s["straggler"].f1) == (None, 0.0, 0.0)


def test_macro_is_the_mean_over_expected_categories_and_micro_is_accuracy():
    assert macro_f1(per_category(PAIRS)) == pytest.approx((0.8 + 2 / 3 + 0.0) / 3)
    assert micro_f1(PAIRS) == pytest.approx(3 / 5)
    assert macro_f1({}) is None and micro_f1([]) is None


def test_confusion_counts_only_the_cells_that_occurred():
    assert confusion(PAIRS) == {
        "gpu_oom": {"gpu_oom": 2, "user_code_error": 1},
        "user_code_error": {"user_code_error": 1},
        "straggler": {NONE: 1},
    }


def test_culprit_accuracy_scores_rank_node_and_gpu_only_where_they_exist():
    js = [
        j(
            "gpu_oom",
            "gpu_oom",
            expected_culprit=Culprit(1, "node0", 1),
            got_culprit=Culprit(1, "node0", 0),
            score_gpu=True,
        ),
        j("hang", "hang", expected_culprit=Culprit(3, "node1", 1), got_culprit=Culprit(2, "node1", 0)),
        j("preemption", "preemption", got_culprit=Culprit(0, "node0", 0)),  # no culprit to score
    ]
    acc = culprit_accuracy(js)
    assert (acc["rank"].hits, acc["rank"].total, acc["rank"].value) == (1, 2, 0.5)
    assert (acc["node"].hits, acc["node"].total) == (2, 2)
    assert (acc["gpu"].hits, acc["gpu"].total, acc["gpu"].value) == (0, 1, 0.0)
    assert js[1].missed and not js[2].missed and js[0].missed  # the GPU is wrong


def test_the_two_costly_action_errors():
    js = [
        j("user_code_error", "user_code_error", expected_action="fail_fast", got_action="fail_fast"),
        j(
            "user_code_error",
            "gpu_memory_error",
            expected_action="fail_fast",
            got_action="restart_excluding_node",
        ),
        j("gpu_fallen_off_bus", "gpu_oom", expected_action="restart_excluding_node", got_action="fail_fast"),
        j(
            "numerical_instability",
            "numerical_instability",
            expected_action="rollback",
            got_action="rollback",
        ),
        j("straggler", NONE, expected_action="alert", got_action=None),
        j("kill", "unknown"),  # no action scored
    ]
    a = action_scores(js)
    assert (a["accuracy"].hits, a["accuracy"].total) == (2, 5)
    assert (a["false_fail_fast"].hits, a["false_fail_fast"].total) == (1, 3)
    assert (a["false_restart"].hits, a["false_restart"].total, a["false_restart"].value) == (1, 2, 0.5)


def test_percentiles_interpolate_between_closest_ranks():
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.5
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 90) == pytest.approx(4.6)
    assert percentile([7.0], 90) == 7.0 and percentile([], 50) is None
    lat = detection_latency(
        [
            j("a", "a", kind="hang", detect_s=2.0),
            j("a", "a", kind="hang", detect_s=4.0),
            j("b", "b", kind="slow"),
        ]
    )
    assert lat == {"hang": {"n": 2, "p50_s": 3.0, "p90_s": 3.8}}


def test_score_lists_every_miss_and_renders_markdown():
    js = [j(e, g, expected_action="restart", got_action="restart") for e, g in PAIRS]
    s = score(js)
    assert s["macro_f1"] == pytest.approx(0.4889, abs=1e-4) and s["micro_f1"] == 0.6
    assert [(m["expected"], m["got"]) for m in s["misses"]] == [
        ("gpu_oom", "user_code_error"),
        ("straggler", NONE),
    ]
    text = markdown({"trials": 5, "seed": 0, "wall_s": 60.0, "scores": s})
    assert "| gpu_oom | 1.000 | 0.667 | 0.800 | 3 |" in text
    assert "macro F1 0.489, micro F1 0.600" in text and "Misses: 2" in text


def test_the_truth_of_a_rank_s_gpu_is_its_newest_record(tmp_path):
    """The zero-code hooks' first `ranks` row knows no GPU on a CPU rank; the trainer's own
    monitor's, a moment later, names its simulated GPU. The campaign took either, and scored the
    culprit GPU of 20 judgements of 30."""
    from jobdata_builder import T0, JobBuilder

    from triage.benchmarks.rca_trial import placement

    b = JobBuilder("j", run_id="r")
    b.rank(0, "node0", None, start=T0).rank(0, "node0", 1, start=T0 + 1).rank(1, "node1", 0, start=T0)
    b.write_store(tmp_path)
    assert placement(tmp_path, "j", "r") == {(0, 0): ("node0", 1), (0, 1): ("node1", 0)}


def test_the_plan_is_seeded_and_covers_every_kind_in_both_layouts():
    full = plan(0, ALL_KINDS, 3)
    assert plan(0, ALL_KINDS, 3) == full and plan(1, ALL_KINDS, 3) != full
    assert {t.kind for t in full} == set(ALL_KINDS)
    for kind in KINDS:
        jobs = [t.jobs[0] for t in full if t.kind == kind]
        assert len(jobs) == 3 and {j.layout for j in jobs} == set(LAYOUTS)
        assert not KINDS[kind].culprit or len({j.expects[0].rank for j in jobs}) == 3  # three culprits
    # a subset keeps each kind's draws
    assert [t for t in full if t.kind in QUICK_KINDS and t.name.endswith("-0")] == plan(0, QUICK_KINDS, 1)


#: The CI gate on `triage bench rca --quick` (seed 0): the published figures are 1.00 for both
#: (README, "How often is Triage right?"); one culprit miss in its 6 judgements (a spurious
#: timeout on a busy 2-core runner) stays above these, two fail the build.
MIN_MACRO_F1 = 0.75
MIN_CULPRIT_ACCURACY = 0.80


@pytest.mark.slow
def test_the_quick_campaign_meets_the_published_accuracy(tmp_path):
    """CI runs the quick campaign: real jobs under `triage run`, each judged against its
    injection; exit 1 below the gate."""
    out = subprocess.run(
        [
            *TRIAGE_CLI,
            "bench",
            "rca",
            "--quick",
            "--seed",
            "0",
            "--out",
            str(tmp_path / "out"),
            "--data-dir",
            str(tmp_path / "data"),
            "--min-macro-f1",
            str(MIN_MACRO_F1),
            "--min-culprit-accuracy",
            str(MIN_CULPRIT_ACCURACY),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    report = json.loads((tmp_path / "out" / "rca.json").read_text())
    assert (tmp_path / "out" / "rca.md").read_text().startswith("## triage bench rca")
    scores = report["scores"]
    assert scores["action"]["false_fail_fast"]["hits"] == 0, scores["misses"]
    assert scores["macro_f1"] >= MIN_MACRO_F1 and scores["culprit"]["rank"]["value"] >= MIN_CULPRIT_ACCURACY
