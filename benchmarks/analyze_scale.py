"""The analyzers' store queries at scale: a synthetic job of `--ranks` ranks x `--steps` steps
(default 1024 x 2000: about 2M step rows, 2M heartbeats and 20M collective rows), generated
vectorised into a temporary data dir in the store format, then each query timed warm (best of
`--repeat` after one cold run): per-rank step-time medians, the last-arriving rank per
collective, and progress per rank (max step, last heartbeat). Exit 1 when a warm query takes
longer than `--target-s`. Generation streams chunks of ranks, so memory stays at a few GB.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pyarrow as pa

from triage.analyzers.config import AnalyzerConfig
from triage.analyzers.job_analysis import analyze_job
from triage.config import ConfigError, add_config_args, config_from_args
from triage.store import StoreWriter, open_snapshot
from triage.store.job_data import load_job
from triage.store.schema import table_spec

if TYPE_CHECKING:
    from rich.console import Console

_T = TypeVar("_T")

JOB, NODE = "scale-job", "scale-node"


@dataclass
class AnalyzeScaleConfig:
    ranks: int = field(default=1024, metadata={"help": "ranks of the synthetic job"})
    steps: int = field(default=2000, metadata={"help": "steps per rank"})
    collectives_per_step: int = field(default=10, metadata={"help": "collectives per step per rank"})
    ranks_per_chunk: int = field(
        default=64, metadata={"help": "ranks generated and written per store segment (bounds memory)"}
    )
    repeat: int = field(default=3, metadata={"help": "warm runs per query (the best is reported)"})
    target_s: float = field(default=2.0, metadata={"help": "warm seconds a query may take"})
    analyze_target_s: float = field(
        default=5.0, metadata={"help": "seconds the whole analysis (load_job + analyze_job) may take"}
    )

    def __post_init__(self) -> None:
        if min(self.ranks, self.steps, self.collectives_per_step, self.ranks_per_chunk, self.repeat) < 1:
            raise ConfigError(
                "--ranks, --steps, --collectives-per-step, --ranks-per-chunk and --repeat must be >= 1"
            )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_config_args(parser, AnalyzeScaleConfig)


def _arrow(table: str, columns: dict[str, np.ndarray | pa.Array]) -> pa.Table:
    schema = table_spec(table).schema
    n = len(next(iter(columns.values())))
    return pa.table(
        {
            f.name: pa.array(columns[f.name], f.type) if f.name in columns else pa.nulls(n, f.type)
            for f in schema
        },
        schema=schema,
    )


def _chunk(cfg: AnalyzeScaleConfig, ranks: np.ndarray, rng: np.random.Generator) -> dict[str, pa.Table]:
    """Steps, heartbeats and collectives of some ranks; rank 7 straggles by 30%."""
    r, s = np.meshgrid(ranks, np.arange(cfg.steps), indexing="ij")
    r, s = r.ravel(), s.ravel()
    n = len(r)
    t0 = 1.7e9 + s * 1.0
    step_time = 0.9 + rng.random(n) * 0.05 + np.where(r == 7, 0.3, 0.0)
    ident: Callable[[int, np.ndarray], dict[str, np.ndarray | pa.Array]] = lambda k, rr: {  # noqa: E731
        "job_id": pa.array([JOB]).take(np.zeros(k, dtype=np.int64)),
        "attempt": np.zeros(k),
        "rank": rr,
        "node": pa.array([NODE]).take(np.zeros(k, dtype=np.int64)),
        "gpu": rr % 8,
    }
    steps = _arrow(
        "steps",
        {
            **ident(n, r),
            "step": s,
            "start_time": t0,
            "end_time": t0 + step_time,
            "compute_s": step_time * 0.8,
            "tokens": np.full(n, 8192),
        },
    )
    heartbeats = _arrow("heartbeats", {**ident(n, r), "time": t0 + 0.99, "step": s, "pid": 1000 + r})
    c = cfg.collectives_per_step
    rc, sc = np.repeat(r, c), np.repeat(s, c)
    k = np.tile(np.arange(c), n)
    enter = np.repeat(t0, c) + k * 0.08 + rng.random(n * c) * 0.002 + np.where(rc == 7, 0.01, 0.0)
    ops = pa.array(["all_gather", "reduce_scatter"]).take(k % 2)
    collectives = _arrow(
        "collectives",
        {
            **ident(n * c, rc),
            "seq": sc * c + k,
            "op": ops,
            "group": pa.array(["dp"]).take(np.zeros(n * c, dtype=np.int64)),
            "group_size": np.full(n * c, cfg.ranks),
            "bytes": np.full(n * c, 1 << 24),
            "step": sc,
            "enter_time": enter,
            "end_time": enter + 0.05,
        },
    )
    return {"steps": steps, "heartbeats": heartbeats, "collectives": collectives}


def generate(data_dir: Path, cfg: AnalyzeScaleConfig, progress: Callable[[int], None]) -> dict[str, int]:
    rng = np.random.default_rng(0)
    rows: dict[str, int] = {}
    with StoreWriter(data_dir, NODE) as writer:
        for first in range(0, cfg.ranks, cfg.ranks_per_chunk):
            ranks = np.arange(first, min(cfg.ranks, first + cfg.ranks_per_chunk))
            for table, arrow in _chunk(cfg, ranks, rng).items():
                rows[table] = rows.get(table, 0) + writer.append_rows(table, arrow)
            writer.append_rows(
                "ranks",
                [
                    {
                        "job_id": JOB,
                        "attempt": 0,
                        "rank": int(x),
                        "node": NODE,
                        "gpu": int(x) % 8,
                        "world_size": cfg.ranks,
                        "start_time": 1.7e9,
                    }
                    for x in ranks
                ],
            )
            progress(len(ranks))
    return rows


def _timed(fn: Callable[[], _T], repeat: int) -> tuple[float, float, _T]:
    """(cold seconds, best warm seconds, result)."""
    start = time.perf_counter()
    result = fn()
    cold = time.perf_counter() - start
    warm = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        warm.append(time.perf_counter() - start)
    return cold, min(warm), result


def measure(cfg: AnalyzeScaleConfig, show_progress: bool) -> dict[str, Any]:
    from rich.progress import Progress

    with tempfile.TemporaryDirectory(prefix="triage-bench-scale-") as tmp:
        data_dir = Path(tmp)
        start = time.perf_counter()
        with Progress(disable=not show_progress, transient=True, console=_stderr_console()) as bar:
            task = bar.add_task(f"generating {cfg.ranks} ranks x {cfg.steps} steps", total=cfg.ranks)
            rows = generate(data_dir, cfg, lambda n: bar.advance(task, n))
        gen_s = time.perf_counter() - start
        queries: dict[str, dict[str, float]] = {}
        with open_snapshot(data_dir) as snap:
            checks: dict[str, tuple[Callable[[], Any], Callable[[Any], bool]]] = {
                "step_time_medians": (lambda: snap.step_time_medians(JOB, 0), lambda r: len(r) == cfg.ranks),
                "last_arrivals": (
                    lambda: snap.last_arrivals(JOB, 0),
                    lambda r: len(r) == cfg.steps * cfg.collectives_per_step,
                ),
                "rank_progress": (
                    lambda: snap.rank_progress(JOB, 0),
                    lambda r: len(r) == cfg.ranks and r[0].max_step == cfg.steps - 1,
                ),
            }
            for name, (fn, ok) in checks.items():
                cold, warm, result = _timed(fn, cfg.repeat)
                if not ok(result):
                    raise RuntimeError(f"query {name} returned a wrong answer at this scale")
                queries[name] = {"cold_s": cold, "warm_s": warm}
            # What `triage analyze` does on this job: load the aggregates and run every analyzer.
            cold, warm, analysis = _timed(
                lambda: analyze_job(load_job(snap.con, JOB), AnalyzerConfig()), cfg.repeat
            )
            if analysis.job_id != JOB or len(analysis.stragglers) != cfg.ranks:
                raise RuntimeError("the analysis of the synthetic job came back incomplete")
            full = {"cold_s": cold, "warm_s": warm, "target_s": cfg.analyze_target_s}
        store_bytes = sum(p.stat().st_size for p in (data_dir / "store").rglob("*.parquet"))
    return {
        "ranks": cfg.ranks,
        "steps": cfg.steps,
        "rows": rows,
        "generate_s": gen_s,
        "store_bytes": store_bytes,
        "queries": queries,
        "target_s": cfg.target_s,
        "analyze_job": full,
    }


def _stderr_console() -> Console:
    from rich.console import Console

    return Console(file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(AnalyzeScaleConfig, args)
    r = measure(cfg, show_progress=True)
    if args.json:
        print(json.dumps(r))
    else:
        print(
            f"synthetic job: {cfg.ranks} ranks x {cfg.steps} steps, rows {r['rows']}, "
            f"{r['store_bytes'] / 2**20:.0f} MiB stored, generated in {r['generate_s']:.1f} s"
        )
        for name, q in r["queries"].items():
            print(f"{name:>18}: warm {q['warm_s']:.3f} s (cold {q['cold_s']:.3f} s; target {cfg.target_s} s)")
        a = r["analyze_job"]
        print(
            f"{'full analysis':>18}: warm {a['warm_s']:.3f} s (cold {a['cold_s']:.3f} s; "
            f"target {cfg.analyze_target_s} s)"
        )
    ok = all(q["warm_s"] <= cfg.target_s for q in r["queries"].values())
    return 0 if ok and r["analyze_job"]["warm_s"] <= cfg.analyze_target_s else 1
