"""Slurm as the engine that carries out the supervisor's decisions (`triage run --launcher slurm`).

The supervisor runs once per job, inside the allocation (the batch script calls `triage run`);
each attempt is one `srun` step with one task per node, each task a `triage.supervisor.
slurm_node` that starts the node's torchrun with the rendezvous on the step's first node and
TRIAGE_NODE from SLURMD_NODENAME. A node left out is left out of the next step
(`srun --nodelist` of the allocation's other nodes: fewer nodes, DCP reshards as ever); when
too few are left, or the job is preempted, the job is requeued (`scontrol requeue`, the nodes
left out in its ExcNodeList) and the next incarnation of the batch script continues the same
run at the next attempt, from what this one wrote under DATA_DIR/slurm/. A quarantined node is
drained in Slurm only with `--slurm-drain` (a cluster-wide act, so off by default, logged either
way); `triage nodes clear` resumes a node that Triage drained.

Everything here is a thin call of Slurm's own commands (srun, scontrol, squeue, sinfo), so what
Triage does can be read and redone by hand from the log.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from triage.config import ConfigError

log = logging.getLogger(__name__)

#: How long one Slurm command may take before it counts as failed.
_TIMEOUT_S = 30.0
#: A drain reason Triage wrote starts with this (the supervisor's), or with the health gate's
#: line (`deploy/slurm/triage-prolog.sh`), so `triage nodes clear` resumes only those.
DRAIN_PREFIX = "triage:"
_TRIAGE_REASONS = (DRAIN_PREFIX, "triage health-check:")


class SlurmError(RuntimeError):
    """A Slurm command failed; the message has its output."""


def _run(argv: Sequence[str]) -> str:
    try:
        out = subprocess.run(list(argv), capture_output=True, text=True, timeout=_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SlurmError(f"`{' '.join(argv)}` failed: {exc}") from None
    if out.returncode != 0:
        raise SlurmError(
            f"`{' '.join(argv)}` exited {out.returncode}: {(out.stderr or out.stdout).strip()[:500]}"
        )
    return out.stdout


#: What Slurm's commands say on a machine that has them but belongs to no cluster.
NOT_CONFIGURED = "Could not establish a configuration source"

#: What a busy or restarting slurmctld answers; the same call a moment later goes through.
_TRANSIENT = ("Socket timed out", "Unable to contact slurm controller", "Resource temporarily unavailable")


def _run_retrying(argv: Sequence[str], tries: int = 3, pause_s: float = 1.0) -> str:
    """`_run`, tried again after a controller's transient refusal: a requeue that fails leaves
    a run that was to go on ended instead."""
    for _ in range(tries - 1):
        try:
            return _run(argv)
        except SlurmError as exc:
            if not any(t in str(exc) for t in _TRANSIENT):
                raise
        time.sleep(pause_s)
    return _run(argv)


def available() -> bool:
    return shutil.which("scontrol") is not None


def hostnames(nodelist: str) -> list[str]:
    """`node[0-2],gpu7` -> ['node0', 'node1', 'node2', 'gpu7'], by Slurm's own expansion."""
    return _run(["scontrol", "show", "hostnames", nodelist]).split()


def node_address(node: str) -> str:
    """The address Slurm reaches `node` at (NodeAddr), for the rendezvous endpoint."""
    for part in _run(["scontrol", "show", "node", node, "-o"]).split():
        if part.startswith("NodeAddr="):
            return part.split("=", 1)[1]
    return node


@dataclass(frozen=True)
class Allocation:
    """The job's allocation as its batch script sees it."""

    job_id: str
    nodes: tuple[str, ...]
    restart_count: int

    @classmethod
    def from_env(cls) -> Allocation:
        job = os.environ.get("SLURM_JOB_ID")
        nodelist = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST")
        if not job or not nodelist:
            raise ConfigError(
                "--launcher slurm runs inside a Slurm allocation (an sbatch script or salloc), "
                "where SLURM_JOB_ID and SLURM_JOB_NODELIST are set; they are not here"
            )
        if not available():
            raise ConfigError("--launcher slurm needs Slurm's commands (scontrol, srun) on PATH")
        try:
            nodes = tuple(hostnames(nodelist))
        except SlurmError as exc:
            raise ConfigError(f"cannot read this allocation's nodes from Slurm: {exc}") from None
        return cls(job, nodes, int(os.environ.get("SLURM_RESTART_COUNT") or 0))


def step_command(
    command: Sequence[str], *, nodes: Sequence[str], name: str, endpoint_port: int, overlap: bool = False
) -> list[str]:
    """`srun` running `command` once per node of `nodes` through the per-node shim."""
    return [
        "srun",
        f"--nodes={len(nodes)}",
        f"--ntasks={len(nodes)}",
        "--ntasks-per-node=1",
        f"--nodelist={','.join(nodes)}",
        f"--job-name={name}",
        "--kill-on-bad-exit=0",  # the supervisor decides what a rank's exit means
        *(["--overlap"] if overlap else []),
        "--",
        sys.executable,
        "-m",
        "triage.supervisor.slurm_node",
        "--port",
        str(endpoint_port),
        "--",
        *command,
    ]


def agent_command(agent_argv: Sequence[str], node: str) -> list[str]:
    """The node's agent as a step of its own beside the job's (`--overlap`), on that node."""
    return [
        "srun",
        "--nodes=1",
        "--ntasks=1",
        f"--nodelist={node}",
        "--overlap",
        f"--job-name=triage-agent-{node}",
        "--",
        *agent_argv,
    ]


