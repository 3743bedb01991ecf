"""Log classifier on the labeled corpus of real logs, per split: per-category precision, recall,
F1 and support, macro and micro F1, the confusion matrix, culprit-rank accuracy where the label
names one, the misses, and throughput in lines per second.

The corpus is `tests/data/logs/` (one file per log, `labels.json` maps file -> {category,
culprit_rank, source, split}). `split` is `tuned` for the logs the signatures were written
from and `heldout` for logs no signature was tuned on: the held-out numbers are the ones that
say how the classifier does on logs it has not seen. `--split` picks one; `all` (the default)
reports both and their union. Exit 1 when the category accuracy of the selected split (the
union for `all`) is below `--target`.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triage.analyzers.log_classifier import LogClassifier
from triage.config import ConfigError, add_config_args, config_from_args
from triage.taxonomy import Category
from triage.verdict import Verdict

DEFAULT_CORPUS = Path(__file__).resolve().parents[1] / "tests" / "data" / "logs"
#: A label without a split predates the held-out part: the signatures were written from it.
SPLITS = ("tuned", "heldout")

Log = tuple[str, dict[str, Any], list[str]]


@dataclass
class ClassifyBenchConfig:
    corpus: str = field(
        default=str(DEFAULT_CORPUS), metadata={"help": "folder holding the logs and labels.json"}
    )
    split: str = field(
        default="all",
        metadata={"help": "which part of the corpus to score", "choices": ("all", *SPLITS)},
    )
    target: float = field(
        default=0.86,
        metadata={
            "help": "category accuracy (of --split) below which exit 1 (0.86: the whole corpus holds "
            "every fresh held-out round as it came, a third to two thirds right)"
        },
    )
    repeat: int = field(default=20, metadata={"help": "passes over the corpus when timing throughput"})
    markdown: str = field(default="", metadata={"help": "also write the tables as Markdown to this file"})

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


def split_of(label: dict[str, Any]) -> str:
    return str(label.get("split", "tuned"))


def load_corpus(corpus: Path) -> list[Log]:
    """(file, label, lines) for every labeled log; a label whose file is missing is bad input."""
    labels = json.loads((corpus / "labels.json").read_text())
    out = []
    for name, label in sorted(labels.items()):
        path = corpus / name
        if not path.is_file():
            raise ConfigError(f"labels.json names {name}, which is not in {corpus}")
        if label["category"] not in {c.value for c in Category}:
            raise ConfigError(f"{name}: label category {label['category']!r} is not in the taxonomy")
        if split_of(label) not in SPLITS:
            raise ConfigError(f"{name}: split {label['split']!r} is not one of {', '.join(SPLITS)}")
        out.append((name, label, path.read_text(errors="replace").splitlines()))
    return out


def _f1(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def score(logs: list[Log], verdicts: dict[str, Verdict]) -> dict[str, Any]:
    """Every number of one split. Categories are those labeled or predicted in it (as
    scikit-learn does), so a wrong `unknown` costs `unknown`'s precision too; micro F1 of a
    single-label task equals accuracy and is reported to say so."""
    pairs = [(label["category"], verdicts[name].category.value) for name, label, _ in logs]
    confusion: dict[str, Counter[str]] = {}
    for expected, got in pairs:
        confusion.setdefault(expected, Counter())[got] += 1
    categories = sorted({c for pair in pairs for c in pair})
    per_category = {}
    for c in categories:
        tp = sum(1 for e, g in pairs if e == g == c)
        predicted = sum(1 for _, g in pairs if g == c)
        support = sum(1 for e, _ in pairs if e == c)
        precision = tp / predicted if predicted else 0.0
        recall = tp / support if support else 0.0
        per_category[c] = {
            "precision": precision,
            "recall": recall,
            "f1": _f1(precision, recall),
            "support": support,
            "predicted": predicted,
        }
    correct = sum(1 for e, g in pairs if e == g)
    accuracy = correct / len(pairs) if pairs else 0.0
    ranked = [(name, label) for name, label, _ in logs if label.get("culprit_rank") is not None]
    rank_misses = [
        {"file": name, "expected": label["culprit_rank"], "got": verdicts[name].culprit.rank}
        for name, label in ranked
        if verdicts[name].culprit.rank != label["culprit_rank"]
    ]
    misses = [
        {
            "file": name,
            "expected": label["category"],
            "got": verdicts[name].category.value,
            "summary": verdicts[name].summary,
        }
        for name, label, _ in logs
        if verdicts[name].category.value != label["category"]
    ]
    return {
        "files": len(logs),
        "lines": sum(len(lines) for _, _, lines in logs),
        "categories": len({label["category"] for _, label, _ in logs}),
        "accuracy": accuracy,
        "macro_f1": sum(m["f1"] for m in per_category.values()) / len(per_category) if per_category else 0.0,
        "micro_f1": accuracy,
        "per_category": per_category,
        "confusion": {e: dict(sorted(row.items())) for e, row in sorted(confusion.items())},
        "rank_accuracy": (len(ranked) - len(rank_misses)) / len(ranked) if ranked else None,
        "rank_labeled": len(ranked),
        "misses": misses,
        "rank_misses": rank_misses,
    }


def evaluate(corpus: Path, repeat: int = 1, split: str = "all") -> dict[str, Any]:
    """The scores of `split` (`all`: the union, with each split under `splits`) and throughput."""
    logs = [log for log in load_corpus(corpus) if split == "all" or split_of(log[1]) == split]
    verdicts = {name: LogClassifier(name).feed_all(lines).verdict() for name, _, lines in logs}
    result = score(logs, verdicts) | {"split": split}
    if split == "all":
        result["splits"] = {
            s: score([log for log in logs if split_of(log[1]) == s], verdicts) for s in SPLITS
        }
    start = time.perf_counter()
    for _ in range(repeat):
        for name, _, lines in logs:
            LogClassifier(name).feed_all(lines).verdict()
    elapsed = time.perf_counter() - start
    result["lines_per_s"] = result["lines"] * repeat / elapsed if elapsed > 0 else None
    return result


def markdown(result: dict[str, Any]) -> str:
    """One section per split: the per-category table, the summary line and the confusion matrix
    (rows: labeled category, columns: the verdict), ready to paste into the README."""
    parts = result.get("splits", {result["split"]: result})
    out = []
    for name, s in parts.items():
        rank = "n/a" if s["rank_accuracy"] is None else f"{s['rank_accuracy']:.1%} of {s['rank_labeled']}"
        out += [
            f"### {name}: {s['files']} logs",
            "",
            "| category | precision | recall | F1 | support |",
            "|---|---:|---:|---:|---:|",
        ]
        out += [
            f"| `{c}` | {m['precision']:.2f} | {m['recall']:.2f} | {m['f1']:.2f} | {m['support']} |"
            for c, m in s["per_category"].items()
        ]
        out += [
            "",
            f"accuracy {s['accuracy']:.1%}, macro F1 {s['macro_f1']:.3f}, micro F1 {s['micro_f1']:.3f}, "
            f"culprit-rank accuracy {rank}",
            "",
        ]
        cols = sorted({g for row in s["confusion"].values() for g in row})
        out += [
            "| labeled \\ verdict | " + " | ".join(f"`{c}`" for c in cols) + " |",
            "|---|" + "---:|" * len(cols),
        ]
        out += [
            f"| `{e}` | " + " | ".join(str(row.get(c, "")) for c in cols) + " |"
            for e, row in s["confusion"].items()
        ]
        out.append("")
    return "\n".join(out)


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(ClassifyBenchConfig, args)
    result = evaluate(Path(cfg.corpus), cfg.repeat, cfg.split)
    result["target"] = cfg.target
    if cfg.markdown:
        Path(cfg.markdown).write_text(markdown(result))
    if args.json:
        print(json.dumps(result))
    else:
        _print(result, cfg)
    return 0 if result["accuracy"] >= cfg.target else 1


def _print(result: dict[str, Any], cfg: ClassifyBenchConfig) -> None:
    from rich.console import Console

    console = Console()
    console.print(
        f"corpus: {result['files']} logs, {result['lines']} lines, "
        f"{result['categories']} categories ({cfg.corpus})"
    )
    for name, s in result.get("splits", {result["split"]: result}).items():
        rank = "n/a" if s["rank_accuracy"] is None else f"{s['rank_accuracy']:.1%} of {s['rank_labeled']}"
        console.print(
            f"{name} ({s['files']} logs): accuracy [bold]{s['accuracy']:.1%}[/], "
            f"macro F1 {s['macro_f1']:.3f}, micro F1 {s['micro_f1']:.3f}, culprit-rank accuracy {rank}"
        )
        for m in s["misses"]:
            console.print(f"  miss {m['file']}: expected {m['expected']}, got {m['got']}", markup=False)
        for m in s["rank_misses"]:
            console.print(f"  rank miss {m['file']}: expected {m['expected']}, got {m['got']}", markup=False)
    console.print(f"{result['split']}: accuracy {result['accuracy']:.1%} (target {cfg.target:.0%})")
    console.print(f"throughput: {result['lines_per_s']:,.0f} lines/s")
