"""Test helper: find a job's processes on this machine by the environment they inherited.

Fine for a test, which knows its job ids are unique: the supervisor itself never finds
processes this way (it tracks its process tree; see triage/supervisor/processes.py).
"""

from __future__ import annotations

import os

from triage.supervisor.processes import JobProcess, rank_pids


def processes_with_job(job_id: str) -> list[JobProcess]:
    """Live, non-zombie processes whose environment has TRIAGE_JOB_ID=job_id (not this one)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            env = open(f"/proc/{name}/environ", "rb").read().split(b"\0")
            stat = open(f"/proc/{name}/stat", "rb").read().rsplit(b")", 1)[1].split()
            cmd = open(f"/proc/{name}/cmdline", "rb").read()
        except OSError:
            continue
        if f"TRIAGE_JOB_ID={job_id}".encode() not in env or stat[0] == b"Z":
            continue
        rank = next((int(e[5:]) for e in env if e.startswith(b"RANK=") and e[5:].isdigit()), None)
        found.append(
            JobProcess(int(name), int(stat[1]), rank, cmd.replace(b"\0", b" ").decode(errors="replace"))
        )
    return found


def ranks_of_job(job_id: str) -> dict[int, int]:
    return rank_pids(processes_with_job(job_id))
