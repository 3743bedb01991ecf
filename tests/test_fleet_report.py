"""Fleet reliability figures (`triage report`): each figure against a hand-built history, the
lemon-node test on synthetic fleets (one bad node among many; none), and the command line."""

from __future__ import annotations

import json
import math
import subprocess
import time
from pathlib import Path

import pytest
from conftest import TRIAGE_CLI
from jobdata_builder import T0
from test_analyzers_goodput import two_attempts

from triage.analyzers.fleet import FleetConfig, fleet_report, size_class
from triage.analyzers.goodput import daly_interval
from triage.analyzers.lemons import LemonTest, binomial_sf, node_risks
from triage.benchmarks.fleet_history import FleetSpec, generate_fleet
from triage.store import open_snapshot
from triage.store.node_health import SOURCE_LEMON, read_ledger
from triage.store.shared_writer import shared_writer
from triage.supervisor.quarantine import QuarantineConfig, quarantine_lemons

NOW = time.time()
A0 = NOW - 3 * 86400  # run A: 3 days ago; run B: 10 days ago
B0 = NOW - 10 * 86400


def _usage(job, attempt, node, gpus, start, end, productive, job_gpus, cause=None, **extra):
    row = dict(
        job_id=job,
        run_id=f"{job}-r",
        attempt=attempt,
        time=NOW,
        node=node,
        gpus=gpus,
        start_time=start,
        end_time=end,
        productive_s=productive,
        status="failed" if cause else "completed",
        job_gpus=job_gpus,
        checkpoint_cost_s=extra.get("cost"),
        checkpoint_interval_s=extra.get("interval"),
    )
    if cause:
        category, layer, culprit, gpu, action = cause
        row |= dict(
            cause_category=category,
            cause_layer=layer,
            culprit_node=culprit,
            culprit_gpu=gpu,
            prescribed_action=action,
        )
    return row


def _lost(job, attempt, bucket, node, seconds, gpus, cause_attempt=None, cause=None):
    category, layer, culprit, gpu, _ = cause or ("overhead", None, None, None, None)
    return dict(
        job_id=job,
        run_id=f"{job}-r",
        attempt=attempt,
        time=NOW,
        bucket=bucket,
        node=node,
        seconds=seconds,
        gpu_seconds=seconds * gpus,
        cause_attempt=cause_attempt,
        category=category,
        layer=layer,
        culprit_node=culprit,
        culprit_gpu=gpu,
    )


GPU_LOST = ("gpu_fallen_off_bus", "gpu", "n1", 2, "restart_excluding_node")
BUG = ("user_code_error", "application", "n3", 0, "fail_fast")


def write_history(data_dir: Path) -> None:
    """Run A (8 GPUs: n0, n1 x 4): attempt 0 (1 h, 3000 s productive) loses n1's GPU 2, 200 s
    of progress and 300 s to detection; attempt 1 (1 h on n0 alone, 100 s start-up) completes.
    Run B (16 GPUs: n2, n3 x 8): a fail-fast bug on n3 after 30 min, restarted anyway: the
    restart (10 min) fails on it again."""
    usage = [
        _usage("A", 0, "n0", 4, A0, A0 + 3600, 3000, 8, GPU_LOST, cost=60.0, interval=600.0),
        _usage("A", 0, "n1", 4, A0, A0 + 3600, 3000, 8, GPU_LOST, cost=60.0, interval=600.0),
        _usage("A", 1, "n0", 4, A0 + 3600, A0 + 7200, 3000, 8, cost=60.0, interval=600.0),
        *[_usage("B", 0, n, 8, B0, B0 + 1800, 1000, 16, BUG) for n in ("n2", "n3")],
        *[_usage("B", 1, n, 8, B0 + 1800, B0 + 2400, 0, 16, BUG) for n in ("n2", "n3")],
    ]
    lost = [
        *[_lost("A", 0, "lost_progress", n, 200, 4, 0, GPU_LOST) for n in ("n0", "n1")],
        *[_lost("A", 0, "detection_and_restart", n, 300, 4, 0, GPU_LOST) for n in ("n0", "n1")],
        *[_lost("A", 0, "initialization", n, 50, 4) for n in ("n0", "n1")],
        _lost("A", 1, "initialization", "n0", 100, 4, 0, GPU_LOST),
        *[_lost("B", 0, "detection_and_restart", n, 120, 8, 0, BUG) for n in ("n2", "n3")],
        *[_lost("B", 1, "initialization", n, 60, 8, 0, BUG) for n in ("n2", "n3")],
        *[_lost("B", 1, "detection_and_restart", n, 30, 8, 1, BUG) for n in ("n2", "n3")],
    ]
    with shared_writer(data_dir) as w:
        w.append_rows("attempt_usage", usage)
        w.append_rows("lost_time", lost)


