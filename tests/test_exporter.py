"""The exporter: what /metrics shows for GPUs and jobs, parsed back the way Prometheus reads it."""

from __future__ import annotations

import urllib.request

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from triage.agent.exporter import ExporterState, StateCollector
from triage.agent.job_progress import ProgressBatch, RankUpdate, RecentStep
from triage.agent.metric_catalog import ALERTED_XIDS, BY_NAME, LOST_TIME_CATEGORIES, family_of_sample
from triage.agent.metrics_server import MetricsServer
from triage.analyzers.lost_time import OVERHEAD
from triage.collectors.records import GpuEvent, GpuSample, NicSample
from triage.store.job_results import NodeAccounting
from triage.taxonomy import Category

NOW = 10_000.0


def scrape(state: ExporterState) -> dict[str, list[tuple[dict[str, str], float]]]:
    """sample name -> [(labels, value)], parsed from the text exposition format."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StateCollector(state))
    out: dict[str, list] = {}
    for fam in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def gpu_sample(gpu: int = 0, **readings) -> GpuSample:
    return GpuSample(
        time=NOW,
        node="n0",
        gpu=gpu,
        uuid=f"GPU-{gpu}",
        name="H100",
        serial=None,
        pci_bus_id=None,
        simulated=False,
        **readings,
    )


def values(samples, name: str, **match) -> list[float]:
    return [
        v for labels, v in samples.get(name, []) if all(labels.get(k) == str(x) for k, x in match.items())
    ]


def test_unreadable_counters_have_no_series_while_reported_ones_start_at_zero():
    state = ExporterState("n0", clock=lambda: NOW)
    state.observe_gpu_sample(
        gpu_sample(
            0,
            ecc_corrected_volatile=0,
            ecc_uncorrected_volatile=0,
            pcie_replay_total=0,
            nvlink_crc_errors_total=0,
            nvlink_replay_errors_total=0,
            nvlink_recovery_errors_total=0,
        )
    )
    state.observe_gpu_sample(gpu_sample(1, unsupported=("ecc_corrected_volatile",)))
    m = scrape(state)
    assert values(m, "triage_gpu_ecc_errors_total", gpu=0, type="uncorrected") == [0.0]
    assert values(m, "triage_gpu_pcie_replay_total", gpu=0) == [0.0]
    assert len(values(m, "triage_gpu_nvlink_errors_total", gpu=0)) == 3
    for name in (
        "triage_gpu_ecc_errors_total",
        "triage_gpu_pcie_replay_total",
        "triage_gpu_nvlink_errors_total",
        "triage_gpu_temperature_celsius",
    ):
        assert values(m, name, gpu=1) == [], name
    assert values(m, "triage_gpu_up", gpu=1) == [1.0]
    # Xid counters exist at 0 for every alerted Xid on every GPU, so increase() sees the first.
    assert sorted(
        labels["xid"] for labels, _ in m["triage_gpu_xid_errors_total"] if labels["gpu"] == "1"
    ) == sorted(ALERTED_XIDS)


def test_lost_gpu_keeps_identity_at_up_zero_and_drops_its_readings():
    state = ExporterState("n0", clock=lambda: NOW)
    state.observe_gpu_sample(gpu_sample(0, temperature_celsius=50.0, ecc_uncorrected_volatile=0))
    state.observe_gpu_sample(
        GpuSample(
            time=NOW + 1,
            node="n0",
            gpu=0,
            uuid=None,
            name=None,
            serial=None,
            pci_bus_id=None,
            simulated=False,
            gpu_up=False,
        )
    )
    state.observe_xid(
        GpuEvent(
            time=NOW,
            node="n0",
            gpu=0,
            uuid="GPU-0",
            kind="xid",
            xid=79,
            text="fallen off",
            source="kernel_log",
        )
    )
    m = scrape(state)
    assert values(m, "triage_gpu_up", gpu=0, uuid="GPU-0") == [0.0]
    assert values(m, "triage_gpu_temperature_celsius", gpu=0) == []
    assert values(m, "triage_gpu_ecc_errors_total", gpu=0) == []
    assert values(m, "triage_gpu_xid_errors_total", gpu=0, xid=79) == [1.0]


def rank(job: str, attempt: int, r: int, **kw) -> RankUpdate:
    return RankUpdate(job, "", attempt, r, **{"node": "n0", **kw})


def test_jobs_export_live_ranks_of_the_newest_attempt_with_zeroed_counters():
    state = ExporterState("n0", live_window_s=60, clock=lambda: NOW)
    state.apply_progress(
        ProgressBatch(
            ranks=[
                rank(
                    "j",
                    0,
                    0,
                    start_time=NOW - 500,
                    max_step=9,
                    last_step_end=NOW - 400,
                    last_heartbeat=NOW - 1,
                    world_size=4,
                ),  # hung: heartbeats, no steps
                rank(
                    "j",
                    0,
                    1,
                    start_time=NOW - 500,
                    max_step=9,
                    last_step_end=NOW - 400,
                    last_heartbeat=NOW - 1,
                    exited=True,
                ),
                rank("j", 0, 2, start_time=NOW - 500, last_heartbeat=NOW - 300),
            ],  # silent
            step_buckets={"j": [0, 0, 0, 0, 3] + [0] * 8},
            step_time_sum={"j": 2.7},
            recent_steps=[RecentStep("j", "", 0, 0, 9, 1000, 0.5)],
        ),
        NOW,
    )
    m = scrape(state)
    assert values(m, "triage_job_last_progress_timestamp_seconds", job="j") == [NOW - 400]
    assert values(m, "triage_job_step", job="j", rank=0) == [9.0]
    assert values(m, "triage_job_step_time_seconds_count", job="j") == [3.0]
    assert values(m, "triage_job_step_time_seconds_bucket", job="j", le="1.0") == [3.0]
    assert values(m, "triage_job_tokens_per_second", job="j") == [2000.0 * 4]
    assert values(m, "triage_job_restarts_total", job="j") == [0.0]
    assert values(m, "triage_job_last_checkpoint_timestamp_seconds", job="j") == [NOW - 500]
    assert len(values(m, "triage_incidents_total", job="j")) == len(Category)

    state.apply_progress(ProgressBatch(ranks=[rank("j", 2, 0, start_time=NOW - 5)]), NOW)
    state.set_incidents("j", {"gpu_fallen_off_bus": 1})
    m = scrape(state)
    assert values(m, "triage_job_restarts_total", job="j") == [2.0]
    assert values(m, "triage_job_last_progress_timestamp_seconds", job="j") == [NOW - 5]
    assert values(m, "triage_incidents_total", job="j", category="gpu_fallen_off_bus", layer="gpu") == [1.0]


def test_silent_jobs_expire():
    state = ExporterState("n0", job_expiry_s=100, clock=lambda: NOW)
    state.apply_progress(ProgressBatch(ranks=[rank("old", 0, 0, last_heartbeat=NOW - 200)]), NOW)
    assert state.known_jobs() == []


def test_metrics_over_http_parse_and_follow_the_catalog():
    state = ExporterState("n0", clock=lambda: NOW)
    state.observe_gpu_sample(gpu_sample(0, temperature_celsius=40.0, ecc_uncorrected_volatile=0))
    state.register_collector("host")
    state.apply_progress(
        ProgressBatch(ranks=[rank("j", 0, 0, last_heartbeat=NOW, max_step=1, last_step_end=NOW)]), NOW
    )
    state.add_accounting(NodeAccounting(10.0, 5.0, {"overhead": 5.0}, {"collective_timeout": 1.0}))
    state.set_lemon(False)
    state.observe_nic_sample(NicSample(NOW, "n0", "mlx5_0/1", True, 0, 0))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StateCollector(state))
    server = MetricsServer(registry, "127.0.0.1", 0)
    try:
        with urllib.request.urlopen(server.url, timeout=5) as resp:
            text = resp.read().decode()
    finally:
        server.close()
    seen = set()
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            catalog = family_of_sample(s.name)
            assert catalog is not None, s.name
            assert set(s.labels) == set(catalog.sample_labels(s.name)), s
            seen.add(catalog.name)
    assert {
        "triage_gpu_up",
        "triage_job_step",
        "triage_job_step_time_seconds",
        "triage_collector_errors_total",
        "triage_agent_up",
        "triage_allocated_gpu_seconds_total",
        "triage_lost_gpu_seconds_total",
        "triage_caused_lost_gpu_seconds_total",
        "triage_node_lemon",
        "triage_nic_link_up",
        "triage_nic_link_downs_total",
    } <= seen
    assert all(name in BY_NAME for name in seen)


def test_node_gpu_second_counters_appear_at_the_first_read_and_add_up():
    state = ExporterState("n0", clock=lambda: NOW)
    m = scrape(state)
    # Not read yet: no series (a zero now and the store's history at the first read would
    # look like an increase of all that history).
    for name in (
        "triage_allocated_gpu_seconds_total",
        "triage_productive_gpu_seconds_total",
        "triage_lost_gpu_seconds_total",
        "triage_caused_lost_gpu_seconds_total",
        "triage_node_lemon",
    ):
        assert values(m, name) == [], name
    state.add_accounting(NodeAccounting())  # a store with no accounting yet
    m = scrape(state)
    assert values(m, "triage_allocated_gpu_seconds_total", node="n0") == [0.0]
    # Every category, and overhead (the lost_time table's name for it), exists at 0 so that
    # increase() sees the first loss.
    assert set(LOST_TIME_CATEGORIES) == {c.value for c in Category} | {OVERHEAD}
    assert sorted(labels["category"] for labels, _ in m["triage_lost_gpu_seconds_total"]) == sorted(
        LOST_TIME_CATEGORIES
    )
    assert values(m, "triage_caused_lost_gpu_seconds_total", node="n0", category="collective_timeout") == [
        0.0
    ]
    state.add_accounting(
        NodeAccounting(
            3600.0, 2880.0, {"gpu_fallen_off_bus": 400.0, "overhead": 200.0}, {"collective_timeout": 50.0}
        )
    )
    state.add_accounting(
        NodeAccounting(1000.0, 900.0, {"overhead": 100.0, "made_up": 7.0}, {"collective_timeout": 25.0})
    )
    state.set_lemon(True)
    m = scrape(state)
    assert values(m, "triage_allocated_gpu_seconds_total", node="n0") == [4600.0]
    assert values(m, "triage_productive_gpu_seconds_total", node="n0") == [3780.0]
    assert values(m, "triage_lost_gpu_seconds_total", node="n0", category="gpu_fallen_off_bus") == [400.0]
    assert values(m, "triage_lost_gpu_seconds_total", node="n0", category="overhead") == [300.0]
    # A category outside the closed label set is counted as unknown, never a new label value.
    assert values(m, "triage_lost_gpu_seconds_total", node="n0", category="unknown") == [7.0]
    assert values(m, "triage_lost_gpu_seconds_total", category="made_up") == []
    assert values(m, "triage_caused_lost_gpu_seconds_total", node="n0", category="collective_timeout") == [
        75.0
    ]
    assert values(m, "triage_node_lemon", node="n0") == [1.0]
    state.set_lemon(False)
    assert values(scrape(state), "triage_node_lemon", node="n0") == [0.0]
    state.set_quarantined(2)  # the node and one GPU, say
    assert values(scrape(state), "triage_node_quarantined", node="n0") == [2.0]


def test_a_port_is_exported_while_it_reports_and_a_lost_link_reads_zero():
    now = [NOW]
    state = ExporterState("n0", live_window_s=60.0, clock=lambda: now[0])
    state.observe_nic_sample(NicSample(NOW, "n0", "eth0", True, 2, None))
    state.observe_nic_sample(NicSample(NOW, "n0", "sim:nic1", False, None, 1))
    m = scrape(state)
    assert values(m, "triage_nic_link_up", nic="eth0", gpu="", simulated="false") == [1.0]
    assert values(m, "triage_nic_link_downs_total", nic="eth0") == [2.0]
    assert values(m, "triage_nic_link_up", nic="sim:nic1", gpu=1, simulated="true") == [0.0]
    assert values(m, "triage_nic_link_downs_total", nic="sim:nic1") == []  # not counted: no series
    now[0] = NOW + 61  # neither read since: a simulated fault over, a port gone
    assert values(scrape(state), "triage_nic_link_up") == []
