"""What a rank's process does besides its main thread: for the hang rule's "working or stuck?".

A rank whose peers wait for it in a collective is working, not hung, when it spends CPU or reads
data. Its main thread's CPU says so for a long step or an evaluation; but a rank that prepares
data in worker processes (`dataset.map(num_proc=N)` under HF's `main_process_first`, a
DataLoader's workers) waits on them with an idle main thread, and one that downloads a dataset
or a model reads from the network with almost no CPU at all. So each heartbeat also carries the
CPU seconds of the rank's child processes (live ones from /proc, reaped ones from the kernel's
account of them) and the bytes the process has read (`rchar`: files, pipes and sockets alike).
Read on the writer thread once a second, never on the hot path; Linux only (None elsewhere).
"""

from __future__ import annotations

import os

#: Child processes read per heartbeat at most (a pool of thousands is counted by its first ones).
MAX_CHILDREN = 256
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat_times(pid: int | str) -> tuple[int, int] | None:
    """(own CPU ticks, reaped children's CPU ticks) of a process, from /proc/<pid>/stat."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None  # gone, or not Linux
    # after the command name: state(3) ... utime(14) stime(15) cutime(16) cstime(17)
    return int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])


def _children(pid: int | str) -> list[str]:
    found: list[str] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                found += f.read().decode().split()
        except OSError:
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
    while pending and seen < MAX_CHILDREN:
        pid = pending.pop()
        seen += 1
        times = _stat_times(pid)
        if times is not None:
            ticks += times[0] + times[1]
            pending += _children(pid)
    return ticks / _TICKS


def read_bytes() -> int | None:
    """Bytes this process has read through system calls (`rchar`), from files and sockets."""
    try:
        with open("/proc/self/io", "rb") as f:
            for line in f:
                if line.startswith(b"rchar:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None
