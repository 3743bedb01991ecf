"""The agent's own cost on a busy node: CPU (share of one core, from /proc/<pid>/stat utime +
stime) and peak RSS (VmHWM) of `triage agent` with 8 simulated GPUs sampled every second while
8 ranks' synthetic spools grow by a flush per second (a steps row, a heartbeat and
`--collectives` collective rows per rank, in one segment, as `SpoolWriter` writes them), the
job's supervisor records its scores every minute as `triage run` does, and /metrics is scraped
every `--scrape-interval` seconds. Beside it, in the same run and window, the floor: prometheus_client's bare exporter (`start_http_server` with the default
registry) scraped the same way. Targets: at most 2% of one core and 200 MB RSS; exit 1 above.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from triage.config import ConfigError, add_config_args, config_from_args
from triage.ports import free_port
from triage.store import StoreWriter
from triage.store.layout import SUPERVISOR_PARTITION
from triage.store.schema import GOODPUT_RATIO, STRAGGLER_SCORE
from triage.trainer_hooks.spool_schema import SPOOL_TABLES, write_segment, writer_dir

NODE, JOB = "bench-node", "bench-job"
#: Seconds between the supervisor's analyses (`triage run --score-interval`'s default).
SCORE_INTERVAL_S = 60
_FLOOR = (
    "import sys, time; from prometheus_client import start_http_server; "
    "start_http_server(int(sys.argv[1]), addr='127.0.0.1'); time.sleep(1e9)"
)


@dataclass
class AgentBenchConfig:
    seconds: float = field(default=60.0, metadata={"help": "length of the measured window"})
    warmup: float = field(
        default=10.0,
        metadata={"help": "seconds after the agent serves /metrics before measuring (imports, first ingest)"},
    )
    ranks: int = field(default=8, metadata={"help": "ranks writing spools, one per GPU"})
    collectives: int = field(default=20, metadata={"help": "collective rows per rank per flush"})
    scrape_interval: float = field(default=5.0, metadata={"help": "seconds between scrapes"})
    target_cpu: float = field(default=0.02, metadata={"help": "CPU target, share of one core"})
    target_rss_mb: float = field(default=200.0, metadata={"help": "peak RSS target in MB"})

    def __post_init__(self) -> None:
        if self.seconds <= 0 or self.warmup < 0 or self.scrape_interval <= 0:
            raise ConfigError("--seconds and --scrape-interval must be > 0, --warmup >= 0")
        if not 1 <= self.ranks <= 8:
            raise ConfigError(f"--ranks must be 1..8 (one per simulated GPU), got {self.ranks}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_args(parser, AgentBenchConfig)
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _peak_rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmHWM for pid {pid}")


class SpoolRanks:
    """`ranks` synthetic ranks of one job, flushing once a second like `SpoolWriter`."""

    def __init__(self, data_dir: Path, ranks: int, collectives: int) -> None:
        self.data_dir = data_dir
        self.dirs = [writer_dir(data_dir, NODE, JOB, 0, r, os.getpid()) for r in range(ranks)]
        self.collectives = collectives
        self.seq = 0
        self.step = 0
        self.stop = threading.Event()
        now = time.time()
        for r, d in enumerate(self.dirs):
            d.mkdir(parents=True, exist_ok=True)
            write_segment(
                d,
                self.seq,
                {
                    "ranks": self._table(
                        r,
                        "ranks",
                        [
                            {
                                "pid": os.getpid(),
                                "local_rank": r,
                                "world_size": len(self.dirs),
                                "start_time": now,
                            }
                        ],
                    )
                },
            )
        self.seq += 1
        self.thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _table(rank: int, table: str, rows: list[dict[str, Any]]) -> pa.Table:
        schema = SPOOL_TABLES[table]
        ident = {"job_id": JOB, "attempt": 0, "rank": rank, "node": NODE, "gpu": rank}
        full = [{**ident, **row} for row in rows]
        return pa.table(
            {f.name: pa.array([row.get(f.name) for row in full], f.type) for f in schema}, schema=schema
        )

    def flush(self) -> None:
        """One segment per rank, as a rank's spool writer flushes every second."""
        t = time.time()
        for r, d in enumerate(self.dirs):
            write_segment(
                d,
                self.seq,
                {
                    "steps": self._table(
                        r,
                        "steps",
                        [
                            {
                                "step": self.step,
                                "start_time": t - 0.9,
                                "end_time": t,
                                "compute_s": 0.7,
                                "tokens": 8192,
                                "loss": 2.0,
                            }
                        ],
                    ),
                    "collectives": self._table(
                        r,
                        "collectives",
                        [
                            {
                                "seq": self.step * self.collectives + c,
                                "op": "all_reduce",
                                "group": "0",
                                "group_size": len(self.dirs),
                                "bytes": 1 << 24,
                                "step": self.step,
                                "enter_time": t - 0.5,
                                "end_time": t - 0.4,
                            }
                            for c in range(self.collectives)
                        ],
                    ),
                    "heartbeats": self._table(
                        r, "heartbeats", [{"time": t, "step": self.step, "pid": os.getpid()}]
                    ),
                },
            )
        self.seq += 1
        self.step += 1

    def record_scores(self) -> None:
        """The rows `triage run` records per analysis: the goodput ratio and a straggler score
        per rank, in the supervisor's partition, which the agent reads at every store batch."""
        t = time.time()
        rows = [{"job_id": JOB, "attempt": 0, "time": t, "name": GOODPUT_RATIO, "value": 0.9}]
        rows += [
            {
                "job_id": JOB,
                "attempt": 0,
                "time": t,
                "name": STRAGGLER_SCORE,
                "rank": r,
                "node": NODE,
                "value": 1.0,
            }
            for r in range(len(self.dirs))
        ]
        with StoreWriter(self.data_dir, SUPERVISOR_PARTITION) as writer:
            writer.append_rows("job_scores", rows)

    def _run(self) -> None:
        while not self.stop.wait(1.0):
            self.flush()
            if self.step % SCORE_INTERVAL_S == 0:
                self.record_scores()


