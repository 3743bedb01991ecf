"""What a rank's process does besides its main thread: for the hang rule's "working or stuck?".

A rank whose peers wait for it in a collective is working, not hung, when it spends CPU or reads
data. Its main thread's CPU says so for a long step or an evaluation; but a rank that prepares
data in worker processes (`dataset.map(num_proc=N)` under HF's `main_process_first`, a
DataLoader's workers) waits on them with an idle main thread, and one that downloads a dataset
or a model reads from the network with almost no CPU at all. So each heartbeat also carries the
CPU seconds of the rank's child processes (live ones from /proc, reaped ones from the kernel's
account of them) and the bytes the process has read through `read()`-like calls (`rchar`:
files and pipes; not sockets read with `recv`, as Python's HTTP clients do, nor mmap'd files, so
a download shows here only where it is read as a file or its writer is a child process). Less
the hooks' own reads of /proc. Read on the writer thread once a second, never on the hot path;
Linux only (None elsewhere, and where /proc says something unexpected).

A main thread's CPU alone says little once no steps come: a rank spinning on a GPU that never
answers spends it too. What tells that spin from an evaluation, or from a dataset tokenized on
the main thread, is whether Python code runs: `MainStack` counts the looks at which the main
thread's stack of Python functions had changed since the look before. A thread blocked or
spinning in one call (a deadlock, a synchronize that never returns, a loop polling a native
call) shows the same stack at every look; one that runs Python code through its functions (an
evaluation's modules, a slow tokenizer's helpers) a new one at many looks. Not seen: a loop in
one function around one native call (a fast tokenizer given huge batches), which looks like a
poll; and a poll through a Python helper counts as work, until the prepare timeout.
"""

from __future__ import annotations

import os
import sys
import threading

#: Child processes read per heartbeat at most: past it the sum is not known (None), as a walk
#: that stops at a different subset each time would make the counter jump.
MAX_CHILDREN = 256
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
#: Bytes these readers read from /proc themselves: part of `rchar`, not the rank's work.
_own_bytes = 0


def _read(path: str) -> bytes:
    global _own_bytes
    with open(path, "rb") as f:
        data = f.read()
    _own_bytes += len(data)
    return data


def _stat_times(pid: int | str) -> tuple[int, int] | None:
    """(own CPU ticks, reaped children's CPU ticks) of a process, from /proc/<pid>/stat."""
    try:
        fields = _read(f"/proc/{pid}/stat").rsplit(b")", 1)[1].split()
        # after the command name: state(3) ... utime(14) stime(15) cutime(16) cstime(17)
        return int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])
    except (OSError, IndexError, ValueError):
        return None  # gone, or not Linux


def _children(pid: int | str) -> list[str]:
    found: list[str] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            found += _read(f"/proc/{pid}/task/{tid}/children").decode().split()
        except (OSError, UnicodeDecodeError):
            continue
    return found


def children_cpu_s() -> float | None:
    """CPU seconds of this process's descendants: the live ones' own and reaped ones', and the
    ones this process has reaped (a worker that finished its share still counts)."""
    own = _stat_times("self")
    if own is None:
        return None
    ticks = own[1]
    pending, seen = _children("self"), 0
    while pending:
        if seen == MAX_CHILDREN:
            return None
        pid = pending.pop()
        seen += 1
        times = _stat_times(pid)
        if times is not None:
            ticks += times[0] + times[1]
            pending += _children(pid)
    return ticks / _TICKS


def runnable_s(thread_native_id: int) -> float | None:
    """Seconds a thread of this process ran or waited for a CPU to run on (Linux's schedstat:
    time on a CPU plus time on a run queue). A rank starved of CPU on an overloaded host still
    wants to work: its CPU time alone would read as idle, its runnable time does not. A thread
    blocked (a deadlock, a sleep, a wait on a socket) adds to neither. None where the kernel
    keeps no such account or the thread has ended."""
    try:
        run_ns, wait_ns = _read(f"/proc/self/task/{thread_native_id}/schedstat").split()[:2]
        return (int(run_ns) + int(wait_ns)) / 1e9
    except (OSError, ValueError):
        return None


def read_bytes() -> int | None:
    """Bytes this process has read through `read()`-like calls (`rchar`), less these readers'."""
    own = _own_bytes  # the figure read does not count this read yet
    try:
        for line in _read("/proc/self/io").splitlines():
            if line.startswith(b"rchar:"):
                return int(line.split()[1]) - own
    except (OSError, IndexError, ValueError):
        pass
    return None


class MainStack:
    """How often the main thread was found running Python code: the number of looks at which
    its stack of Python functions differed from the look before. Functions, not lines: a loop
    that polls for something that never comes (`while not work.is_completed(): pass`) moves
    between its lines at every look, but never into another function."""

    def __init__(self, thread_id: int) -> None:
        self._thread_id = thread_id
        self._last: tuple[int, ...] | None = None
        self.moves = 0

    def look(self) -> int | None:
        """The count after this look; None where the thread has ended. A look from the thread
        itself (an exit path's last heartbeat) sees only its own call: not counted. Frames are
        not kept past the look: a frame held would keep its locals (a batch, a tensor) alive."""
        if threading.get_ident() == self._thread_id:
            return self.moves
        frame = sys._current_frames().get(self._thread_id)
        if frame is None:
            return None
        stack = []
        while frame is not None:
            stack.append(id(frame.f_code))
            frame = frame.f_back
        now = tuple(stack)
        if self._last is not None and now != self._last:
            self.moves += 1
        self._last = now
        return self.moves
