"""An attempt's output, captured: shown live as before, kept under the run in the data dir
(bounded, rotated), and its decisive lines handed to the store, where the analyzers read them.

A job that carries no Triage code and runs with --no-auto-hooks (or not in Python) tells what
went wrong only in its output, so that output is evidence like any other. torchrun reads its
flags from `PET_*` variables, so every rank's output comes through teed with a `[rank<N>]:`
prefix (`TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE`) without touching the command; a job's own
--tee, --redirects or --log-dir wins. Lines are read from the command's stdout and stderr
pipes, echoed to the supervisor's own stdout and stderr at once, and appended to
`logs/<job>/<run>/attempt-<N>.log`, which rotates to `.log.1` at half of `max_bytes`, so an
attempt never holds more than `max_bytes` on disk however much it prints. Each rank's lines (by
their prefix) also go to `attempt-<N>/rank-<R>.log`, bounded the same way at
`max_bytes / RANK_FILE_SHARE` each, for the first `MAX_RANK_FILES` ranks seen: what a person
reads when one rank is the question.

What goes to the store is small: lines the log classifier matches (at most
`MAX_DECISIVE_LINES` an attempt, `MAX_LINES_PER_SIGNATURE` of one signature from one rank) and
each rank's exit from torchrun's failure summary (`rank : 1 (local_rank: 1)` /
`exitcode : -9 (pid: 3109)`), with whether torchrun saw it first ("Root Cause"): the only
record of a rank killed by a signal, which no hook inside the rank can make.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from triage.analyzers.log_classifier import TracebackReader, classify_line, own_code_exception, rank_prefix
from triage.store.schema import EVENT_LOG_LINE, EVENT_RANK_EXIT, EVENT_SOURCE_SUPERVISOR

log = logging.getLogger(__name__)

#: Default bound on one attempt's captured output on disk (current file plus rotated one).
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
#: Each rank's own file holds at most this fraction of the attempt's bound (with its rotation).
RANK_FILE_SHARE = 8
#: Ranks whose lines get a file of their own (the combined log has every rank's).
MAX_RANK_FILES = 256
MAX_DECISIVE_LINES = 400
MAX_LINES_PER_SIGNATURE = 5
#: Longest line kept whole; the rest of a longer line is cut (a binary blob printed by mistake).
MAX_LINE_BYTES = 64 * 1024
_STORED_LINE_CHARS = 2000

_ROOT_HEADER = "Root Cause (first observed failure)"
_FAILURES_HEADER = "Failures:"
_SUMMARY_RANK_RE = re.compile(r"^\s*rank\s*:\s*(\d+)\s*\(local_rank:\s*(\d+)\)")
_SUMMARY_EXIT_RE = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)\s*\(pid:\s*(\d+)\)")
_SUMMARY_END_RE = re.compile(r"^={20,}\s*$")
#: PyTorch prefixes the tracebacks it prints with `[rank<N>]:` itself, and the tee adds the same
#: again: one is kept.
_DOUBLE_PREFIX_RE = re.compile(rb"^(\[rank\d+\]:)\1")


def torchrun_log_env(env: dict[str, str], scratch: Path) -> bool:
    """Set in `env` what makes torchrun tee each rank's output with its rank in front, and
    Python ranks flush each line (a rank killed by SIGKILL keeps its last lines). Returns
    whether `scratch` became torchrun's --log-dir (then the caller removes it afterwards:
    the tee's files repeat what the capture kept)."""
    if "PET_TEE" not in env and "PET_REDIRECTS" not in env:
        env["PET_TEE"] = "3"
    env.setdefault("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "[rank${rank}]:")
    env.setdefault("PYTHONUNBUFFERED", "1")
    if "PET_LOG_DIR" in env:
        return False
    env["PET_LOG_DIR"] = str(scratch)
    return True


@dataclass(frozen=True)
class CapturedLine:
    """A decisive line: when it was read, from which stream, the rank its prefix names."""

    time: float
    stream: str
    rank: int | None
    text: str
    signature: str


@dataclass(frozen=True)
class RankExit:
    """A rank's end as torchrun's failure summary reports it."""

    time: float
    rank: int
    local_rank: int
    exit_code: int
    pid: int
    first_observed: bool

    @property
    def signal_name(self) -> str | None:
        if self.exit_code >= 0:
            return None
        try:
            return signal.Signals(-self.exit_code).name
        except ValueError:
            return f"signal {-self.exit_code}"

    def describe(self) -> str:
        how = (
            f"was killed by {self.signal_name}"
            if self.signal_name
            else f"exited with status {self.exit_code}"
        )
        first = " (the launcher's first observed failure)" if self.first_observed else ""
        return f"rank {self.rank} (pid {self.pid}) {how}{first}"


class _RotatingFile:
    """Appends to `path`; past `max_bytes / 2` the file becomes `path.1` (replacing an older
    one) and a new one starts, so both together stay within `max_bytes`. A disk that fails
    (full, read-only) ends the file, never the job or the live output: `error` says why."""

    def __init__(self, path: Path, max_bytes: int) -> None:
        self.path = path
        self.limit = max(4096, max_bytes // 2)
        self.error: str | None = None
        self._fh: IO[bytes] | None = None
        self._size = 0
        self._guard(self._open)

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "ab")
        self._size = self._fh.tell()

    def _guard(self, fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except OSError as exc:
            self.error = f"{self.path}: {exc.strerror or exc}"
            log.warning(
                "the attempt's output is no longer kept on disk (%s); it is still shown and classified",
                self.error,
            )
            self._close()

    def write(self, data: bytes) -> None:
        if self._fh is not None:
            self._guard(self._write, data)

    def _write(self, data: bytes) -> None:
        assert self._fh is not None
        if self._size + len(data) > self.limit and self._size > 0:
            self._fh.close()
            os.replace(self.path, self.path.with_name(self.path.name + ".1"))
            self._open()
        assert self._fh is not None
        self._fh.write(data)
        self._size += len(data)

    def flush(self) -> None:
        if self._fh is not None:
            self._guard(self._fh.flush)

    def _close(self) -> None:
        fh, self._fh = self._fh, None
        if fh is not None:
            try:
                fh.close()
            except OSError:
                pass

    def close(self) -> None:
        self.flush()
        self._close()


class _Summary:
    """The state of torchrun's failure summary while its lines go by."""

    def __init__(self) -> None:
        self.section: str | None = None
        self.rank: tuple[int, int] | None = None

    def feed(self, text: str, now: float) -> RankExit | None:
        if _ROOT_HEADER in text:
            self.section, self.rank = "root", None
        elif text.strip() == _FAILURES_HEADER:
            self.section, self.rank = "failures", None
        elif self.section is not None:
            if (m := _SUMMARY_RANK_RE.match(text)) is not None:
                self.rank = (int(m.group(1)), int(m.group(2)))
            elif (m := _SUMMARY_EXIT_RE.match(text)) is not None and self.rank is not None:
                rank, local = self.rank
                self.rank = None
                return RankExit(now, rank, local, int(m.group(1)), int(m.group(2)), self.section == "root")
            elif _SUMMARY_END_RE.match(text) and self.section == "root":
                self.section = None
        return None


#: The line an attempt's log gets when the supervisor stops it, before the detection's name.
STOP_MARKER = "[triage] stopping the attempt:"


class AttemptLog:
    """The capture of one attempt's stdout and stderr (`attach`), until `close`."""

    def __init__(self, path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES, echo: bool = True) -> None:
        self.path = path
        self.echo = echo
        self._file = _RotatingFile(path, max_bytes)
        self.rank_dir = path.with_suffix("")
        self._rank_bytes = max_bytes // RANK_FILE_SHARE
        self._rank_files: dict[int, _RotatingFile] = {}
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.decisive: list[CapturedLine] = []
        self.exits: list[RankExit] = []
        self.lines = 0
        self._per_signature: Counter[tuple[str, int | None]] = Counter()
        self._tracebacks = TracebackReader()  # whose code raised what the ranks print
        self._summary = _Summary()
        self._stopping_at: float | None = None

    def stopping(self, detection: str) -> None:
        """The supervisor starts stopping the attempt: what the ranks and the launcher print
        from now on (SIGTERM received, workers killed) answers that stop, and says nothing
        about why the attempt failed, so it is kept on disk but not handed to the store. The
        log says so in a line of its own (`STOP_MARKER`): read later (`triage classify`), the
        SIGTERMs after it are this stop, not a preemption."""
        with self._lock:
            self._stopping_at = time.time()
            self._file.write(f"{STOP_MARKER} {detection} (the SIGTERMs that follow are Triage's)\n".encode())

    def attach(self, stdout: IO[bytes] | None, stderr: IO[bytes] | None) -> None:
        for name, pipe, echo_to in (("stdout", stdout, sys.stdout), ("stderr", stderr, sys.stderr)):
            if pipe is None:
                continue
            t = threading.Thread(
                target=self._pump, args=(name, pipe, echo_to), name=f"triage-log-{name}", daemon=True
            )
            t.start()
            self._threads.append(t)

    def _pump(self, stream: str, pipe: IO[bytes], echo_to: IO[str]) -> None:
        out = getattr(echo_to, "buffer", None)
        keeping = True
        try:
            while True:
                raw = pipe.readline(MAX_LINE_BYTES)
                if not raw:
                    return
                raw = _DOUBLE_PREFIX_RE.sub(rb"\1", raw, count=1)
                if self.echo:
                    self._echo(out, echo_to, raw)
                if keeping:
                    try:
                        self._take(stream, raw)
                    except Exception:
                        # happens here: a reader that stops would block the ranks' writes
                        log.exception(
                            "capturing the attempt's %s failed; it is still shown but no longer kept", stream
                        )
                        keeping = False
        except (OSError, ValueError):  # the pipe went away under us: nothing more to read
            return
        finally:
            pipe.close()

    @staticmethod
    def _echo(out: Any, echo_to: IO[str], raw: bytes) -> None:
        try:
            if out is not None:
                out.write(raw)
                out.flush()
            else:
                echo_to.write(raw.decode(errors="replace"))
                echo_to.flush()
        except (OSError, ValueError):  # a closed terminal must not stop the capture
            pass

    def _take(self, stream: str, raw: bytes) -> None:
        now = time.time()
        text = raw.decode(errors="replace").rstrip("\r\n")
        line = raw if raw.endswith(b"\n") else raw + b"\n"
        rank = rank_prefix(text)
        with self._lock:
            self.lines += 1
            self._file.write(line)
            own = None if rank is None else self._rank_file(rank)
            if own is not None:
                own.write(line)
            exit_ = self._summary.feed(text, now)
            if self._stopping_at is not None:
                return
            if exit_ is not None:
                self.exits.append(exit_)
                return
            end = self._tracebacks.read(text)
            if len(self.decisive) >= MAX_DECISIVE_LINES:
                return
            match = classify_line(text)
            if own_code_exception(end, text, match) and end is not None:
                # keep the frame that raised it with it: only where it was raised says the
                # exception is the job's own (a plain RuntimeError of the script's)
                self._keep(now, stream, rank, "own-code-exception", (*end.frame, text))
            elif match is not None:
                self._keep(now, stream, rank, match.signature, (text,))

    def _keep(
        self, now: float, stream: str, rank: int | None, signature: str, texts: tuple[str, ...]
    ) -> None:
        key = (signature, rank)
        self._per_signature[key] += 1
        if self._per_signature[key] > MAX_LINES_PER_SIGNATURE:
            return
        for text in texts:
            self.decisive.append(CapturedLine(now, stream, rank, text[:_STORED_LINE_CHARS], signature))

    def _rank_file(self, rank: int) -> _RotatingFile | None:
        """The rank's own file; None past `MAX_RANK_FILES` ranks (the combined log has them)."""
        f = self._rank_files.get(rank)
        if f is None and len(self._rank_files) < MAX_RANK_FILES:
            f = self._rank_files[rank] = _RotatingFile(self.rank_dir / f"rank-{rank}.log", self._rank_bytes)
        return f

    def flush(self) -> None:
        with self._lock:
            self._file.flush()
            for f in self._rank_files.values():
                f.flush()

    def close(self, timeout_s: float = 5.0) -> None:
        """Wait for the pipes to end (every process holding them has exited), at most
        `timeout_s`: a process that outlived its attempt may keep one open."""
        deadline = time.monotonic() + timeout_s
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            self._file.close()
            for f in self._rank_files.values():
                f.close()

    def event_rows(
        self, job_id: str, run_id: str, attempt: int, nodes: dict[int, str], default_node: str
    ) -> list[dict[str, Any]]:
        """The store's `events` rows for what this capture found (`nodes`: rank -> node as the
        supervisor saw the rank processes)."""
        with self._lock:
            lines, exits = list(self.decisive), list(self.exits)
        key = {"job_id": job_id, "run_id": run_id, "attempt": attempt, "source": EVENT_SOURCE_SUPERVISOR}
        rows = [
            {
                **key,
                "rank": ln.rank,
                "node": nodes.get(ln.rank, default_node) if ln.rank is not None else default_node,
                "time": ln.time,
                "kind": EVENT_LOG_LINE,
                "message": ln.text,
                "detail": json.dumps({"stream": ln.stream, "signature": ln.signature}),
            }
            for ln in lines
        ]
        rows += [
            {
                **key,
                "rank": e.rank,
                "node": nodes.get(e.rank, default_node),
                "time": e.time,
                "kind": EVENT_RANK_EXIT,
                "message": e.describe(),
                "detail": json.dumps(
                    {
                        "exit_code": e.exit_code,
                        "signal": e.signal_name,
                        "pid": e.pid,
                        "local_rank": e.local_rank,
                        "first_observed": e.first_observed,
                    }
                ),
            }
            for e in exits
        ]
        return rows
