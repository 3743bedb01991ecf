"""The supervisor's progress probe on a data dir with history, timed both ways in one run.

While an attempt runs, the supervisor reads its progress from the store every 2 seconds (step
progress, the collective stall, a fatal Xid on one of its GPUs). A data dir that has served
many jobs holds thousands of store segments of theirs until compaction and retention catch up;
a probe that opened a snapshot over all of them paid per segment (a footer check, a file in a
view) on every read. The probe now opens only the segments with records from the attempt's
start on (less `_CLOCK_SKEW_S`, from the manifest's time range per segment).

The data dir: `--nodes` partitions, each with `--old-segments` segments per table (steps,
heartbeats) of `--old-jobs` earlier jobs from three days ago, as ingest writes them before
compaction, and the running attempt's last minute of steps. Reported: the probe's best time
of `--repeat` with the history opened and with it left out, and their ratio. Exit 1 when the
two disagree on the attempt's progress.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triage.config import ConfigError, add_config_args, config_from_args
from triage.store import StoreWriter
from triage.supervisor.observe import Progress, read_attempt_progress

JOB, RUN = "probe-job", "probe-run"


@dataclass
class ProbeBenchConfig:
    nodes: int = field(default=2, metadata={"help": "node partitions in the data dir"})
    old_segments: int = field(
        default=500, metadata={"help": "segments per table and node of earlier jobs (history)"}
    )
    old_jobs: int = field(default=7, metadata={"help": "earlier jobs the history belongs to"})
    repeat: int = field(default=5, metadata={"help": "probes each way (the best is reported)"})

    def __post_init__(self) -> None:
        if min(self.nodes, self.old_jobs, self.repeat) < 1 or self.old_segments < 0:
            raise ConfigError("--nodes, --old-jobs and --repeat must be >= 1, --old-segments >= 0")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_args(parser, ProbeBenchConfig)
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def build(data_dir: Path, cfg: ProbeBenchConfig, now: float) -> float:
    """The data dir; returns when the running attempt started."""
    started = now - 60.0
    for n in range(cfg.nodes):
        with StoreWriter(data_dir, f"node{n}") as w:
            for k in range(cfg.old_segments):
                t = now - 3 * 86400 + 10.0 * k
                job = f"old-{k % cfg.old_jobs}"
                w.append_rows(
                    "steps",
                    [
                        {
                            "job_id": job,
                            "run_id": "r",
                            "attempt": 0,
                            "rank": n,
                            "step": k,
                            "start_time": t - 1,
                            "end_time": t,
                        }
                    ],
                )
                w.append_rows(
                    "heartbeats",
                    [{"job_id": job, "run_id": "r", "attempt": 0, "rank": n, "time": t, "step": k}],
                )
            w.append_rows(
                "steps",
                [
                    {
                        "job_id": JOB,
                        "run_id": RUN,
                        "attempt": 0,
                        "rank": n,
                        "step": s,
                        "start_time": t - 1.0,
                        "end_time": t,
                    }
                    for s, t in enumerate(started + 1.0 + i for i in range(55))
                ],
            )
    return started


def _best(fn: Callable[[], Progress], repeat: int) -> tuple[float, Progress]:
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    assert result is not None
    return best, result


def measure(cfg: ProbeBenchConfig) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="triage-bench-probe-") as tmp:
        data_dir = Path(tmp)
        started = build(data_dir, cfg, time.time())
        # since=None reads the whole store, as every probe did before
        everything, full = _best(lambda: read_attempt_progress(data_dir, JOB, RUN, 0), cfg.repeat)
        recent, pruned = _best(
            lambda: read_attempt_progress(data_dir, JOB, RUN, 0, since=started), cfg.repeat
        )
    return {
        "nodes": cfg.nodes,
        "old_segments_per_table_and_node": cfg.old_segments,
        "probe_with_history_s": everything,
        "probe_from_attempt_start_s": recent,
        "ratio": everything / recent if recent > 0 else None,
        "same_progress": (full.first_step, full.last_step, full.last_progress)
        == (pruned.first_step, pruned.last_step, pruned.last_progress),
    }


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(ProbeBenchConfig, args)
    out = measure(cfg)
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        print(
            f"progress probe, {cfg.nodes} node(s) x {cfg.old_segments} old segments per table: "
            f"{out['probe_with_history_s'] * 1000:.0f} ms with the history opened, "
            f"{out['probe_from_attempt_start_s'] * 1000:.0f} ms from the attempt's start "
            f"(x{out['ratio']:.1f}); same progress: {out['same_progress']}"
        )
    return 0 if out["same_progress"] else 1
