"""The per-node agent: simulated faults stored and exported, collector isolation and backoff,
spool ingest into the store, clean shutdown, and its refusals (second agent, port in use)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from store_spools import write_rank

from triage.agent.config import AgentConfig
from triage.agent.exporter import StateCollector
from triage.agent.node_agent import BUSY_UTILIZATION, NodeAgent
from triage.collectors.gpu_backend import GpuConfig
from triage.collectors.kernel_log import KernelLogConfig
from triage.fault_schedule import GpuFault, append_fault
from triage.ports import free_port
from triage.store import StoreWriter, open_snapshot
from triage.store.layout import SUPERVISOR_PARTITION, agent_flush_mark
from triage.store.node_health import SOURCE_LEMON

T0 = time.time() - 3600  # simulated time: an hour ago, so every fault is "due" when written


def make_agent(tmp_path: Path, **kw) -> NodeAgent:
    config = AgentConfig(
        data_dir=str(tmp_path),
        node=kw.pop("node", "n0"),
        gpu=kw.pop("gpu", "sim"),
        gpus=GpuConfig(gpu="none", sim_gpus=2),
        kernel=kw.pop("kernel", KernelLogConfig("auto")),
        **kw,
    )
    return NodeAgent(config)


def parse_metrics(text: str) -> dict[str, list[tuple[dict, float]]]:
    out: dict[str, list] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def metrics(agent: NodeAgent) -> dict[str, list[tuple[dict, float]]]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StateCollector(agent.state))
    return parse_metrics(generate_latest(registry).decode())


def value(m, name: str, **match) -> float | None:
    found = [v for labels, v in m.get(name, []) if all(labels.get(k) == str(x) for k, x in match.items())]
    assert len(found) <= 1, (name, match, found)
    return found[0] if found else None


#: kind -> (fault params, time after the fault to look, (metric, labels, check), Xid raised)
FAULTS = {
    "xid": ({}, 2, ("triage_gpu_up", {}, lambda v: v == 0.0), 79),
    "ecc": (
        {"errors": 3},
        2,
        ("triage_gpu_ecc_errors_total", {"type": "uncorrected"}, lambda v: v == 3.0),
        94,
    ),
    "thermal": (
        {"ramp_s": 5},
        20,
        ("triage_gpu_clock_event_active", {"reason": "hw_thermal"}, lambda v: v == 1.0),
        None,
    ),
    "pcie": ({"replays_per_s": 10}, 20, ("triage_gpu_pcie_replay_total", {}, lambda v: v >= 100), None),
    "nvlink": (
        {"crc_per_s": 50},
        20,
        ("triage_gpu_nvlink_errors_total", {"kind": "crc"}, lambda v: v >= 500),
        74,
    ),
}


@pytest.mark.parametrize("kind", sorted(FAULTS))
def test_simulated_fault_is_stored_and_exported(tmp_path, kind):
    params, after, (metric, labels, check), xid = FAULTS[kind]
    agent = make_agent(tmp_path)
    try:
        agent.collect(T0)
        append_fault(tmp_path, GpuFault(time=T0 + 1, node="n0", gpu=1, kind=kind, params=params))
        for dt in range(2, after + 2):
            agent.collect(T0 + dt)
        agent.store_batch(T0 + after + 2)
        m = metrics(agent)
    finally:
        agent.close()
    assert check(value(m, metric, gpu=1, **labels)), (metric, m.get(metric))
    healthy = value(m, metric, gpu=0, **labels)
    assert healthy is not None and not check(healthy)
    with open_snapshot(tmp_path) as snap:
        events = snap.sql("SELECT kind, xid, source FROM gpu_events WHERE gpu = 1 AND kind = 'xid'")
        samples = snap.sql("SELECT count(*) AS n FROM gpu_samples WHERE node = 'n0'")[0]["n"]
    assert samples == 2 * (after + 1)
    if xid is None:
        assert events == []
        assert value(m, "triage_gpu_xid_errors_total", gpu=1, xid=79) == 0.0
    else:
        # Reported by the simulator and again by its kernel-log line: stored and counted once.
        assert [e["xid"] for e in events] == [xid]
        assert value(m, "triage_gpu_xid_errors_total", gpu=1, xid=xid) == 1.0
        assert value(m, "triage_gpu_xid_errors_total", gpu=0, xid=xid) == 0.0


def test_a_simulated_disk_full_is_stored_beside_the_real_disk_reading(tmp_path):
    agent = make_agent(tmp_path)
    try:
        agent.collect(T0)
        append_fault(
            tmp_path, GpuFault(time=T0 + 1, node="n0", gpu=None, kind="disk_full", params={"seconds": 3})
        )
        for dt in (2, 3, 5):
            agent.collect(T0 + dt)
        agent.store_batch(T0 + 6)
    finally:
        agent.close()
    with open_snapshot(tmp_path) as snap:
        rows = snap.sql(
            "SELECT time, path, free_bytes FROM disk_samples WHERE node = 'n0' ORDER BY time, path"
        )
    sim = [(r["time"] - T0, r["free_bytes"]) for r in rows if r["path"] == f"sim:{tmp_path}"]
    real = [r for r in rows if r["path"] == str(tmp_path)]
    assert sim == [(2, 0), (3, 0)]  # full from the fault's time for its 3 s, then freed
    assert len(real) == 4 and all(r["free_bytes"] > 0 for r in real)


def test_a_simulated_port_down_reaches_the_store_for_the_analysis(tmp_path):
    agent = make_agent(tmp_path)
    try:
        append_fault(
            tmp_path, GpuFault(time=T0 + 1, node="n0", gpu=1, kind="nic_down", params={"seconds": 2})
        )
        for dt in (0, 2, 4):
            agent.collect(T0 + dt)
        agent.store_batch(T0 + 5)
    finally:
        agent.close()
    with open_snapshot(tmp_path) as snap:
        rows = snap.sql("SELECT time, nic, up, gpu FROM nic_samples WHERE nic LIKE 'sim:%'")
    assert [(r["time"] - T0, r["nic"], r["up"], r["gpu"]) for r in rows] == [(2, "sim:nic1", False, 1)]


class Flaky:
    """Raises on its first `failures` collects, then returns nothing."""

    name = "flaky"

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls: list[float] = []

    def collect(self, now: float) -> list:
        self.calls.append(now)
        if len(self.calls) <= self.failures:
            raise RuntimeError("source broken")
        return []

    def close(self) -> None:
        pass


def test_raising_collector_is_counted_backed_off_and_isolated(tmp_path):
    flaky = Flaky(failures=3)
    config = AgentConfig(
        data_dir=str(tmp_path),
        node="n0",
        gpu="sim",
        interval=1.0,
        backoff_max=4.0,
        gpus=GpuConfig(gpu="none", sim_gpus=1),
        kernel=KernelLogConfig("none"),
    )
    agent = NodeAgent(config, extra_collectors=[flaky])
    try:
        for t in range(12):
            agent.collect(T0 + t)
        m = metrics(agent)
    finally:
        agent.close()
    # Backoff 2, 4, then capped at 4 s: tries at 0, 2, 6, then works at 10 and keeps its interval.
    assert [c - T0 for c in flaky.calls] == [0, 2, 6, 10, 11]
    assert value(m, "triage_collector_errors_total", collector="flaky") == 3.0
    assert value(m, "triage_agent_last_scrape_timestamp_seconds", collector="flaky") == T0 + 11
    assert value(m, "triage_collector_errors_total", collector="sim_gpu") == 0.0
    assert value(m, "triage_agent_last_scrape_timestamp_seconds", collector="sim_gpu") == T0 + 11


def test_ranks_spools_are_ingested_and_their_gpus_busy(tmp_path):
    now = time.time()
    write_rank(tmp_path, "n0", "job1", 0, 1, steps=4, t0=now - 5, pid=os.getpid())
    agent = make_agent(tmp_path, kernel=KernelLogConfig("none"))
    try:
        # The spool written before the agent started is ingested at its first batch.
        agent.store_batch(now)
        agent.collect(now)
        m = metrics(agent)
    finally:
        agent.close()
    assert value(m, "triage_job_step", job="job1", rank=1, node="n0") == 3.0
    assert value(m, "triage_gpu_utilization_ratio", gpu=1) == BUSY_UTILIZATION
    assert value(m, "triage_gpu_utilization_ratio", gpu=0) == 0.0
    with open_snapshot(tmp_path) as snap:
        assert snap.count("steps") == 4


def record_supervisor_results(
    data_dir: Path, t: float, goodput: float, stragglers: dict[tuple[int, str], float], attempt: int = 0
) -> None:
    """What `triage run` records while it watches job1: scores, and one incident."""
    with StoreWriter(data_dir, SUPERVISOR_PARTITION) as w:
        w.append_rows(
            "job_scores",
            [
                {"job_id": "job1", "attempt": attempt, "time": t, "name": "goodput_ratio", "value": goodput},
                *(
                    {
                        "job_id": "job1",
                        "attempt": attempt,
                        "time": t,
                        "name": "straggler_score",
                        "rank": rank,
                        "node": node,
                        "value": v,
                    }
                    for (rank, node), v in stragglers.items()
                ),
            ],
        )
        w.append_rows(
            "incidents",
            [
                {
                    "job_id": "job1",
                    "attempt": attempt,
                    "time": t,
                    "category": "gpu_fallen_off_bus",
                    "layer": "hardware",
                }
            ],
        )


def test_supervisor_scores_and_incidents_are_exported_for_this_nodes_ranks(tmp_path):
    now = time.time()
    for rank in (0, 1):
        write_rank(tmp_path, "n0", "job1", 0, rank, steps=3, t0=now - 5, pid=os.getpid())
    record_supervisor_results(tmp_path, now - 60, 0.5, {(0, "n0"): 1.0, (1, "n0"): 1.2})
    agent = make_agent(tmp_path, kernel=KernelLogConfig("none"))
    try:
        agent.store_batch(now)
        first = metrics(agent)
        # A newer analysis; rank 5 lives on another node, whose agent exports it.
        record_supervisor_results(tmp_path, now, 0.75, {(1, "n0"): 1.6, (5, "n1"): 2.0})
        agent.store_batch(now + 15)
        second = metrics(agent)
        # Scores of an attempt older than the one running here are not this attempt's.
        record_supervisor_results(tmp_path, now + 20, 0.7, {(1, "n0"): 9.0}, attempt=-1)
        agent.store_batch(now + 30)
        third = metrics(agent)
    finally:
        agent.close()
    assert value(first, "triage_job_goodput_ratio", job="job1") == 0.5
    assert value(first, "triage_straggler_score", job="job1", rank=1, node="n0") == 1.2
    assert value(first, "triage_incidents_total", job="job1", category="gpu_fallen_off_bus") == 1
    assert value(second, "triage_job_goodput_ratio", job="job1") == 0.75
    assert value(second, "triage_straggler_score", job="job1", rank=1, node="n0") == 1.6
    assert value(second, "triage_straggler_score", job="job1", rank=0, node="n0") == 1.0
    assert value(second, "triage_straggler_score", job="job1", rank=5) is None
    assert value(second, "triage_incidents_total", job="job1", category="gpu_fallen_off_bus") == 2
    assert value(third, "triage_straggler_score", job="job1", rank=1, node="n0") == 1.6
    assert value(third, "triage_incidents_total", job="job1", category="gpu_fallen_off_bus") == 3


def record_run_accounting(data_dir: Path, job: str, run: str, t: float, usage: list, lost: list) -> None:
    """What `triage run` records when a run ends: `usage` (node, GPUs, span s, productive s)
    and `lost` (node, category, GPU-seconds, culprit node) rows, all stamped `t`."""
    key = {"job_id": job, "run_id": run, "attempt": 0, "time": t}
    with StoreWriter(data_dir, SUPERVISOR_PARTITION) as w:
        w.append_rows(
            "attempt_usage",
            [
                {**key, "node": n, "gpus": g, "start_time": t - span, "end_time": t, "productive_s": p}
                for n, g, span, p in usage
            ],
        )
        if lost:
            w.append_rows(
                "lost_time",
                [
                    {
                        **key,
                        "node": n,
                        "bucket": "lost_progress",
                        "category": c,
                        "gpu_seconds": s,
                        "culprit_node": k,
                    }
                    for n, c, s, k in lost
                ],
            )


def record_health(data_dir: Path, t: float, node: str, state: str, source: str) -> None:
    with StoreWriter(data_dir, SUPERVISOR_PARTITION) as w:
        w.append_rows(
            "node_health", [{"time": t, "node": node, "state": state, "source": source, "reason": "test"}]
        )


def test_each_agent_exports_its_own_nodes_gpu_seconds_what_it_caused_and_its_lemon_flag(tmp_path):
    now = time.time()
    # A run that ended before the agents started: their counters start from it.
    record_run_accounting(tmp_path, "old", "r0", now - 7200, [("n0", 1, 100.0, 100.0)], [])
    agents = {
        n: make_agent(tmp_path, node=n, gpu="none", kernel=KernelLogConfig("none")) for n in ("n0", "n1")
    }

    def scrape_all(t: float) -> dict[str, dict]:
        for a in agents.values():
            a.store_batch(t)
        return {n: metrics(a) for n, a in agents.items()}

    try:
        start = {n: metrics(a) for n, a in agents.items()}
        # Run 1: 4 GPUs on n0 and 2 on n1 for 900 s; n1's GPU fell off the bus and cost n0 400
        # GPU-s and n1 200; n0 also lost 100 to overhead (start-up).
        record_run_accounting(
            tmp_path,
            "job1",
            "r1",
            now,
            [("n0", 4, 900.0, 720.0), ("n1", 2, 900.0, 600.0)],
            [
                ("n0", "gpu_fallen_off_bus", 400.0, "n1"),
                ("n0", "overhead", 100.0, None),
                ("n1", "gpu_fallen_off_bus", 200.0, "n1"),
            ],
        )
        first = scrape_all(now + 15)
        # A backfill writes run 1's accounting again, later: counted already, adds nothing.
        record_run_accounting(tmp_path, "job1", "r1", now + 20, [("n0", 4, 900.0, 720.0)], [])
        # Run 2, on n0 alone: 2 GPUs for 500 s; a collective timeout blamed on n0 cost it 50.
        record_run_accounting(
            tmp_path,
            "job2",
            "r2",
            now + 25,
            [("n0", 2, 500.0, 450.0)],
            [("n0", "collective_timeout", 50.0, "n0")],
        )
        # The lemon-node test quarantines n1; n0 is quarantined for a verdict (not a lemon).
        record_health(tmp_path, now + 26, "n1", "quarantined", SOURCE_LEMON)
        record_health(tmp_path, now + 26, "n0", "quarantined", "verdict")
        second = scrape_all(now + 30)
        record_health(tmp_path, now + 40, "n1", "cleared", "manual")
        third = scrape_all(now + 45)
    finally:
        for a in agents.values():
            a.close()

    # Born at the store's total for the node (the old run: 1 GPU x 100 s), at 0 for n1.
    assert value(start["n0"], "triage_allocated_gpu_seconds_total", node="n0") == 100.0
    assert value(start["n1"], "triage_allocated_gpu_seconds_total", node="n1") == 0.0
    assert value(start["n0"], "triage_node_lemon", node="n0") == 0.0
    # Each agent its own node only: n0 = 100 + 4 x 900, n1 = 2 x 900.
    assert value(first["n0"], "triage_allocated_gpu_seconds_total", node="n0") == 3700.0
    assert value(first["n0"], "triage_productive_gpu_seconds_total", node="n0") == 100.0 + 720.0 * 4
    assert value(first["n1"], "triage_allocated_gpu_seconds_total", node="n1") == 1800.0
    assert value(first["n1"], "triage_productive_gpu_seconds_total", node="n1") == 1200.0
    assert value(first["n0"], "triage_allocated_gpu_seconds_total", node="n1") is None
    assert value(first["n0"], "triage_lost_gpu_seconds_total", category="gpu_fallen_off_bus") == 400.0
    assert value(first["n0"], "triage_lost_gpu_seconds_total", category="overhead") == 100.0
    assert value(first["n1"], "triage_lost_gpu_seconds_total", category="gpu_fallen_off_bus") == 200.0
    # The culprit's agent counts what it cost the fleet, on every node; n0 caused nothing.
    assert value(first["n1"], "triage_caused_lost_gpu_seconds_total", category="gpu_fallen_off_bus") == 600.0
    assert value(first["n0"], "triage_caused_lost_gpu_seconds_total", category="gpu_fallen_off_bus") == 0.0
    # Run 2 adds up; the backfill of run 1 does not.
    assert value(second["n0"], "triage_allocated_gpu_seconds_total", node="n0") == 3700.0 + 1000.0
    assert value(second["n0"], "triage_productive_gpu_seconds_total", node="n0") == 2980.0 + 900.0
    assert value(second["n0"], "triage_lost_gpu_seconds_total", category="collective_timeout") == 50.0
    assert value(second["n0"], "triage_caused_lost_gpu_seconds_total", category="collective_timeout") == 50.0
    assert value(second["n1"], "triage_allocated_gpu_seconds_total", node="n1") == 1800.0
    assert value(second["n1"], "triage_caused_lost_gpu_seconds_total", category="collective_timeout") == 0.0
    # Lemon: n1's quarantine by the lemon test, not n0's by a verdict; gone once cleared.
    assert value(second["n1"], "triage_node_lemon", node="n1") == 1.0
    assert value(second["n0"], "triage_node_lemon", node="n0") == 0.0
    assert value(third["n1"], "triage_node_lemon", node="n1") == 0.0
    # Any quarantine counts for triage_node_quarantined: n0's by a verdict as well as n1's lemon
    assert value(start["n0"], "triage_node_quarantined", node="n0") == 0.0
    assert value(second["n0"], "triage_node_quarantined", node="n0") >= 1.0
    assert value(second["n1"], "triage_node_quarantined", node="n1") >= 1.0
    assert value(third["n1"], "triage_node_quarantined", node="n1") == 0.0
    assert value(third["n1"], "triage_allocated_gpu_seconds_total", node="n1") == 1800.0


# -- the command, as a process ---------------------------------------------------------------


def start_agent(data_dir: Path, port: int, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "triage.cli",
            "agent",
            "--data-dir",
            str(data_dir),
            "--node",
            "n0",
            "--gpu",
            "sim",
            "--sim-gpus",
            "2",
            "--port",
            str(port),
            "--kernel-log",
            "none",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_serving(proc: subprocess.Popen, port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError("agent did not start serving")


def scrape(port: int) -> dict[str, list[tuple[dict, float]]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return parse_metrics(r.read().decode())


@contextlib.contextmanager
def running_agent(data_dir: Path, port: int, *extra: str) -> Iterator[subprocess.Popen]:
    """A `triage agent` serving on `port`; killed on the way out if the test left it running."""
    agent = start_agent(data_dir, port, *extra)
    try:
        wait_serving(agent, port)
        yield agent
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.communicate()


def stop_cleanly(agent: subprocess.Popen) -> str:
    """SIGTERM, as a service manager stops it: exit 0 after the final flush; its stderr."""
    agent.send_signal(signal.SIGTERM)
    _, err = agent.communicate(timeout=60)
    assert agent.returncode == 0, err
    return err


@pytest.mark.slow
def test_agent_process_exports_supervisor_scores_without_duckdb_or_pandas(tmp_path):
    now = time.time()
    write_rank(tmp_path, "n0", "job1", 0, 0, steps=3, t0=now - 5, pid=os.getpid())
    record_supervisor_results(tmp_path, now, 0.625, {(0, "n0"): 1.25})
    port = free_port()
    with running_agent(tmp_path, port, "--interval", "0.5", "--store-interval", "0.5") as agent:
        deadline = time.monotonic() + 30
        while (m := scrape(port)) and value(m, "triage_job_goodput_ratio", job="job1") is None:
            assert time.monotonic() < deadline, "the supervisor's goodput was never exported"
            time.sleep(0.2)
        assert value(m, "triage_straggler_score", job="job1", rank=0, node="n0") == 1.25
        assert value(m, "triage_job_goodput_ratio", job="job1") == 0.625
        # The agent's memory budget: the analytics engines stay out of its process.
        mapped = Path(f"/proc/{agent.pid}/maps").read_text()
        assert "/duckdb/" not in mapped and "_duckdb" not in mapped
        assert "/pandas/" not in mapped
        stop_cleanly(agent)


@pytest.mark.slow
def test_sigterm_flushes_spools_and_second_agent_or_busy_port_exit_2(tmp_path):
    port = free_port()
    with running_agent(tmp_path, port, "--store-interval", "600") as agent:
        second = start_agent(tmp_path, free_port())
        _, err = second.communicate(timeout=60)
        assert second.returncode == 2, err
        assert "being written by process" in err and "one agent" in err
        other_dir = start_agent(tmp_path / "other", port)
        _, err = other_dir.communicate(timeout=60)
        assert other_dir.returncode == 2, err
        assert f"port {port}" in err and "already in use" in err
        # Written while the agent runs; its next store batch is 10 min away: only the
        # shutdown flush can store these rows.
        write_rank(tmp_path, "n0", "job1", 0, 0, steps=3, t0=time.time())
        err = stop_cleanly(agent)
    assert "flushed" in err
    with open_snapshot(tmp_path) as snap:
        assert snap.count("steps") == 3
        assert snap.count("gpu_samples") >= 2


@pytest.mark.slow
def test_sigusr1_stores_at_once_and_marks_when(tmp_path):
    """A supervisor diagnosing a failure asks the agent to store now (SIGUSR1) instead of at its
    next store batch (10 min away here): the rows written before the request are stored, the
    flush mark says when the request was taken up, and the agent goes on running."""
    port = free_port()
    mark = agent_flush_mark(tmp_path, "n0")
    with running_agent(tmp_path, port, "--store-interval", "600") as agent:
        deadline = time.monotonic() + 30
        while not mark.exists():  # written once SIGUSR1 is handled: before, it would kill
            assert time.monotonic() < deadline, "the agent never marked itself ready"
            time.sleep(0.05)
        write_rank(tmp_path, "n0", "job1", 0, 0, steps=3, t0=time.time())
        asked = time.time()
        agent.send_signal(signal.SIGUSR1)
        while float(mark.read_text()) < asked:
            assert time.monotonic() < deadline + 30, "the flush asked for never happened"
            assert agent.poll() is None, agent.communicate()
            time.sleep(0.05)
        with open_snapshot(tmp_path) as snap:
            assert snap.count("steps") == 3
        assert agent.poll() is None
        stop_cleanly(agent)