def _report(data_dir: Path, **kw) -> object:
    with open_snapshot(data_dir) as snap:
        return fleet_report(snap.con, FleetConfig(**kw))


def test_every_figure_matches_the_hand_computation(tmp_path):
    write_history(tmp_path)
    r = _report(tmp_path)
    assert (r.runs, r.attempts, r.failures, r.nodes) == (2, 4, 3, 4)
    alloc = 3600 * 8 + 3600 * 4 + 1800 * 16 + 600 * 16  # GPU-seconds
    assert r.allocated_gpu_h == pytest.approx(alloc / 3600)
    assert r.ettr == pytest.approx((3000 * 8 + 3000 * 4 + 1000 * 16) / alloc)
    node_days = (3600 * 3 + 1800 * 2 + 600 * 2) / 86400
    assert r.node_days == pytest.approx(node_days)
    rates = {f["category"]: f for f in r.failure_rates}
    assert rates["user_code_error"]["failures"] == 2
    assert rates["gpu_fallen_off_bus"]["per_1000_node_days"] == pytest.approx(1000 / node_days)
    size = {s["size"]: s for s in r.by_size}
    assert set(size) == {"1-8", "9-64"}
    assert size["1-8"]["mttf_h"] == pytest.approx(2.0)  # 2 h of run A, one failure
    assert size["9-64"]["mttf_h"] == pytest.approx(2400 / 3600 / 2)
    assert size["1-8"]["mttr_s"] == pytest.approx(300 + 100)  # detection + the restart's start-up
    assert size["9-64"]["mttr_s"] == pytest.approx(120 + 60)  # B's last failure was not restarted
    by_cat = {x["category"]: x["gpu_h"] for x in r.lost_by["category"]}
    assert by_cat["gpu_fallen_off_bus"] == pytest.approx((200 * 8 + 300 * 8 + 100 * 4) / 3600)
    assert by_cat["overhead"] == pytest.approx(50 * 8 / 3600)
    assert {x["node"]: x["gpu_h"] for x in r.lost_by["node"]} == pytest.approx(
        {"n1": 4400 / 3600, "n3": (120 * 16 + 60 * 16 + 30 * 16) / 3600}
    )
    assert r.lost_by["gpu"][0]["gpu"] == "n1 GPU 2"
    (avoidable,) = r.avoidable_restarts
    assert (avoidable["job_id"], avoidable["attempt"]) == ("B", 1)
    assert "fail" in avoidable["reason"] and avoidable["gpu_h"] == pytest.approx(600 * 16 / 3600)
    (advice,) = r.checkpoint_advice  # only run A saved checkpoints
    best = daly_interval(60.0, 7200.0)
    assert advice["interval_advised_s"] == pytest.approx(best)

    def waste(tau: float) -> float:
        return 60 / tau + tau / (2 * 7200)

    assert advice["excess_gpu_h"] == pytest.approx((waste(600) - waste(best)) * (3600 * 8 + 3600 * 4) / 3600)
    assert r.lemons == []


def test_the_window_keeps_attempts_that_started_in_it(tmp_path):
    write_history(tmp_path)
    r = _report(tmp_path, since=NOW - 7 * 86400)
    assert (r.runs, r.failures) == (1, 1)
    assert {f["category"] for f in r.failure_rates} == {"gpu_fallen_off_bus"}
    assert _report(tmp_path, until=NOW - 7 * 86400).runs == 1  # B alone


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_lemon_among_many_nodes_is_flagged_and_no_other(tmp_path, seed):
    truth = generate_fleet(tmp_path, FleetSpec(jobs=1200, nodes=40, lemons=1, seed=seed, days=30))
    r = _report(tmp_path)
    assert [n.node for n in r.lemons] == truth.lemons
    (lemon,) = r.lemons
    assert lemon.failures >= 3 and lemon.rate_ratio > 5


@pytest.mark.parametrize("seed", [3, 4])
def test_a_fleet_without_lemons_has_none_flagged(tmp_path, seed):
    generate_fleet(tmp_path, FleetSpec(jobs=1200, nodes=40, lemons=0, seed=seed, days=30))
    r = _report(tmp_path)
    assert r.failures > 50  # plenty of failures, spread as exposure predicts
    assert r.lemons == []


