"""Who a launch is: its job id, its run id, and the per-job lock that makes it the only one.

A job id names a job; each `triage run` of it is a new run with a unique run id, so reusing
`--job-id nightly` never mixes tonight's attempts with last night's. Two supervisors of one job
at once would restart, exclude and record over each other, so the first takes an exclusive
lock on `<data_dir>/locks/<job>.lock` for as long as it runs and the second is refused. The lock
is an `flock` held by the open file: it is released by the kernel when the supervisor exits,
however it exits, so a `kill -9` leaves no stale lock behind.
"""

from __future__ import annotations

import fcntl
import getpass
import json
import os
import secrets
import socket
import time
from pathlib import Path

from triage import display
from triage.config import ConfigError
from triage.names import check_name

LOCKS_DIR = "locks"


def new_run_id(now: float | None = None) -> str:
    """`20261204T170501-3fa2c1d0`: sortable by start time, unique by its 32 random bits."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(time.time() if now is None else now))
    return f"{stamp}-{secrets.token_hex(4)}"


def default_job_id(now: float | None = None) -> str:
    """`job-20261204-170501-3fa2c1d0`: two starts in one second still get different ids."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(time.time() if now is None else now))
    return f"job-{stamp}-{secrets.token_hex(4)}"


def current_user() -> str:
    """Who runs this process, for the records that say who did what (a run, a clear)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # a container's uid without a passwd entry
        return str(os.getuid())


class JobRunning(ConfigError):
    """Another supervisor runs this job id on this data dir (the CLI exits 2)."""


class JobLock:
    """The exclusive lock of one job id in one data dir, held while a supervisor runs it."""

    def __init__(self, data_dir: Path, job_id: str, run_id: str) -> None:
        check_name("job id", job_id)
        self.path = Path(data_dir) / LOCKS_DIR / f"{job_id}.lock"
        self.job_id = job_id
        self.run_id = run_id
        self._fd: int | None = None

    def acquire(self) -> JobLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise JobRunning(
                f"job {self.job_id!r} is already running under another `triage run` "
                f"({holder}); wait for it to finish, stop it, or pick another --job-id"
            ) from None
        os.ftruncate(fd, 0)
        os.write(
            fd,
            json.dumps(
                {
                    "job_id": self.job_id,
                    "run_id": self.run_id,
                    "pid": os.getpid(),
                    "host": socket.gethostname(),
                    "since": time.time(),
                }
            ).encode(),
        )
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock; the file stays for the next run
            self._fd = None

    def __enter__(self) -> JobLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _holder(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return "holder unknown"
    since = info.get("since")
    when = display.when(since) if since else "?"
    return (
        f"run {info.get('run_id', '?')}, pid {info.get('pid', '?')} on {info.get('host', '?')}, since {when}"
    )
