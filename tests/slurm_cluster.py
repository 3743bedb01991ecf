"""A real 2-node Slurm cluster on this machine for the tests: munged, slurmctld and two slurmd
(`node0`, `node1`) on loopback, in a private directory, with private ports and socket.

Debian's slurm-wlm 22.05 is built with multiple-slurmd support, so both nodes run on one host
(NodeAddr 127.0.0.1, a port each). No systemd, cgroups or accounting database. The traps, as
`../shared/tools/slurm-local-cluster.sh` found them: the munge socket's directory must be
o+x; `cred_expire` is also the least time before a requeued job may start again (>= 5);
`SlurmdParameters=config_overrides` makes slurmd trust `CPUs=` over the hardware; a drained
node stays drained until resumed. Each job's prolog runs `etc/gate.sh` when a test put one
there (the health gate), else does nothing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from triage.ports import free_port

NODES = ("node0", "node1")
_BINARIES = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "scontrol", "srun", "sinfo", "squeue")
INSTALL_HINT = "apt-get install slurmd slurmctld slurm-client munge"


def missing_binaries() -> list[str]:
    return [b for b in _BINARIES if shutil.which(b) is None]


@dataclass
class SlurmCluster:
    root: Path
    env: dict[str, str]

    def run(self, *argv: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(argv), env=self.env, capture_output=True, text=True, timeout=timeout, check=check
        )

    def sbatch(self, script: str, *args: str) -> str:
        path = self.root / "jobs" / f"job-{time.monotonic_ns()}.sh"
        path.write_text(script)
        return self.run("sbatch", "--parsable", *args, str(path)).stdout.strip().split(";")[0]

    def job_field(self, job: str, field: str) -> str | None:
        out = self.run("scontrol", "show", "job", job, "-o", check=False).stdout
        for part in out.split():
            if part.startswith(f"{field}="):
                return part.split("=", 1)[1]
        return None

    def wait_job(self, job: str, states: tuple[str, ...], timeout: float) -> str:
        """The job's state once it is one of `states`; fails the test with the job's record
        and the slurmctld log's tail otherwise."""
        deadline = time.monotonic() + timeout
        state = None
        while time.monotonic() < deadline:
            state = self.job_field(job, "JobState")
            if state in states:
                return state
            time.sleep(0.5)
        log = (self.root / "log" / "slurmctld.log").read_text()[-3000:]
        job_record = self.run("scontrol", "show", "job", job, check=False).stdout
        pytest.fail(f"job {job} is {state}, not {states}, after {timeout} s\n{job_record}\n{log}")

    def node_state(self, node: str) -> tuple[str, str]:
        """(state, reason) as sinfo shows them."""
        out = self.run("sinfo", "-h", "-N", "-n", node, "-o", "%T|%E").stdout.strip().splitlines()
        state, _, reason = out[0].partition("|")
        return state, reason

    def wait_until(self, what: str, ok: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ok():
                return
            time.sleep(0.3)
        pytest.fail(f"timed out after {timeout} s waiting for {what}")

    def resume_all(self) -> None:
        for node in NODES:
            state, _ = self.node_state(node)
            if state.startswith("drain") or state == "down":
                self.run("scontrol", "update", f"nodename={node}", "state=resume", check=False)
        (self.root / "etc" / "gate.sh").unlink(missing_ok=True)

    def set_gate(self, script: str) -> None:
        """The prolog's health gate for the jobs that start from now on."""
        gate = self.root / "etc" / "gate.sh"
        gate.write_text(script)
        gate.chmod(0o755)


def _config(root: Path, ctld_port: int, cpus: int) -> str:
    lines = [
        "ClusterName=triage-test",
        "SlurmctldHost=localhost(127.0.0.1)",
        f"SlurmctldPort={ctld_port}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={root}/run/munge.sock,cred_expire=5",
        f"StateSaveLocation={root}/state",
        f"SlurmdSpoolDir={root}/spool/slurmd-%n",
        f"SlurmctldPidFile={root}/run/slurmctld.pid",
        f"SlurmdPidFile={root}/run/slurmd-%n.pid",
        f"SlurmctldLogFile={root}/log/slurmctld.log",
        f"SlurmdLogFile={root}/log/slurmd-%n.log",
        f"PlugStackConfig={root}/etc/plugstack.conf",
        "MailProg=/bin/true",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobContainerType=job_container/none",
        "SwitchType=switch/none",
        "MpiDefault=none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        f"Prolog={root}/etc/prolog.sh",
        "PrologFlags=Alloc",
        "ReturnToService=2",
        "SlurmdParameters=config_overrides",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=30",
        "MessageTimeout=10",
        "InactiveLimit=0",
        "KillWait=10",
        "MinJobAge=600",
        "SchedulerParameters=sched_interval=2",
    ]
    for node in NODES:
        lines.append(
            f"NodeName={node} NodeHostname=localhost NodeAddr=127.0.0.1 Port={free_port()} "
            f"CPUs={cpus} State=UNKNOWN"
        )
    lines.append(f"PartitionName=debug Nodes={','.join(NODES)} Default=YES MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


def _wait(what: str, ok: Callable[[], bool], timeout: float, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ok():
            return
        time.sleep(0.2)
    tail = log.read_text()[-2000:] if log.exists() else "(no log)"
    raise RuntimeError(f"Slurm test cluster: {what} not up after {timeout} s; {log}:\n{tail}")


def _quiet(argv: list[str], env: dict[str, str]) -> bool:
    return subprocess.run(argv, env=env, capture_output=True, timeout=20, check=False).returncode == 0


def _pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    missing = missing_binaries()
    if missing:
        why = f"Slurm is not installed here (missing {', '.join(missing)}): {INSTALL_HINT}"
        if os.environ.get("CI"):  # .ci/run installs it: its absence there is a broken CI
            pytest.fail(why)
        pytest.skip(why)
    if os.geteuid() != 0:
        pytest.skip("the test Slurm cluster runs its daemons as root (SlurmUser=root)")
    # not under pytest's tmp dirs: munged refuses a socket whose every parent is not o+x
    root = Path(tempfile.mkdtemp(prefix="triage-slurm-"))
    root.chmod(0o755)
    for sub in ("etc", "state", "spool", "log", "jobs", "run", "munge"):
        (root / sub).mkdir()
    (root / "munge").chmod(0o700)
    (root / "run").chmod(0o755)
    env = {**os.environ, "SLURM_CONF": str(root / "etc" / "slurm.conf")}
    # the jobs find this interpreter's `triage` first; ranks talk over loopback
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}"
    env["GLOO_SOCKET_IFNAME"] = "lo"
    subprocess.run(
        ["mungekey", "--create", f"--keyfile={root}/munge/munge.key"], check=True, capture_output=True
    )
    (root / "munge" / "munge.key").chmod(0o600)
    (root / "etc" / "slurm.conf").write_text(_config(root, free_port(), cpus=4))
    (root / "etc" / "plugstack.conf").write_text("")
    prolog = root / "etc" / "prolog.sh"
    prolog.write_text(f'#!/bin/sh\n[ -x "{root}/etc/gate.sh" ] && exec "{root}/etc/gate.sh"\nexit 0\n')
    prolog.chmod(0o755)
    sock = f"{root}/run/munge.sock"
    started: list[Path] = []
    try:
        subprocess.run(
            [
                "munged",
                f"--key-file={root}/munge/munge.key",
                f"--socket={sock}",
                f"--pid-file={root}/run/munged.pid",
                f"--log-file={root}/munge/munged.log",
                f"--seed-file={root}/munge/munged.seed",
            ],
            check=True,
            capture_output=True,
        )
        started.append(root / "run" / "munged.pid")
        _wait(
            "munged",
            lambda: _quiet(["sh", "-c", f"munge -S {sock} -n | unmunge -S {sock}"], env),
            10,
            root / "munge" / "munged.log",
        )
        subprocess.run(
            ["slurmctld", "-f", env["SLURM_CONF"]], env=env, cwd=root, check=True, capture_output=True
        )
        started.append(root / "run" / "slurmctld.pid")
        _wait("slurmctld", lambda: _quiet(["scontrol", "ping"], env), 20, root / "log" / "slurmctld.log")
        for node in NODES:
            subprocess.run(
                ["slurmd", "-f", env["SLURM_CONF"], "-N", node],
                env=env,
                cwd=root,
                check=True,
                capture_output=True,
            )
            started.append(root / "run" / f"slurmd-{node}.pid")

        def idle() -> bool:
            out = subprocess.run(
                ["sinfo", "-h", "-N", "-t", "idle", "-o", "%N"],
                env=env,
                capture_output=True,
                text=True,
                check=False,
            ).stdout.split()
            return set(out) == set(NODES)

        _wait("both slurmd idle", idle, 60, root / "log" / "slurmctld.log")
        yield SlurmCluster(root, env)
    finally:
        subprocess.run(
            ["scancel", "--full", "--quiet", "--user=root"], env=env, capture_output=True, check=False
        )
        for pid_file in reversed(started):
            pid = _pid(pid_file)
            if pid is None:
                continue
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            for _ in range(50):
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)
            else:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        shutil.rmtree(root, ignore_errors=True)
