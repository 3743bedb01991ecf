"""Spool -> store ingest throughput (rows/s, target >= 1,000,000 on the reference 2-core
machine), the store's size on disk per million rows, and the naive baseline measured in the
same run: row-by-row INSERTs into a DuckDB table, timed on a sample and extrapolated.

The spool is what `--ranks` ranks write in `--flushes` one-second flushes: per flush one
`steps` row, one `heartbeats` row, `--collectives` collective rows (most rows, as in
tensor/pipeline-parallel training) and an `events` row every tenth flush, every table of a
flush in one segment as `SpoolWriter` writes it. The same rows written as one Parquet file per
table and flush (the layout ranks wrote before, still ingested) are timed beside it. Generating the spools is not
timed. Exit 1 below `--target`.
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from triage.config import ConfigError, add_config_args, config_from_args
from triage.store import ingest_spools
from triage.store.collective_summary import summary_path
from triage.store.ingest import IngestReport
from triage.store.layout import partition_dir
from triage.store.manifest import load_manifest
from triage.store.schema import duckdb_type
from triage.trainer_hooks.spool_schema import SPOOL_TABLES, read_segment, write_segment, writer_dir

NODE, JOB = "bench-node", "bench-job"


@dataclass
class IngestBenchConfig:
    ranks: int = field(default=8, metadata={"help": "ranks writing spools"})
    flushes: int = field(default=60, metadata={"help": "flushes (segments per table) per rank"})
    collectives: int = field(default=2000, metadata={"help": "collective rows per flush per rank"})
    naive_rows: int = field(
        default=2000,
        metadata={"help": "rows inserted one by one for the naive baseline (extrapolated to rows/s)"},
    )
    target: float = field(default=1_000_000.0, metadata={"help": "rows/s below which exit 1"})

    def __post_init__(self) -> None:
        if min(self.ranks, self.flushes, self.collectives, self.naive_rows) < 1:
            raise ConfigError("--ranks, --flushes, --collectives and --naive-rows must be >= 1")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_config_args(parser, IngestBenchConfig)


def _table(name: str, n: int, rank: int, values: dict[str, np.ndarray | list[Any]]) -> pa.Table:
    schema = SPOOL_TABLES[name]
    ident = {
        "job_id": [JOB] * n,
        "attempt": np.zeros(n),
        "rank": np.full(n, rank),
        "node": [NODE] * n,
        "gpu": np.full(n, rank % 8),
    }
    cols = {**ident, **values}
    return pa.table(
        {f.name: pa.array(cols[f.name], f.type) if f.name in cols else pa.nulls(n, f.type) for f in schema},
        schema=schema,
    )


def spool_flushes(cfg: IngestBenchConfig) -> Iterator[tuple[int, int, dict[str, pa.Table]]]:
    """(rank, seq, rows per table) of every flush of the benchmark job's spool."""
    rng = np.random.default_rng(0)
    c = cfg.collectives
    ops = ["all_gather", "reduce_scatter"] * (c // 2) + ["all_reduce"] * (c % 2)
    for rank in range(cfg.ranks):
        for step in range(cfg.flushes):
            t = 1.7e9 + step
            enter = t + np.sort(rng.random(c))
            tables = {
                "steps": _table(
                    "steps",
                    1,
                    rank,
                    {
                        "step": [step],
                        "start_time": [t],
                        "end_time": [t + 0.98],
                        "compute_s": [0.7],
                        "tokens": [8192],
                        "loss": [2.5],
                    },
                ),
                "collectives": _table(
                    "collectives",
                    c,
                    rank,
                    {
                        "seq": np.arange(step * c, (step + 1) * c),
                        "op": ops,
                        "group": ["tp"] * c,
                        "group_size": np.full(c, 8),
                        "bytes": np.full(c, 1 << 22),
                        "dtype": ["bfloat16"] * c,
                        "step": np.full(c, step),
                        "enter_time": enter,
                        "end_time": enter + 0.0004,
                        "algbw_bytes_per_s": rng.random(c) * 1e11,
                        "busbw_bytes_per_s": rng.random(c) * 1e11,
                    },
                ),
                "heartbeats": _table(
                    "heartbeats", 1, rank, {"time": [t + 0.99], "step": [step], "pid": [1000 + rank]}
                ),
            }
            if step % 10 == 0:
                tables["events"] = _table(
                    "events",
                    1,
                    rank,
                    {
                        "time": [t],
                        "kind": ["canary"],
                        "step": [step],
                        "message": ["canary ok"],
                        "detail": ["{}"],
                    },
                )
            yield rank, step, tables


def write_spool(data_dir: Path, cfg: IngestBenchConfig, fmt: str = "arrow") -> tuple[int, int, int]:
    """Write the spool as ranks do (`arrow`: a segment per flush), or as Triage did before
    (`parquet`: a snappy Parquet file per table and flush); returns its rows, files and bytes."""
    rows = files = size = 0
    for rank, step, tables in spool_flushes(cfg):
        d = writer_dir(data_dir, NODE, JOB, 0, rank, 1000 + rank)
        d.mkdir(parents=True, exist_ok=True)
        if fmt == "arrow":
            paths = [write_segment(d, step, tables)]
        else:
            paths = [
                d / f"{step * len(SPOOL_TABLES) + i:08d}.{name}.parquet" for i, name in enumerate(tables)
            ]
            for path, table in zip(paths, tables.values()):
                pq.write_table(table, path, compression="snappy")
        rows += sum(t.num_rows for t in tables.values())
        files += len(paths)
        size += sum(p.stat().st_size for p in paths)
    return rows, files, size


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def timed_ingest(data_dir: Path, spool_rows: int) -> tuple[float, float, IngestReport]:
    """(wall seconds, CPU seconds of every thread, report): on a shared machine the CPU
    seconds say what the ingest costs when the wall clock also counts other processes' turns."""
    start, cpu = time.perf_counter(), _cpu_s()
    report = ingest_spools(data_dir, NODE)
    elapsed, cpu = time.perf_counter() - start, _cpu_s() - cpu
    if report.total_rows != spool_rows or report.errors:
        raise RuntimeError(
            f"ingest stored {report.total_rows} of {spool_rows} rows "
            f"({len(report.errors)} errors): the benchmark would measure a broken store"
        )
    return elapsed, cpu, report


def naive_rows_per_s(data_dir: Path, sample: pa.Table) -> float:
    """Row-by-row INSERTs (one statement, one commit per row) into a DuckDB database file."""
    con = duckdb.connect(str(data_dir / "naive.duckdb"))
    cols = ", ".join(f'"{f.name}" {duckdb_type(f.type)}' for f in sample.schema)
    con.execute(f"CREATE TABLE collectives ({cols})")
    insert = f"INSERT INTO collectives VALUES ({', '.join('?' * sample.num_columns)})"
    rows = sample.to_pylist()
    start = time.perf_counter()
    for row in rows:
        con.execute(insert, list(row.values()))
    elapsed = time.perf_counter() - start
    con.close()
    return len(rows) / elapsed


def measure(cfg: IngestBenchConfig) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="triage-bench-ingest-") as tmp:
        data_dir = Path(tmp) / "arrow"
        spool_rows, spool_files, spool_bytes = write_spool(data_dir, cfg)
        sample = read_segment(next((data_dir / "spool").rglob("*.arrow")))["collectives"].slice(
            0, cfg.naive_rows
        )
        elapsed, cpu, report = timed_ingest(data_dir, spool_rows)
        manifest = load_manifest(partition_dir(data_dir, NODE))
        assert manifest is not None  # the ingest just wrote the partition
        part = partition_dir(data_dir, NODE)
        summaries = [summary_path(part / s.file) for s in manifest.segments]
        store_bytes = sum(s.bytes for s in manifest.segments) + sum(
            p.stat().st_size for p in summaries if p.exists()
        )
        legacy_dir = Path(tmp) / "parquet"
        _, legacy_files, legacy_bytes = write_spool(legacy_dir, cfg, "parquet")
        legacy_elapsed, _, _ = timed_ingest(legacy_dir, spool_rows)
        naive = naive_rows_per_s(Path(tmp), sample)
    rate = spool_rows / elapsed
    return {
        "rows": spool_rows,
        "rows_by_table": report.rows,
        "spool_segments": spool_files,
        "spool_bytes_per_million_rows": spool_bytes / spool_rows * 1e6,
        "store_segments": len(manifest.segments),
        "seconds": elapsed,
        "rows_per_s": rate,
        "cpu_s": cpu,
        "rows_per_cpu_s": spool_rows / cpu,
        "spool_segments_per_s": spool_files / elapsed,
        "store_bytes": store_bytes,
        "store_bytes_per_million_rows": store_bytes / spool_rows * 1e6,
        "parquet_spool_files": legacy_files,
        "parquet_spool_rows_per_s": spool_rows / legacy_elapsed,
        "parquet_spool_bytes_per_million_rows": legacy_bytes / spool_rows * 1e6,
        "naive_rows": sample.num_rows,
        "naive_rows_per_s": naive,
        "speedup_vs_naive": rate / naive,
        "target_rows_per_s": cfg.target,
    }


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(IngestBenchConfig, args)
    r = measure(cfg)
    if args.json:
        print(json.dumps(r))
    else:
        print(
            f"spool: {r['rows']:,} rows in {r['spool_segments']:,} segments from {cfg.ranks} ranks "
            f"({r['rows_by_table']})"
        )
        print(
            f"ingest: {r['seconds']:.2f} s = {r['rows_per_s']:,.0f} rows/s, "
            f"{r['spool_segments_per_s']:,.0f} spool segments/s (target {cfg.target:,.0f} rows/s); "
            f"{r['cpu_s']:.2f} CPU s = {r['rows_per_cpu_s']:,.0f} rows per CPU second"
        )
        print(
            f"spool: {r['spool_bytes_per_million_rows'] / 2**20:.1f} MiB per million rows (Arrow IPC, "
            "a segment per flush)"
        )
        print(
            f"store: {r['store_segments']} segments (and their collectives' summaries), {r['store_bytes']:,} bytes = "
            f"{r['store_bytes_per_million_rows'] / 2**20:.1f} MiB per million rows"
        )
        print(
            f"same rows as {r['parquet_spool_files']:,} Parquet files, a file per table and flush "
            f"(the spool layout before): {r['parquet_spool_rows_per_s']:,.0f} rows/s, "
            f"{r['parquet_spool_bytes_per_million_rows'] / 2**20:.1f} MiB per million rows"
        )
        print(
            f"naive row-by-row INSERT: {r['naive_rows_per_s']:,.0f} rows/s on {r['naive_rows']:,} rows; "
            f"ingest is {r['speedup_vs_naive']:,.0f}x faster"
        )
    return 0 if r["rows_per_s"] >= cfg.target else 1
