"""The pieces of `triage run --launcher slurm` that need no cluster: what each node runs, the
srun step, the continuation a requeued job reads, and the refusals outside an allocation."""

from __future__ import annotations

import itertools
import signal

import pytest

from triage.config import ConfigError
from triage.supervisor.slurm import Allocation, Continuation, SlurmError, requeue, step_command
from triage.supervisor.slurm_node import node_command

KW = dict(nnodes=3, node_rank=2, endpoint="10.0.0.5:29500", local_addr="10.0.0.7", rdzv_id="42.3")


def _flags(cmd: list[str]) -> dict[str, str]:
    return {a: b for a, b in itertools.pairwise(cmd) if a.startswith("--")}


def test_torchrun_gets_the_multi_node_flags_it_lacks_before_the_script():
    cmd = node_command(["torchrun", "--nproc-per-node", "8", "--standalone", "train.py", "--lr", "3"], **KW)
    script = cmd.index("train.py")
    assert cmd[script:] == ["train.py", "--lr", "3"]  # the script's own arguments untouched
    assert "--standalone" not in cmd  # it would make every node a job of its own
    f = _flags(cmd[:script])
    assert f["--nnodes"] == "3" and f["--node-rank"] == "2" and f["--rdzv-backend"] == "c10d"
    assert f["--rdzv-endpoint"] == "10.0.0.5:29500" and f["--rdzv-id"] == "42.3"
    assert f["--local-addr"] == "10.0.0.7" and f["--rdzv-conf"] == "is_host=false"


def test_what_the_command_already_says_wins_and_python_m_counts_as_torchrun():
    cmd = node_command(
        ["/usr/bin/python3", "-m", "torch.distributed.run", "--nnodes=1:4", "--rdzv-id", "mine", "t.py"],
        **{**KW, "node_rank": 0},
    )
    f = _flags(cmd)
    assert "--nnodes" not in f and "--nnodes=1:4" in cmd  # an elastic range the user chose
    assert f["--rdzv-id"] == "mine" and f["--rdzv-conf"] == "is_host=true"
    assert cmd.index("--node-rank") < cmd.index("t.py")


def test_triage_train_gets_its_node_flags_and_other_commands_run_as_given():
    train = node_command(["triage", "train", "--steps", "5"], **KW)
    assert train[-6:] == ["--nnodes", "3", "--node-rank", "2", "--rdzv-endpoint", "10.0.0.5:29500"]
    assert node_command(["python", "-m", "triage.cli", "train"], **KW)[4:6] == ["--nnodes", "3"]
    assert node_command(["bash", "my_launcher.sh"], **KW) == ["bash", "my_launcher.sh"]


def test_the_step_runs_one_task_per_node_on_exactly_the_nodes_given():
    cmd = step_command(["triage", "train"], nodes=["node0", "node2"], name="triage-j-a1", endpoint_port=29511)
    assert cmd[0] == "srun"
    f = {a.split("=")[0]: a.split("=", 1)[1] for a in cmd if a.startswith("--") and "=" in a}
    assert (f["--nodes"], f["--ntasks"], f["--ntasks-per-node"]) == ("2", "2", "1")
    assert f["--nodelist"] == "node0,node2" and f["--job-name"] == "triage-j-a1"
    shim = cmd.index("triage.supervisor.slurm_node")
    assert cmd[shim + 1 : shim + 3] == ["--port", "29511"] and cmd[-2:] == ["triage", "train"]


def test_a_continuation_round_trips_and_a_damaged_one_says_what_to_do(tmp_path):
    c = Continuation("job", "run-1", 123.0, 2, ["node1"])
    c.save(tmp_path, "77")
    assert Continuation.load(tmp_path, "77") == c
    assert Continuation.load(tmp_path, "78") is None
    Continuation.path(tmp_path, "79").write_text("{not json")
    with pytest.raises(ConfigError, match="delete it"):
        Continuation.load(tmp_path, "79")