def _wait_serving(proc: subprocess.Popen[str], port: int, timeout: float = 60.0) -> None:
    assert proc.stderr is not None  # started with stderr=PIPE
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode}: {proc.stderr.read()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"nothing served on port {port} within {timeout} s")


def measure(cfg: AgentBenchConfig) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="triage-bench-agent-") as tmp:
        data = Path(tmp)
        agent_port, floor_port = free_port(), free_port()
        spool = SpoolRanks(data, cfg.ranks, cfg.collectives)
        agent = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "triage.cli",
                "agent",
                "--data-dir",
                str(data),
                "--node",
                NODE,
                "--gpu",
                "sim",
                "--sim-gpus",
                "8",
                "--interval",
                "1",
                "--port",
                str(agent_port),
                "--log-level",
                "warning",
            ],
            stderr=subprocess.PIPE,
            text=True,
        )
        floor = subprocess.Popen(
            [sys.executable, "-c", _FLOOR, str(floor_port)], stderr=subprocess.PIPE, text=True
        )
        stop_scrapes = threading.Event()
        scrapes = {"agent": 0, "floor": 0}
        metric_bytes = {"agent": 0, "floor": 0}
        exported_scores = False

        def scrape_loop() -> None:
            nonlocal exported_scores
            while not stop_scrapes.wait(cfg.scrape_interval):
                for name, port in (("agent", agent_port), ("floor", floor_port)):
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                        body = r.read()
                    metric_bytes[name] = len(body)
                    scrapes[name] += 1
                    if name == "agent" and f'triage_job_goodput_ratio{{job="{JOB}"}}'.encode() in body:
                        exported_scores = True

        try:
            _wait_serving(agent, agent_port)
            _wait_serving(floor, floor_port)
            spool.record_scores()
            spool.thread.start()
            scraper = threading.Thread(target=scrape_loop, daemon=True)
            scraper.start()
            time.sleep(cfg.warmup)
            cpu0 = {n: _cpu_seconds(p.pid) for n, p in (("agent", agent), ("floor", floor))}
            wall0 = time.monotonic()
            time.sleep(cfg.seconds)
            wall = time.monotonic() - wall0
            cpu = {n: _cpu_seconds(p.pid) - cpu0[n] for n, p in (("agent", agent), ("floor", floor))}
            rss = {n: _peak_rss_bytes(p.pid) for n, p in (("agent", agent), ("floor", floor))}
            alive = agent.poll() is None
        finally:
            spool.stop.set()
            stop_scrapes.set()
            for p in (agent, floor):
                p.terminate()
            for p in (agent, floor):
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
        assert agent.stderr is not None  # started with stderr=PIPE
        agent_log = agent.stderr.read()
        if not alive:
            raise RuntimeError(f"the agent exited during the run: {agent_log[-2000:]}")
    return {
        "seconds": round(wall, 2),
        "ranks": cfg.ranks,
        "sim_gpus": 8,
        "spool_flushes_per_rank": spool.step,
        "scrape_interval_s": cfg.scrape_interval,
        "agent": {
            "cpu_share_of_one_core": round(cpu["agent"] / wall, 4),
            "peak_rss_mb": round(rss["agent"] / 1e6, 1),
            "scrapes": scrapes["agent"],
            "metrics_bytes": metric_bytes["agent"],
            "exported_supervisor_scores": exported_scores,
        },
        "floor_prometheus_client": {
            "cpu_share_of_one_core": round(cpu["floor"] / wall, 4),
            "peak_rss_mb": round(rss["floor"] / 1e6, 1),
            "scrapes": scrapes["floor"],
            "metrics_bytes": metric_bytes["floor"],
        },
        "target": {"cpu_share_of_one_core": cfg.target_cpu, "peak_rss_mb": cfg.target_rss_mb},
        "agent_warnings": [
            line for line in agent_log.splitlines() if " WARNING " in line or " ERROR " in line
        ][-10:],
    }


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(AgentBenchConfig, args)
    r = measure(cfg)
    a, f = r["agent"], r["floor_prometheus_client"]
    met = a["cpu_share_of_one_core"] <= cfg.target_cpu and a["peak_rss_mb"] <= cfg.target_rss_mb
    r["target_met"] = met
    if args.json:
        print(json.dumps(r))
    else:
        print(
            f"{r['seconds']:.0f} s, {cfg.ranks} ranks flushing every second, 8 simulated GPUs "
            f"sampled every second, /metrics scraped every {cfg.scrape_interval:g} s"
        )
        print(
            f"triage agent:          CPU {a['cpu_share_of_one_core']:.2%} of one core, peak RSS "
            f"{a['peak_rss_mb']:.0f} MB ({a['metrics_bytes']:,} bytes per scrape)"
        )
        print(
            f"prometheus_client bare: CPU {f['cpu_share_of_one_core']:.2%} of one core, peak RSS "
            f"{f['peak_rss_mb']:.0f} MB"
        )
        print(
            f"target: <= {cfg.target_cpu:.0%} of one core and <= {cfg.target_rss_mb:.0f} MB: "
            f"{'met' if met else 'MISSED'}"
        )
        for line in r["agent_warnings"]:
            print(f"agent log: {line}")
    return 0 if met else 1
