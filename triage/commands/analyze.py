"""Analyse one job: root cause of each failed attempt, hangs, stragglers, GPU health, SDC,
numerical faults and goodput, from the store.

Every analyzer runs over one snapshot of the store (pending spools are ingested first where no
agent holds the node's partition). Each failed attempt gets exactly one root-cause incident
(culprit rank, node, GPU; the other ranks' errors listed as its consequences); non-fatal
findings (throttling, stragglers, PCIe, SDC, loss spikes) are separate incidents.

Exit codes: 0 the analysis ran and the job is running, completed or was preempted (even when
non-fatal incidents were found); 1 the job's latest attempt failed or hangs (the report names
why); 2 bad usage, an unknown job (the known ones are listed) or not a Triage data directory.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime
from typing import Any, cast

from triage.analyzers.config import AnalyzerConfig
from triage.analyzers.job_analysis import JobAnalysis, analyze_job
from triage.config import ConfigError, add_config_args, config_from_args, data_dir_from_env
from triage.store import StoreError, check_data_dir, ingest_spools, open_snapshot
from triage.store.job_data import NO_RUN, list_jobs, list_runs, load_job

#: Statuses of a job that needs attention: `triage analyze` exits 1 on them.
FAILED_STATUSES = ("failed", "hung")
_STATUS_STYLE = {
    "running": "cyan",
    "completed": "green",
    "failed": "bold red",
    "hung": "bold red",
    "preempted": "yellow",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job_id", metavar="JOB_ID", help="the job to analyse (`triage jobs` lists them)")
    parser.add_argument(
        "--run",
        metavar="RUN_ID",
        help="which run of the job (each `triage run` of a job id is a run; "
        f"`triage jobs` lists them; `{NO_RUN}` for telemetry without a run "
        "id); default: the newest",
    )
    parser.add_argument(
        "--data-dir", help="Triage data directory (default: $TRIAGE_DATA_DIR or ./triage-data)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the report")
    parser.add_argument(
        "--ingest",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="ingest pending spools first where no agent is writing (default: yes)",
    )
    add_config_args(parser, AnalyzerConfig)


def analyze(
    data_dir: str | None, job_id: str, cfg: AnalyzerConfig, ingest: bool, run: str | None = None
) -> JobAnalysis:
    """Open a snapshot of the store and analyse one run of a job (the newest by default);
    ConfigError names the known jobs, or the job's runs."""
    path = check_data_dir(data_dir_from_env(data_dir))
    if ingest:
        try:
            for why in ingest_spools(path).refused:
                print(f"triage analyze: warning: {why}", file=sys.stderr)
        except (OSError, StoreError) as exc:
            print(
                f"triage analyze: warning: could not ingest pending spools ({exc}); analysing what is stored",
                file=sys.stderr,
            )
    with open_snapshot(path, now=cfg.now) as snap:
        for problem in snap.problems:
            print(f"triage analyze: warning: {problem}", file=sys.stderr)
        runs = list_runs(snap.con, job_id)
        if not runs:
            known = list_jobs(snap.con)
            listing = ", ".join(known) if known else "none yet (run `triage demo`)"
            raise ConfigError(f"no job {job_id!r} in {path}; known jobs: {listing}")
        try:
            job = load_job(snap.con, job_id, run=run)
        except KeyError:
            listing = ", ".join(r.label for r in reversed(runs))
            raise ConfigError(
                f"job {job_id!r} has no run {run!r}; its runs, newest first: {listing}"
            ) from None
    return analyze_job(job, cfg)


def run(args: argparse.Namespace) -> int:
    now = args.now if args.now is not None else time.time()
    cfg = config_from_args(AnalyzerConfig, args, now=now)
    result = analyze(args.data_dir, args.job_id, cfg, args.ingest, args.run)
    if args.json:
        print(json.dumps(result.to_dict(), default=str))
    else:
        print_report(result)
    return 1 if result.status in FAILED_STATUSES else 0


def _t(t: float | None) -> str:
    return "-" if t is None else datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S")


def _culprit(c: dict[str, Any]) -> str:
    parts = [f"{k} {c[k]}" for k in ("rank", "node", "gpu") if c.get(k) is not None]
    if c.get("uuid"):
        parts.append(str(c["uuid"]))
    return ", ".join(parts) or "-"


