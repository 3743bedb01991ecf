"""Classify raw log files (torchrun stderr, Slurm output, dmesg, a pasted traceback) into the
failure taxonomy, without a store: root cause, culprit rank/node/GPU, evidence lines.

`-` reads standard input. Files are streamed line by line, so multi-GB logs are fine. Rotated
and copied logs come compressed: gzip, bzip2 and xz files (and stdin) are read as the text they
hold, told by their first bytes, not their names; a UTF-16 log (PowerShell's `>`) is read as
such, and the NUL blocks a crash leaves in a file are dropped. A directory stands for every file under it
(a torchrun `--log-dir`, a folder of Slurm outputs), one verdict per file; the binary files
found there (core dumps, checkpoints) are skipped and counted, not reported one by one.
Exit codes: 0 every file was classified (even as `unknown`), 2 a path is missing or unreadable,
or a read broke off (the verdict then covers the lines read before it; the other files are
still reported).
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import io
import json
import lzma
import os
import re
import stat
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any, AnyStr

from triage.analyzers.log_classifier import LogClassifier, LogClassifierConfig
from triage.config import add_config_args, config_from_args
from triage.taxonomy import Category
from triage.verdict import Verdict

EXIT_OK, EXIT_USAGE = 0, 2
#: A line longer than this is read in pieces: one huge line must not be loaded whole.
MAX_LINE_BYTES = 1 << 16
#: Consequences listed in the terminal; --json has all the verdict keeps.
_CONSEQUENCES_SHOWN = 5
#: Bytes sniffed to tell a binary file from a log.
SNIFF_BYTES = 8192
#: Control bytes a text log holds (tabs, line ends, a form feed, a backspace, colour escapes).
_TEXT_CONTROLS = frozenset(b"\t\n\r\x0b\x0c\x08\x1b")
#: Past this share of other control bytes (NULs aside), the bytes are no text.
_MAX_CONTROL_SHARE = 0.05


#: Compressed forms a log is found in (gzip, bzip2, xz), by magic bytes long enough that no text
#: log starts with them (gzip's deflate method byte; bzip2's block size digit and the first
#: block's or the empty stream's own magic): a regex -> reader.
_COMPRESSED: tuple[tuple[re.Pattern[bytes], Callable[[Any], io.BufferedIOBase]], ...] = (
    (re.compile(rb"\x1f\x8b\x08"), lambda raw: gzip.GzipFile(fileobj=raw, mode="rb")),
    (re.compile(rb"BZh[1-9](?:1AY&SY|\x17rE8P\x90)"), bz2.BZ2File),
    (re.compile(rb"\xfd7zXZ\x00"), lzma.LZMAFile),
)
_COMPRESSED_READERS = (gzip.GzipFile, bz2.BZ2File, lzma.LZMAFile)
#: Seconds between reports of a long read's progress (the first comes after as many) ...
_PROGRESS_EVERY_S = 2.0
#: ... looked at every so many lines (a clock read per line would cost the read's speed)
_PROGRESS_CHECK_LINES = 4096
#: Bytes read to tell the formats apart
_MAGIC_BYTES = 10
#: Formats the standard library cannot read: named, so the error can say how to read them.
_UNSUPPORTED = ((b"\x28\xb5\x2f\xfd", "zstd", "zstd -dc"), (b"\x04\x22\x4d\x18", "lz4", "lz4 -dc"))
#: What a damaged or truncated compressed stream (or a failing disk) raises part way through.
_READ_ERRORS = (OSError, EOFError, lzma.LZMAError, zlib.error)


@dataclass(frozen=True)
class LogRead:
    """One file's verdict. `error` says why the read broke off (the verdict is then of the lines
    read before it); `binary` marks a file that holds no text."""

    verdict: Verdict
    error: str | None = None
    binary: bool = False


class _Guarded(io.RawIOBase):
    """A stream whose read error ends it: every byte before a truncated archive's end (or a
    failing disk's bad block) is still read, and `error` keeps what broke it off."""

    def __init__(self, inner: io.BufferedIOBase) -> None:
        self._inner = inner
        self.error: BaseException | None = None
        self.read_bytes = 0  # of text (what a compressed file holds), for the progress shown

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.error is not None:
            return 0
        view = memoryview(buffer).cast("B")
        try:
            # read1: what one decompression step gives, before a later step finds the damage
            data = self._inner.read1(len(view))
        except _READ_ERRORS as exc:
            self.error = exc
            return 0
        view[: len(data)] = data
        self.read_bytes += len(data)
        return len(data)


