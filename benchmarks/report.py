"""`triage report` at fleet scale: a synthetic history of `--jobs` runs on `--nodes` nodes
(default 10,000 x 1,000 over 7 days, 5 lemon nodes; `benchmarks/fleet_history.py` says how it
fails) written as the supervisors would write it, then the report timed: in process (cold, then
the best of `--repeat` warm) and as the command a person runs (`triage report --json`, a fresh
process: imports, snapshot, report), with that process's peak RSS. It also scores the lemon
test against the truth the generator knows (precision, recall). `--sizes` repeats it at other
job counts (nodes scale with them) for a table of how cost grows. Exit 1 when the command takes
longer than `--target-s` or the lemon test names a healthy node.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triage.analyzers.fleet import FleetConfig, fleet_report
from triage.benchmarks.fleet_history import FleetSpec, generate_fleet
from triage.config import ConfigError, add_config_args, config_from_args
from triage.store import open_snapshot


@dataclass
class ReportBenchConfig:
    jobs: int = field(default=10_000, metadata={"help": "runs in the synthetic history"})
    nodes: int = field(default=1_000, metadata={"help": "nodes of the synthetic fleet"})
    lemons: int = field(default=5, metadata={"help": "lemon nodes among them"})
    days: float = field(default=7.0, metadata={"help": "days the history spans"})
    seed: int = field(default=0, metadata={"help": "seed of the history"})
    repeat: int = field(default=3, metadata={"help": "warm in-process runs (the best is reported)"})
    sizes: str = field(
        default="",
        metadata={
            "help": "comma-separated job counts to repeat the measurement at (nodes scale "
            "with jobs), e.g. 1000,10000,50000; default: --jobs alone"
        },
    )
    target_s: float = field(default=10.0, metadata={"help": "seconds `triage report` may take"})
    keep: str = field(
        default="",
        metadata={
            "help": "write the history into this new data dir and keep it, to look at with "
            "`triage report` or the dashboard (default: a temporary dir, removed)",
            "metavar": "DIR",
        },
    )

    def __post_init__(self) -> None:
        if min(self.jobs, self.repeat) < 1 or self.nodes < 2:
            raise ConfigError("--jobs and --repeat must be >= 1, --nodes >= 2")
        if self.sizes:
            try:
                counts = [int(x) for x in self.sizes.split(",")]
            except ValueError:
                raise ConfigError(f"--sizes {self.sizes!r}: expected job counts like 1000,10000") from None
            if min(counts) < 1:
                raise ConfigError("--sizes: every job count must be >= 1")
        if self.keep and (len(self.job_counts) > 1 or Path(self.keep).exists()):
            raise ConfigError("--keep takes one new directory (not with several --sizes)")

    @property
    def job_counts(self) -> list[int]:
        return [int(x) for x in self.sizes.split(",")] if self.sizes else [self.jobs]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_config_args(parser, ReportBenchConfig)


#: Runs the command in a fresh interpreter and reports that process's own peak RSS last.
_CHILD = (
    "import resource, sys\n"
    "from triage.cli import main\n"
    "rc = main(sys.argv[1:])\n"
    "sys.stdout.flush()\n"
    "print(f'peak_rss_kb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}', file=sys.stderr)\n"
    "sys.exit(rc)\n"
)


def _command(data_dir: Path) -> tuple[float, float, dict[str, Any]]:
    """(seconds, peak RSS MB, report) of `triage report --json --since all` in a new process."""
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, "report", "--data-dir", str(data_dir), "--since", "all", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    took = time.perf_counter() - start
    if out.returncode != 0:
        raise RuntimeError(f"triage report failed: {out.stderr.strip()[-500:]}")
    peak_kb = int(out.stderr.strip().splitlines()[-1].split("=", 1)[1])
    return took, peak_kb / 1024, json.loads(out.stdout)


def measure(cfg: ReportBenchConfig, jobs: int) -> dict[str, Any]:
    nodes = max(2, round(cfg.nodes * jobs / cfg.jobs))
    spec = FleetSpec(jobs=jobs, nodes=nodes, lemons=min(cfg.lemons, nodes - 1), seed=cfg.seed, days=cfg.days)
    with tempfile.TemporaryDirectory(prefix="triage-bench-report-") as tmp:
        data_dir = Path(cfg.keep or tmp)
        start = time.perf_counter()
        truth = generate_fleet(data_dir, spec)
        gen_s = time.perf_counter() - start
        fleet_cfg = FleetConfig()
        warm = []
        with open_snapshot(data_dir) as snap:
            start = time.perf_counter()
            report = fleet_report(snap.con, fleet_cfg)
            cold = time.perf_counter() - start
            for _ in range(cfg.repeat):
                start = time.perf_counter()
                fleet_report(snap.con, fleet_cfg)
                warm.append(time.perf_counter() - start)
        command_s, peak_mb, printed = _command(data_dir)
        if printed["runs"] != report.runs:
            raise RuntimeError("the command's report disagrees with the in-process one")
        flagged = {n.node for n in report.lemons}
        true = set(truth.lemons)
        return {
            "jobs": jobs,
            "nodes": nodes,
            "rows": truth.rows,
            "generate_s": round(gen_s, 2),
            "report_cold_s": round(cold, 3),
            "report_warm_s": round(min(warm), 3),
            "command_s": round(command_s, 3),
            "command_peak_rss_mb": round(peak_mb, 1),
            "ettr": report.ettr,
            "failures": report.failures,
            "lemons_true": sorted(true),
            "lemons_flagged": sorted(flagged),
            "lemon_precision": len(flagged & true) / len(flagged) if flagged else None,
            "lemon_recall": len(flagged & true) / len(true) if true else None,
        }


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(ReportBenchConfig, args)
    results = []
    for jobs in cfg.job_counts:
        print(f"bench report: {jobs} jobs ...", file=sys.stderr)
        results.append(measure(cfg, jobs))
    ok = all(r["command_s"] <= cfg.target_s and r["lemon_precision"] in (None, 1.0) for r in results)
    if args.json:
        print(json.dumps({"target_s": cfg.target_s, "ok": ok, "results": results}))
        return 0 if ok else 1
    print(
        f"{'jobs':>7} {'nodes':>6} {'rows':>9} {'report warm':>12} {'command':>8} {'peak RSS':>9} "
        f"{'lemons found':>13}"
    )
    for r in results:
        rows = sum(r["rows"].values())
        found = f"{len(set(r['lemons_flagged']) & set(r['lemons_true']))}/{len(r['lemons_true'])}"
        wrong = len(set(r["lemons_flagged"]) - set(r["lemons_true"]))
        print(
            f"{r['jobs']:>7} {r['nodes']:>6} {rows:>9,} {r['report_warm_s']:>10.2f} s {r['command_s']:>6.2f} s "
            f"{r['command_peak_rss_mb']:>6.0f} MB {found:>9}{f' +{wrong} wrong' if wrong else ''}"
        )
    print(f"target: `triage report` within {cfg.target_s:g} s; {'met' if ok else 'NOT met'}")
    return 0 if ok else 1
