"""Classify raw log files (torchrun stderr, Slurm output, dmesg, a pasted traceback) into the
failure taxonomy, without a store: root cause, culprit rank/node/GPU, evidence lines.

`-` reads standard input. Files are streamed line by line, so multi-GB logs are fine.
Exit codes: 0 every file was classified (even as `unknown`), 2 a path is missing or unreadable
(the other files are still reported).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import IO, Any

from triage.analyzers.log_classifier import LogClassifier, LogClassifierConfig
from triage.config import add_config_args, config_from_args
from triage.taxonomy import Category
from triage.verdict import Verdict

EXIT_OK, EXIT_USAGE = 0, 2
#: A line longer than this is read in pieces: one huge line must not be loaded whole.
MAX_LINE_BYTES = 1 << 16
#: Bytes sniffed for NUL to tell a binary file from a log.
SNIFF_BYTES = 8192


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help="log files; `-` reads stdin")
    parser.add_argument("--json", action="store_true", help="print one JSON object per file, one per line")
    add_config_args(parser, LogClassifierConfig)


def _lines(stream: IO[bytes], head: bytes) -> Iterator[str]:
    """Lines of at most MAX_LINE_BYTES (the rest of a longer line is skipped, so line numbers
    stay right and memory stays bounded)."""
    data = head + stream.readline(MAX_LINE_BYTES)
    while data:
        yield data.decode("utf-8", errors="replace")
        tail = data
        while not tail.endswith(b"\n") and tail:
            tail = stream.readline(MAX_LINE_BYTES)
        data = stream.readline(MAX_LINE_BYTES)


def classify_stream(stream: IO[bytes], name: str, config: LogClassifierConfig) -> Verdict:
    """Classify one byte stream; binary or empty input gives an `unknown` verdict that says so."""
    head = stream.read(SNIFF_BYTES)
    if not head:
        return Verdict(Category.UNKNOWN, 0.0, f"{name} is empty: nothing to classify")
    if b"\0" in head:
        return Verdict(
            Category.UNKNOWN, 0.0, f"{name} looks binary (NUL bytes), not a text log: nothing classified"
        )
    # Hand the sniffed bytes back to the line reader: whole lines now, the partial last one is
    # completed by the next read.
    cut = head.rfind(b"\n") + 1
    # split on newlines only, as the reader below does (and as `grep -n` numbers lines): a
    # carriage return inside a line is a progress bar's update, not a new line
    lines = head[:cut].decode("utf-8", errors="replace").split("\n")[:-1]
    classifier = LogClassifier(name, config)
    classifier.feed_all(lines)
    classifier.feed_all(_lines(stream, head[cut:]))
    return classifier.verdict()


def _record(name: str, verdict: Verdict, error: str | None = None) -> dict[str, Any]:
    d = verdict.to_dict()
    record: dict[str, Any] = {
        "file": name,
        "category": d["category"],
        "layer": d["layer"],
        "action": d["action"],
        "confidence": d["confidence"],
        "culprit": {k: d["culprit"][k] for k in ("rank", "node", "gpu")},
        "summary": d["summary"],
        "evidence": [{"line": e["line"], "text": e["text"]} for e in d["evidence"]],
        "consequences": d["consequences"],
    }
    if error:
        record["error"] = error
    return record


def _print_human(console: Any, record: dict[str, Any]) -> None:
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    cat = record["category"]
    style = "yellow" if cat == "unknown" else "red"
    culprit = ", ".join(f"{k} {v}" for k, v in record["culprit"].items() if v is not None)
    head = Table.grid(padding=(0, 2))
    head.add_row(
        "category",
        f"[bold {style}]{cat}[/] (layer {record['layer']}, "
        f"action {record['action']}, confidence {record['confidence']:.2f})",
    )
    head.add_row("culprit", culprit or "-")
    head.add_row("summary", Text(record["summary"]))
    if record.get("error"):
        head.add_row("error", f"[red]{record['error']}[/]")
    console.print(Panel(head, title=Text(record["file"]), title_align="left", border_style=style))
    if record["evidence"]:
        ev = Table("line", "evidence", show_edge=False, box=None)
        for e in record["evidence"]:
            ev.add_row(str(e["line"]), Text(e["text"]))
        console.print(ev)
    if record["consequences"]:
        console.print(f"[dim]consequences ({len(record['consequences'])} shown):[/]")
        for c in record["consequences"][:5]:
            console.print("  " + c, style="dim", markup=False, highlight=False)


def run(args: argparse.Namespace) -> int:
    config = config_from_args(LogClassifierConfig, args)
    console = None
    if not args.json:
        from rich.console import Console

        console = Console()
    status = EXIT_OK
    for name in args.files:
        error = None
        try:
            if name == "-":
                verdict = classify_stream(sys.stdin.buffer, "<stdin>", config)
            else:
                with open(name, "rb") as stream:
                    verdict = classify_stream(stream, name, config)
        except OSError as exc:
            status = EXIT_USAGE
            error = f"cannot read {name}: {exc.strerror or exc}; check the path and permissions"
            verdict = Verdict(Category.UNKNOWN, 0.0, error)
            print(f"triage classify: error: {error}", file=sys.stderr)
        record = _record("<stdin>" if name == "-" else name, verdict, error)
        if args.json:
            print(json.dumps(record), flush=True)
        else:
            _print_human(console, record)
    return status