class _Rejoined(io.RawIOBase):
    """The bytes sniffed from a stream's start, then the rest of it: stdin cannot seek back."""

    def __init__(self, head: bytes, rest: IO[bytes]) -> None:
        self._head = head
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        if self._head:
            n = min(len(view), len(self._head))
            view[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = self._rest.read(len(view))
        view[: len(data)] = data
        return len(data)


def open_log(raw: IO[bytes], name: str) -> io.BufferedIOBase:
    """The text bytes `raw` holds: itself, or what its gzip/bzip2/xz compression holds. A format
    the standard library cannot read is a ValueError that says how to read it instead."""
    head = raw.read(_MAGIC_BYTES)
    rejoined = io.BufferedReader(_Rejoined(head, raw))
    for magic, opener in _COMPRESSED:
        if magic.match(head):
            return opener(rejoined)
    for kind_magic, kind, command in _UNSUPPORTED:
        if head.startswith(kind_magic):
            source = "FILE" if name == "<stdin>" else name
            raise ValueError(
                f"{name} is {kind}-compressed, which triage cannot read itself: "
                f"`{command} {source} | triage classify -`"
            )
    return rejoined


@dataclass(frozen=True)
class LogPath:
    """One log to read: a FILE argument, or a file found under a directory argument (`directory`:
    a binary file there is skipped, not reported). `error` is why a directory (or a part of it)
    could not be listed: reported as such, nothing read."""

    path: str
    directory: str | None = None
    error: str | None = None


def expand_paths(paths: list[str]) -> Iterator[LogPath]:
    """Each FILE argument, and each file under a directory argument in name order."""
    for path in paths:
        if path == "-" or not os.path.isdir(path):
            yield LogPath(path)
            continue
        unlisted: list[OSError] = []
        found = False
        for root, dirs, files in os.walk(path, onerror=unlisted.append):
            dirs.sort()
            for file in sorted(files):
                full = os.path.join(root, file)
                if os.path.isfile(full):
                    found = True
                    yield LogPath(full, directory=path)
        if not found and not unlisted:
            yield LogPath(path)  # reading it says that it holds no file
        for exc in unlisted:
            where = exc.filename or path
            yield LogPath(where, error=f"cannot list {where}: {exc.strerror or exc}; check its permissions")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="log files (plain, gzip, bzip2 or xz) or directories of them; `-` reads stdin",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object per file, one per line")
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="say on stderr every 2 s how far a long read has come (default: where stderr is a terminal)",
    )
    add_config_args(parser, LogClassifierConfig)


def _looks_binary(head: bytes) -> bool:
    """Whether the first bytes are no text: control bytes a log never holds, NULs aside. A log
    a crash cut short is padded with NUL blocks where its last writes never landed, and a
    rank's output may carry a stray NUL: those are dropped, not taken for a binary file."""
    if head.startswith(b"\x7fELF"):
        return True
    body = head.replace(b"\0", b"")
    controls = sum(1 for b in body if (b < 0x20 and b not in _TEXT_CONTROLS) or b == 0x7F)
    return controls > _MAX_CONTROL_SHARE * len(body)


