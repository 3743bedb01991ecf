"""An attempt's processes: exactly those the supervisor started, found by ancestry, not by name.

Each attempt runs under a keeper (`triage.supervisor.keeper`), a child subreaper: whatever its
descendants do (a new session, a double fork, an environment wiped with `execve(..., {})`),
they stay below it in the process tree, or, once the keeper has exited, are reparented to the
supervisor, which is a subreaper too. So the attempt's processes are the keeper's subtree plus
the supervisor's own reparented children that started after the attempt did; every one is
checked for the supervisor's uid, and the supervisor and its ancestors are never among them.
Nothing is found by environment variables: a process elsewhere on the machine that happens to
carry `TRIAGE_JOB_ID` (the shell that started the supervisor, another user's job) is never
signalled. Environment is read only to label ranks (`RANK`).

This needs neither systemd nor a writable cgroup: prctl is enough, on any Linux since 3.4.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from triage.config import ENV_NODE
from triage.supervisor.keeper import PR_SET_CHILD_SUBREAPER, prctl

_PROC = "/proc"
#: How long `stop` waits for processes that got SIGKILL to be gone.
_KILL_WAIT_S = 10.0
#: How often `stop` looks whether the processes are gone.
_STOP_POLL_S = 0.05


def become_subreaper() -> None:
    """Orphaned descendants of this process are reparented to it instead of to init."""
    prctl(PR_SET_CHILD_SUBREAPER, 1)


@dataclass(frozen=True)
class ProcInfo:
    pid: int
    ppid: int
    state: str
    start_ticks: int  # clock ticks after boot (/proc/<pid>/stat field 22)
    uid: int


@dataclass(frozen=True)
class ObservedRank:
    """A rank process as the supervisor saw it from outside: enough to place a rank whose
    script reports nothing itself (no hooks)."""

    rank: int
    pid: int
    local_rank: int | None
    world_size: int | None
    node: str | None  # TRIAGE_NODE where the launcher set one (simulated nodes)
    first_seen: float


@dataclass(frozen=True)
class JobProcess:
    pid: int
    ppid: int
    rank: int | None  # torchrun's RANK, for the rank processes and their workers
    cmdline: str


def _stat(pid: int) -> ProcInfo | None:
    try:
        with open(f"{_PROC}/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        uid = os.stat(f"{_PROC}/{pid}").st_uid
    except OSError:
        return None
    return ProcInfo(pid, int(fields[1]), fields[0].decode(), int(fields[19]), uid)


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def _table() -> dict[int, ProcInfo]:
    out = {}
    for name in os.listdir(_PROC):
        if name.isdigit() and (info := _stat(int(name))) is not None:
            out[info.pid] = info
    return out


def _cmdline(pid: int) -> str | None:
    try:
        with open(f"{_PROC}/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:  # gone
        return None


def environ_of(pid: int, keys: Collection[str]) -> dict[str, str]:
    """Those of `keys` set in a process's environment (as it started), {} where it cannot be
    read: a process that hides its environment (not dumpable) is still one of the attempt's."""
    try:
        with open(f"{_PROC}/{pid}/environ", "rb") as fh:
            env = fh.read()
    except OSError:
        return {}
    wanted = {k.encode() + b"=" for k in keys}
    out = {}
    for item in env.split(b"\0"):
        key, eq, value = item.partition(b"=")
        if eq and key + b"=" in wanted:
            out[key.decode()] = value.decode(errors="replace")
    return out


def _int_or_none(value: str | None) -> int | None:
    return int(value) if value is not None and value.isdigit() else None


def _rank(pid: int) -> int | None:
    """RANK from the environment, a label only."""
    value = environ_of(pid, ("RANK",)).get("RANK", "")
    return int(value) if value.isdigit() else None


def _ancestors(table: Mapping[int, ProcInfo], pid: int) -> set[int]:
    out = set()
    while pid in table and pid not in out:
        out.add(pid)
        pid = table[pid].ppid
    return out


