"""Root-cause accuracy under a seeded, randomized fault campaign on the reference trainer.

Each trial runs real `triage run` jobs (torchrun, FSDP2 on gloo, simulated nodes with their
agents and simulated GPUs) in 2 nodes x 2 ranks or 1 node x 4 ranks, with faults injected at
random culprit ranks and steps: every fault kind of `triage train --inject` (`--repeats`
placements each), a fault during checkpoint load (`ckpt_corrupt`), pairs of faults in one
attempt (`pair_hw_sw`: a hot GPU or failing PCIe link, then a bug on another rank;
`pair_straggler_hang`), faults in the first step (`startup`), and three runs on one data dir
(`sequence`: a lost GPU's node quarantined, then two runs of a job on the other node).

The truth is the injection: the kind's taxonomy category, the injected rank and where the store
says it ran (node, GPU). The expected action is the restart policy's decision for the true
cause. A fault the job runs on (straggler, throttling, PCIe) is judged by the final
analysis's incidents. Jobs get no restart unless the trial needs one: the decision is judged,
recovery is `triage bench recovery`'s.

Printed and written to --out (rca.json, rca.md): per category precision, recall, F1 and
support, macro and micro F1, the confusion matrix, culprit accuracy (rank, node, GPU), action
accuracy with the false fail-fast and false restart rates, detection latency per kind (p50,
p90), and every miss with its inject spec, expected and got. Exit 1 when macro F1 or culprit
rank accuracy is below --min-macro-f1 / --min-culprit-accuracy.

Size, on the 2-core reference machine shared with other work: the full campaign is 22 kinds x
3 repeats, 66 trials (72 runs), 20-60 s a trial, 35-60 min; --quick is 5 trials (exception,
hang, lost GPU, ECC, straggler plus hang), 2.5-4.5 min.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triage.benchmarks.rca_campaign import ALL_KINDS, QUICK_KINDS, plan
from triage.benchmarks.rca_report import markdown
from triage.benchmarks.rca_scoring import Judgement, score
from triage.benchmarks.rca_trial import run_trial
from triage.config import ConfigError, add_config_args, config_from_args


@dataclass
class RcaBenchConfig:
    seed: int = field(
        default=0, metadata={"help": "seed of the placements (ranks, steps, layouts, variants)"}
    )
    kinds: str | None = field(
        default=None,
        metadata={"help": f"comma-separated kinds to run (default: all): {', '.join(ALL_KINDS)}"},
    )
    repeats: int | None = field(
        default=None, metadata={"help": "placements per kind (default: 3; 1 with --quick)", "metavar": "N"}
    )
    quick: bool = field(
        default=False, metadata={"help": f"the CI subset, one placement each: {', '.join(QUICK_KINDS)}"}
    )
    out: str = field(default="triage-bench-rca", metadata={"help": "folder for rca.json and rca.md"})
    data_dir: str | None = field(
        default=None,
        metadata={"help": "keep every trial's data dir here (default: temporary, removed afterwards)"},
    )
    min_macro_f1: float = field(default=0.0, metadata={"help": "exit 1 below this macro F1"})
    min_culprit_accuracy: float = field(
        default=0.0, metadata={"help": "exit 1 below this culprit rank accuracy"}
    )

    def __post_init__(self) -> None:
        unknown = [k for k in self.kind_list() if k not in ALL_KINDS]
        if unknown:
            raise ConfigError(f"--kinds: unknown {', '.join(unknown)}; choose from {', '.join(ALL_KINDS)}")
        if self.repeats is not None and self.repeats < 1:
            raise ConfigError(f"--repeats must be >= 1, got {self.repeats}")
        for flag, v in {
            "--min-macro-f1": self.min_macro_f1,
            "--min-culprit-accuracy": self.min_culprit_accuracy,
        }.items():
            if not 0.0 <= v <= 1.0:
                raise ConfigError(f"{flag} must lie in [0, 1], got {v}")

    def kind_list(self) -> tuple[str, ...]:
        if self.kinds:
            return tuple(k.strip() for k in self.kinds.split(",") if k.strip())
        return QUICK_KINDS if self.quick else ALL_KINDS

    def repeat_count(self) -> int:
        return self.repeats or (1 if self.quick else 3)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_args(parser, RcaBenchConfig)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of Markdown")


def campaign(cfg: RcaBenchConfig, data_root: Path, out: Path) -> dict[str, Any]:
    """Run every trial, one after another (each is a multi-process job on loopback); the
    scores so far are written after each trial, so an hour-long campaign cut short still
    leaves its numbers (`trials_done` says how far it got)."""
    started = time.time()
    trials = plan(cfg.seed, cfg.kind_list(), cfg.repeat_count())
    judgements: list[Judgement] = []
    records = []
    result: dict[str, Any] = {}
    for n, trial in enumerate(trials, 1):
        t0 = time.time()
        got, record = run_trial(trial, data_root / trial.name)
        judgements += got
        records.append({**record, "wall_s": round(time.time() - t0, 1)})
        missed = [j for j in got if j.missed]
        print(
            f"[{n}/{len(trials)}] {trial.name}: {'MISS' if missed else 'ok'} ({time.time() - t0:.0f} s)"
            + "".join(f"; expected {j.expected}, got {j.got}" for j in missed),
            file=sys.stderr,
            flush=True,
        )
        result = {
            "benchmark": "rca",
            "seed": cfg.seed,
            "kinds": list(cfg.kind_list()),
            "repeats": cfg.repeat_count(),
            "trials": len(trials),
            "trials_done": n,
            "wall_s": round(time.time() - started, 1),
            "scores": score(judgements),
            "judgements": [j.to_dict() for j in judgements],
            "runs": records,
        }
        write(result, out)
    return result


def write(result: dict[str, Any], out: Path) -> str:
    """rca.json and rca.md under `out`; the Markdown."""
    out.mkdir(parents=True, exist_ok=True)
    text = markdown(result)
    (out / "rca.json").write_text(json.dumps(result, indent=1))
    (out / "rca.md").write_text(text)
    return text


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(RcaBenchConfig, args)
    tmp = None if cfg.data_dir else tempfile.mkdtemp(prefix="triage-bench-rca-")
    try:
        result = campaign(cfg, Path(cfg.data_dir or str(tmp)), Path(cfg.out))
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(result, indent=1) if args.json else write(result, Path(cfg.out)))
    s = result["scores"]
    rank = s["culprit"]["rank"]["value"]
    below = (s["macro_f1"] or 0.0) < cfg.min_macro_f1 or (
        rank if rank is not None else 1.0
    ) < cfg.min_culprit_accuracy
    return 1 if below else 0
