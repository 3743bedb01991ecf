"""One data dir, many jobs: one after another and side by side, as on a shared cluster.

Real `triage run` supervisors (the CLI), real `triage train` jobs on 3 simulated nodes x 1
rank with their node agents and simulated GPUs. Each later job must be diagnosed on its own
evidence: a GPU lost under an earlier job is a quarantined node to leave out, never the cause
of a later bug or hang; a reused job id is a new run; two supervisors of one id cannot both
run; two jobs on the same nodes do not disturb each other. Culprit ranks and nodes differ from
job to job (and from the demo's rank 3).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from conftest import TRIAGE_CLI as TRIAGE
from procs import processes_with_job

from triage.fault_schedule import read_faults
from triage.store.node_health import quarantined_nodes, read_ledger
from triage.store.writer import partition_holder

pytestmark = pytest.mark.slow


def train(run_dir: Path, *inject: str, nnodes: int = 3, steps: int = 8) -> list[str]:
    return [
        *TRIAGE,
        "train",
        "--nnodes",
        str(nnodes),
        "--nproc-per-node",
        "1",
        "--model",
        "tiny",
        "--steps",
        str(steps),
        "--checkpoint-every",
        "3",
        "--collective-timeout",
        "6",
        "--shutdown-timeout",
        "5",
        "--run-dir",
        str(run_dir),
        *[a for spec in inject for a in ("--inject", spec)],
    ]


def run_args(data_dir: Path, job: str, *extra: str) -> list[str]:
    return [
        *TRIAGE,
        "run",
        "--data-dir",
        str(data_dir),
        "--job-id",
        job,
        "--json",
        "--backoff",
        "0",
        "--grace",
        "3",
        "--hang-timeout",
        "20",
        "--agent-interval",
        "0.5",
        *extra,
        "--",
    ]


def supervise(data_dir: Path, job: str, command: list[str], *extra: str) -> dict:
    out = subprocess.run(
        [*run_args(data_dir, job, *extra), *command], capture_output=True, text=True, timeout=600
    )
    assert out.stdout, f"triage run printed no report (exit {out.returncode}): {out.stderr}"
    report = json.loads(out.stdout)
    report["exit_code"], report["stderr"] = out.returncode, out.stderr
    assert not processes_with_job(job), f"processes of {job} outlived it"
    return report


def cli_json(*args: str) -> dict:
    out = subprocess.run([*TRIAGE, *args, "--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode in (0, 1), out.stderr
    return json.loads(out.stdout)


def root(attempt: dict) -> tuple:
    v = attempt["verdict"] or {}
    c = v.get("culprit") or {}
    return v.get("category"), c.get("rank"), c.get("node"), attempt["action"]


def root_causes(analysis: dict) -> list[str]:
    return [i["category"] for i in analysis["incidents"] if i.get("root_cause")]


def test_each_job_in_a_shared_data_dir_is_diagnosed_on_its_own_evidence(tmp_path):
    data = tmp_path / "data"
    # Job A: GPU 0 of node2 (rank 2) falls off the bus at step 4.
    a = supervise(data, "shared", train(tmp_path / "run-a", "xid@step=4,rank=2,xid=79"))
    assert a["status"] == "completed", a["reason"]
    assert root(a["attempts"][0]) == ("gpu_fallen_off_bus", 2, "node2", "restart_excluding_node")
    assert a["attempts"][0]["quarantine"]["node"] == "node2"
    assert a["attempts"][0]["quarantine"]["gpu"] == 0
    (entry,) = read_ledger(data)
    assert (entry.node, entry.gpu, entry.category, entry.xid, entry.job_id, entry.run_id) == (
        "node2",
        0,
        "gpu_fallen_off_bus",
        79,
        "shared",
        a["run_id"],
    )

    # Job B: node2 is left out from the start, so it runs on node0 and node1; a KeyError in
    # rank 1 (node1): a user bug, fail fast; not the old GPU, no node excluded.
    b = supervise(data, "bug", train(tmp_path / "run-b", "exception@step=2,rank=1"))
    assert b["exit_code"] == 1 and b["status"] == "failed"
    assert list(b["quarantined_at_start"]) == ["node2"] and b["excluded_nodes"] == ["node2"]
    assert "leaving node2 out" in b["stderr"] and "runs on 2 of its 3 nodes" in b["stderr"]
    assert len(b["attempts"]) == 1
    assert root(b["attempts"][0]) == ("user_code_error", 1, "node1", "fail_fast")
    assert root_causes(b["analysis"]) == ["user_code_error"]
    assert len(read_ledger(data)) == 1  # a bug quarantines nothing

    # node2 is repaired: its simulated GPUs are reset.
    cleared = cli_json("nodes", "clear", "node2", "--by", "test", "--data-dir", str(data))
    assert [(c["node"], c["gpu"]) for c in cleared["cleared"]] == [("node2", 0)]
    assert read_faults(data, "node2")[0][-1].kind == "reset"
    assert quarantined_nodes(data) == {}

    # Job C reuses job A's id: a new run, on all 3 nodes again (rank 2 on the GPU that A lost).
    # Rank 0 hangs at step 3: a collective timeout with that culprit, not A's Xid 79.
    c = supervise(data, "shared", train(tmp_path / "run-c", "hang@step=3,rank=0"))
    assert c["status"] == "completed", c["reason"]
    assert c["run_id"] != a["run_id"] and c["quarantined_at_start"] == {}
    assert c["attempts"][0]["plan"]["excluded_nodes"] == []
    assert root(c["attempts"][0]) == ("collective_timeout", 0, "node0", "restart_excluding_node")
    assert c["excluded_nodes"] == ["node0"]  # attempt 1 trained on node1 and the reset node2
    assert c["attempts"][0]["quarantine"] is None  # the first incident since the clear
    assert c["attempts"][0]["resumed_from_step"] == 0  # its own run dir, not A's checkpoints
    cats = {i["category"] for i in c["analysis"]["incidents"]}
    assert "gpu_fallen_off_bus" not in cats, c["analysis"]["incidents"]

    # What the reports say afterwards: the newest run by default, the older by --run.
    newest = cli_json("analyze", "shared", "--data-dir", str(data))
    assert newest["run_id"] == c["run_id"]
    assert root_causes(newest) == ["collective_timeout"], [
        (i["attempt"], i["category"], i.get("summary")) for i in newest["incidents"] if i.get("root_cause")
    ]
    # job A's lost GPU (node2's GPU 0, reset since) is older than this run: not in its GPU table
    assert {(g["node"], g["gpu"]): (g["xid_events"], g["lost"]) for g in newest["gpus"]}[("node2", 0)] == (
        0,
        False,
    )
    older = cli_json("analyze", "shared", "--run", a["run_id"], "--data-dir", str(data))
    assert root_causes(older) == ["gpu_fallen_off_bus"]
    runs = cli_json("jobs", "--data-dir", str(data))["runs"]
    assert sorted((r["job_id"], r["status"]) for r in runs) == [
        ("bug", "failed"),
        ("shared", "completed"),
        ("shared", "completed"),
    ]


def test_jobs_side_by_side_on_one_data_dir_and_one_id_at_a_time(tmp_path):
    """Two jobs on the same simulated nodes at once (one agent per node serves both); a
    second supervisor of a running job id is refused at once, and disturbs nothing."""
    data = tmp_path / "data"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    left = subprocess.Popen(
        [*run_args(data, "left"), *train(tmp_path / "l", nnodes=2, steps=10)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    deadline = time.monotonic() + 60
    while (
        partition_holder(data, "node0") is None or partition_holder(data, "node1") is None
    ) and time.monotonic() < deadline:
        time.sleep(0.2)  # left's agents hold both nodes' partitions
    right = subprocess.Popen(
        [*run_args(data, "right"), *train(tmp_path / "r", "kill@step=4,rank=0", nnodes=2, steps=10)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    again = subprocess.run(
        [*run_args(data, "left"), *train(tmp_path / "l2", nnodes=2)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 2
    assert "job 'left' is already running" in again.stderr and again.stdout == ""
    assert "kept under" not in again.stderr  # no log folder announced that it will never write
    outs = {}
    for name, proc in (("left", left), ("right", right)):
        stdout, stderr = proc.communicate(timeout=600)
        assert stdout, stderr
        outs[name] = json.loads(stdout)
    lj, rj = outs["left"], outs["right"]
    assert lj["status"] == "completed" and len(lj["attempts"]) == 1, lj["reason"]
    assert lj["attempts"][0]["verdict"] is None and lj["attempts"][0]["last_step"] == 10
    assert root_causes(lj["analysis"]) == []
    assert rj["status"] == "completed" and len(rj["attempts"]) == 2, rj["reason"]
    assert root(rj["attempts"][0])[1:3] == (0, "node0")
    for job, report in outs.items():
        mine = cli_json("analyze", job, "--data-dir", str(data))
        assert mine["run_id"] == report["run_id"]
        assert {r["job_id"] for r in cli_json("jobs", "--data-dir", str(data))["runs"]} == {"left", "right"}
    assert not processes_with_job("left") and not processes_with_job("right")
    # right found both partitions held by left's agents, and used them meanwhile
    for node in ("node0", "node1"):
        assert "serves this job too" in (data / "logs" / f"agent-{node}.log").read_text()
