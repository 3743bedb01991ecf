"""The supervisor end to end: real `triage train` jobs (torchrun, FSDP2 on gloo, DCP) under
`Supervisor`, one short run per action, each checked for its decision, its store records, the
resumed attempt, and that no process of the job outlives it.

Runs are 1 node x 2 ranks (2 nodes x 1 rank where a node is left out), 12 steps, checkpoints
every 4 steps, and a 6 s collective timeout, so each takes well under a minute on 2 cores.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from procs import processes_with_job, ranks_of_job

from triage.store import open_snapshot
from triage.supervisor.config import SupervisorConfig
from triage.supervisor.report import JobReport
from triage.supervisor.supervisor import Supervisor

pytestmark = pytest.mark.slow
STEPS = 12


def train_command(
    summary: Path, *args: str, nnodes: int = 1, nproc: int = 2, steps: int = STEPS
) -> list[str]:
    return [
        sys.executable,
        "-m",
        "triage.cli",
        "train",
        "--nnodes",
        str(nnodes),
        "--nproc-per-node",
        str(nproc),
        "--steps",
        str(steps),
        "--checkpoint-every",
        "4",
        "--collective-timeout",
        "6",
        "--shutdown-timeout",
        "5",
        "--summary",
        str(summary),
        *args,
    ]


def supervise(
    tmp_path: Path,
    name: str,
    *inject: str,
    agents: str = "none",
    nnodes: int = 1,
    nproc: int = 2,
    max_restarts: int = 3,
    score_interval: float = 60.0,
    steps: int = STEPS,
) -> tuple[JobReport, dict, Path]:
    """Run one supervised job; (report, the last attempt's summary, data dir)."""
    data_dir = tmp_path / name
    summary = data_dir / "summary.json"
    cmd = train_command(
        summary, *[a for spec in inject for a in ("--inject", spec)], nnodes=nnodes, nproc=nproc, steps=steps
    )
    cfg = SupervisorConfig(
        job_id=name,
        data_dir=str(data_dir),
        backoff=0.0,
        grace=5.0,
        hang_timeout=20.0,
        max_restarts=max_restarts,
        agents=agents,
        score_interval=score_interval,
    )
    report = Supervisor(cfg, cmd).run()
    assert not processes_with_job(name), "processes of the job outlived it"
    assert all(not a.orphans for a in report.attempts)
    return report, json.loads(summary.read_text()), data_dir


def stored(data_dir: Path, job_id: str) -> tuple[list[dict], list[dict]]:
    with open_snapshot(data_dir) as snap:
        incidents = snap.sql(
            "SELECT attempt, category, action, culprit_node, culprit_rank "
            "FROM incidents WHERE job_id = $1 ORDER BY attempt",
            [job_id],
        )
        outcomes = snap.sql(
            "SELECT attempt, status FROM attempt_outcomes WHERE job_id = $1 ORDER BY attempt", [job_id]
        )
    return incidents, outcomes


@pytest.fixture(scope="module")
def clean_losses(tmp_path_factory) -> dict[int, float]:
    """The uninterrupted run's loss per step (same world size, seed and data)."""
    d = tmp_path_factory.mktemp("clean")
    summary = d / "summary.json"
    proc = subprocess.run(
        [*train_command(summary), "--data-dir", str(d), "--job-id", "clean"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return dict(json.loads(summary.read_text())["losses"])


def test_restart_after_a_crash_reproduces_the_clean_losses(tmp_path, clean_losses):
    # scores every second: one falls inside the restarted attempt however quickly it runs
    report, summary, data_dir = supervise(tmp_path, "crash", "kill@step=6,rank=1", score_interval=1.0)
    first, second = report.attempts
    assert report.status == "completed" and first.outcome == "failed"
    assert first.detection in ("rank_exit", "launcher_exit") and first.action == "restart"
    assert first.exited_first == [1] or first.detection == "launcher_exit"
    assert second.resumed_from_step == 4 and second.outcome == "completed"
    assert summary["world_size"] == 2 and summary["steps_completed"] == STEPS
    assert dict(summary["losses"]) == {s: clean_losses[s] for s in range(5, STEPS + 1)}
    _, outcomes = stored(data_dir, "crash")
    assert outcomes == [{"attempt": 0, "status": "failed"}, {"attempt": 1, "status": "completed"}]
    # Job scores for the agents to export: while an attempt runs (every --score-interval) and
    # when it ends; straggler scores for the attempt's ranks.
    with open_snapshot(data_dir) as snap:
        scores = snap.sql(
            "SELECT attempt, time, name, rank, value FROM job_scores WHERE job_id = 'crash' ORDER BY time"
        )
    goodput = [s for s in scores if s["name"] == "goodput_ratio"]
    assert {s["attempt"] for s in goodput} == {0, 1}
    # 0.0 is right for a score taken once the ranks' start is in the store but not yet their
    # first step; from then on the job has done useful work, and the restart keeps it.
    values = [(s["attempt"], s["value"]) for s in goodput]
    assert all(0.0 <= v <= 1.0 for _, v in values) and values[-1][1] > 0.0, values
    assert all(v > 0.0 for a, v in values if a == 1), values
    assert any(s["attempt"] == 1 and s["time"] < second.ended - 1.0 for s in goodput)
    assert {s["rank"] for s in scores if s["name"] == "straggler_score" and s["attempt"] == 1} == {0, 1}


def test_nan_rolls_back_and_skips_the_bad_batch(tmp_path, clean_losses):
    report, summary, data_dir = supervise(tmp_path, "nan", "nan@step=7,rank=0")
    first = report.attempts[0]
    assert report.status == "completed", report.reason
    assert first.verdict["category"] == "numerical_instability" and first.action == "rollback"
    assert report.attempts[1].plan == {"excluded_nodes": [], "resume_before_step": 7, "skip_steps": [7]}
    steps = dict(summary["losses"])
    assert summary["resumed_from_step"] == 4 and 7 not in steps and max(steps) == STEPS
    assert steps[5] == clean_losses[5] and steps[6] == clean_losses[6]  # before the skip: same
    incidents, _ = stored(data_dir, "nan")
    assert [(i["category"], i["action"]) for i in incidents] == [("numerical_instability", "rollback")]


def test_preemption_requeues_from_the_checkpoint_saved_on_sigterm(tmp_path, clean_losses):
    report, summary, data_dir = supervise(tmp_path, "preempt", "sigterm@step=6")
    first = report.attempts[0]
    assert first.outcome == "preempted" and first.exit_code == 143
    assert first.action == "checkpoint_and_requeue" and report.status == "completed"
    assert summary["resumed_from_step"] == 6  # nothing lost: the checkpoint of the SIGTERM step
    assert dict(summary["losses"]) == {s: clean_losses[s] for s in range(7, STEPS + 1)}
    _, outcomes = stored(data_dir, "preempt")
    assert outcomes[0] == {"attempt": 0, "status": "preempted"}


def test_a_long_step_keeps_its_peers_waiting_but_is_no_hang(tmp_path):
    """From step 4 rank 2 takes 2.5 s more per step: its three peers wait in each step's
    collective longer than the stall rule's 2 s floor, but rank 2 is busy (its main thread on
    the CPU, as a GPU-bound step's is), so no hang is declared and the job runs on."""
    report, summary, _ = supervise(
        tmp_path, "long-steps", "slow@step=4,rank=2,seconds=2.5", nnodes=2, nproc=2, steps=6
    )
    assert report.status == "completed" and len(report.attempts) == 1, report.to_dict()
    assert report.attempts[0].outcome == "completed" and report.attempts[0].detection == "launcher_exit"
    assert summary["steps_completed"] == 6 and summary["world_size"] == 4


def test_silent_corruption_stops_the_job_and_resumes_before_it_without_its_node(tmp_path):
    """Rank 2 (node1) computes wrong numbers from step 3, with no error. The canaries run at
    steps 1 and 11 (the run's last but one): rank 2's disagrees with the three others' at 11,
    so the fault began after step 1, and the supervisor (stopping the attempt, or finding it in
    the run that just finished) leaves node1 out and resumes from before step 2: none of the
    checkpoints saved since (steps 4 and 8) is trained on, though the canaries agreed at no
    step between."""
    report, summary, _ = supervise(tmp_path, "sdc", "sdc@step=3,rank=2", nnodes=2, nproc=2, steps=12)
    first, second = report.attempts[0], report.attempts[1]
    assert first.detection == "corruption" and first.verdict["category"] == "silent_data_corruption"
    assert (first.verdict["culprit"]["rank"], first.verdict["culprit"]["node"]) == (2, "node1")
    assert first.action == "restart_excluding_node"
    assert second.plan["excluded_nodes"] == ["node1"] and second.plan["resume_before_step"] == 2
    assert report.status == "completed" and len(report.attempts) == 2
    assert summary["world_size"] == 2 and summary["resumed_from_step"] is None
    assert summary["steps_completed"] == 12


def test_oom_fails_fast_without_a_restart(tmp_path):
    report, _, data_dir = supervise(tmp_path, "oom", "oom@step=3,rank=0")
    assert report.status == "failed" and len(report.attempts) == 1
    assert report.attempts[0].verdict["category"] == "gpu_oom"
    assert report.attempts[0].action == "fail_fast"
    incidents, outcomes = stored(data_dir, "oom")
    assert incidents[0]["action"] == "fail_fast"
    assert outcomes == [{"attempt": 0, "status": "failed"}]


def test_the_same_failure_twice_without_progress_stops_the_restart_loop(tmp_path):
    report, _, _ = supervise(
        tmp_path, "loop", "disk_full@step=4,rank=1,attempt=0", "disk_full@step=4,rank=1,attempt=1"
    )
    assert report.status == "gave_up" and "restart loop" in report.reason
    assert [a.verdict["category"] for a in report.attempts] == ["storage_error"] * 2
    assert report.attempts[0].action == "restart"


def test_run_without_a_command_is_bad_usage():
    proc = subprocess.run(
        [sys.executable, "-m", "triage.cli", "run", "--max-restarts", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "after --" in proc.stderr


@pytest.mark.parametrize("to", ["supervisor", "process group"])
def test_ctrl_c_stops_the_job_and_its_agents(tmp_path, to):
    """A terminal's Ctrl-C signals the whole foreground process group: the ranks and torchrun
    get it as the supervisor does (a trial's job was then analysed as failed on a collective
    timeout its own KeyboardInterrupts made)."""
    data_dir = tmp_path / "interrupt"
    cmd = [
        sys.executable,
        "-m",
        "triage.cli",
        "run",
        "--job-id",
        "interrupt",
        "--data-dir",
        str(data_dir),
        "--grace",
        "5",
        "--",
        *train_command(data_dir / "summary.json", "--steps", "500", nnodes=2, nproc=1),
    ]
    sup = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(ranks_of_job("interrupt")) < 2:
        time.sleep(0.5)
    assert ranks_of_job("interrupt"), "the job never started"
    agents = list(_agent_processes(data_dir))
    assert len(agents) == 2
    time.sleep(3)  # a few steps in
    if to == "supervisor":
        sup.send_signal(signal.SIGINT)
    else:
        os.killpg(sup.pid, signal.SIGINT)
    _, err = sup.communicate(timeout=60)
    assert sup.returncode == 130, err[-2000:]
    assert not processes_with_job("interrupt") and not _agent_processes(data_dir)
    _, outcomes = stored(data_dir, "interrupt")
    assert outcomes == [{"attempt": 0, "status": "interrupted"}]
    # the ranks' SIGTERMs were the supervisor's own, their KeyboardInterrupts the terminal's: no
    # cause in the job's analysis or the fleet's failure figures (a new user's Ctrl-C was
    # counted as a preemption, then as a collective timeout)
    out = subprocess.run(
        [sys.executable, "-m", "triage.cli", "analyze", "interrupt", "--json", "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    analysis = json.loads(out.stdout)
    assert out.returncode == 0 and analysis["status"] == "interrupted", out.stdout[-2000:]
    assert not [i for i in analysis["incidents"] if i["root_cause"]], analysis["incidents"]


def _agent_processes(data_dir: Path) -> list[int]:
    """pids of `triage agent` processes serving this data directory."""
    found = []
    for name in os.listdir("/proc"):
        try:
            cmd = open(f"/proc/{name}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if b"agent" in cmd and str(data_dir).encode() in cmd:
            found.append(int(name))
    return found