def _subtree(table: Mapping[int, ProcInfo], roots: Collection[int]) -> set[int]:
    children: dict[int, list[int]] = {}
    for info in table.values():
        children.setdefault(info.ppid, []).append(info.pid)
    out, todo = set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid in out:
            continue
        out.add(pid)
        todo.extend(children.get(pid, []))
    return out


def _signal_all(pids: Collection[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass


def rank_pids(procs: Sequence[JobProcess]) -> dict[int, int]:
    """rank -> pid of the rank's own process (not its DataLoader workers, which inherit RANK)."""
    by_pid = {p.pid: p for p in procs if p.rank is not None}
    return {
        p.rank: p.pid
        for p in by_pid.values()
        if p.rank is not None and (p.ppid not in by_pid or by_pid[p.ppid].rank != p.rank)
    }


class AttemptProcesses:
    """One attempt's command, started under a keeper, and every process that came of it.

    `capture_output`: the command's stdout and stderr are pipes (`launcher.stdout`/`.stderr`)
    for the supervisor to read. `own_children` names the supervisor's other children (its node agents): they are not the
    attempt's, though they are the supervisor's children too."""

    def __init__(
        self,
        command: Sequence[str],
        env: Mapping[str, str],
        *,
        own_children: Callable[[], Collection[int]] = frozenset,
        capture_output: bool = False,
    ) -> None:
        # The keeper exits with its command: what is still running then (a rank its launcher
        # lost, a daemon) must come to us, not to init, or no one could find it.
        become_subreaper()
        self.own_children = own_children
        self.me = os.getpid()
        self.uid = os.getuid()
        self.launcher = subprocess.Popen(
            [sys.executable, "-m", "triage.supervisor.keeper", "--parent-pid", str(self.me), "--", *command],
            env=dict(env),
            start_new_session=True,
            stdout=subprocess.PIPE if capture_output else None,
            stderr=subprocess.PIPE if capture_output else None,
        )
        info = _stat(self.launcher.pid)
        self._since_ticks = info.start_ticks if info else 0
        self.observed: dict[int, ObservedRank] = {}
        self._workers: set[int] = set()  # pids seen as a rank's child with its RANK

    def poll(self) -> int | None:
        """The command's exit status once it has ended (the keeper passes it on)."""
        return self.launcher.poll()

    def processes(self) -> list[JobProcess]:
        """Live processes of the attempt, the keeper itself excluded."""
        table = self._reap(_table())
        mine = self._members(table)
        found = []
        for pid in sorted(mine):
            if (cmdline := _cmdline(pid)) is not None:
                found.append(JobProcess(pid, table[pid].ppid, _rank(pid), cmdline))
        return found

    def ranks(self) -> dict[int, int]:
        """rank -> pid among the attempt's processes: the tree decides who belongs, RANK only
        says which rank a member is. Each new rank process is noted in `observed`. A process
        once seen as a rank's worker stays a worker: when its rank dies, a DataLoader worker is
        orphaned to a subreaper of ours and would pass for the rank (for the seconds it takes
        to notice its parent is gone), hiding the death."""
        procs = self.processes()
        by_pid = {p.pid: p for p in procs}
        self._workers |= {
            p.pid for p in procs if p.rank is not None and p.ppid in by_pid and by_pid[p.ppid].rank == p.rank
        }
        found = rank_pids([p for p in procs if p.pid not in self._workers])
        for rank, pid in found.items():
            if rank not in self.observed or self.observed[rank].pid != pid:
                env = environ_of(pid, ("LOCAL_RANK", "WORLD_SIZE", ENV_NODE))
                self.observed[rank] = ObservedRank(
                    rank,
                    pid,
                    _int_or_none(env.get("LOCAL_RANK")),
                    _int_or_none(env.get("WORLD_SIZE")),
                    env.get(ENV_NODE) or None,
                    time.time(),
                )
        return found

    def _members(self, table: Mapping[int, ProcInfo]) -> set[int]:
        others = set(self.own_children())
        adopted = [
            p.pid
            for p in table.values()
            if p.ppid == self.me
            and p.pid != self.launcher.pid
            and p.pid not in others
            and p.start_ticks >= self._since_ticks
        ]
        roots = ([self.launcher.pid] if self.launcher.pid in table else []) + adopted
        members = _subtree(table, roots) - _ancestors(table, self.me) - {self.launcher.pid}
        return {p for p in members if table[p].uid == self.uid and table[p].state != "Z"}

    def _reap(self, table: dict[int, ProcInfo]) -> dict[int, ProcInfo]:
        """Collect the exit of orphans reparented to the supervisor (never `waitpid(-1)`, which
        would take the exit codes that `subprocess.Popen` objects wait for)."""
        known = set(self.own_children()) | {self.launcher.pid}
        for p in [
            p
            for p in table.values()
            if p.ppid == self.me
            and p.state == "Z"
            and p.pid not in known
            and p.start_ticks >= self._since_ticks
        ]:
            try:
                os.waitpid(p.pid, os.WNOHANG)
            except ChildProcessError:
                pass
            table.pop(p.pid, None)
        return table

    def _stop_targets(self) -> list[int]:
        """Who gets the stop's SIGTERM besides the keeper's process group: every rank, and each
        process outside that group whose parent is not the attempt's (one adopted by a
        subreaper). A launcher under a live parent gets it from the parent only: torchrun
        raises out of its own shutdown on every further SIGTERM, and after three it hung past
        the grace without its failure report (so `triage train` wrote no run summary). A
        rank's own children get nothing: a DataLoader worker that a SIGTERM ends first makes
        its rank report a data-pipeline error that never happened."""
        procs = self.processes()
        by_pid = {p.pid: p for p in procs}
        ranks = set(rank_pids([p for p in procs if p.pid not in self._workers]).values())
        group = _pgid(self.launcher.pid)
        unforwarded = [
            p.pid
            for p in procs
            if p.ppid not in by_pid and p.ppid != self.launcher.pid and _pgid(p.pid) != group
        ]
        return sorted(ranks | set(unforwarded))

    def notify(self, signum: int) -> None:
        """`signum` to the keeper's process group (the command itself: srun, torchrun),
        to act on as it does, nothing stopped: srun passes SIGTERM on to its tasks."""
        try:
            os.killpg(self.launcher.pid, signum)
        except ProcessLookupError:
            pass

    def stop(self, grace_s: float, rank_grace_s: float | None = None) -> list[int]:
        """SIGTERM to the keeper's process group, to the ranks and to processes no one of the
        attempt would pass it on to (`_stop_targets`), SIGKILL to whatever is left after
        `grace_s` (the wait ends as soon as all are gone: a crashed job whose ranks are
        already dead costs no grace). `rank_grace_s`: the rank processes get only this long
        before SIGKILL, their launchers still `grace_s` to see them gone and write what they
        write at the end (torchrun's failure report, a run summary). Returns the pids that
        needed SIGKILL, once nothing is left, or after `_KILL_WAIT_S` more for a process stuck
        in the kernel, which `processes()` then names."""
        try:
            os.killpg(self.launcher.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        _signal_all(self._stop_targets(), signal.SIGTERM)
        started = time.monotonic()
        rank_deadline = started + (grace_s if rank_grace_s is None else min(grace_s, rank_grace_s))
        killed: list[int] = []
        while time.monotonic() < started + grace_s and (self.launcher.poll() is None or self.processes()):
            if time.monotonic() >= rank_deadline:
                late = [p.pid for p in self.processes() if p.rank is not None]
                _signal_all(late, signal.SIGKILL)
                killed += [pid for pid in late if pid not in killed]
            time.sleep(_STOP_POLL_S)
        killed += [p.pid for p in self.processes() if p.pid not in killed]
        if self.launcher.poll() is None:
            killed.append(self.launcher.pid)
            try:
                os.killpg(self.launcher.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _signal_all(killed, signal.SIGKILL)
        self.launcher.wait()
        deadline = time.monotonic() + _KILL_WAIT_S
        while (left := self.processes()) and time.monotonic() < deadline:
            _signal_all([p.pid for p in left], signal.SIGKILL)
            time.sleep(0.1)
        return killed
