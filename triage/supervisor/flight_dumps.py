"""The supervisor's side of the Flight Recorder (`trainer_hooks.flight_recorder`): ask a hung
attempt's ranks for their dumps, wait for them a few seconds, and turn what came into store
events (`fr_dump` per rank that dumped; one `fr_request` saying a dump was asked for, so a
live rank that gave none is known to have stayed silent)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from triage.store.schema import EVENT_FR_DUMP, EVENT_FR_REQUEST, EVENT_SOURCE_SUPERVISOR
from triage.trainer_hooks.flight_recorder import read_dumps, request_dumps

#: Frames of a thread's stack kept in the store (its innermost ones).
_STORED_FRAMES = 6


def collect_dumps(folder: Path, ranks: set[int], wait_s: float) -> float:
    """Ask for dumps and wait until each of `ranks` answered (a `rank<R>.json` newer than the
    request) or `wait_s` passed; returns the request time."""
    asked = request_dumps(folder)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        answered = {d["rank"] for d in read_dumps(folder) if d.get("time", 0) >= asked}
        if ranks <= answered:
            break
        time.sleep(0.2)
    return asked


def dump_event_rows(
    folder: Path,
    job_id: str,
    run_id: str,
    attempt: int,
    nodes: dict[int, str],
    host: str,
    *,
    requested: float | None,
) -> list[dict[str, Any]]:
    key = {"job_id": job_id, "run_id": run_id, "attempt": attempt, "source": EVENT_SOURCE_SUPERVISOR}
    rows: list[dict[str, Any]] = []
    if requested is not None:
        rows.append(
            {
                **key,
                "rank": None,
                "node": host,
                "time": requested,
                "kind": EVENT_FR_REQUEST,
                "message": "Flight Recorder dumps requested (hang)",
                "detail": None,
            }
        )
    for d in read_dumps(folder) if folder.is_dir() else []:
        rank = int(d["rank"])
        stacks = {
            name: frames[-_STORED_FRAMES:]
            for name, frames in (d.get("stacks") or {}).items()
            if isinstance(frames, list)
        }
        detail = {
            "reason": d.get("reason"),
            "groups": d.get("groups", []),
            "stacks": stacks,
            "pid": d.get("pid"),
        }
        rows.append(
            {
                **key,
                "rank": rank,
                "node": nodes.get(rank, host),
                "time": float(d.get("time") or 0.0),
                "kind": EVENT_FR_DUMP,
                "message": f"rank {rank} dumped its Flight Recorder ({d.get('reason')})",
                "detail": json.dumps(detail, default=str),
            }
        )
    return rows