def cancel_steps(job_id: str, name: str, signal: str = "KILL") -> list[str]:
    """Signal the job's steps called `name`; the step ids signalled (a step that ended between
    the listing and the signal is no error: it is what the signal was for)."""
    out = _run(["squeue", "-h", "-s", "-j", job_id, "-o", "%i %j"])
    steps = [line.split()[0] for line in out.splitlines() if line.split()[1:2] == [name]]
    for step in steps:
        try:
            _run(["scancel", f"--signal={signal}", step] if signal != "KILL" else ["scancel", step])
        except SlurmError as exc:
            if "Invalid job id" not in str(exc) and "already completing or completed" not in str(exc):
                raise
    return steps


@dataclass(frozen=True)
class Ending:
    """Why Slurm sent the job SIGTERM, as its controller tells it: the job runs on past a
    notice (`--signal=B:TERM@N` before the time limit, `scancel --signal=TERM`: it can
    checkpoint and be requeued), or Slurm is ending it now (its state COMPLETING): at its
    time limit (Reason=TimeLimit; Slurm requeues no job past its limit), or cancelled
    (`scancel`, an administrator), which Triage must not undo. A preemption (PREEMPTED) is
    requeued as ever."""

    kind: str  # "notice", "time_limit" or "cancelled"
    state: str
    reason: str

    def describe(self) -> str:
        said = f"JobState={self.state} Reason={self.reason}"
        if self.kind == "time_limit":
            return f"Slurm's time limit ended the job ({said})"
        if self.kind == "cancelled":
            return f"the job was cancelled in Slurm ({said}: scancel, or an administrator)"
        return f"Slurm sent the job SIGTERM and lets it run on ({said}: --signal before its time limit, or a preemption)"


def ending(job_id: str) -> Ending:
    """Why the job is being signalled, read from `scontrol show job` at the notice."""
    fields = dict(
        part.split("=", 1) for part in _run(["scontrol", "show", "job", "-o", job_id]).split() if "=" in part
    )
    state, reason = fields.get("JobState", "?"), fields.get("Reason", "None")
    preempted = fields.get("PreemptTime", "None") not in ("None", "Unknown", "")
    if state == "TIMEOUT" or reason == "TimeLimit":
        return Ending("time_limit", state, reason)
    # COMPLETING hides the state under it (CANCELLED, PREEMPTED, NODE_FAIL): a preemption
    # shows its PreemptTime, a lost node its Reason; what is left is a cancel
    if state in ("COMPLETING", "CANCELLED", "COMPLETED", "FAILED") and not preempted and reason != "NodeDown":
        return Ending("cancelled", state, reason)
    return Ending("notice", state, reason)  # RUNNING, preempted, a node lost: to be requeued


def requeue(job_id: str, exclude: Sequence[str], pause_s: float = 1.0) -> None:
    """Put the job back in the queue, never again on the nodes in `exclude`. Ends this batch
    script (SIGTERM, SIGKILL after KillWait): call it last. Slurm takes a new ExcNodeList only
    from a job that is not running, so the job is requeued held, given the list, released:
    three quick calls, done long before KillWait is up."""
    if not exclude:
        _run_retrying(["scontrol", "requeue", job_id], pause_s=pause_s)
        return
    # the requeue SIGTERMs this batch script at once: live through it to release the job
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _run_retrying(["scontrol", "requeuehold", job_id], pause_s=pause_s)
    try:
        _run_retrying(
            ["scontrol", "update", f"jobid={job_id}", f"ExcNodeList={','.join(exclude)}"], pause_s=pause_s
        )
    finally:
        _run_retrying(["scontrol", "release", job_id], pause_s=pause_s)


def drain(node: str, reason: str) -> bool:
    _run(["scontrol", "update", f"nodename={node}", "state=drain", f"reason={DRAIN_PREFIX} {reason}"[:250]])
    return True


def drained_by_triage(node: str) -> bool:
    """Whether Slurm holds `node` drained (or draining) with a reason Triage wrote."""
    out = _run(["sinfo", "-h", "-N", "-n", node, "-o", "%T|%E"]).strip().splitlines()
    return any(
        line.split("|", 1)[0].startswith("drain") and line.split("|", 1)[1].startswith(_TRIAGE_REASONS)
        for line in out
        if "|" in line
    )


def resume(node: str) -> None:
    _run(["scontrol", "update", f"nodename={node}", "state=resume"])


@dataclass
class Continuation:
    """What the next incarnation of a requeued job needs to go on with the same run."""

    job_id: str
    run_id: str
    start_time: float
    next_attempt: int
    excluded_nodes: list[str] = field(default_factory=list)

    @staticmethod
    def path(data_dir: Path, slurm_job_id: str) -> Path:
        return data_dir / "slurm" / f"job-{slurm_job_id}.json"

    def save(self, data_dir: Path, slurm_job_id: str) -> None:
        path = self.path(data_dir, slurm_job_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self)))
        os.replace(tmp, path)

    @classmethod
    def load(cls, data_dir: Path, slurm_job_id: str) -> Continuation | None:
        try:
            return cls(**json.loads(cls.path(data_dir, slurm_job_id).read_text()))
        except FileNotFoundError:
            return None
        except (ValueError, TypeError) as exc:
            raise ConfigError(
                f"{cls.path(data_dir, slurm_job_id)} is damaged ({exc}); delete it to start the run anew"
            ) from None