def test_outside_an_allocation_the_slurm_launcher_is_refused(monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.delenv("SLURM_JOB_NODELIST", raising=False)
    monkeypatch.delenv("SLURM_NODELIST", raising=False)
    with pytest.raises(ConfigError, match="inside a Slurm allocation"):
        Allocation.from_env()


def test_a_slurm_that_does_not_answer_is_a_clear_error(monkeypatch, tmp_path):
    scontrol = tmp_path / "scontrol"
    scontrol.write_text(
        "#!/bin/sh\necho 'slurm_load_partitions: Unable to contact slurm controller' >&2\nexit 1\n"
    )
    scontrol.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    monkeypatch.setenv("SLURM_JOB_ID", "5")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "node[0-1]")
    with pytest.raises(ConfigError, match="Unable to contact slurm controller"):
        Allocation.from_env()


def _fake_scontrol(tmp_path, monkeypatch, first_answer: str) -> list[str]:
    """An scontrol that answers `first_answer` (and exit 1) once, then succeeds; the calls it got."""
    log, once = tmp_path / "calls", tmp_path / "answered"
    scontrol = tmp_path / "scontrol"
    scontrol.write_text(
        f'#!/bin/sh\necho "$*" >> {log}\n'
        f'if [ ! -e {once} ]; then touch {once}; echo "{first_answer}" >&2; exit 1; fi\n'
    )
    scontrol.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    return log


def test_a_requeue_goes_through_a_busy_controller_and_stops_at_a_real_refusal(monkeypatch, tmp_path):
    """A busy slurmctld's `Socket timed out` is tried again (a failed requeue ends a run that
    was to go on); a refusal that means it (no such job) is not."""
    previous = signal.getsignal(signal.SIGTERM)  # requeue() ignores SIGTERM, as the batch must
    try:
        log = _fake_scontrol(
            tmp_path, monkeypatch, "scontrol: error: slurm_requeue2: Socket timed out on send/recv operation"
        )
        requeue("42", ["node1"], pause_s=0.0)
        assert log.read_text().splitlines() == [
            "requeuehold 42",
            "requeuehold 42",
            "update jobid=42 ExcNodeList=node1",
            "release 42",
        ]
        other = tmp_path / "other"
        other.mkdir()
        log = _fake_scontrol(other, monkeypatch, "scontrol: error: Invalid job id specified")
        with pytest.raises(SlurmError, match="Invalid job id"):
            requeue("42", [], pause_s=0.0)
        assert log.read_text().splitlines() == ["requeue 42"]
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.parametrize(
    ("shown", "kind"),
    [
        # `scancel J` (the states from a real 22.05 cluster: tests/test_slurm.py has the run)
        ("JobState=COMPLETING Reason=None PreemptTime=None", "cancelled"),
        ("JobState=CANCELLED Reason=None PreemptTime=None", "cancelled"),
        # the time limit, with no --signal before it
        ("JobState=COMPLETING Reason=TimeLimit PreemptTime=None", "time_limit"),
        ("JobState=TIMEOUT Reason=TimeLimit PreemptTime=None", "time_limit"),
        # `--signal=B:TERM@120`, `scancel --signal=TERM --batch`: the job runs on
        ("JobState=RUNNING Reason=None PreemptTime=None", "notice"),
        # COMPLETING hides a preemption and a lost node: both are requeued as before
        ("JobState=COMPLETING Reason=None PreemptTime=2026-12-07T20:00:00", "notice"),
        ("JobState=COMPLETING Reason=NodeDown PreemptTime=None", "notice"),
        ("JobState=PREEMPTED Reason=None PreemptTime=2026-12-07T20:00:00", "notice"),
    ],
)
def test_why_slurm_sent_sigterm_is_read_from_the_controller(monkeypatch, tmp_path, shown, kind):
    from triage.supervisor.slurm import ending

    scontrol = tmp_path / "scontrol"
    scontrol.write_text(f'#!/bin/sh\necho "JobId=42 JobName=train UserId=me(0) {shown} Restarts=0"\n')
    scontrol.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    read = ending("42")
    assert read.kind == kind, read
    assert {"cancelled": "cancelled in Slurm", "time_limit": "time limit", "notice": "lets it run on"}[
        kind
    ] in (read.describe())
