"""Host health from /proc and statvfs (no psutil: a few files give all of it).

CPU busy ratio over the interval since the previous collect (/proc/stat), load averages,
memory and swap (/proc/meminfo), network errors and drops summed over non-loopback interfaces
(/proc/net/dev), free space of the data and checkpoint directories, and whether each local
rank's process is alive. A file or path that cannot be read leaves its fields None and adds an
`Unavailable` record naming it; it never raises and never reads as 0.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from triage.collectors.records import DiskSample, HostSample, ProcessSample, Record, Unavailable

log = logging.getLogger(__name__)

#: rank -> pid of this node's local ranks (the agent knows them from the ranks' spools).
PidProvider = Callable[[], Mapping[int, int]]


class _HostReadings(TypedDict, total=False):
    """The `HostSample` readings one collect got; a file it could not read leaves its fields out."""

    cpu_ratio: float
    load_1m: float
    load_5m: float
    load_15m: float
    memory_total_bytes: int
    memory_used_bytes: int
    memory_available_bytes: int
    swap_used_bytes: int
    net_rx_errors_total: int
    net_tx_errors_total: int
    net_rx_drops_total: int
    net_tx_drops_total: int


@dataclass
class HostConfig:
    disk_paths: list[str] = field(
        default_factory=list,
        metadata={
            "help": "directory whose filesystem free space to watch (repeatable; the agent adds "
            "the data directory): give the checkpoint directory, so a checkpoint that fails on a "
            "full disk is named a storage_error",
            "flag": "--disk-path",
            "metavar": "PATH",
        },
    )

    def __post_init__(self) -> None:
        self.disk_paths = [str(p) for p in self.disk_paths]


def _cpu_times(proc: Path) -> tuple[int, int]:
    """(busy, total) jiffies from the aggregate `cpu` line; iowait counts as idle."""
    with open(proc / "stat") as fh:
        parts = fh.readline().split()
    values = [int(v) for v in parts[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    total = sum(values[:8])  # guest time is already inside user/nice
    return total - idle, total


def _meminfo(proc: Path) -> dict[str, int]:
    out = {}
    with open(proc / "meminfo") as fh:
        for line in fh:
            key, _, rest = line.partition(":")
            fields = rest.split()
            if fields:
                out[key] = int(fields[0]) * (1024 if fields[1:2] == ["kB"] else 1)
    return out


def _net_errors(proc: Path) -> tuple[int, int, int, int]:
    rx_err = rx_drop = tx_err = tx_drop = 0
    with open(proc / "net/dev") as fh:
        for line in fh.readlines()[2:]:
            name, _, rest = line.partition(":")
            if name.strip() == "lo":
                continue
            v = [int(x) for x in rest.split()]
            rx_err, rx_drop, tx_err, tx_drop = rx_err + v[2], rx_drop + v[3], tx_err + v[10], tx_drop + v[11]
    return rx_err, tx_err, rx_drop, tx_drop


def process_alive(pid: int, proc: Path = Path("/proc")) -> bool:
    """True while the process exists and is not a zombie (a zombie rank has already died)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return True  # /proc not mounted here: kill(0) said it exists
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


class HostCollector:
    name = "host"

    def __init__(
        self,
        config: HostConfig,
        node: str,
        pids: PidProvider | None = None,
        proc: str | os.PathLike[str] = "/proc",
    ) -> None:
        self.config = config
        self.node = node
        self.pids = pids
        self.proc = Path(proc)
        self._warned: set[str] = set()
        try:
            self._last_cpu: tuple[int, int] | None = _cpu_times(self.proc)
        except (OSError, ValueError, IndexError):
            self._last_cpu = None

    def _unavailable(self, now: float, source: str, exc: Exception) -> Unavailable:
        if source not in self._warned:
            self._warned.add(source)
            log.warning("host: cannot read %s (%s); reported as unavailable", source, exc)
        return Unavailable(
            time=now,
            node=self.node,
            collector=self.name,
            source=source,
            reason=f"{type(exc).__name__}: {exc}",
        )

    def collect(self, now: float) -> list[Record]:
        records: list[Record] = []
        values: _HostReadings = {}
        try:
            busy, total = _cpu_times(self.proc)
            if self._last_cpu is not None and total > self._last_cpu[1]:
                values["cpu_ratio"] = (busy - self._last_cpu[0]) / (total - self._last_cpu[1])
            self._last_cpu = (busy, total)
        except (OSError, ValueError, IndexError) as exc:
            records.append(self._unavailable(now, "proc:stat", exc))
        try:
            load = (self.proc / "loadavg").read_text().split()
            values.update({"load_1m": float(load[0]), "load_5m": float(load[1]), "load_15m": float(load[2])})
        except (OSError, ValueError, IndexError) as exc:
            records.append(self._unavailable(now, "proc:loadavg", exc))
        try:
            mem = _meminfo(self.proc)
            total_mem, available = mem["MemTotal"], mem["MemAvailable"]
            values.update(
                {
                    "memory_total_bytes": total_mem,
                    "memory_available_bytes": available,
                    "memory_used_bytes": total_mem - available,
                    "swap_used_bytes": mem["SwapTotal"] - mem["SwapFree"],
                }
            )
        except (OSError, ValueError, KeyError) as exc:
            records.append(self._unavailable(now, "proc:meminfo", exc))
        try:
            rx_err, tx_err, rx_drop, tx_drop = _net_errors(self.proc)
            values.update(
                {
                    "net_rx_errors_total": rx_err,
                    "net_tx_errors_total": tx_err,
                    "net_rx_drops_total": rx_drop,
                    "net_tx_drops_total": tx_drop,
                }
            )
        except (OSError, ValueError, IndexError) as exc:
            records.append(self._unavailable(now, "proc:net/dev", exc))
        records.append(HostSample(time=now, node=self.node, **values))
        for path in self.config.disk_paths:
            try:
                st = os.statvfs(path)
            except OSError as exc:
                records.append(self._unavailable(now, f"disk:{path}", exc))
                continue
            records.append(
                DiskSample(
                    time=now,
                    node=self.node,
                    path=path,
                    free_bytes=st.f_bavail * st.f_frsize,
                    total_bytes=st.f_blocks * st.f_frsize,
                )
            )
        for rank, pid in sorted((self.pids() if self.pids else {}).items()):
            records.append(
                ProcessSample(
                    time=now, node=self.node, pid=pid, rank=rank, alive=process_alive(pid, self.proc)
                )
            )
        return records

    def close(self) -> None:
        """Holds nothing open: every file is read per collect."""
