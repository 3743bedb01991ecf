"""The supervisor stops exactly the processes it started, and takes them with it when it dies.

Real processes: a command whose children leave their session, double-fork and wipe their
environment (tests/workloads/escaping_children.py), a supervisor killed with SIGKILL, and
bystanders that carry the job's TRIAGE_* variables without being its processes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from conftest import TRIAGE_CLI as TRIAGE

from triage.supervisor.processes import AttemptProcesses

WORKLOAD = Path(__file__).parent / "workloads" / "escaping_children.py"


def _with_marker(marker: str) -> list[int]:
    """pids of live processes whose argv holds `marker`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            cmd = open(f"/proc/{name}/cmdline", "rb").read()
            state = open(f"/proc/{name}/stat", "rb").read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmd and state != b"Z":
            found.append(int(name))
    return found


def _wait_for(predicate, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def _supervise(
    data_dir: Path, marker: str, *extra: str, env: dict | None = None, agents: str = "none", **popen
) -> subprocess.Popen:
    return subprocess.Popen(
        [
            *TRIAGE,
            "run",
            "--agents",
            agents,
            "--data-dir",
            str(data_dir),
            "--job-id",
            marker,
            "--max-restarts",
            "0",
            "--grace",
            "2",
            "--json",
            "--",
            sys.executable,
            str(WORKLOAD),
            marker,
            *extra,
        ],
        env=env or os.environ.copy(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )


@pytest.mark.slow
def test_kill_9_of_the_supervisor_leaves_no_process_of_the_job(tmp_path):
    marker = f"escape-{uuid.uuid4().hex[:8]}"
    sup = _supervise(tmp_path, marker, "60")
    try:
        # main, its child in a new session, and the env-less double-forked sleep
        assert _wait_for(lambda: len(_with_marker(marker)) >= 3, 30), _with_marker(marker)
        sup.send_signal(signal.SIGKILL)
        sup.wait()
        assert _wait_for(lambda: not _with_marker(marker), 8), (
            f"outlived the supervisor: {_with_marker(marker)}"
        )
    finally:
        for pid in _with_marker(marker):
            os.kill(pid, signal.SIGKILL)
        sup.kill()


@pytest.mark.slow
def test_the_node_agents_die_with_a_killed_supervisor(tmp_path):
    marker = f"agent-{uuid.uuid4().hex[:8]}"
    node = f"node-{marker}"  # in the agent's argv
    sup = _supervise(tmp_path, marker, "60", agents=node)
    try:
        assert _wait_for(lambda: _with_marker(node) and len(_with_marker(marker)) >= 4, 60), (
            _with_marker(node),
            sup.poll(),
        )
        sup.send_signal(signal.SIGKILL)
        sup.wait()
        assert _wait_for(lambda: not _with_marker(marker), 20), (
            f"outlived the supervisor: {_with_marker(marker)}"
        )
    finally:
        for pid in _with_marker(marker):
            os.kill(pid, signal.SIGKILL)
        sup.kill()


@pytest.mark.slow
def test_children_that_outlive_their_command_are_stopped_and_reported(tmp_path):
    """The command exits 1 after 2 s; its env-less daemon is still running: it is killed before
    the run ends (no next attempt beside it) and named in the attempt's orphans."""
    marker = f"outlive-{uuid.uuid4().hex[:8]}"
    sup = _supervise(tmp_path, marker, "2", "1")
    try:
        out, err = sup.communicate(timeout=60)
        report = json.loads(out)
        (attempt,) = report["attempts"]
        assert attempt["exit_code"] == 1
        assert any(marker in o for o in attempt["orphans"]), (attempt["orphans"], err[-2000:])
        assert isinstance(attempt["killed_pids"], list)  # `triage run --json` reports both
        assert not _with_marker(marker)
    finally:
        for pid in _with_marker(marker):
            os.kill(pid, signal.SIGKILL)
        sup.kill()


@pytest.mark.slow
def test_bystanders_with_the_jobs_variables_are_never_signalled(tmp_path):
    """TRIAGE_JOB_ID exported in the shell that starts `triage run`, and an unrelated process
    with TRIAGE_JOB_ID/TRIAGE_ATTEMPT/RANK of the job: neither is one of the job's processes."""
    marker = f"bystander-{uuid.uuid4().hex[:8]}"
    fake = {**os.environ, "TRIAGE_JOB_ID": marker, "TRIAGE_ATTEMPT": "0", "RANK": "0"}
    bystander = subprocess.Popen(["sleep", "120"], env=fake)
    run = " ".join(
        [
            *TRIAGE,
            "run",
            "--agents",
            "none",
            "--data-dir",
            str(tmp_path),
            "--job-id",
            marker,
            "--max-restarts",
            "0",
            "--grace",
            "2",
            "--",
            sys.executable,
            str(WORKLOAD),
            marker,
            "2",
            "1",
        ]
    )
    shell = subprocess.Popen(
        ["bash", "-c", f"{run} >/dev/null 2>&1; echo shell-survived"],
        env=fake,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        out, _ = shell.communicate(timeout=60)
        assert shell.returncode == 0 and "shell-survived" in out
        assert bystander.poll() is None, "an unrelated process with the job's variables was killed"
        assert not _with_marker(marker)
    finally:
        bystander.kill()
        shell.kill()
        for pid in _with_marker(marker):
            os.kill(pid, signal.SIGKILL)


_RANK_TREE = """\
import os, signal, subprocess, sys, time
out = sys.argv[1]
if len(sys.argv) > 2 and sys.argv[2] == "worker":  # a DataLoader worker: notes a SIGTERM
    def noted(signum, frame):
        open(os.path.join(out, f"worker-{os.getpid()}-sigterm"), "w").close()
    signal.signal(signal.SIGTERM, noted)
    time.sleep(60)
elif len(sys.argv) > 2:  # a rank, with one worker; SIGTERM ends it (default action)
    subprocess.Popen([sys.executable, __file__, out, "worker"])
    time.sleep(60)
else:  # the launcher: each rank in a session of its own, as torchrun starts them
    for r in (0, 1):
        subprocess.Popen([sys.executable, __file__, out, "rank"],
                         env={**os.environ, "RANK": str(r)}, start_new_session=True)
    time.sleep(60)
"""


def test_ranks_are_told_apart_from_their_workers_and_workers_get_no_sigterm(tmp_path):
    """A tree like torchrun's: two ranks (RANK=0, RANK=1), each with a worker that inherits
    RANK. The workers are no ranks, and `stop` leaves their end to their rank (SIGKILL for what
    is left after the grace), never a SIGTERM of its own."""
    script = tmp_path / "tree.py"
    script.write_text(_RANK_TREE)
    procs = AttemptProcesses([sys.executable, str(script), str(tmp_path)], dict(os.environ))
    try:
        assert _wait_for(lambda: len(procs.processes()) == 5, 20), procs.processes()
        found = procs.processes()
        ranks = procs.ranks()
        assert sorted(ranks) == [0, 1]
        workers = [p for p in found if p.rank is not None and p.pid not in ranks.values()]
        assert len(workers) == 2 and all(w.ppid == ranks[w.rank] for w in workers)
        assert {p.rank for p in found} == {None, 0, 1}  # the launcher has no RANK
        killed = procs.stop(1.0)
    finally:
        if procs.poll() is None:
            procs.stop(0.0)
    assert not procs.processes() and procs.poll() is not None
    assert sorted(killed) == sorted(w.pid for w in workers)  # left for SIGKILL, as promised
    assert not list(tmp_path.glob("worker-*-sigterm")), "stop sent a worker its own SIGTERM"


@pytest.mark.parametrize(("script", "status"), [("exit 3", 3), ("kill -TERM $$", 143)])
def test_the_keeper_passes_on_the_commands_exit_status(script, status):
    """As a shell would: the supervisor reads 143 (SIGTERM) as a preemption."""
    procs = AttemptProcesses(["sh", "-c", script], dict(os.environ))
    procs.launcher.wait(timeout=20)
    assert procs.poll() == status


def test_a_notice_reaches_the_command_and_leaves_it_to_act(tmp_path):
    """How a preemption notice goes to srun when its step cannot be signalled: the command in
    the keeper's group gets it and does what it does with it (srun passes it to its tasks);
    nothing is stopped for it."""
    ready = tmp_path / "ready"
    procs = AttemptProcesses(
        ["sh", "-c", f"trap 'exit 7' TERM; touch {ready}; while :; do sleep 0.1; done"], dict(os.environ)
    )
    deadline = time.monotonic() + 20
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    procs.notify(signal.SIGTERM)
    procs.launcher.wait(timeout=20)
    assert procs.poll() == 7  # its own handler's status: it acted on the notice


def test_no_next_attempt_starts_beside_a_process_that_withstood_sigkill(tmp_path, monkeypatch):
    """A rank stuck in the kernel (state D) survives SIGKILL: the supervisor must not start
    attempt 1 beside it, and says which process and what to do. Stubbed: a real D-state
    process needs a hung device or filesystem."""
    from triage.supervisor.config import SupervisorConfig
    from triage.supervisor.processes import JobProcess
    from triage.supervisor.supervisor import Supervisor

    stuck = JobProcess(pid=4_194_999, ppid=1, rank=0, cmdline="python train.py")
    monkeypatch.setattr(AttemptProcesses, "stop", lambda self, grace_s, rank_grace_s=None: [stuck.pid])
    monkeypatch.setattr(
        AttemptProcesses, "processes", lambda self: [stuck] if self.launcher.poll() is not None else []
    )
    cfg = SupervisorConfig(
        job_id="stuck", data_dir=str(tmp_path), agents="none", max_restarts=3, backoff=0.0, grace=1.0
    )
    report = Supervisor(cfg, [sys.executable, "-c", "raise SystemExit(1)"]).run()
    assert len(report.attempts) == 1 and report.status == "failed"
    assert "outlived SIGKILL (4194999): not starting attempt 1" in report.reason
    assert report.attempts[0].survivors == ["4194999 python train.py"]


_STUBBORN_RANK = """
import os, signal, subprocess, sys, time
out = sys.argv[1]
rank = subprocess.Popen(
    [
        sys.executable,
        "-c",
        "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "open(sys.argv[1], 'w').close(); time.sleep(60)",
        os.path.join(out, "rank-ready"),
    ],
    env={**os.environ, "RANK": "0"},
)
def on_term(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the keeper's group gets it too
    rank.wait()  # a launcher that reports once its rank is gone, as torchrun does
    open(os.path.join(out, "summary"), "w").write(str(rank.returncode))
    sys.exit(1)
signal.signal(signal.SIGTERM, on_term)
open(os.path.join(out, "started"), "w").close()
time.sleep(60)
"""


def test_a_failed_attempts_ranks_get_the_short_grace_and_the_launcher_its_report(tmp_path):
    """A rank that ignores SIGTERM gets SIGKILL after `rank_grace_s`; its launcher, which waits
    for it and then writes its summary, gets the whole grace for that and is not killed."""
    script = tmp_path / "launcher.py"
    script.write_text(_STUBBORN_RANK)
    procs = AttemptProcesses([sys.executable, str(script), str(tmp_path)], dict(os.environ))
    try:
        assert _wait_for(lambda: (tmp_path / "started").exists() and (tmp_path / "rank-ready").exists(), 20)
        (rank_pid,) = procs.ranks().values()
        began = time.monotonic()
        killed = procs.stop(30.0, rank_grace_s=0.5)
        took = time.monotonic() - began
    finally:
        if procs.poll() is None:
            procs.stop(0.0)
    assert killed == [rank_pid]
    assert (tmp_path / "summary").read_text() == str(-signal.SIGKILL)
    assert took < 30.0  # ended when all were gone, not at the whole grace


def test_a_dead_ranks_orphaned_worker_does_not_pass_for_the_rank(tmp_path):
    """Rank 0 is SIGKILLed; its DataLoader worker (RANK=0 too) lives on, orphaned to a subreaper
    of ours, for the seconds it takes to notice. The rank is gone at once all the same."""
    script = tmp_path / "tree.py"
    script.write_text(_RANK_TREE)
    procs = AttemptProcesses([sys.executable, str(script), str(tmp_path)], dict(os.environ))
    try:
        assert _wait_for(lambda: len(procs.processes()) == 5, 20), procs.processes()
        ranks = procs.ranks()
        (worker,) = [p.pid for p in procs.processes() if p.rank == 0 and p.pid != ranks[0]]
        os.kill(ranks[0], signal.SIGKILL)
        assert _wait_for(lambda: 0 not in procs.ranks(), 5)
        assert worker in [p.pid for p in procs.processes()]  # still there, and no rank
        assert sorted(procs.ranks()) == [1]
    finally:
        procs.stop(0.0)


_LAYERED_LAUNCHER = """
import os, signal, subprocess, sys, time
out, role = sys.argv[1], sys.argv[2]
def count(name):
    def on_term(signum, frame):
        with open(os.path.join(out, name), "a") as fh:
            fh.write("TERM\\n")
    return on_term
if role == "wrapper":  # `triage train`: in the keeper's group, passes signals on to its node
    node = subprocess.Popen([sys.executable, __file__, out, "node"], start_new_session=True)
    def forward(signum, frame):
        count("wrapper")(signum, frame)
        node.send_signal(signum)
    signal.signal(signal.SIGTERM, forward)
    node.wait()
elif role == "node":  # torchrun: a session of its own, one rank
    signal.signal(signal.SIGTERM, count("node"))
    rank = subprocess.Popen([sys.executable, __file__, out, "rank"], env={**os.environ, "RANK": "0"})
    rank.wait()
else:
    signal.signal(signal.SIGTERM, count("rank"))
    open(os.path.join(out, "rank-ready"), "w").close()
    time.sleep(60)
"""


def test_a_launcher_below_a_forwarding_wrapper_gets_one_sigterm(tmp_path):
    """`triage train` passes SIGTERM on to its torchruns, each in a session of its own; a
    torchrun that gets it a second time raises out of its own shutdown (and once hung past the
    grace without its report). So the wrapper (in the keeper's group), the node launcher below
    it and the rank get exactly one SIGTERM each."""
    script = tmp_path / "wrapper.py"
    script.write_text(_LAYERED_LAUNCHER)
    procs = AttemptProcesses([sys.executable, str(script), str(tmp_path), "wrapper"], dict(os.environ))
    try:
        assert _wait_for((tmp_path / "rank-ready").exists, 20)
        assert _wait_for(lambda: sorted(procs.ranks()) == [0], 5)
        procs.stop(3.0, rank_grace_s=1.0)
    finally:
        if procs.poll() is None:
            procs.stop(0.0)
    got = {name: (tmp_path / name).read_text().count("TERM") for name in ("wrapper", "node", "rank")}
    assert got == {"wrapper": 1, "node": 1, "rank": 1}