def test_failing_in_proportion_to_exposure_is_not_a_lemon():
    hours = {"busy": 900.0, **{f"n{i}": 10.0 for i in range(10)}}
    # the busy node has 90% of the hours and 9 of the 10 failures: as predicted
    risks = {r.node: r for r in node_risks({"busy": 9, "n0": 1}, hours, LemonTest())}
    assert not risks["busy"].lemon and risks["busy"].expected == pytest.approx(9.0)
    # a node with 1% of the hours and 4 of 10 failures is one
    risks = {r.node: r for r in node_risks({"busy": 6, "n0": 4}, hours, LemonTest())}
    assert risks["n0"].lemon and not risks["busy"].lemon
    # ... but not below the minimum count, however unlikely
    risks = {r.node: r for r in node_risks({"busy": 8, "n0": 2}, hours, LemonTest())}
    assert not risks["n0"].lemon


def test_binomial_tail_is_exact():
    for n, p, k in [(10, 0.1, 3), (50, 0.01, 2), (200, 0.5, 120), (5, 0.3, 0), (5, 0.3, 6)]:
        exact = sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))
        assert binomial_sf(k, n, p) == pytest.approx(exact, rel=1e-9, abs=1e-300)


def test_a_lemon_is_quarantined_once_with_its_evidence_and_a_clear_resets_it(tmp_path):
    truth = generate_fleet(tmp_path, FleetSpec(jobs=1200, nodes=40, lemons=1, seed=1, days=10))
    cfg = QuarantineConfig(repeat_window_days=14)
    (entry,) = quarantine_lemons(tmp_path, job_id="j", run_id="r", now=time.time(), config=cfg)
    assert entry.node == truth.lemons[0] and entry.source == SOURCE_LEMON and entry.gpu is None
    assert "binomial" in entry.reason and entry.evidence[0]["failures"] >= 3
    assert quarantine_lemons(tmp_path, job_id="j", run_id="r2", now=time.time(), config=cfg) == []
    # a person repairs and clears it: its old failures no longer count against it
    subprocess.run(
        [*TRIAGE_CLI, "nodes", "clear", entry.node, "--data-dir", str(tmp_path), "--reason", "GPU swapped"],
        check=True,
        capture_output=True,
    )
    assert quarantine_lemons(tmp_path, job_id="j", run_id="r3", now=time.time(), config=cfg) == []
    assert [e.node for e in read_ledger(tmp_path) if e.source == SOURCE_LEMON] == [entry.node]


def test_size_classes():
    assert [size_class(g) for g in (1, 8, 9, 64, 65, 512, 513, 4096, 4097)] == [
        "1-8",
        "1-8",
        "9-64",
        "9-64",
        "65-512",
        "65-512",
        "513-4096",
        "513-4096",
        "4097+",
    ]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TRIAGE_CLI, "report", *args], capture_output=True, text=True, timeout=120)


def test_cli_reports_json_markdown_and_terminal(tmp_path):
    write_history(tmp_path)
    out = _cli("--data-dir", str(tmp_path), "--since", "all", "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["runs"] == 2 and d["ettr"] == pytest.approx(_report(tmp_path).ettr)
    md = _cli("--data-dir", str(tmp_path), "--since", "30d", "--markdown")
    assert md.returncode == 0 and "## Lost GPU-hours by cause" in md.stdout
    assert "| gpu_fallen_off_bus | gpu | 1 |" in md.stdout
    term = _cli("--data-dir", str(tmp_path), "--since", "5d")
    assert term.returncode == 0 and "n1 GPU 2" in term.stdout and "user_code_error" not in term.stdout


def test_cli_refuses_a_bad_window_and_says_so_on_an_empty_store(tmp_path):
    bad = _cli("--data-dir", str(tmp_path), "--since", "last tuesday")
    assert bad.returncode == 2 and "7d" in bad.stderr
    empty = _cli("--data-dir", str(tmp_path))
    assert empty.returncode == 0 and "No runs with accounting" in empty.stdout


def test_backfill_accounts_for_an_ended_run_that_has_none(tmp_path):
    b = two_attempts(run_id="r1")
    b.write_store(tmp_path)
    with shared_writer(tmp_path) as w:
        w.append_rows(
            "runs",
            [
                dict(
                    job_id="job1", run_id="r1", time=T0 + 70, start_time=T0, end_time=T0 + 66, status="failed"
                ),
            ],
        )
    before = _cli("--data-dir", str(tmp_path), "--since", "all")
    assert "1 ended run(s) have no accounting" in before.stderr and "job1/r1" in before.stderr
    after = _cli("--data-dir", str(tmp_path), "--since", "all", "--backfill", "--json")
    assert after.returncode == 0, after.stderr
    d = json.loads(after.stdout)
    assert d["unaccounted_runs"] == [] and d["runs"] == 1
    assert d["allocated_gpu_h"] == pytest.approx(66 * 2 / 3600)
    assert d["ettr"] == pytest.approx(15 / 66)  # the goodput the analysis computes for this job
