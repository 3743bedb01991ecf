"""Fleet reliability over every run in the data directory: where the GPU time went and what to fix.

Figures (definitions in the README's "Reliability metrics"): fleet ETTR (productive GPU-time /
allocated GPU-time), goodput, MTTF and MTTR by job size, failures per 1000 node-days by
category, lost GPU-hours by cause, layer, culprit node and GPU, restarts that only repeated
their failure, checkpoint intervals against Daly's, and lemon nodes (implicated in far more
failures than their share of node-hours predicts; one-sided binomial test).

It reads each run's accounting, which `triage run` records when a run ends. Runs without it
(the supervisor was killed, or the run predates it) are listed; `--backfill` analyses them and
records theirs. Times are UTC. `--since`/`--until` take `7d`, `24h`, `90m`, an ISO date or time
(`2026-12-01`, `2026-12-01T08:00`), a unix time, or `all`; an attempt is in the window when it
started in it. Exit codes: 0 reported (also when empty), 2 bad usage or not a data directory.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from triage.analyzers.fleet import FleetConfig, FleetReport, fleet_report
from triage.analyzers.lemons import LemonTest
from triage.config import ConfigError, data_dir_from_env
from triage.display import duration, when
from triage.store import check_data_dir, open_snapshot

_UNITS = {"m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
_AGO = re.compile(r"^(\d+(?:\.\d+)?)([mhdw])$")


def parse_time(text: str, now: float, flag: str) -> float | None:
    """A window bound: `7d` (ago), an ISO date/time (UTC unless it names a zone), a unix time;
    `all` is None (unbounded)."""
    t = text.strip().lower()
    if t == "all":
        return None
    m = _AGO.match(t)
    if m:
        return now - float(m.group(1)) * _UNITS[m.group(2)]
    try:
        return float(t)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ConfigError(
            f"{flag} {text!r}: expected an age like 7d, 24h or 90m, an ISO date or time "
            "(2026-12-01, 2026-12-01T08:00), a unix time, or `all`"
        ) from None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir", help="Triage data directory (default: $TRIAGE_DATA_DIR or ./triage-data)"
    )
    parser.add_argument("--since", default="7d", help="start of the window (default: 7d)")
    parser.add_argument("--until", default=None, help="end of the window (default: now)")
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print one JSON object")
    out.add_argument("--markdown", action="store_true", help="print Markdown tables (for a wiki or a ticket)")
    parser.add_argument("--top", type=int, default=10, help="rows in each top-N list (default: 10)")
    parser.add_argument(
        "--lemon-alpha",
        type=float,
        default=LemonTest.alpha,
        help="significance of the lemon-node test, Bonferroni-corrected over the nodes (default: %(default)s)",
    )
    parser.add_argument(
        "--lemon-min-failures",
        type=int,
        default=LemonTest.min_failures,
        help="fewest failures that can make a node a lemon (default: %(default)s)",
    )
    parser.add_argument(
        "--backfill",
        action="store_true",
        help="first analyse the ended runs in the window that have no accounting, and record theirs",
    )


@dataclass
class Section:
    """One table of the report, rendered to the terminal or to Markdown."""

    title: str
    columns: list[str]
    rows: list[list[str]]
    empty: str = ""
    note: str = ""


def _h(gpu_h: object) -> str:
    """GPU-hours: one decimal at fleet scale, three significant digits for a small job's."""
    if gpu_h is None:
        return "-"
    v = float(gpu_h)  # type: ignore[arg-type]
    return f"{v:,.1f}" if abs(v) >= 10 or v == 0 else f"{v:.3g}"


def _pct(x: object) -> str:
    return "-" if x is None else f"{float(x):.1%}"  # type: ignore[arg-type]


def _num(x: object, fmt: str = ".2f") -> str:
    return "-" if x is None else format(float(x), fmt)  # type: ignore[arg-type]


