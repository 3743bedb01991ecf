"""The node health ledger: what a verdict quarantines, what the repeat-offender rule counts,
what `triage nodes clear` returns, and that the simulated GPUs remember across agents.

Real store partitions (pyarrow segments, manifests, flock) and the real CLI; no training
processes (tests/test_fleet_history.py runs jobs). Culprit nodes and GPUs vary.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from triage.cli import main
from triage.collectors.records import GpuEvent, GpuSample
from triage.collectors.sim_gpu import SimGpuCollector
from triage.fault_schedule import GpuFault, append_fault, append_reset, read_faults
from triage.store.node_health import (
    CLEARED,
    QUARANTINED,
    SOURCE_MANUAL,
    SOURCE_REPEAT_OFFENDER,
    SOURCE_VERDICT,
    HealthEntry,
    Implication,
    clear_node,
    current_state,
    quarantined_nodes,
    read_ledger,
    record_health,
)
from triage.store.shared_writer import shared_writer
from triage.store.writer import PartitionBusy, StoreWriter, partition_holder
from triage.supervisor import agents as agents_mod
from triage.supervisor.observe import record_attempt
from triage.supervisor.quarantine import QuarantineConfig, decide, quarantine_for_verdict
from triage.taxonomy import Category
from triage.verdict import Culprit, Evidence, Verdict

DAY = 86400.0
NOW = 1_796_000_000.0
NODES = ["node1", "node0", "gpu-a17.rack3"]


def verdict(
    category: Category, node: str | None, gpu: int | None = None, rank: int = 2, text: str = ""
) -> Verdict:
    return Verdict(
        category,
        0.9,
        f"{category.value} on {node}",
        Culprit(rank, node, gpu),
        first_seen=NOW - 5,
        evidence=[Evidence(text or "evidence line", "kernel_log", NOW - 5, rank)],
    )


def implications(node: str, *pairs) -> list[Implication]:
    """Incidents recorded against `node`: (time, category, job, attempt) each."""
    return [Implication(t, node, None, c.value, job, "r", attempt) for t, c, job, attempt in pairs]


# -- the hardware rule ------------------------------------------------------------------------


@pytest.mark.parametrize("node", NODES)
@pytest.mark.parametrize(
    "category,gpu,expect_gpu",
    [
        (Category.GPU_FALLEN_OFF_BUS, 3, 3),
        (Category.GPU_MEMORY_ERROR, 0, 0),
        (Category.NVLINK_ERROR, 5, 5),
        (Category.NODE_FAILURE, 1, None),
        (Category.SILENT_DATA_CORRUPTION, None, None),
    ],
)
def test_a_hardware_verdict_quarantines_its_gpu_or_node(node, category, gpu, expect_gpu):
    v = verdict(
        category, node, gpu, text="NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus."
    )
    e = decide(v, now=NOW, job_id="a", run_id="r", attempt=1, ledger=[], implications=[])
    assert e is not None and (e.node, e.gpu, e.state) == (node, expect_gpu, QUARANTINED)
    assert e.source == SOURCE_VERDICT and e.category == category.value
    assert (e.job_id, e.run_id, e.attempt) == ("a", "r", 1)
    assert e.xid == 79 and e.evidence and e.evidence[0]["source"] == "kernel_log"
    # it stands: the same verdict again (the next attempt, another job) writes nothing new
    assert decide(v, now=NOW + 60, job_id="b", run_id="r2", attempt=0, ledger=[e], implications=[]) is None


@pytest.mark.parametrize(
    "category",
    [
        Category.USER_CODE_ERROR,
        Category.GPU_OOM,
        Category.HOST_OOM,
        Category.PREEMPTION,
        Category.UNKNOWN,
        Category.COLLECTIVE_TIMEOUT,
    ],
)
def test_one_incident_of_other_causes_quarantines_nothing(category):
    assert (
        decide(
            verdict(category, "node1", 0),
            now=NOW,
            job_id="a",
            run_id="r",
            attempt=0,
            ledger=[],
            implications=[],
        )
        is None
    )


def test_a_verdict_without_a_culprit_node_quarantines_nothing():
    assert (
        decide(
            verdict(Category.GPU_FALLEN_OFF_BUS, None, 1),
            now=NOW,
            job_id="a",
            run_id="r",
            attempt=0,
            ledger=[],
            implications=[],
        )
        is None
    )


# -- the repeat-offender rule -----------------------------------------------------------------


@pytest.mark.parametrize("node", NODES)
def test_a_node_implicated_twice_in_the_window_is_quarantined_whole(node):
    earlier = implications(node, (NOW - 3 * DAY, Category.COLLECTIVE_TIMEOUT, "other-job", 2))
    v = verdict(Category.NETWORK_ERROR, node, 1)
    e = decide(v, now=NOW, job_id="a", run_id="r", attempt=0, ledger=[], implications=earlier)
    assert e is not None and (e.node, e.gpu, e.source) == (node, None, SOURCE_REPEAT_OFFENDER)
    assert "2 incidents" in e.reason and "other-job" in e.reason
    # another node's history counts for nothing here
    other = implications("elsewhere", (NOW - 3 * DAY, Category.COLLECTIVE_TIMEOUT, "x", 0))
    assert decide(v, now=NOW, job_id="a", run_id="r", attempt=0, ledger=[], implications=other) is None


def test_repeat_offender_ignores_old_same_attempt_and_non_hardware_incidents():
    v = verdict(Category.COLLECTIVE_TIMEOUT, "node1")
    cfg = QuarantineConfig(repeat_window_days=7, repeat_count=2)

    def verdict_after(*pairs, ledger=()):
        return decide(
            v,
            now=NOW,
            job_id="a",
            run_id="r",
            attempt=3,
            ledger=list(ledger),
            implications=implications("node1", *pairs),
            config=cfg,
        )

    assert verdict_after((NOW - 8 * DAY, Category.COLLECTIVE_TIMEOUT, "b", 0)) is None
    assert verdict_after((NOW - DAY, Category.USER_CODE_ERROR, "b", 0)) is None
    assert verdict_after((NOW - DAY, Category.PREEMPTION, "b", 0)) is None
    # this very attempt's incident, already recorded, counts once
    assert verdict_after((NOW - 1, Category.COLLECTIVE_TIMEOUT, "a", 3)) is None
    assert verdict_after((NOW - DAY, Category.COLLECTIVE_TIMEOUT, "b", 0)) is not None
    cleared = HealthEntry(NOW - 3600, "node1", None, CLEARED, "fixed", SOURCE_MANUAL, "ops")
    assert verdict_after((NOW - DAY, Category.COLLECTIVE_TIMEOUT, "b", 0), ledger=[cleared]) is None


def test_an_incident_on_a_gpu_cleared_since_no_longer_counts_against_its_node():
    # an NVLink fault on GPU 1 (quarantined, then cleared as repaired), then a hang on GPU 0: one
    # incident counts, not two; the GPU's clear says nothing of incidents after it
    nvlink = Implication(NOW - DAY, "node1", 1, Category.NVLINK_ERROR.value, "j2", "r", 0)
    hang = verdict(Category.COLLECTIVE_TIMEOUT, "node1", 0)
    gpu_cleared = HealthEntry(NOW - 3600, "node1", 1, CLEARED, "reseated", SOURCE_MANUAL, "ops")
    args = dict(now=NOW, job_id="j4", run_id="r", attempt=0, implications=[nvlink])
    assert decide(hang, ledger=[gpu_cleared], **args) is None
    assert decide(hang, ledger=[], **args) is not None
    before = HealthEntry(NOW - 2 * DAY, "node1", 1, CLEARED, "reseated", SOURCE_MANUAL, "ops")
    assert decide(hang, ledger=[before], **args) is not None


def test_quarantine_config_rejects_a_rule_that_fires_on_every_incident():
    from triage.config import ConfigError

    with pytest.raises(ConfigError, match="--repeat-count must be >= 2"):
        QuarantineConfig(repeat_count=1)
    with pytest.raises(ConfigError, match="--repeat-window-days"):
        QuarantineConfig(repeat_window_days=0)


@pytest.mark.parametrize("node", ["node0", "node1"])
def test_quarantine_for_verdict_reads_and_writes_the_store(tmp_path, node):
    """Through real segments: the first collective timeout on the node is recorded (an
    incident) but quarantines nothing; the second, in another job, quarantines the node."""
    first = verdict(Category.COLLECTIVE_TIMEOUT, node, 1)
    record_attempt(
        tmp_path,
        "job-a",
        "run-a",
        0,
        status="failed",
        exit_code=1,
        reason="x",
        verdict=first,
        action="restart",
    )
    now = time.time()
    assert quarantine_for_verdict(tmp_path, first, job_id="job-a", run_id="run-a", attempt=0, now=now) is None
    second = verdict(Category.COLLECTIVE_TIMEOUT, node, 0)
    record_attempt(
        tmp_path,
        "job-b",
        "run-b",
        4,
        status="failed",
        exit_code=1,
        reason="x",
        verdict=second,
        action="restart",
    )
    e = quarantine_for_verdict(tmp_path, second, job_id="job-b", run_id="run-b", attempt=4, now=now + 1)
    assert e is not None and e.source == SOURCE_REPEAT_OFFENDER
    assert [x.to_dict() for x in read_ledger(tmp_path)] == [e.to_dict()]
    assert list(quarantined_nodes(tmp_path)) == [node]


# -- clearing ---------------------------------------------------------------------------------


def _q(node: str, gpu: int | None, t: float, category: str = "gpu_fallen_off_bus") -> HealthEntry:
    return HealthEntry(
        t,
        node,
        gpu,
        QUARANTINED,
        f"{category} on {node}",
        SOURCE_VERDICT,
        "triage run",
        category=category,
        job_id="a",
        run_id="r",
        attempt=0,
    )


def test_clearing_a_gpu_leaves_the_node_quarantine_and_clearing_the_node_ends_all(tmp_path):
    record_health(
        tmp_path, [_q("node1", 2, NOW), _q("node1", None, NOW + 1, "node_failure"), _q("node0", 0, NOW + 2)]
    )
    assert clear_node(tmp_path, "node1", gpu=2, by="ops", now=NOW + 10)
    assert set(quarantined_nodes(tmp_path)) == {"node0", "node1"}  # node1 still, as a node
    ended = clear_node(tmp_path, "node1", by="ops", now=NOW + 20)
    assert [(e.node, e.gpu) for e in ended] == [("node1", None)]
    assert set(quarantined_nodes(tmp_path)) == {"node0"}
    assert clear_node(tmp_path, "node1", by="ops", now=NOW + 30) == []  # nothing stands
    state = current_state(read_ledger(tmp_path))
    assert state[("node1", None)].state == CLEARED and ("node1", 2) not in state


def test_a_quarantine_after_a_clear_stands_again(tmp_path):
    record_health(tmp_path, [_q("node3", 1, NOW)])
    clear_node(tmp_path, "node3", by="ops", now=NOW + 10)
    record_health(tmp_path, [_q("node3", 1, NOW + 20)])
    assert [e.gpu for e in quarantined_nodes(tmp_path)["node3"]] == [1]


def test_nodes_cli_lists_clears_and_says_when_nothing_stands(tmp_path, capsys):
    append_fault(tmp_path, GpuFault(time=NOW - 100, node="node2", gpu=3, kind="xid", xid=79))
    record_health(tmp_path, [_q("node2", 3, NOW)])
    assert main(["nodes", "--data-dir", str(tmp_path), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(q["node"], q["gpu"]) for q in listed["quarantined"]] == [("node2", 3)]
    assert main(["nodes", "--data-dir", str(tmp_path)]) == 0
    assert "node2 GPU 3" in capsys.readouterr().out
    assert main(["nodes", "clear", "node0", "--data-dir", str(tmp_path)]) == 1
    assert "node0 is not quarantined, nothing written" in capsys.readouterr().out
    assert main(["nodes", "clear", "node2", "--gpu", "1", "--data-dir", str(tmp_path)]) == 1
    assert "quarantined there: node2 GPU 3" in capsys.readouterr().out
    assert (
        main(
            [
                "nodes",
                "--data-dir",
                str(tmp_path),
                "clear",
                "node2",
                "--by",
                "alice",
                "--reason",
                "GPU 3 replaced",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert [(c["node"], c["gpu"]) for c in out["cleared"]] == [("node2", 3)]
    assert quarantined_nodes(tmp_path) == {}
    last = read_ledger(tmp_path)[-1]
    assert (last.state, last.by, last.source) == (CLEARED, "alice: GPU 3 replaced", SOURCE_MANUAL)
    faults, _ = read_faults(tmp_path, "node2")
    assert faults[-1].kind == "reset" and faults[-1].gpu is None  # the simulated node resets
    assert main(["nodes", "clear", "bad name", "--data-dir", str(tmp_path)]) == 2
    assert main(["nodes", "--data-dir", str(tmp_path / "missing")]) == 2


# -- shared writes ----------------------------------------------------------------------------


def test_a_ledger_write_waits_for_another_writer_of_the_partition(tmp_path):
    held = threading.Event()
    release = threading.Event()

    def other_supervisor():
        with shared_writer(tmp_path) as writer:
            held.set()
            release.wait(5)
            writer.append_rows("node_health", [_q("node0", 0, NOW).to_row()])

    t = threading.Thread(target=other_supervisor)
    t.start()
    assert held.wait(5)
    with pytest.raises(PartitionBusy, match=r"stayed busy for 0.2 s \(written by process \d+"):
        record_health(tmp_path, [_q("node1", 1, NOW + 1)], wait_s=0.2)
    threading.Timer(0.3, release.set).start()
    record_health(tmp_path, [_q("node1", 1, NOW + 1)], wait_s=5)
    t.join()
    assert sorted(quarantined_nodes(tmp_path)) == ["node0", "node1"]


def test_partition_holder_names_the_writer_and_creates_nothing(tmp_path):
    assert partition_holder(tmp_path, "node0") is None
    assert not (tmp_path / "store").exists()
    with StoreWriter(tmp_path, "node0"):
        holder = partition_holder(tmp_path, "node0")
    assert holder is not None and int(holder) > 0
    assert partition_holder(tmp_path, "node0") is None


def test_an_agent_waits_for_a_partition_another_job_holds(tmp_path, monkeypatch):
    """Two supervisors on one data dir: the node's partition is another's (here a writer
    this test holds); this job's agent starts once it is free, not never."""
    monkeypatch.setattr(agents_mod, "_RESTART_S", 0.0)
    writer = StoreWriter(tmp_path, "node5")
    agents = agents_mod.Agents(["node5"], tmp_path, gpu="sim", sim_gpus=1, interval_s=0.5)
    try:
        assert agents.running() == set()
        assert "another job's agent" in (tmp_path / "logs" / "agent-node5.log").read_text()
        writer.close()
        agents.tend()
        assert agents.running() == {"node5"}
        deadline = time.monotonic() + 30
        # "?" while the agent has taken the lock but not yet written its pid into it
        while partition_holder(tmp_path, "node5") in (None, "?") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert partition_holder(tmp_path, "node5") == str(agents.procs["node5"].pid)
    finally:
        agents.stop()
    assert agents.running() == set()