def _utf16(head: bytes) -> str | None:
    """The codec of a UTF-16 log (Windows PowerShell's `>` writes one), else None: by its byte
    order mark, or by ASCII text with every other byte NUL."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf-16"
    even, odd = head[0::2], head[1::2]
    if len(head) >= 16 and odd.count(0) > 0.9 * len(odd) and even.count(0) < 0.1 * len(even):
        return "utf-16-le"
    if len(head) >= 16 and even.count(0) > 0.9 * len(even) and odd.count(0) < 0.1 * len(odd):
        return "utf-16-be"
    return None


def _bounded_lines(
    readline: Callable[[int], AnyStr], first: AnyStr, newline: AnyStr, cut: AnyStr
) -> Iterator[AnyStr]:
    """Lines of at most twice MAX_LINE_BYTES: of a longer one, its start and its end with `cut`
    between them (still one line, so line numbers stay right; memory stays bounded). A
    progress bar's carriage-return updates make one line of megabytes whose last words, after
    its last update, may be the error that ended the job."""
    data = first + readline(MAX_LINE_BYTES)
    while data:
        if len(data) >= MAX_LINE_BYTES and not data.endswith(newline):
            tail = [readline(MAX_LINE_BYTES)]  # the last two reads hold the line's end
            while tail[-1] and not tail[-1].endswith(newline) and (more := readline(MAX_LINE_BYTES)):
                tail = [tail[-1], more]
            end = newline[:0].join(tail)[-MAX_LINE_BYTES:]
            if end:
                data = data + cut + end
        yield data
        data = readline(MAX_LINE_BYTES)


def _lines(stream: IO[bytes], head: bytes) -> Iterator[str]:
    """`_bounded_lines` of a byte stream, without NUL bytes."""
    for data in _bounded_lines(stream.readline, head, b"\n", b" [...] "):
        yield data.replace(b"\0", b"").decode("utf-8", errors="replace")


def _text_lines(text: IO[str]) -> Iterator[str]:
    """`_bounded_lines` of a stream decoded already."""
    for line in _bounded_lines(text.readline, "", "\n", " [...] "):
        yield line.replace("\0", "")


def _megabytes(n: int) -> str:
    return f"{n / 1e6:.0f}" if n >= 10e6 else f"{n / 1e6:.1f}"


def _shown_progress(
    lines: Iterator[str], name: str, guarded: _Guarded, total: int | None, out: IO[str]
) -> Iterator[str]:
    """`lines`, saying every few seconds how far the read has come: a 200 MB log (or one piped
    in) takes a minute, which must not look like a hang."""
    started = time.monotonic()
    shown = started
    on_terminal = out.isatty()  # one line, rewritten in place, and wiped once the read ends
    said = ""
    for i, line in enumerate(lines, 1):
        yield line
        if i % _PROGRESS_CHECK_LINES == 0 and (now := time.monotonic()) - shown >= _PROGRESS_EVERY_S:
            shown = now
            read = _megabytes(guarded.read_bytes)
            of = f" of {_megabytes(total)} MB ({100 * guarded.read_bytes / total:.0f}%)" if total else " MB"
            said = f"triage classify: {name}: {read}{of} read, {i:,} lines in {now - started:.0f} s"
            print(said, file=out, end="\r" if on_terminal else "\n", flush=True)
    if on_terminal and said:
        print(" " * len(said), file=out, end="\r", flush=True)


def classify_stream(
    raw: IO[bytes], name: str, config: LogClassifierConfig, progress: IO[str] | None = None
) -> LogRead:
    """Classify one byte stream, compressed or not. Binary or empty input gives an `unknown`
    verdict that says so; a read that breaks off (a truncated archive, a disk error) keeps the
    verdict of the lines read before it. Raises ValueError for a compression it cannot read and
    OSError where the stream cannot be read at all. With `progress`, a long read says there how
    far it has come."""
    inner = open_log(raw, name)
    guarded = _Guarded(inner)
    stream = io.BufferedReader(guarded)
    head = stream.read(SNIFF_BYTES)
    if not head and guarded.error is not None:
        raise OSError(str(guarded.error)) from guarded.error
    if not head:
        return LogRead(Verdict(Category.UNKNOWN, 0.0, f"{name} is empty: nothing to classify"))
    classifier = LogClassifier(name, config)
    if (codec := _utf16(head)) is not None:
        text = io.TextIOWrapper(io.BufferedReader(_Rejoined(head, stream)), encoding=codec, errors="replace")
        classifier.feed_all(_progressed(_text_lines(text), name, guarded, raw, inner, progress))
        return _finished(classifier, guarded, name)
    if _looks_binary(head):
        summary = f"{name} looks binary (control bytes no log holds), not a text log: nothing classified"
        return LogRead(Verdict(Category.UNKNOWN, 0.0, summary), binary=True)
    # Hand the sniffed bytes back to the line reader: whole lines now, the partial last one is
    # completed by the next read.
    cut = head.rfind(b"\n") + 1
    # split on newlines only, as the reader below does (and as `grep -n` numbers lines): a
    # carriage return inside a line is a progress bar's update, not a new line
    classifier.feed_all(head[:cut].replace(b"\0", b"").decode("utf-8", errors="replace").split("\n")[:-1])
    classifier.feed_all(_progressed(_lines(stream, head[cut:]), name, guarded, raw, inner, progress))
    return _finished(classifier, guarded, name)


def _progressed(
    lines: Iterator[str],
    name: str,
    guarded: _Guarded,
    raw: IO[bytes],
    inner: io.BufferedIOBase,
    out: IO[str] | None,
) -> Iterator[str]:
    """`lines`, with progress shown on `out` where one is given; of a plain file (not a pipe,
    not an archive: its text's size is unknown) the share read too."""
    if out is None:
        return lines
    total = None
    if not isinstance(inner, _COMPRESSED_READERS):
        try:
            st = os.fstat(raw.fileno())
            total = st.st_size if stat.S_ISREG(st.st_mode) and st.st_size else None
        except (OSError, ValueError, io.UnsupportedOperation):
            total = None
    return _shown_progress(lines, name, guarded, total, out)


def _finished(classifier: LogClassifier, guarded: _Guarded, name: str) -> LogRead:
    """The verdict of what was read, with why the read broke off where it did."""
    if guarded.error is None:
        return LogRead(classifier.verdict())
    error = (
        f"reading {name} broke off after line {classifier.lines} ({guarded.error}): the verdict "
        f"is of the lines before it; copy the file again from its source to read the rest"
    )
    return LogRead(classifier.verdict(), error=error)


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
    if record.get("error") != record["summary"]:  # a file not read at all: its error is the summary
        head.add_row("summary", Text(record["summary"]))
    if record.get("error"):
        head.add_row("error", Text(record["error"], style="red"))
    console.print(Panel(head, title=Text(record["file"]), title_align="left", border_style=style))
    if record["evidence"]:
        ev = Table("line", "evidence", show_edge=False, box=None)
        for e in record["evidence"]:
            ev.add_row(str(e["line"]), Text(e["text"]))
        console.print(ev)
    if record["consequences"]:
        shown = record["consequences"][:_CONSEQUENCES_SHOWN]
        more = len(record["consequences"]) - len(shown)
        console.print(
            f"[dim]consequences{f' (first {len(shown)} of {len(shown) + more}; --json lists them)' if more else ''}:[/]"
        )
        for c in shown:
            console.print("  " + c, style="dim", markup=False, highlight=False)


def run(args: argparse.Namespace) -> int:
    config = config_from_args(LogClassifierConfig, args)
    console = None
    if not args.json:
        from rich.console import Console

        console = Console()
    status = EXIT_OK
    progress = sys.stderr if (sys.stderr.isatty() if args.progress is None else args.progress) else None
    skipped: dict[str, int] = {}
    reported: set[str] = set()
    for log in expand_paths(args.files):
        name, directory = log.path, log.directory
        if log.error:
            status = EXIT_USAGE
            print(f"triage classify: error: {log.error}", file=sys.stderr)
            _emit(args.json, console, _record(name, Verdict(Category.UNKNOWN, 0.0, log.error), log.error))
            continue
        try:
            if name == "-":
                read = classify_stream(sys.stdin.buffer, "<stdin>", config, progress)
            else:
                with open(name, "rb") as stream:
                    read = classify_stream(stream, name, config, progress)
        except ValueError as exc:
            read = LogRead(Verdict(Category.UNKNOWN, 0.0, str(exc)), error=str(exc))
        except OSError as exc:
            why = "a directory with no file under it" if os.path.isdir(name) else exc.strerror or exc
            error = f"cannot read {name}: {why}; check the path and permissions"
            read = LogRead(Verdict(Category.UNKNOWN, 0.0, error), error=error)
        if directory is not None and read.binary:
            skipped[directory] = skipped.get(directory, 0) + 1
            continue
        if directory is not None:
            reported.add(directory)
        if read.error:
            status = EXIT_USAGE
            print(f"triage classify: error: {read.error}", file=sys.stderr)
        _emit(args.json, console, _record("<stdin>" if name == "-" else name, read.verdict, read.error))
    for directory, count in skipped.items():
        print(f"triage classify: skipped {count} binary file(s) under {directory}", file=sys.stderr)
        if directory not in reported:  # every file there was binary: say so, not nothing
            summary = f"{directory} holds no text log: its {count} file(s) are binary"
            _emit(args.json, console, _record(directory, Verdict(Category.UNKNOWN, 0.0, summary)))
    return status


def _emit(as_json: bool, console: Any, record: dict[str, Any]) -> None:
    if as_json:
        print(json.dumps(record), flush=True)
    else:
        _print_human(console, record)
