"""The job's processes, found by the identity the supervisor gave them, and stopped for good.

Every process of an attempt inherits TRIAGE_JOB_ID and TRIAGE_ATTEMPT from the launcher the
supervisor starts, whatever process group or session it moved to (torchrun starts each node in
its own session), so /proc's environ finds them all: ranks to watch, stragglers to kill, and
orphans to report. A rank is a process with torchrun's RANK whose parent is not a rank itself
(DataLoader workers inherit RANK too).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass

from triage.config import ENV_ATTEMPT, ENV_JOB_ID

_PROC = "/proc"


@dataclass(frozen=True)
class JobProcess:
    pid: int
    ppid: int
    attempt: int | None
    rank: int | None
    cmdline: str


def _environ(pid: int) -> dict[str, str] | None:
    try:
        raw = open(f"{_PROC}/{pid}/environ", "rb").read()
    except OSError:  # gone, or not ours to read
        return None
    env = {}
    for item in raw.split(b"\0"):
        key, eq, value = item.partition(b"=")
        if eq:
            env[key.decode(errors="replace")] = value.decode(errors="replace")
    return env


def _ppid_and_cmdline(pid: int) -> tuple[int, str] | None:
    try:
        stat = open(f"{_PROC}/{pid}/stat").read()
        cmd = open(f"{_PROC}/{pid}/cmdline", "rb").read()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] == "Z":  # a zombie has exited; its parent has yet to reap it
        return None
    return int(fields[1]), cmd.replace(b"\0", b" ").decode(errors="replace").strip()


def job_processes(job_id: str, attempt: int | None = None) -> list[JobProcess]:
    """Live processes carrying this job id (and attempt, when given), this process excluded."""
    found = []
    me = os.getpid()
    for name in os.listdir(_PROC):
        if not name.isdigit() or int(name) == me:
            continue
        pid = int(name)
        env = _environ(pid)
        if env is None or env.get(ENV_JOB_ID) != job_id:
            continue
        raw_attempt = env.get(ENV_ATTEMPT, "")
        proc_attempt = int(raw_attempt) if raw_attempt.isdigit() else None
        if attempt is not None and proc_attempt != attempt:
            continue
        info = _ppid_and_cmdline(pid)
        if info is None:
            continue
        rank = env.get("RANK", "")
        found.append(JobProcess(pid, info[0], proc_attempt, int(rank) if rank.isdigit() else None,
                                info[1]))
    return found


def rank_processes(procs: list[JobProcess]) -> dict[int, int]:
    """rank -> pid of the rank's own process (not its DataLoader workers)."""
    ranked = {p.pid: p for p in procs if p.rank is not None}
    return {p.rank: p.pid for p in ranked.values()
            if p.ppid not in ranked or ranked[p.ppid].rank != p.rank}


def _signal_all(pids: list[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass


def _terminate_targets(procs: list[JobProcess]) -> list[int]:
    """Every process of the attempt but the ranks' children: a DataLoader worker that a SIGTERM
    ends first makes its rank report a data-pipeline error that never happened."""
    ranks = {p.pid for p in procs if p.rank is not None}
    return [p.pid for p in procs if p.ppid not in ranks]


def stop_job(launcher: subprocess.Popen, job_id: str, attempt: int, grace_s: float) -> list[int]:
    """SIGTERM to the launcher's process group and to the attempt's launchers and ranks, SIGKILL
    to whatever still runs after `grace_s`; returns the pids that needed SIGKILL. Waits until no
    process of the attempt is left (a SIGKILLed process is gone within moments)."""
    try:
        os.killpg(launcher.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    _signal_all(_terminate_targets(job_processes(job_id, attempt)), signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and (launcher.poll() is None
                                           or job_processes(job_id, attempt)):
        time.sleep(0.2)
    killed = [p.pid for p in job_processes(job_id, attempt)]
    if launcher.poll() is None:
        killed.append(launcher.pid)
        try:
            os.killpg(launcher.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _signal_all(killed, signal.SIGKILL)
    launcher.wait()
    deadline = time.monotonic() + 10
    while job_processes(job_id, attempt) and time.monotonic() < deadline:
        time.sleep(0.1)
    return killed