# -- the simulated GPUs remember ---------------------------------------------------------------


def _events(records):
    return [r for r in records if isinstance(r, GpuEvent)]


def _up(records, gpu):
    (s,) = [r for r in records if isinstance(r, GpuSample) and r.gpu == gpu]
    return s.gpu_up


@pytest.mark.parametrize("gpu", [0, 3])
def test_a_restarted_agent_finds_the_lost_gpu_lost_and_reports_no_old_xid(tmp_path, gpu):
    append_fault(tmp_path, GpuFault(time=NOW, node="n", gpu=gpu, kind="xid", xid=79))
    first = SimGpuCollector("n", tmp_path, num_gpus=4, started=NOW - 10)
    recs = first.collect(NOW + 1)
    assert [(e.gpu, e.kind) for e in _events(recs)] == [(gpu, "xid"), (gpu, "gpu_lost")]
    assert _up(recs, gpu) is False
    later = SimGpuCollector("n", tmp_path, num_gpus=4)  # the next job's agent
    recs = later.collect(NOW + 600)
    assert _events(recs) == [] and _up(recs, gpu) is False
    assert all(_up(recs, g) for g in range(4) if g != gpu)
    kmsg = (tmp_path / "sim-kmsg" / "n.log").read_text().splitlines()
    assert len([line for line in kmsg if "Xid" in line]) == 1  # printed once, by the first
    append_reset(tmp_path, "n", gpu, now=NOW + 700)
    assert _up(later.collect(NOW + 701), gpu) is True
    # and an agent started after the reset replays both: the GPU is up
    assert _up(SimGpuCollector("n", tmp_path, num_gpus=4).collect(NOW + 800), gpu) is True