def sections(r: FleetReport) -> list[Section]:
    failures_rate = r.failures / r.node_days * 1000 if r.node_days > 0 else None
    out = [
        Section(
            "Fleet",
            ["figure", "value"],
            [
                ["runs (jobs)", f"{r.runs} ({r.jobs})"],
                ["attempts / failures", f"{r.attempts} / {r.failures}"],
                ["nodes", str(r.nodes)],
                ["allocated GPU-hours", _h(r.allocated_gpu_h)],
                ["productive GPU-hours", _h(r.productive_gpu_h)],
                ["ETTR (productive / allocated)", _pct(r.ettr)],
                ["lost GPU-hours", _h(r.lost_gpu_h)],
                ["node-days", _num(r.node_days, ".1f")],
                ["failures per 1000 node-days", _num(failures_rate, ".1f")],
            ],
        ),
        Section(
            "By job size (GPUs)",
            ["size", "runs", "GPU-hours", "ETTR", "failures", "MTTF", "MTTR"],
            [
                [
                    str(s["size"]),
                    str(s["runs"]),
                    _h(s["allocated_gpu_h"]),
                    _pct(s["ettr"]),
                    str(s["failures"]),
                    "-" if s["mttf_h"] is None else duration(float(s["mttf_h"]) * 3600),  # type: ignore[arg-type]
                    duration(s["mttr_s"]),  # type: ignore[arg-type]
                ]
                for s in r.by_size
            ],
        ),
        Section(
            "Failures per 1000 node-days",
            ["category", "layer", "failures", "per 1000 node-days"],
            [
                [
                    str(f["category"]),
                    str(f["layer"] or "-"),
                    str(f["failures"]),
                    _num(f["per_1000_node_days"]),
                ]
                for f in r.failure_rates
            ],
            empty="no failures in the window",
        ),
    ]
    for key, title in (
        ("category", "Lost GPU-hours by cause"),
        ("layer", "Lost GPU-hours by layer"),
        ("node", "Lost GPU-hours by culprit node"),
        ("gpu", "Lost GPU-hours by culprit GPU"),
    ):
        out.append(
            Section(
                title,
                [key, "GPU-hours", "share of lost"],
                [[str(x[key]), _h(x["gpu_h"]), _pct(x["share"])] for x in r.lost_by.get(key, [])],
                empty="nothing lost to a culprit in the window" if key in ("node", "gpu") else "nothing lost",
            )
        )
    out += [
        Section(
            "Avoidable restarts",
            ["job / run", "attempt", "why", "GPU-hours"],
            [
                [f"{a['job_id']} / {a['run_id']}", str(a["attempt"]), str(a["reason"]), _h(a["gpu_h"])]
                for a in r.avoidable_restarts
            ],
            empty="none: no restart repeated the failure before it",
        ),
        Section(
            "Checkpoint intervals (Daly's, for each run's save cost and its size's MTTF)",
            ["job / run", "save cost", "used", "advised", "excess GPU-hours"],
            [
                [
                    f"{c['job_id']} / {c['run_id']}",
                    duration(c["checkpoint_cost_s"]),  # type: ignore[arg-type]
                    duration(c["interval_used_s"]),  # type: ignore[arg-type]
                    duration(c["interval_advised_s"]),  # type: ignore[arg-type]
                    _h(c["excess_gpu_h"]),
                ]
                for c in r.checkpoint_advice
            ],
            empty="no run with checkpoint saves in a size class that has failed",
        ),
        Section(
            "Lemon nodes",
            ["node", "failures", "expected", "ratio", "p-value", "node-hours"],
            [
                [
                    n.node,
                    str(n.failures),
                    f"{n.expected:.2f}",
                    _num(n.rate_ratio, ".1f"),
                    f"{n.p_value:.1e}",
                    f"{n.node_hours:,.1f}",
                ]
                for n in r.lemons
            ],
            empty="none flagged",
            note="lemon: culprit of more hardware failures than its share of node-hours predicts "
            "(one-sided binomial test, Bonferroni over the nodes)",
        ),
    ]
    return out


