"""The whole analysis of a large job, timed: a synthetic job of `--ranks` ranks x `--steps` steps
(default 1024 x 2000: about 2M step rows, 2M heartbeats and 20M collective rows), generated
vectorised into a temporary data dir in the store format, then what `triage analyze` does on it
(`load_job` + `analyze_job`) run once cold and `--repeat` times warm, the best warm run reported
with its stages (each of `load_job`'s queries, then the analyzers). The analysis runs in a fresh
process, so its peak memory is its own: the peak resident set size (RSS) the kernel recorded for
that process (`getrusage` ru_maxrss), interpreter and libraries included. Three store queries
are timed beside it (per-rank step-time medians, the last-arriving rank per collective, progress
per rank). Several rank counts (`--ranks 1024,4096,16384`) measure one job each and end with a
Markdown table of how the cost grows. Exit 1 when a warm query takes longer than `--target-s` or
a warm analysis longer than `--analyze-target-s`. Generation streams chunks of ranks, so memory
stays at a few GB.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
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
from triage.store.collective_summary import ARRIVALS_SQL, SUMMARISED_TABLE, SUMMARY_SQL
from triage.store.job_data import load_job
from triage.store.schema import table_spec

if TYPE_CHECKING:
    from rich.console import Console

_T = TypeVar("_T")

JOB, NODE = "scale-job", "scale-node"


@dataclass
class AnalyzeScaleConfig:
    ranks: str = field(
        default="1024",
        metadata={
            "help": "ranks of the synthetic job; several, comma-separated (1024,4096,16384), "
            "measure a job each and show how the cost grows",
            "metavar": "N[,N...]",
        },
    )
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
        try:
            counts = self.rank_counts
        except ValueError:
            raise ConfigError(f"--ranks takes rank counts separated by commas, got {self.ranks!r}") from None
        if min(*counts, self.steps, self.collectives_per_step, self.ranks_per_chunk, self.repeat) < 1:
            raise ConfigError(
                "--ranks, --steps, --collectives-per-step, --ranks-per-chunk and --repeat must be >= 1"
            )

    @property
    def rank_counts(self) -> list[int]:
        return [int(n) for n in str(self.ranks).split(",")]


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


def _chunk(
    cfg: AnalyzeScaleConfig, world: int, ranks: np.ndarray, rng: np.random.Generator
) -> dict[str, pa.Table]:
    """Ranks, steps, heartbeats and collectives of some ranks of a `world`-rank job; rank 7
    straggles by 30%."""
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
            "group_size": np.full(n * c, world),
            "bytes": np.full(n * c, 1 << 24),
            "step": sc,
            "enter_time": enter,
            "end_time": enter + 0.05,
        },
    )
    m = len(ranks)
    rank_rows = _arrow(
        "ranks", {**ident(m, ranks), "world_size": np.full(m, world), "start_time": np.full(m, 1.7e9)}
    )
    return {"ranks": rank_rows, "steps": steps, "heartbeats": heartbeats, "collectives": collectives}


def generate(
    data_dir: Path, cfg: AnalyzeScaleConfig, world: int, progress: Callable[[int], None]
) -> dict[str, int]:
    """The job's rows, a chunk of ranks per commit (each table's segments written on both cores),
    collectives segments with their summaries: the store as the agent's maintenance leaves it
    (ingest leaves them to it)."""
    rng = np.random.default_rng(0)
    rows: dict[str, int] = {}
    with StoreWriter(data_dir, NODE) as writer:
        for first in range(0, world, cfg.ranks_per_chunk):
            ranks = np.arange(first, min(world, first + cfg.ranks_per_chunk))
            tables = {t: writer.conform(t, a)[0] for t, a in _chunk(cfg, world, ranks, rng).items()}
            writer.commit(writer.write_segments(tables))
            for table, arrow in tables.items():
                rows[table] = rows.get(table, 0) + arrow.num_rows
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


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _analysis_run(con: Any) -> tuple[float, float, dict[str, float], Any]:
    """One whole analysis: (wall seconds, CPU seconds of every thread, stages, result)."""
    stages: dict[str, float] = {}
    start, cpu = time.perf_counter(), _cpu_s()
    job = load_job(con, JOB, timings=stages)
    mid = time.perf_counter()
    analysis = analyze_job(job, AnalyzerConfig())
    end = time.perf_counter()
    stages["analyzers"] = end - mid
    return end - start, _cpu_s() - cpu, stages, analysis


def analyze(data_dir: str, repeat: int, world: int) -> dict[str, Any]:
    """What `triage analyze` does on the job, once cold then `repeat` times warm, in this
    process (`measure` runs it in a fresh one, so the peak RSS is the analysis' own)."""
    with open_snapshot(data_dir) as snap:
        cold, _, _, analysis = _analysis_run(snap.con)
        if analysis.job_id != JOB or len(analysis.stragglers) != world:
            raise RuntimeError("the analysis of the synthetic job came back incomplete")
        warm = min((_analysis_run(snap.con)[:3] for _ in range(repeat)), key=lambda r: r[0])
        # side by side: the arrivals from the segments' summaries, and from the rows as before them
        params = {"job": JOB, "run": None}
        arrivals = {
            source: _timed(lambda sql=sql: snap.con.execute(sql, params).df(), repeat)[1]  # type: ignore[misc]
            for source, sql in (
                ("summaries", ARRIVALS_SQL.format(summaries="collective_summaries")),
                ("rows", ARRIVALS_SQL.format(summaries=f"({SUMMARY_SQL.format(source=SUMMARISED_TABLE)})")),
            )
        }
    return {
        "arrivals_s": arrivals,
        "cold_s": cold,
        "warm_s": warm[0],
        "warm_cpu_s": warm[1],
        "stages_s": dict(sorted(warm[2].items(), key=lambda kv: -kv[1])),
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }


def _in_fresh_process(fn: Callable[..., _T], *args: Any) -> _T:
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(fn, args)


def measure_job(cfg: AnalyzeScaleConfig, world: int, show_progress: bool) -> dict[str, Any]:
    from rich.progress import Progress

    with tempfile.TemporaryDirectory(prefix="triage-bench-scale-") as tmp:
        data_dir = Path(tmp)
        start = time.perf_counter()
        with Progress(disable=not show_progress, transient=True, console=_stderr_console()) as bar:
            task = bar.add_task(f"generating {world} ranks x {cfg.steps} steps", total=world)
            rows = generate(data_dir, cfg, world, lambda n: bar.advance(task, n))
        gen_s = time.perf_counter() - start
        queries: dict[str, dict[str, float]] = {}
        with open_snapshot(data_dir) as snap:
            checks: dict[str, tuple[Callable[[], Any], Callable[[Any], bool]]] = {
                "step_time_medians": (lambda: snap.step_time_medians(JOB, 0), lambda r: len(r) == world),
                "last_arrivals": (
                    lambda: snap.last_arrivals(JOB, 0),
                    lambda r: len(r) == cfg.steps * cfg.collectives_per_step,
                ),
                "rank_progress": (
                    lambda: snap.rank_progress(JOB, 0),
                    lambda r: len(r) == world and r[0].max_step == cfg.steps - 1,
                ),
            }
            for name, (fn, ok) in checks.items():
                cold, warm, result = _timed(fn, cfg.repeat)
                if not ok(result):
                    raise RuntimeError(f"query {name} returned a wrong answer at this scale")
                queries[name] = {"cold_s": cold, "warm_s": warm}
        full = {**_in_fresh_process(analyze, tmp, cfg.repeat, world), "target_s": cfg.analyze_target_s}
        store_bytes = sum(p.stat().st_size for p in (data_dir / "store").rglob("*.parquet*"))
    return {
        "ranks": world,
        "steps": cfg.steps,
        "rows": rows,
        "generate_s": gen_s,
        "store_bytes": store_bytes,
        "queries": queries,
        "target_s": cfg.target_s,
        "analyze_job": full,
    }


def measure(cfg: AnalyzeScaleConfig, show_progress: bool) -> dict[str, Any]:
    return {"jobs": [measure_job(cfg, world, show_progress) for world in cfg.rank_counts]}


def _stderr_console() -> Console:
    from rich.console import Console

    return Console(file=sys.stderr)


def scaling_table(jobs: list[dict[str, Any]]) -> str:
    """How the whole analysis grows with the job, as Markdown."""
    lines = [
        "| ranks x steps | collective rows | step rows | store MiB | analysis warm s (cold) "
        "| CPU s | s per 10M collective rows | peak RSS MiB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for j in jobs:
        a, rows = j["analyze_job"], j["rows"]
        lines.append(
            f"| {j['ranks']:,} x {j['steps']:,} | {rows['collectives'] / 1e6:.1f}M | {rows['steps'] / 1e6:.1f}M "
            f"| {j['store_bytes'] / 2**20:,.0f} | {a['warm_s']:.2f} ({a['cold_s']:.2f}) | {a['warm_cpu_s']:.2f} "
            f"| {a['warm_s'] / rows['collectives'] * 1e7:.2f} | {a['peak_rss_bytes'] / 2**20:,.0f} |"
        )
    return "\n".join(lines)


def _print_job(j: dict[str, Any], cfg: AnalyzeScaleConfig) -> None:
    print(
        f"synthetic job: {j['ranks']} ranks x {j['steps']} steps, rows {j['rows']}, "
        f"{j['store_bytes'] / 2**20:.0f} MiB stored, generated in {j['generate_s']:.1f} s"
    )
    for name, q in j["queries"].items():
        print(f"{name:>18}: warm {q['warm_s']:.3f} s (cold {q['cold_s']:.3f} s; target {cfg.target_s} s)")
    a = j["analyze_job"]
    print(
        f"{'full analysis':>18}: warm {a['warm_s']:.3f} s, {a['warm_cpu_s']:.2f} CPU s (cold {a['cold_s']:.3f} s; "
        f"target {cfg.analyze_target_s} s); peak RSS {a['peak_rss_bytes'] / 2**20:,.0f} MiB"
    )
    arr = a["arrivals_s"]
    print(
        f"{'arrivals':>18}: from the segments' summaries {arr['summaries']:.3f} s, from the rows "
        f"{arr['rows']:.3f} s (x{arr['rows'] / arr['summaries']:.1f}), side by side"
    )
    top = list(a["stages_s"].items())
    shown = ", ".join(f"{name} {sec:.3f}" for name, sec in top[:6])
    rest = sum(sec for _, sec in top[6:])
    print(f"{'stages (warm, s)':>18}: {shown}, {len(top) - 6} more {rest:.3f}")


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(AnalyzeScaleConfig, args)
    r = measure(cfg, show_progress=True)
    if args.json:
        print(json.dumps(r))
    else:
        for j in r["jobs"]:
            _print_job(j, cfg)
        if len(r["jobs"]) > 1:
            print(scaling_table(r["jobs"]))
    ok = all(
        q["warm_s"] <= cfg.target_s and j["analyze_job"]["warm_s"] <= cfg.analyze_target_s
        for j in r["jobs"]
        for q in j["queries"].values()
    )
    return 0 if ok else 1