def test_a_reset_keeps_lifetime_ecc_counts_and_zeroes_volatile_ones(tmp_path):
    append_fault(tmp_path, GpuFault(time=NOW, node="n", gpu=1, kind="ecc", xid=48))
    sim = SimGpuCollector("n", tmp_path, num_gpus=2, started=NOW - 1)
    (before,) = [r for r in sim.collect(NOW + 1) if isinstance(r, GpuSample) and r.gpu == 1]
    assert before.ecc_uncorrected_volatile == before.ecc_uncorrected_aggregate == 1
    append_reset(tmp_path, "n", now=NOW + 2)  # the whole node
    (after,) = [r for r in sim.collect(NOW + 3) if isinstance(r, GpuSample) and r.gpu == 1]
    assert (after.ecc_uncorrected_volatile, after.ecc_uncorrected_aggregate) == (0, 1)


def test_reset_is_no_fault_the_trainer_can_inject():
    out = subprocess.run(
        [sys.executable, "-m", "triage.cli", "train", "--inject", "reset@step=2,rank=0", "--steps", "1"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2 and "reset" in out.stderr
    with pytest.raises(ValueError, match="only a reset or disk_full may name none"):
        GpuFault(time=NOW, node="n", gpu=None, kind="xid", xid=79)


def test_a_job_whose_every_node_is_quarantined_is_refused_before_it_starts(tmp_path):
    record_health(tmp_path, [_q("node0", 1, time.time())])
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "triage.cli",
            "run",
            "--data-dir",
            str(tmp_path),
            "--agents",
            "none",
            "--",
            sys.executable,
            "-m",
            "triage.cli",
            "train",
            "--nnodes",
            "1",
            "--steps",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2
    assert "every node of this job is quarantined: node0 (node0 GPU 1" in out.stderr
    assert "kept under" not in out.stderr  # a refused run announces no log folder
    assert "triage nodes clear NODE" in out.stderr and "--no-quarantine" in out.stderr
    assert not (tmp_path / "store" / "supervisor" / "runs").exists()  # no run was recorded


def test_a_local_launch_on_a_quarantined_host_is_refused_not_run_there(tmp_path):
    # torchrun or a plain script starts its ranks on this host whatever TRIAGE_EXCLUDE_NODES says:
    # a quarantined host is refused with the way back, and --no-quarantine runs it (a burn-in)
    host = socket.gethostname()
    record_health(tmp_path, [_q(host, None, time.time())])
    cmd = [sys.executable, "-m", "triage.cli", "run", "--data-dir", str(tmp_path), "--agents", "none"]
    job = ["--", sys.executable, "-c", "print('ran')"]
    out = subprocess.run([*cmd, *job], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr[-2000:]
    assert f"this host ({host}) is quarantined" in out.stderr
    assert f"triage nodes clear {host}" in out.stderr and "--no-quarantine" in out.stderr
    ran = subprocess.run([*cmd, "--no-quarantine", *job], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr[-2000:]
    # the ranks' node is TRIAGE_NODE where it is set: a quarantined one named so is refused too
    # (the gate looked at the host name only, and a trial's job ran on its quarantined node1)
    record_health(tmp_path, [_q("node1", None, time.time())])
    named = subprocess.run(
        [*cmd, *job], capture_output=True, text=True, timeout=120, env={**os.environ, "TRIAGE_NODE": "node1"}
    )
    assert named.returncode == 2 and "this host (node1) is quarantined" in named.stderr, named.stderr[-2000:]


def test_the_demo_returns_its_own_simulated_nodes_to_service_first(tmp_path):
    """A second `make demo` in the same data dir: the first quarantined the GPU it lost; the
    demo's nodes are simulated and its own, so it clears them rather than run on fewer."""
    from triage.commands.demo import _return_demo_nodes
    from triage.supervisor.scenarios import SCENARIOS

    append_fault(tmp_path, GpuFault(time=NOW - 10, node="node1", gpu=1, kind="xid", xid=79))
    demo = dataclasses.replace(_q("node1", 1, NOW), job_id="demo-gpu-lost-20261207-101010")
    drill = dataclasses.replace(_q("node0", 0, NOW), job_id="drill-7")
    record_health(tmp_path, [demo, drill, _q("node7", 0, NOW)])
    lines = _return_demo_nodes(tmp_path, SCENARIOS["gpu-lost"].train_command())
    assert len(lines) == 2 and lines[1].startswith("node1 was quarantined by an earlier demo")
    # a quarantine another job made on a node named like the demo's is a person's to undo
    assert lines[0].startswith("node0 is quarantined by job(s) drill-7, not by a demo")
    assert sorted(quarantined_nodes(tmp_path)) == ["node0", "node7"]
    assert read_ledger(tmp_path)[-1].by == "triage demo"
    assert read_faults(tmp_path, "node1")[0][-1].kind == "reset"


def test_the_agents_a_run_starts_are_published_for_prometheus_file_sd(tmp_path):
    """`triage run`'s agents listen on ports of their own: a static scrape config cannot know
    them (a trial had to run its own agents to scrape any). The supervisor lists them in
    Prometheus' file_sd format while they run."""
    from triage.store.layout import scrape_targets_file

    agents = agents_mod.Agents(["node5", "node6"], tmp_path, gpu="sim", sim_gpus=1, interval_s=0.5)
    path = scrape_targets_file(tmp_path, os.getpid())
    try:
        published = json.loads(path.read_text())
        assert sorted(published, key=lambda t: t["labels"]["triage_agent_node"]) == [
            {"targets": [f"127.0.0.1:{agents.ports[n]}"], "labels": {"triage_agent_node": n}}
            for n in ("node5", "node6")
        ]
    finally:
        agents.stop()
    assert not path.exists()


def test_clearing_a_node_where_slurm_is_installed_but_not_configured_says_nothing_of_slurm(
    tmp_path, capsys, monkeypatch
):
    """A machine with Slurm's commands and no cluster: `sinfo` fails with "Could not establish
    a configuration source"; a clear printed four lines of it as a warning (a trial)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sinfo", "scontrol"):
        fake = bin_dir / tool
        fake.write_text(
            "#!/bin/sh\necho 'sinfo: error: Could not establish a configuration source' >&2\n"
            "echo 'sinfo: fatal: Could not establish a configuration source' >&2\nexit 1\n"
        )
        fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    record_health(tmp_path, [_q("node2", None, NOW)])
    assert main(["nodes", "clear", "node2", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr()
    assert "Slurm" not in out.err and "configuration source" not in out.err + out.out


def test_a_run_on_a_data_dir_that_does_not_exist_says_it_starts_one_without_history(tmp_path):
    """A typo in --data-dir started a job in a new, empty directory without a word: its ledger
    knew no quarantined node, so the job could land on one (a trial)."""
    new = tmp_path / "typo-data"
    cmd = [sys.executable, "-m", "triage.cli", "run", "--data-dir", str(new), "--agents", "none"]
    job = ["--", sys.executable, "-c", "print('ran')"]
    first = subprocess.run([*cmd, *job], capture_output=True, text=True, timeout=120)
    assert first.returncode == 0 and "starting a new data directory, with no history" in first.stderr
    again = subprocess.run([*cmd, *job], capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "new data directory" not in again.stderr
