"""List the runs of the jobs in a data directory: status, attempts, ranks, steps and last
progress, newest first. A job id names a job; each `triage run` of it is a run of its own.

A run's status is the supervisor's final word on it where it wrote one (`completed`, `failed`,
`gave_up`, `interrupted`), else that of its newest attempt: `running` (heartbeats within the timeout),
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

from triage.commands.pending import ingest_pending
from triage.config import add_config_args, config_from_args, data_dir_from_env
from triage.display import Status, status_colour, when
from triage.store import StoreConfig, check_data_dir, open_snapshot
from triage.store.job_data import NO_RUN


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir", help="Triage data directory (default: $TRIAGE_DATA_DIR or ./triage-data)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument(
        "--ingest",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="ingest pending spools first where no agent is writing (default: yes)",
    )
    add_config_args(
        parser,
        StoreConfig,
        skip=tuple(f.name for f in dataclasses.fields(StoreConfig) if f.name != "heartbeat_timeout_s"),
    )


def _seen_cell(seen: float | None, now: float) -> str:
    """`12-06 03:11:47` over `47m ago` (UTC, as the title says; the year is in --json)."""
    if seen is None:
        return "-"
    return f"{when(seen)[5:19]}\n[dim]{_age(seen, now)}[/]"


def _age(t: float | None, now: float) -> str:
    if t is None:
        return "-"
    s = max(0.0, now - t)
    age = (
        f"{s:.0f}s"
        if s < 120
        else f"{s / 60:.0f}m"
        if s < 7200
        else f"{s / 3600:.1f}h"
        if s < 172800
        else f"{s / 86400:.0f}d"
    )
    return f"{age} ago"


def status_style(status: str) -> str:
    """The rich style of a status word: its colour from `triage.display` (the dashboard's
    too), bold where a person should look."""
    try:
        bold = Status(status).needs_attention
    except ValueError:  # a status this version does not know: grey, as status_colour has it
        bold = False
    return f"bold {status_colour(status)}" if bold else status_colour(status)


def run(args: argparse.Namespace) -> int:
    data_dir = check_data_dir(data_dir_from_env(args.data_dir))
    config = config_from_args(StoreConfig, args)
    ingest = ingest_pending(data_dir, "jobs", config) if args.ingest else None
    now = time.time()
    with open_snapshot(data_dir, now=now, config=config) as snap:
        jobs = snap.jobs()
        runs = snap.runs()
        problems = snap.problems
    for problem in problems:
        print(f"triage jobs: warning: {problem}", file=sys.stderr)
    if args.json:
        print(
            json.dumps(
                {
                    "data_dir": str(data_dir),
                    "now": now,
                    "ingest": ingest.to_dict() if ingest else None,
                    "problems": problems,
                    "jobs": [dataclasses.asdict(j) for j in jobs],
                    "runs": [dataclasses.asdict(r) for r in runs],
                }
            )
        )
        return 0
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console()
    if not runs:
        console.print(
            f"No jobs in {data_dir} yet. Run `triage demo` to train a small job, then `triage jobs` again."
        )
        return 0
    table = Table(
        title=f"Runs in {data_dir}, newest first (times in UTC)",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    # Two lines a run, so it reads at 80 columns: the job id over its run id, the time over its age.
    # Only the ids may fold (a long one keeps its end); the other columns never wrap.
    table.add_column("job / run", overflow="fold")
    table.add_column("status", no_wrap=True)
    for col in ("att.", "ranks", "step"):
        table.add_column(col, justify="right", no_wrap=True)
    table.add_column("last seen", no_wrap=True)
    for r in runs:
        seen = max(
            (t for t in (r.last_progress, r.last_heartbeat, r.end_time, r.start_time) if t is not None),
            default=None,
        )
        table.add_row(
            Text.assemble(r.job_id, "\n", (r.run_id or NO_RUN, "dim")),
            Text(r.status, style=status_style(r.status)),
            str(r.attempts),
            str(r.ranks),
            "-" if r.max_step is None else str(r.max_step),
            _seen_cell(seen, now),
        )
    console.print(table)
    console.print("[dim]`triage analyze JOB` shows a job's newest run; `--run RUN` another.[/]")
    return 0
