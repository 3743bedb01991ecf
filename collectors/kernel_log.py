"""The kernel-log collector: new kernel-log lines -> `KernelLogEvent`s (and `GpuEvent`s for Xids).

Sources, tried in this order by `auto`: `/dev/kmsg` (non-blocking, from its current end or after
a saved sequence number), then `journalctl -k` (polled with a cursor). `dmesg` is not a separate
source: it reads the same ring buffer under the same permission (`dmesg_restrict`) as
/dev/kmsg, so it works exactly when /dev/kmsg does. A file path (the simulator's
`<data_dir>/sim-kmsg/<node>.log`, or a saved capture) is tailed like a log file. When no source
can be read (not root, a container) the collector says so with an `Unavailable` record at each
collect, logs it once, and the other collectors carry on.
"""

from __future__ import annotations

import errno
import logging
import os
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from triage.collectors.kernel_log_parser import gpu_event_from, parse_line
from triage.collectors.records import GpuIdentity, KernelLogEvent, Record, Unavailable
from triage.config import ConfigError

log = logging.getLogger(__name__)

KMSG_PATH = "/dev/kmsg"
_SOURCES = ("auto", "kmsg", "journalctl", "none")
#: An OOM kill is printed twice (the `oom-kill:` summary and `Killed process`); one kill, one event.
_OOM_DUPLICATE_WINDOW_S = 5.0
#: How often to try again to open a kernel log that could not be opened (journalctl is a process).
_REOPEN_INTERVAL_S = 60.0


@dataclass
class KernelLogConfig:
    kernel_log: str = field(
        default="auto",
        metadata={
            "help": "kernel log to read: auto (/dev/kmsg, else journalctl -k), kmsg, journalctl, "
            "none, or the path of a log file to tail",
            "metavar": "SOURCE",
        },
    )
    kernel_log_from_start: bool = field(
        default=False, metadata={"help": "read the kernel log from its beginning instead of from now"}
    )

    def __post_init__(self) -> None:
        if not self.kernel_log:
            raise ConfigError("--kernel-log needs a value: auto, kmsg, journalctl, none or a file path")

    @property
    def file_path(self) -> Path | None:
        return None if self.kernel_log in _SOURCES else Path(self.kernel_log)


class LineSource(Protocol):
    """Where kernel-log lines come from; `read()` raises OSError when the source is unreadable."""

    description: str

    def read(self) -> list[str]: ...

    def close(self) -> None: ...


class KmsgSource:
    """/dev/kmsg: one record per read(), `EAGAIN` at the end, `EPIPE` when the ring buffer
    overwrote records we had not read yet (those are gone; carry on with the rest)."""

    description = "/dev/kmsg"

    def __init__(self, path: str = KMSG_PATH, after_seq: int | None = None, from_start: bool = False) -> None:
        self._fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self.after_seq = after_seq
        self.lost_records = 0
        if after_seq is None and not from_start:
            os.lseek(self._fd, 0, os.SEEK_END)

    def read(self) -> list[str]:
        lines: list[str] = []
        while True:
            try:
                chunk = os.read(self._fd, 16384)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EPIPE:
                    self.lost_records += 1
                    continue
                raise
            if not chunk:
                break
            record = chunk.decode("utf-8", "replace").split("\n", 1)[0]
            seq = int(record.split(",", 2)[1]) if record.count(",") >= 2 else None
            if seq is not None and self.after_seq is not None and seq <= self.after_seq:
                continue
            if seq is not None:
                self.after_seq = seq
            lines.append(record)
        return lines

    def close(self) -> None:
        os.close(self._fd)


class JournalctlSource:
    """`journalctl -k`, polled with `--after-cursor`, in short-iso-precise form (wall-clock times)."""

    description = "journalctl -k"

    def __init__(self, from_start: bool = False, since: float | None = None) -> None:
        self._cursor: str | None = None
        self._since = None if from_start else (time.time() if since is None else since)
        # Fail now if journalctl cannot read the kernel log; the lines it got are the first
        # read()'s (dropping them lost a from-start backlog, or the lines since `since`).
        self._first: list[str] | None = self._poll()

    def read(self) -> list[str]:
        if self._first is not None:
            lines, self._first = self._first, None
            return lines
        return self._poll()

    def _poll(self) -> list[str]:
        cmd = ["journalctl", "-k", "-o", "short-iso-precise", "--no-pager", "-q", "--show-cursor"]
        if self._cursor:
            cmd.append(f"--after-cursor={self._cursor}")
        elif self._since is not None:
            cmd.append(f"--since=@{int(self._since)}")
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=False)
        except (FileNotFoundError, subprocess.TimeoutExpired) as exc:
            raise OSError(f"journalctl failed: {exc}") from exc
        if out.returncode != 0:
            raise OSError(f"journalctl -k exited {out.returncode}: {out.stderr.strip()[:200]}")
        lines = []
        for line in out.stdout.splitlines():
            if line.startswith("-- cursor: "):
                self._cursor = line[len("-- cursor: ") :].strip()
            elif line and not line.startswith("-- "):
                lines.append(line)
        return lines

    def close(self) -> None:
        pass


