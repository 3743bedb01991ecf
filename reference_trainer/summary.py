"""What rank 0 records as it trains, and the run summary the launcher builds from it.

Rank 0 appends one JSON line per event to `<run_dir>/progress-attempt<A>.jsonl` (unbuffered
`os.write`, so a SIGKILL loses nothing already written); the launcher, which outlives every
rank, turns it into the `--summary` JSON after torchrun exits, whatever way the ranks ended.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from triage.display import Status


def progress_path(run_dir: str | os.PathLike[str], attempt: int) -> Path:
    return Path(run_dir) / f"progress-attempt{attempt}.jsonl"


class ProgressLog:
    """Rank 0's append-only record of the run."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)

    def record(self, event: str, **fields: Any) -> None:
        os.write(self._fd, (json.dumps({"event": event, "time": time.time(), **fields}) + "\n").encode())

    def close(self) -> None:
        os.close(self._fd)


def read_progress_log(path: Path) -> list[dict[str, Any]]:
    """Every complete record; a line torn by a kill is dropped."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return []
    events = []
    for line in lines:
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


def build_summary(
    events: list[dict[str, Any]], *, job_id: str, world_size: int, completed: bool
) -> dict[str, Any]:
    """The `--summary` JSON. `steps_completed` is the global step reached (it counts the steps
    before a resume); `losses` are this run's steps only, each the all-reduced mean loss."""
    start = next((e for e in events if e["event"] == "start"), {})
    steps = [e for e in events if e["event"] == "step"]
    losses = [[e["step"], e["loss"]] for e in steps]
    times = [e["step_time_s"] for e in steps]
    tokens = sum(e["tokens"] for e in steps)
    resumed = start.get("resumed_from_step")
    preempted = next((e["step"] for e in events if e["event"] == "preempted"), None)
    return {
        "job_id": job_id,
        "world_size": start.get("world_size", world_size),
        "steps_completed": steps[-1]["step"] if steps else (resumed or 0),
        "resumed_from_step": resumed,
        "final_loss": losses[-1][1] if losses else None,
        "losses": losses,
        "step_time_p50_s": statistics.median(times) if times else None,
        "tokens_per_s": tokens / sum(times) if times and sum(times) > 0 else None,
        "exit": Status.COMPLETED if completed else Status.FAILED,
        "preempted_checkpoint_step": preempted,
        "error": next((e["message"] for e in reversed(events) if e["event"] == "error"), None),
    }


def write_summary(path: str | os.PathLike[str], summary: dict[str, Any]) -> None:
    """Atomic: a reader never sees half a summary."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(summary, indent=1) + "\n")
    os.replace(tmp, path)