def _window_text(r: FleetReport) -> str:
    since = "the beginning" if r.since is None else when(r.since)
    return f"{since} to {when(r.until) if r.until is not None else 'now'}"


def print_markdown(r: FleetReport) -> None:
    print(f"# Fleet reliability, {_window_text(r)}\n")
    for s in sections(r):
        print(f"## {s.title}\n")
        if s.note:
            print(f"_{s.note}_\n")
        if not s.rows:
            print(f"{s.empty}\n")
            continue
        print("| " + " | ".join(s.columns) + " |")
        print("|" + "|".join("---" for _ in s.columns) + "|")
        for row in s.rows:
            print("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
        print()


def print_terminal(r: FleetReport) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(f"[bold]Fleet reliability[/], {_window_text(r)}")
    for s in sections(r):
        if not s.rows:
            console.print(f"\n[bold]{s.title}[/]: {s.empty}")
            continue
        table = Table(title=s.title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        for i, c in enumerate(s.columns):
            table.add_column(c, justify="left" if i == 0 else "right", overflow="fold")
        for row in s.rows:
            table.add_row(*row)
        console.print(table)
        if s.note:
            console.print(f"[dim]{s.note}[/]")
    for n in r.lemons:
        console.print(f"[bold red]{n.node}[/]: {n.evidence}")


def _backfill(data_dir: str, runs: list[tuple[str, str]]) -> list[str]:
    """Analyse each run and record its accounting; the problems met, one line each."""
    from triage.supervisor.observe import analyze, record_accounting

    problems = []
    for i, (job, run) in enumerate(runs, 1):
        print(f"triage report: backfilling {i}/{len(runs)}: {job} run {run}", file=sys.stderr)
        try:
            analysis = analyze(Path(data_dir), job, run)
            if analysis is None:
                problems.append(f"{job} run {run}: no telemetry to account for")
                continue
            record_accounting(Path(data_dir), analysis)
        except Exception as exc:  # noqa: BLE001 - one bad run must not stop the others' backfill
            problems.append(f"{job} run {run}: {type(exc).__name__}: {exc}")
    return problems


def run(args: argparse.Namespace) -> int:
    data_dir = check_data_dir(data_dir_from_env(args.data_dir))
    now = time.time()
    until = now if args.until is None else parse_time(args.until, now, "--until")
    cfg = FleetConfig(
        since=parse_time(args.since, now, "--since"),
        until=until,
        top=args.top,
        lemon=LemonTest(args.lemon_alpha, args.lemon_min_failures),
    )
    with open_snapshot(data_dir) as snap:
        report = fleet_report(snap.con, cfg)
    if args.backfill and report.unaccounted_runs:
        for problem in _backfill(str(data_dir), report.unaccounted_runs):
            print(f"triage report: warning: {problem}", file=sys.stderr)
        with open_snapshot(data_dir) as snap:
            report = fleet_report(snap.con, cfg)
    if args.json:
        print(json.dumps({"data_dir": str(data_dir), **report.to_dict()}, default=str))
        return 0
    if report.runs == 0 and not report.unaccounted_runs:
        print(
            f"No runs with accounting in {data_dir} from {_window_text(report)}. Runs started with "
            "`triage run` (or `triage demo`) record theirs when they end; try `--since all`."
        )
        return 0
    if args.markdown:
        print_markdown(report)
    else:
        print_terminal(report)
    if report.unaccounted_runs:
        listed = ", ".join(f"{j}/{r}" for j, r in report.unaccounted_runs[:5])
        more = len(report.unaccounted_runs) - 5
        print(
            f"triage report: {len(report.unaccounted_runs)} ended run(s) have no accounting and are not "
            f"counted ({listed}{f', and {more} more' if more > 0 else ''}); `--backfill` analyses "
            "and records them",
            file=sys.stderr,
        )
    return 0
