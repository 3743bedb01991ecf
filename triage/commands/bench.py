"""Run one of Triage's benchmarks and report its numbers (`--json` for one JSON object).

Each benchmark lives in `triage.benchmarks.<module>` with `add_arguments(parser)` and
`run(args) -> int`; its exit code is passed through (1: below its target).
"""

from __future__ import annotations

import argparse
import importlib

#: name -> (module under triage.benchmarks, one-line help). Add a benchmark with one line here.
BENCHMARKS: dict[str, tuple[str, str]] = {
    "classify": ("classify", "log classifier accuracy and throughput on the labeled log corpus"),
    "ingest": ("ingest", "spool -> store ingest rows/s, store bytes per million rows, naive baseline"),
    "hooks": ("hooks", "training overhead of the in-rank telemetry (A/B) and cost per event"),
    "agent": ("agent", "the agent's CPU and peak RSS on a busy simulated node, beside a bare exporter"),
    "recovery": ("recovery", "time to detect and recover from a crash, a hang and a GPU fault; goodput"),
    "rca": ("rca", "root-cause accuracy under a seeded random fault campaign: F1, culprit, action, latency"),
    "analyze-scale": (
        "analyze_scale",
        "the whole analysis of a synthetic job of --ranks (1k-16k) x --steps: time, CPU, memory",
    ),
    "report": (
        "report",
        "`triage report` over a synthetic 10,000-job, 1,000-node history: time, memory, lemon nodes found",
    ),
    "probe": (
        "probe",
        "the supervisor's progress probe on a data dir with history: with it opened and left out",
    ),
    "bad-inputs": (
        "bad_inputs",
        "damaged spools, manifests and segments beside good data: contained, reported, rows lost",
    ),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)
    for name, (module_name, help_text) in BENCHMARKS.items():
        module = importlib.import_module(f"triage.benchmarks.{module_name}")
        p = sub.add_parser(
            name,
            help=help_text,
            description=module.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(p)
        p.set_defaults(_bench_run=module.run)


def run(args: argparse.Namespace) -> int:
    return int(args._bench_run(args) or 0)