class FileSource:
    """Tail a log file by byte offset; a file that shrank was rotated or truncated, so read it
    again from its start. A torn last line waits for its newline."""

    def __init__(self, path: Path, from_start: bool = False) -> None:
        self.path = path
        self.description = str(path)
        self.offset = 0 if from_start else path.stat().st_size

    def read(self) -> list[str]:
        with open(self.path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size < self.offset:
                self.offset = 0
            fh.seek(self.offset)
            data = fh.read()
        end = data.rfind(b"\n") + 1
        self.offset += end
        return data[:end].decode("utf-8", "replace").splitlines()

    def close(self) -> None:
        pass


def open_source(config: KernelLogConfig) -> LineSource:
    """The configured source; raises OSError when it cannot be read (auto: when none can)."""
    if (path := config.file_path) is not None:
        return FileSource(path, config.kernel_log_from_start)
    if config.kernel_log == "kmsg":
        return KmsgSource(from_start=config.kernel_log_from_start)
    if config.kernel_log == "journalctl":
        return JournalctlSource(from_start=config.kernel_log_from_start)
    errors = []
    for opener in (
        lambda: KmsgSource(from_start=config.kernel_log_from_start),
        lambda: JournalctlSource(from_start=config.kernel_log_from_start),
    ):
        try:
            return opener()
        except OSError as exc:
            errors.append(str(exc))
    raise OSError("no kernel log readable: " + "; ".join(errors))


class KernelLogCollector:
    """Parses each new kernel-log line; Xid and fallen-off-the-bus lines also become `GpuEvent`s
    (source `kernel_log`) mapped to a GPU through `gpus` (from the GPU collector's bus ids)."""

    name = "kernel_log"

    def __init__(
        self,
        config: KernelLogConfig,
        node: str,
        gpus: Sequence[GpuIdentity] = (),
        *,
        simulated: bool = False,
        source: LineSource | None = None,
    ) -> None:
        self.config = config
        self.node = node
        self.simulated = simulated
        self._gpus = {g.gpu: g for g in gpus}
        self._gpu_by_pci = {g.pci_bus_id: g.gpu for g in gpus if g.pci_bus_id}
        self._boot_time = time.time() - time.monotonic()
        self._source = source
        self._unavailable_reason: str | None = None
        self._last_oom: tuple[int, float] | None = None
        self._next_open = float("-inf")
        if config.kernel_log != "none":
            self._ensure_source()  # "from now" means from when the collector was made

    def _ensure_source(self) -> LineSource | None:
        if self._source is None and time.monotonic() >= self._next_open:
            try:
                self._source = open_source(self.config)
            except OSError as exc:
                self._next_open = time.monotonic() + _REOPEN_INTERVAL_S
                self._mark_unavailable(str(exc))
        return self._source

    def _mark_unavailable(self, reason: str) -> None:
        if self._unavailable_reason is None:
            log.warning(
                "kernel log unavailable (%s); Xid/AER/OOM lines will not be seen. "
                "Run the agent as root or with CAP_SYSLOG, or pass --kernel-log PATH.",
                reason,
            )
        self._unavailable_reason = reason

    def collect(self, now: float) -> list[Record]:
        if self.config.kernel_log == "none":
            return []
        source = self._ensure_source()
        lines: list[str] = []
        if source is not None:
            try:
                lines = source.read()
                self._unavailable_reason = None
            except OSError as exc:
                self._mark_unavailable(f"{source.description}: {exc}")
        records: list[Record] = []
        if self._unavailable_reason is not None:
            records.append(
                Unavailable(
                    time=now,
                    node=self.node,
                    collector=self.name,
                    source="kernel_log",
                    reason=self._unavailable_reason,
                )
            )
        for line in lines:
            ev = parse_line(
                line,
                node=self.node,
                now=now,
                boot_time=self._boot_time,
                gpu_by_pci=self._gpu_by_pci,
                simulated=self.simulated,
            )
            if ev is None or self._is_repeated_oom(ev):
                continue
            records.append(ev)
            if (gpu_ev := gpu_event_from(ev, self._gpus)) is not None:
                records.append(gpu_ev)
        return records

    def _is_repeated_oom(self, ev: KernelLogEvent) -> bool:
        if ev.kind != "oom_kill" or ev.pid is None:
            return False
        last = self._last_oom
        self._last_oom = (ev.pid, ev.time)
        return last is not None and last[0] == ev.pid and abs(ev.time - last[1]) <= _OOM_DUPLICATE_WINDOW_S

    def close(self) -> None:
        if self._source is not None:
            self._source.close()
            self._source = None
