"""When each injected fault fired: the ground truth that benchmarks measure detection from.

A rank appends one JSON line to `<data_dir>/injected/<job_id>.jsonl` the moment before it
fires a fault (`--inject`): the time, the job's run and attempt, the rank, its node and the
spec. Only the reference trainer's fault injection writes it; nothing in Triage's diagnosis
reads it (that would be cheating): `triage bench recovery` and `triage bench rca` compare what
Triage found, and when, with it.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from triage.config import ENV_RUN_ID, node_name
from triage.names import check_name


@dataclass(frozen=True)
class Injection:
    time: float
    job_id: str
    run_id: str | None
    attempt: int
    rank: int
    node: str
    spec: str


def injection_log(data_dir: str | os.PathLike[str], job_id: str) -> Path:
    return Path(data_dir) / "injected" / f"{check_name('job id', job_id)}.jsonl"


def record_injection(
    data_dir: str | os.PathLike[str], job_id: str, attempt: int, rank: int, spec: str
) -> None:
    """One line, appended with a single write (O_APPEND keeps concurrent ranks' lines whole)."""
    path = injection_log(data_dir, job_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(
        {
            "time": time.time(),
            "job_id": job_id,
            "run_id": os.environ.get(ENV_RUN_ID),
            "attempt": attempt,
            "rank": rank,
            "node": node_name(),
            "spec": spec,
        }
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def read_injections(
    data_dir: str | os.PathLike[str], job_id: str, run_id: str | None = None
) -> list[Injection]:
    """The job's injections (of one run where `run_id` is given), oldest first; torn or
    malformed lines are skipped."""
    try:
        lines = injection_log(data_dir, job_id).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        try:
            item = Injection(**json.loads(line))
        except (ValueError, TypeError):
            continue
        if run_id is None or item.run_id == run_id:
            out.append(item)
    return sorted(out, key=lambda i: i.time)
