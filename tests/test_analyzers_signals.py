"""Stragglers vs throttling, SDC minority, NaN culprit, loss spikes and GPU health, one by one."""

import math

from jobdata_builder import T0, JobBuilder

from triage.analyzers.config import AnalyzerConfig
from triage.analyzers.gpu_health import gpu_health_findings
from triage.analyzers.job_analysis import analyze_job
from triage.analyzers.numerical import numerical_findings
from triage.analyzers.sdc import sdc_findings
from triage.analyzers.straggler import straggler_analysis
from triage.taxonomy import Category

CFG = AnalyzerConfig()


def slow_rank_job(slow: int = 5) -> JobBuilder:
    b = JobBuilder().world(8)
    end = b.steps(0, range(200), T0 + 5, compute=lambda r, s: 0.65 if r == slow else 0.5 + 0.001 * r)
    for r in range(8):
        b.event(0, r, end + 1, "exit")
    return b


def test_straggler_is_flagged_with_a_score_and_others_are_not():
    res = straggler_analysis(slow_rank_job().load(), CFG)
    (f,) = res.findings
    assert f.verdict.category is Category.STRAGGLER and f.verdict.culprit.rank == 5
    scores = {s.rank: s for s in res.scores}
    assert math.isclose(scores[5].score, 0.65 / 0.5035, rel_tol=0.02)
    assert [r for r, s in scores.items() if s.straggler] == [5]


def test_straggler_on_a_throttled_gpu_becomes_throttling():
    b = slow_rank_job()
    for k in range(20):
        b.gpu_sample(
            "node1", 1, T0 + 10 * k, clock_event_reasons=0x40 if k > 2 else 0, temperature_celsius=91.0
        )
        b.gpu_sample("node1", 0, T0 + 10 * k, clock_event_reasons=0x4, temperature_celsius=60.0)
    a = analyze_job(b.load(), CFG)
    cats = [i.verdict.category for i in a.incidents]
    assert cats == [Category.GPU_THROTTLING]  # power cap (0x4) on GPU 0 is not a health signal
    v = a.incidents[0].verdict
    assert (v.culprit.node, v.culprit.gpu, v.culprit.rank) == ("node1", 1, 5)
    assert "hw thermal" in v.summary and any("straggler" in c for c in v.consequences)
    assert a.status == "completed"


def test_a_throttled_share_counts_only_the_runs_own_samples():
    # the GPU ran cool for 290 s before this run (another job's samples, within the lead the
    # store reads to recognise old evidence as old): its throttling in the run is still most
    # of the run's samples, so the straggler stays the throttling's consequence
    b = slow_rank_job()
    for k in range(58):
        b.gpu_sample("node1", 1, T0 - 290 + 5 * k, clock_event_reasons=0, temperature_celsius=40.0)
    for k in range(20):  # throttled in 6 of the run's 20 samples: 30%, over the 20% it takes
        b.gpu_sample(
            "node1", 1, T0 + 10 * k, clock_event_reasons=0x40 if k > 13 else 0, temperature_celsius=91.0
        )
    a = analyze_job(b.load(), CFG)
    assert [i.verdict.category for i in a.incidents] == [Category.GPU_THROTTLING]


def test_sdc_canary_minority_is_the_culprit():
    b = JobBuilder().world(4)
    b.steps(0, range(30), T0 + 5)
    for step in (10, 20):
        for r in range(4):
            b.event(0, r, T0 + 5 + step, "canary", "bad0" if r == 2 else "good", step=step)
    (f,) = sdc_findings(b.load(), CFG)
    assert f.verdict.category is Category.SILENT_DATA_CORRUPTION
    assert f.verdict.culprit.rank == 2 and f.verdict.confidence >= 0.9


def test_sdc_without_majority_blames_nobody():
    b = JobBuilder().world(2)
    b.steps(0, range(5), T0)
    b.event(0, 0, T0 + 3, "canary", "aaa", step=3).event(0, 1, T0 + 3, "canary", "bbb", step=3)
    (f,) = sdc_findings(b.load(), CFG)
    assert f.verdict.culprit.rank is None and f.verdict.confidence < 0.5


def test_single_rank_loss_outlier_where_losses_are_replicated():
    b = JobBuilder().world(4)
    b.steps(0, range(20), T0, loss=lambda r, s: 3.5 if (r == 1 and s >= 12) else 2.0 / (1 + s))
    (f,) = sdc_findings(b.load(), CFG)
    assert f.verdict.culprit.rank == 1 and f.verdict.first_seen == T0 + 13


def test_first_rank_to_go_nonfinite_is_the_culprit():
    b = JobBuilder().world(4)
    b.steps(0, range(10), T0)
    b.step(0, 2, 10, T0 + 10, T0 + 10.5, loss=float("nan"))
    for r in (0, 1, 3):
        b.step(0, r, 10, T0 + 10, T0 + 11, loss=float("nan"))
    (f,) = [f for f in numerical_findings(b.load(), CFG) if f.fatal]
    assert f.verdict.category is Category.NUMERICAL_INSTABILITY and f.verdict.culprit.rank == 2


def test_loss_spike_is_found_and_noise_is_not():
    b = JobBuilder().world(2)
    b.steps(0, range(120), T0, loss=lambda r, s: 50.0 if s == 100 else 2.0 + 0.01 * (s % 7))
    (f,) = numerical_findings(b.load(), CFG)
    assert not f.fatal and "step 100" in f.verdict.summary
    quiet = JobBuilder().world(2)
    quiet.steps(0, range(120), T0, loss=lambda r, s: 2.0 + 0.01 * (s % 7))
    assert numerical_findings(quiet.load(), CFG) == []


def test_xid_74_on_several_gpus_of_a_node_blames_the_node():
    b = JobBuilder().world(4)
    b.steps(0, range(5), T0)
    b.gpu_event("node0", 0, T0 + 3, 74, "NVRM: Xid (PCI:0000:3b:00): 74, NVLink")
    b.gpu_event("node0", 1, T0 + 4, 74, "NVRM: Xid (PCI:0000:3c:00): 74, NVLink")
    (f,) = [f for f in gpu_health_findings(b.load(), CFG) if f.verdict.culprit.gpu is None]
    assert f.verdict.category is Category.NVLINK_ERROR and f.verdict.culprit.node == "node0"
    single = JobBuilder().world(4)
    single.steps(0, range(5), T0)
    single.gpu_event("node0", 3, T0 + 3, 74, "NVRM: Xid (PCI:0000:3e:00): 74, NVLink")
    (g,) = gpu_health_findings(single.load(), CFG)
    assert (g.verdict.culprit.gpu, g.verdict.culprit.rank) == (3, 3)


def test_ecc_and_pcie_width_from_samples():
    b = JobBuilder().world(4)
    b.steps(0, range(5), T0)
    for k in range(5):
        b.gpu_sample(
            "node0",
            2,
            T0 + k,
            ecc_uncorrected_volatile=0 if k < 3 else 2,
            pcie_link_width=8,
            pcie_link_width_max=16,
        )
    found = {f.verdict.category: f for f in gpu_health_findings(b.load(), CFG)}
    ecc = found[Category.GPU_MEMORY_ERROR]
    assert ecc.fatal and ecc.verdict.first_seen == T0 + 3 and ecc.verdict.culprit.rank == 2
    assert not found[Category.PCIE_ERROR].fatal
