"""Log classifier on the labeled corpus of real logs: category accuracy (target >= 90%),
culprit-rank accuracy where the label names one, the confusion list of misses, and throughput
in lines per second.

The corpus is `tests/data/logs/` (one file per log, `labels.json` maps file -> {category,
culprit_rank, source}). Exit 1 when category accuracy is below `--target`.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triage.analyzers.log_classifier import LogClassifier
from triage.config import ConfigError, add_config_args, config_from_args
from triage.taxonomy import Category

DEFAULT_CORPUS = Path(__file__).resolve().parents[1] / "tests" / "data" / "logs"


@dataclass
class ClassifyBenchConfig:
    corpus: str = field(
        default=str(DEFAULT_CORPUS), metadata={"help": "folder holding the logs and labels.json"}
    )
    target: float = field(default=0.9, metadata={"help": "category accuracy below which exit 1"})
    repeat: int = field(default=20, metadata={"help": "passes over the corpus when timing throughput"})

    def __post_init__(self) -> None:
        if not 0.0 <= self.target <= 1.0:
            raise ConfigError(f"--target must lie in [0, 1], got {self.target}")
        if self.repeat < 1:
            raise ConfigError(f"--repeat must be at least 1, got {self.repeat}")
        labels = Path(self.corpus) / "labels.json"
        if not labels.is_file():
            raise ConfigError(f"no {labels}: pass --corpus with the folder of the labeled logs")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_config_args(parser, ClassifyBenchConfig)


def load_corpus(corpus: Path) -> list[tuple[str, dict[str, Any], list[str]]]:
    """(file, label, lines) for every labeled log; a label whose file is missing is bad input."""
    labels = json.loads((corpus / "labels.json").read_text())
    out = []
    for name, label in sorted(labels.items()):
        path = corpus / name
        if not path.is_file():
            raise ConfigError(f"labels.json names {name}, which is not in {corpus}")
        if label["category"] not in {c.value for c in Category}:
            raise ConfigError(f"{name}: label category {label['category']!r} is not in the taxonomy")
        out.append((name, label, path.read_text(errors="replace").splitlines()))
    return out


def evaluate(corpus: Path, repeat: int = 1) -> dict[str, Any]:
    """Accuracy, rank accuracy, misses and throughput of the classifier on the corpus."""
    logs = load_corpus(corpus)
    misses, rank_misses = [], []
    correct = rank_total = rank_correct = 0
    for name, label, lines in logs:
        verdict = LogClassifier(name).feed_all(lines).verdict()
        if verdict.category.value == label["category"]:
            correct += 1
        else:
            misses.append(
                {
                    "file": name,
                    "expected": label["category"],
                    "got": verdict.category.value,
                    "summary": verdict.summary,
                }
            )
        if label.get("culprit_rank") is not None:
            rank_total += 1
            if verdict.culprit.rank == label["culprit_rank"]:
                rank_correct += 1
            else:
                rank_misses.append(
                    {"file": name, "expected": label["culprit_rank"], "got": verdict.culprit.rank}
                )
    n_lines = sum(len(lines) for _, _, lines in logs)
    start = time.perf_counter()
    for _ in range(repeat):
        for name, _, lines in logs:
            LogClassifier(name).feed_all(lines).verdict()
    elapsed = time.perf_counter() - start
    return {
        "files": len(logs),
        "lines": n_lines,
        "categories": len({label["category"] for _, label, _ in logs}),
        "accuracy": correct / len(logs) if logs else 0.0,
        "rank_accuracy": rank_correct / rank_total if rank_total else None,
        "rank_labeled": rank_total,
        "misses": misses,
        "rank_misses": rank_misses,
        "lines_per_s": n_lines * repeat / elapsed if elapsed > 0 else None,
    }


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(ClassifyBenchConfig, args)
    result = evaluate(Path(cfg.corpus), cfg.repeat)
    result["target"] = cfg.target
    if args.json:
        print(json.dumps(result))
    else:
        from rich.console import Console

        console = Console()
        rank = (
            "n/a"
            if result["rank_accuracy"] is None
            else f"{result['rank_accuracy']:.1%} of {result['rank_labeled']}"
        )
        console.print(
            f"corpus: {result['files']} logs, {result['lines']} lines, "
            f"{result['categories']} categories ({cfg.corpus})"
        )
        console.print(f"category accuracy: [bold]{result['accuracy']:.1%}[/] (target {cfg.target:.0%})")
        console.print(f"culprit-rank accuracy: {rank}")
        console.print(f"throughput: {result['lines_per_s']:,.0f} lines/s")
        for m in result["misses"]:
            console.print(f"  miss {m['file']}: expected {m['expected']}, got {m['got']}", markup=False)
        for m in result["rank_misses"]:
            console.print(f"  rank miss {m['file']}: expected {m['expected']}, got {m['got']}", markup=False)
    return 0 if result["accuracy"] >= cfg.target else 1
