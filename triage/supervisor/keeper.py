"""The keeper: the one process between the supervisor and an attempt's command.

    python -m triage.supervisor.keeper --parent-pid PID -- COMMAND ...

Linux gives a process two ways to hold on to its descendants whatever they do to their
environment, session or process group: as a child subreaper (PR_SET_CHILD_SUBREAPER) every
orphaned descendant is reparented to it rather than to init, and PR_SET_PDEATHSIG tells it when
its own parent dies. The keeper is both. It runs COMMAND as its child and exits with COMMAND's
status (128 + N for a signal, as a shell does), passes SIGTERM/SIGINT on to COMMAND's
process group where COMMAND left the keeper's, and reaps whatever is reparented to it. When the
supervisor dies, even by SIGKILL, the keeper SIGTERMs every descendant, SIGKILLs what is left
after `_DEATH_GRACE_S`, and exits: a supervisor that dies takes its job with it. No systemd,
cgroup or privilege is needed. Import-light on purpose: it starts before every attempt.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
#: How long descendants get after SIGTERM once the supervisor is gone.
_DEATH_GRACE_S = 2.0
#: How long to go on SIGKILLing what is left after that before the keeper gives up and exits.
_KILL_WAIT_S = 10.0
_PARENT_DIED = signal.SIGUSR1


def prctl(option: int, value: int) -> None:
    """Raises where the kernel lacks the option: without it a job could outlive its supervisor
    or escape its stop, so supervising it is refused rather than done half."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(
            err,
            f"prctl({option}, {value}) failed: {os.strerror(err)}; `triage run` "
            "needs Linux 3.4 or newer to keep track of a job's processes",
        )


def descendants(root: int) -> list[int]:
    """Live processes below `root`, through /proc ppid links: whatever session, group or
    environment they moved to, a subreaper's orphans stay below it."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != b"Z":
            children.setdefault(int(fields[1]), []).append(int(name))
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _signal(pids: list[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _end_everything() -> None:
    """The supervisor is gone: nobody would stop, watch or restart this attempt."""
    me = os.getpid()
    _signal(descendants(me), signal.SIGTERM)
    deadline = time.monotonic() + _DEATH_GRACE_S
    while time.monotonic() < deadline and descendants(me):
        _reap()
        time.sleep(0.05)
    deadline += _KILL_WAIT_S  # a process stuck in the kernel (D state) dies when it returns
    while (left := descendants(me)) and time.monotonic() < deadline:
        _signal(left, signal.SIGKILL)
        _reap()
        time.sleep(0.05)
    os._exit(137)


def _status(raw: int) -> int:
    return 128 + os.WTERMSIG(raw) if os.WIFSIGNALED(raw) else os.WEXITSTATUS(raw)


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[0] != "--parent-pid" or argv[2] != "--":
        print("usage: python -m triage.supervisor.keeper --parent-pid PID -- COMMAND ...", file=sys.stderr)
        return 2
    parent, command = int(argv[1]), argv[3:]
    prctl(PR_SET_CHILD_SUBREAPER, 1)

    def parent_died(signum: int, frame: object) -> None:
        # The death signal also comes when the thread that started the keeper ends, and
        # anyone may send SIGUSR1: only a keeper whose parent is gone ends the attempt.
        if os.getppid() != parent:
            _end_everything()

    signal.signal(_PARENT_DIED, parent_died)
    prctl(PR_SET_PDEATHSIG, _PARENT_DIED)
    if os.getppid() != parent:  # it died before the death signal was armed
        _end_everything()
    child = os.fork()
    if child == 0:
        # exec keeps ignored signals ignored: give COMMAND the defaults Python changed
        for sig in (_PARENT_DIED, signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_DFL)
        try:
            os.execvp(command[0], command)
        except OSError as exc:
            print(f"triage run: cannot start {command[0]!r}: {exc}", file=sys.stderr)
            os._exit(127)

    def forward(signum: int, frame: object) -> None:
        # The supervisor signals the keeper's process group; a command that moved to a
        # group of its own (torchrun starts a session per node) is told here instead.
        try:
            group = os.getpgid(child)
            if group != os.getpgid(0):
                os.killpg(group, signum)
        except ProcessLookupError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, forward)
    while True:
        pid, raw = os.wait()
        if pid == child:
            _reap()
            return _status(raw)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