def print_report(a: JobAnalysis) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    style = _STATUS_STYLE.get(a.status, "")
    run = f" run {a.run_id}" if a.run_id else ""
    console.print(
        f"[bold]Job {a.job_id}{run}[/]: [{style}]{a.status}[/]"
        if style
        else f"[bold]Job {a.job_id}{run}[/]: {a.status}"
    )
    attempts = Table(title="Attempts")
    for col in ("attempt", "status", "ranks", "nodes", "steps", "start", "duration"):
        attempts.add_column(col)
    for at in a.attempts:
        steps = "-" if at.first_step is None else f"{at.first_step}-{at.last_step}"
        dur = "-" if at.start is None or at.end is None else f"{at.end - at.start:.0f} s"
        attempts.add_row(
            str(at.attempt), at.status, str(at.ranks), ", ".join(at.nodes), steps, _t(at.start), dur
        )
    console.print(attempts)

    if a.incidents:
        inc = Table(title="Incidents", show_lines=True)
        for col in ("attempt", "category / action", "conf", "culprit", "summary and evidence"):
            inc.add_column(col, overflow="fold")
        for i in a.incidents:
            d = i.verdict.to_dict()
            # Log text carries brackets (gloo's `[file.cc:78]`) that rich would read as markup.
            body = ("[bold]ROOT CAUSE[/] " if i.root else "") + escape(d["summary"])
            for e in d["evidence"][:4]:
                body += f"\n  [dim]{_t(e['time'])} {e['source']}:[/] {escape(e['text'][:160])}"
            if d["consequences"]:
                body += (
                    f"\n  [dim]{len(d['consequences'])} consequence(s), first: "
                    f"{escape(d['consequences'][0][:160])}[/]"
                )
            inc.add_row(
                str(i.attempt),
                f"{d['category']}\n[dim]{d['layer']} -> {d['action']}[/]",
                f"{d['confidence']:.2f}",
                _culprit(d["culprit"]),
                body,
            )
        console.print(inc)
    else:
        console.print("No incidents: nothing went wrong that the telemetry shows.")

    g = a.goodput
    ratio = "-" if g.ratio is None else f"{g.ratio:.1%}"
    good = Table(title=f"Goodput {ratio} ({g.productive_s:.0f} s productive of {g.total_s:.0f} s)")
    good.add_column("badput")
    good.add_column("seconds", justify="right")
    good.add_column("share", justify="right")
    for name, secs in g.badput.items():
        good.add_row(name, f"{secs:.1f}", f"{secs / g.total_s:.1%}" if g.total_s else "-")
    console.print(good)
    if g.recommended_checkpoint_interval_s is not None:
        console.print(
            f"Recommended checkpoint interval (Young/Daly): "
            f"{g.recommended_checkpoint_interval_s:.0f} s (checkpoint cost "
            f"{g.checkpoint_cost_s:.1f} s, MTBF {g.mtbf_s:.0f} s)"
        )
    for note in g.notes:
        console.print(f"[dim]{note}[/]")

    if a.stragglers:
        st = Table(title="Slowest ranks (score = compute time / median rank)")
        for col in ("rank", "node", "score", "slow windows", "last to arrive", "others waited", "straggler"):
            st.add_column(col)
        for s in sorted(a.stragglers, key=lambda s: (-s.straggler, -s.score))[:10]:
            st.add_row(
                str(s.rank),
                s.node or "-",
                f"{s.score:.2f}",
                f"{s.slow_share:.0%}",
                f"{s.last_share:.0%}",
                f"{s.wait_caused_s:.1f} s",
                "[bold red]yes[/]" if s.straggler else "no",
            )
        console.print(st)

    if a.gpus:
        gt = Table(title="GPU health")
        for col in (
            "node",
            "gpu",
            "ranks",
            "samples",
            "max temp",
            "throttled",
            "ECC uncorr.",
            "Xids",
            "lost",
        ):
            gt.add_column(col)
        for row in a.gpus:
            gt.add_row(
                str(row["node"]),
                str(row["gpu"]),
                ",".join(map(str, cast("list[int]", row["ranks"]))),
                str(row["samples"]),
                "-" if row["max_temperature_celsius"] is None else f"{row['max_temperature_celsius']:.0f} C",
                "-" if row["throttled_share"] is None else f"{row['throttled_share']:.0%}",
                "-" if row["ecc_uncorrected"] is None else f"{row['ecc_uncorrected']:.0f}",
                str(row["xid_events"]),
                "[bold red]yes[/]" if row["lost"] else "no",
            )
        console.print(gt)
