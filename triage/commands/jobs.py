"""List the jobs in a data directory: status, attempts, ranks, steps and last progress.

Status is that of the job's newest attempt: `running` (heartbeats within the timeout),
`completed` (every rank exited cleanly), `failed` (an exception, a bad exit, or heartbeats
that stopped) or `preempted` (SIGTERM), unless the supervisor recorded an outcome. Pending
spools are ingested first where no agent holds the node's partition; otherwise the command
only reads. Exit codes: 0 listed (also when empty), 2 not a Triage data directory.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from datetime import datetime

from triage.config import add_config_args, config_from_args, data_dir_from_env
from triage.store import StoreConfig, StoreError, check_data_dir, ingest_spools, open_snapshot

_STATUS_STYLE = {"running": "cyan", "completed": "green", "failed": "bold red", "preempted": "yellow"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", help="Triage data directory (default: $TRIAGE_DATA_DIR or ./triage-data)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--ingest", action=argparse.BooleanOptionalAction, default=True,
                        help="ingest pending spools first where no agent is writing (default: yes)")
    add_config_args(parser, StoreConfig, skip=tuple(
        f.name for f in dataclasses.fields(StoreConfig) if f.name != "heartbeat_timeout_s"))


def _ago(t: float | None, now: float) -> str:
    if t is None:
        return "-"
    s = max(0.0, now - t)
    age = f"{s:.0f}s" if s < 120 else f"{s / 60:.0f}m" if s < 7200 else f"{s / 3600:.1f}h" if s < 172800 else f"{s / 86400:.0f}d"
    return f"{datetime.fromtimestamp(t).strftime('%m-%d %H:%M:%S')} ({age} ago)"


def run(args: argparse.Namespace) -> int:
    data_dir = check_data_dir(data_dir_from_env(args.data_dir))
    config = config_from_args(StoreConfig, args)
    ingest = None
    if args.ingest:
        try:
            ingest = ingest_spools(data_dir, config=config)
        except (OSError, StoreError) as exc:
            print(f"triage jobs: warning: could not ingest pending spools ({exc}); "
                  "listing what is stored", file=sys.stderr)
        for err in ingest.errors if ingest else []:
            print(f"triage jobs: warning: {err.path}: {err.error} (kept in {err.quarantined_to})",
                  file=sys.stderr)
    now = time.time()
    with open_snapshot(data_dir, now=now, config=config) as snap:
        jobs = snap.jobs()
    if args.json:
        print(json.dumps({"data_dir": str(data_dir), "now": now,
                          "ingest": ingest.to_dict() if ingest else None,
                          "jobs": [dataclasses.asdict(j) for j in jobs]}))
        return 0
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not jobs:
        console.print(f"No jobs in {data_dir} yet. Run `triage demo` to train a small job, "
                      "then `triage jobs` again.")
        return 0
    table = Table(title=f"Jobs in {data_dir}")
    for col in ("job", "status", "attempts", "ranks", "last step", "last progress", "last heartbeat"):
        table.add_column(col, justify="right" if col in ("attempts", "ranks", "last step") else "left")
    for j in jobs:
        style = _STATUS_STYLE.get(j.status, "")
        table.add_row(j.job_id, f"[{style}]{j.status}[/]" if style else j.status, str(j.attempts),
                      str(j.ranks), "-" if j.max_step is None else str(j.max_step),
                      _ago(j.last_progress, now), _ago(j.last_heartbeat, now))
    console.print(table)
    return 0
