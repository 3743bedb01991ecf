"""Run the reference trainer as a small demo job: 4 ranks on 2 simulated nodes on loopback
(tiny model, checkpoints every 10 steps) and print its summary.

Interim: the supervisor will replace it with a demo of failure, diagnosis and restart.
Exit status: that of `triage train` (0 when the job completed).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from triage.config import data_dir_from_env
from triage.reference_trainer.launcher import launch
from triage.reference_trainer.train_config import TrainConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--steps", type=int, default=40, help="global steps (default: %(default)s)")
    parser.add_argument("--data-dir", help="site data directory; the run lands in DATA_DIR/runs "
                        "(default: env TRIAGE_DATA_DIR, else ./triage-data)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def render(summary: dict, run_dir: str, console: Console) -> None:
    table = Table(title=f"triage demo: job {summary['job_id']}", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    p50, tps = summary["step_time_p50_s"], summary["tokens_per_s"]
    for label, value in [
        ("outcome", summary["exit"]), ("world size", summary["world_size"]),
        ("steps completed", summary["steps_completed"]),
        ("resumed from step", summary["resumed_from_step"] or "-"),
        ("final loss", f"{summary['final_loss']:.4f}" if summary["final_loss"] else "-"),
        ("step time p50", f"{p50 * 1000:.1f} ms" if p50 else "-"),
        ("throughput", f"{tps:,.0f} tokens/s" if tps else "-"), ("run dir", run_dir)]:
        table.add_row(label, str(value))
    console.print(table)
    losses = summary["losses"]
    if losses:
        curve = Table(title="loss")
        curve.add_column("step", justify="right")
        curve.add_column("mean over ranks", justify="right")
        shown = losses[::max(1, len(losses) // 8)]
        for step, loss in shown + ([losses[-1]] if shown[-1] != losses[-1] else []):
            curve.add_row(str(step), f"{loss:.4f}")
        console.print(curve)


def run(args: argparse.Namespace) -> int:
    job_id = time.strftime("demo-%Y%m%d-%H%M%S")
    data_dir = data_dir_from_env(args.data_dir)
    run_dir = data_dir / "runs" / job_id
    summary_path = run_dir / "summary.json"
    cfg = TrainConfig(nnodes=2, nproc_per_node=2, steps=args.steps, checkpoint_every=10,
                      model="tiny", job_id=job_id, data_dir=str(data_dir), run_dir=str(run_dir),
                      summary=str(summary_path))
    rc = launch(cfg)
    summary = json.loads(Path(summary_path).read_text())
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        render(summary, str(run_dir), Console())
    return rc
