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

from triage.analyzers.config import AnalyzerConfig
from triage.analyzers.job_analysis import JobAnalysis, analyze_job
from triage.commands.pending import ingest_pending
from triage.commands.report_view import print_analysis
from triage.config import ConfigError, add_config_args, config_from_args, data_dir_from_env
from triage.display import Status
from triage.store import check_data_dir, open_snapshot
from triage.store.job_data import NO_RUN, list_jobs, list_runs, load_job


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
        ingest_pending(path, "analyze")
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
        print_analysis(result)
    return 1 if Status(result.status).needs_attention else 0
