"""Check this node before a job is placed on it (or after one left it): exit 0 healthy, 1 not.

    triage health-check --data-dir /shared/triage-data --node "$SLURMD_NODENAME"

Made for a Slurm Prolog/Epilog (deploy/slurm/triage-prolog.sh, README "Slurm prolog/epilog
health gate"): every source is read once and nothing heavy is imported (no pandas, DuckDB or
torch; pyarrow only where there is a ledger to read), so it takes well under a second. It
prints one line, `triage health-check: NODE healthy ...` or `triage health-check: NODE
UNHEALTHY: REASON; REASON` (at most 200 characters: fit for `scontrol update ... reason=`), or
with --json one object whose `checks` each have name, ok, status (ok, fail, unavailable,
skipped), detail and seconds.

The rules, each kept small (a gate that drains good nodes gets switched off):

gpu         Through the agent's GPU backend (--gpu; `sim` acts out the data dir's fault schedule,
            so a simulated GPU lost there stays lost until `triage nodes clear` resets it).
            Unhealthy: a GPU that is lost or does not answer a health reading (the next job
            fails on it); uncorrectable ECC errors since the GPU's last reset (volatile count
            > 0: its memory already returned bad data; reset it first); a row remap pending
            (it takes effect only at the next GPU reset, which NVIDIA asks for before more
            work); a row remap failure (no spare rows left: NVIDIA's replace criterion); fewer
            GPUs than --expect-gpus (a GPU that fell off the bus before boot is not listed at
            all). Not: corrected or lifetime ECC counts, retired pages (the collectors record
            how many pages were retired, not NVML's "retirement pending" flag, and a retired
            page is the repair, not the fault), temperatures, clocks, PCIe and NVLink counters
            (a rate needs two samples apart). `auto`: NVML where it starts; where it does not,
            a node with NVIDIA device files (/dev/nvidia0, ...) is unhealthy (a broken driver)
            and one without is not checked (no GPUs). `nvml`: NVML not starting is unhealthy.
kernel_log  The kernel log since boot (/dev/kmsg, else `journalctl -k`; with --gpu sim the
            simulator's log; or --kernel-log FILE), parsed by the agent's parser: an Xid after
            which the GPU does no more work (`IMMEDIATE_XIDS` of the analyzers' Xid table: 79,
            119, 120 GPU lost; 48, 64, 95 uncorrectable memory) or a "GPU has fallen off the
            bus" line. A line older than the latest clear of the node (or of that GPU) in the
            ledger is history: a person returned it to service after it; without a ledger only
            a reboot forgets it. Not: the application's own Xids (13, 31, 43, ...), contained
            ECC (94) and NVLink (74) Xids, AER, OOM kills.
ledger      With a data dir (--data-dir, $TRIAGE_DATA_DIR, or ./triage-data where it exists):
            a standing quarantine of the node or of one of its GPUs (`triage nodes`), with its
            reason.
disk        Free space on the data dir's filesystem and on / (--disk PATH instead of /,
            repeatable) below --min-free-disk-gb; a path that cannot be read (a mount that is
            gone) is unhealthy.
memory      MemAvailable below --min-free-mem-gb (what a leftover process of the last job
            holds).

A source this process cannot read (/dev/kmsg without root or CAP_SYSLOG and no journal,
/proc/meminfo, a damaged ledger) is "unavailable": never reported healthy, not a failure
either. The node passes and the line says what was not checked (`healthy: ... ok; warning:
...`), so a gate without permission does not drain a whole cluster; --strict fails it.
GB here are 10^9 bytes.

Exit codes: 0 healthy; 1 unhealthy (the line says why); 2 bad usage.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import logging
import math
import os
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triage import display
from triage.analyzers.log_signatures import IMMEDIATE_XIDS, XID_TABLE
from triage.collectors.gpu_backend import GPU_BACKENDS, GpuConfig, make_gpu_collector
from triage.collectors.host import HostCollector, HostConfig
from triage.collectors.kernel_log import KernelLogConfig, open_source
from triage.collectors.kernel_log_parser import parse_line
from triage.collectors.records import (
    DiskSample,
    GpuEvent,
    GpuIdentity,
    GpuSample,
    HostSample,
    KernelLogEvent,
    Record,
    Unavailable,
)
from triage.collectors.sim_gpu import SimGpuCollector, sim_kmsg_path
from triage.config import (
    ENV_DATA_DIR,
    ENV_NODE,
    ConfigError,
    add_config_args,
    config_from_args,
    data_dir_from_env,
    node_name,
)
from triage.names import check_name
from triage.taxonomy import Category

HEALTH_CHECK_GPU_CHOICES = ("auto", *GPU_BACKENDS)
GB = 1e9
#: Longest line printed: what a Slurm drain reason holds comfortably.
REASON_MAX_CHARS = 200
OK, FAIL, UNAVAILABLE, SKIPPED = "ok", "fail", "unavailable", "skipped"
#: The device files an NVIDIA driver creates, one per GPU: GPUs are here even if NVML fails.
NVIDIA_DEVICE_GLOB = "/dev/nvidia[0-9]*"
#: How long the NVML Xid thread waits per call: bounds how long closing the collector takes.
_NVML_EVENT_TIMEOUT_MS = 50
#: Readings a GPU must answer unless it does not support them: the rules below need them.
_HEALTH_READINGS = ("ecc_uncorrected_volatile", "remapped_rows_pending", "remapped_rows_failure")
#: At most this many kernel-log findings are named (the rest are counted).
_MAX_NAMED = 3


@dataclass
class HealthCheckConfig:
    data_dir: str | None = field(
        default=None,
        metadata={
            "help": "data directory: its ledger, its filesystem's free space, the simulated GPUs' "
            "fault schedule (default: $TRIAGE_DATA_DIR, else ./triage-data where it exists)",
            "metavar": "DIR",
        },
    )
    node: str | None = field(
        default=None, metadata={"help": "this node's name (default: $TRIAGE_NODE, else the host name)"}
    )
    gpu: str = field(
        default="auto",
        metadata={
            "help": "GPU health source: auto (NVML when it starts; NVIDIA device files without "
            "NVML are unhealthy, no GPUs are not checked), nvml, sim (simulated GPUs and their "
            "fault schedule), none",
            "choices": HEALTH_CHECK_GPU_CHOICES,
        },
    )
    expect_gpus: int = field(
        default=0, metadata={"help": "unhealthy with fewer GPUs than this (0: any number)", "metavar": "N"}
    )
    disk: list[str] = field(
        default_factory=list,
        metadata={
            "help": "filesystem whose free space to check instead of / (repeatable; the data "
            "directory's is always checked)",
            "metavar": "PATH",
        },
    )
    min_free_disk_gb: float = field(
        default=5.0, metadata={"help": "unhealthy below this much free disk space (GB)", "metavar": "GB"}
    )
    min_free_mem_gb: float = field(
        default=2.0, metadata={"help": "unhealthy below this much available memory (GB)", "metavar": "GB"}
    )
    strict: bool = field(
        default=False,
        metadata={"help": "a source that cannot be read (e.g. /dev/kmsg without root) fails the node"},
    )
    gpus: GpuConfig = field(default_factory=lambda: GpuConfig(gpu="none"), metadata={"cli": False})
    kernel: KernelLogConfig = field(default_factory=KernelLogConfig, metadata={"cli": False})

    def __post_init__(self) -> None:
        if self.gpu not in HEALTH_CHECK_GPU_CHOICES:
            raise ConfigError(f"--gpu must be one of {', '.join(HEALTH_CHECK_GPU_CHOICES)}, got {self.gpu!r}")
        if self.expect_gpus < 0:
            raise ConfigError(f"--expect-gpus must be >= 0, got {self.expect_gpus}")
        for flag, value in (
            ("--min-free-disk-gb", self.min_free_disk_gb),
            ("--min-free-mem-gb", self.min_free_mem_gb),
        ):
            if not (math.isfinite(value) and value >= 0):
                raise ConfigError(f"{flag} must be a number of GB >= 0, got {value}")
        self.disk = [str(p) for p in self.disk]
        if any(not p for p in self.disk):
            raise ConfigError("--disk needs a path")
        if self.node is not None:
            check_name("node name", self.node, source="--node")
        elif os.environ.get(ENV_NODE):
            check_name("node name", os.environ[ENV_NODE], source=f"env {ENV_NODE}")

    @property
    def resolved_node(self) -> str:
        return self.node or node_name()

    def resolved_data_dir(self) -> Path | None:
        """The data dir given (flag or env), else ./triage-data where it exists, else None."""
        if self.data_dir or os.environ.get(ENV_DATA_DIR):
            return data_dir_from_env(self.data_dir)
        default = data_dir_from_env(None)
        return default if default.is_dir() else None


@dataclass
class Check:
    name: str
    status: str  # OK, FAIL, UNAVAILABLE or SKIPPED
    detail: str
    seconds: float = 0.0

    def passes(self, strict: bool) -> bool:
        return self.status in (OK, SKIPPED) or (self.status == UNAVAILABLE and not strict)

    def to_dict(self, strict: bool) -> dict[str, object]:
        return {
            "name": self.name,
            "ok": self.passes(strict),
            "status": self.status,
            "detail": self.detail,
            "seconds": round(self.seconds, 4),
        }


def _gb(n: float) -> str:
    return f"{n / GB:.1f} GB"


def _xid_text(xid: int) -> str:
    meaning = XID_TABLE.get(xid)
    return f"Xid {xid} ({meaning[2]})" if meaning else f"Xid {xid}"


# -- the ledger -------------------------------------------------------------------------------


@dataclass
class _Ledger:
    check: Check
    #: gpu (None: the node) -> time of its latest clear: kernel-log lines before it are history
    cleared: dict[int | None, float] = field(default_factory=dict)


def _ledger(data_dir: Path | None, node: str) -> _Ledger:
    if data_dir is None:
        return _Ledger(Check("ledger", SKIPPED, "not checked: no data dir (--data-dir, $TRIAGE_DATA_DIR)"))
    if not data_dir.is_dir():
        return _Ledger(Check("ledger", UNAVAILABLE, f"node health ledger unavailable: {data_dir} not found"))
    try:  # pyarrow, and only here
        from triage.store.node_health import CLEARED, quarantines, read_ledger

        entries = read_ledger(data_dir)
    except Exception as exc:  # noqa: BLE001 - a damaged ledger is unreadable, not a sick node
        return _Ledger(
            Check("ledger", UNAVAILABLE, f"node health ledger unavailable: {type(exc).__name__}: {exc}")
        )
    cleared: dict[int | None, float] = {}
    for e in entries:
        if e.node == node and e.state == CLEARED:
            cleared[e.gpu] = max(cleared.get(e.gpu, -math.inf), e.time)
    standing = quarantines(entries).get(node, [])
    if not standing:
        return _Ledger(Check("ledger", OK, f"not quarantined ({len(entries)} ledger entries)"), cleared)
    detail = "; ".join(
        f"quarantined{'' if e.gpu is None else f' GPU {e.gpu}'} since {display.when(e.time)}: {e.reason}"
        for e in standing
    )
    return _Ledger(Check("ledger", FAIL, detail), cleared)


# -- GPUs -------------------------------------------------------------------------------------


@dataclass
class _GpuReadout:
    """What the GPU backend said, evaluated once the kernel log is read (for the Xid behind it)."""

    samples: list[GpuSample] = field(default_factory=list)
    events: list[GpuEvent] = field(default_factory=list)
    identities: list[GpuIdentity] = field(default_factory=list)
    skipped: str | None = None
    error: str | None = None
    simulated: bool = False
    seconds: float = 0.0


def _read_gpus(config: HealthCheckConfig, node: str, data_dir: Path, now: float) -> _GpuReadout:
    if config.gpu == "none":
        return _GpuReadout(skipped="not checked (--gpu none)")
    backend = "nvml" if config.gpu == "auto" else config.gpu
    gpus = dataclasses.replace(config.gpus, gpu=backend, nvml_event_timeout_ms=_NVML_EVENT_TIMEOUT_MS)
    try:
        collector = make_gpu_collector(gpus, node, data_dir)
    except Exception as exc:  # noqa: BLE001 - a GPU that breaks the backend is the finding
        return _GpuReadout(error=f"GPUs not readable: {type(exc).__name__}: {exc}")
    assert collector is not None  # backend is nvml or sim
    simulated = isinstance(collector, SimGpuCollector)
    try:
        if isinstance(collector, SimGpuCollector):
            # Every fault of the schedule as an event (the Xid behind a lost GPU), not only the
            # new ones; and not printed again into the simulated kernel log the agent tails.
            collector.started = -math.inf
            collector.kmsg_path = Path(os.devnull)
        records: list[Record] = collector.collect(now)
        identities = collector.identities()
    except Exception as exc:  # noqa: BLE001 - likewise
        return _GpuReadout(error=f"GPUs not readable: {type(exc).__name__}: {exc}", simulated=simulated)
    finally:
        collector.close()
    nvml_down = next((r.reason for r in records if isinstance(r, Unavailable) and r.source == "nvml"), None)
    if nvml_down is not None:
        devices = sorted(glob.glob(NVIDIA_DEVICE_GLOB))
        if config.gpu == "auto" and not devices:
            return _GpuReadout(skipped=f"not checked: no NVIDIA GPU here ({nvml_down})")
        where = f" although {len(devices)} NVIDIA device file(s) exist" if devices else ""
        return _GpuReadout(error=f"{nvml_down}{where}")
    return _GpuReadout(
        samples=sorted((r for r in records if isinstance(r, GpuSample)), key=lambda s: s.gpu),
        events=[r for r in records if isinstance(r, GpuEvent)],
        identities=identities,
        simulated=simulated,
    )


def _cause(
    gpu: int, category: Category, gpu_events: Sequence[GpuEvent], kernel: Sequence[KernelLogEvent]
) -> str:
    """` (Xid N at TIME)`: the latest Xid of `category` the backend or the kernel log reported
    on `gpu`, or ""."""
    events: list[GpuEvent | KernelLogEvent] = [*gpu_events, *kernel]
    found = [
        (e.time, e.xid)
        for e in events
        if e.gpu == gpu and e.xid is not None and e.xid in XID_TABLE and XID_TABLE[e.xid][0] == category
    ]
    if not found:
        return ""
    t, xid = max(found)
    return f" (Xid {xid} at {display.when(t)})"


def _gpu_check(readout: _GpuReadout, expect: int, kernel: Sequence[KernelLogEvent]) -> Check:
    if readout.skipped is not None:
        return Check("gpu", SKIPPED, readout.skipped, readout.seconds)
    if readout.error is not None:
        return Check("gpu", FAIL, readout.error, readout.seconds)
    problems: list[str] = []
    for s in readout.samples:
        if not s.gpu_up:
            cause = _cause(s.gpu, Category.GPU_FALLEN_OFF_BUS, readout.events, kernel)
            problems.append(f"GPU {s.gpu} lost{cause}")
            continue
        memory_cause = _cause(s.gpu, Category.GPU_MEMORY_ERROR, readout.events, kernel)
        silent = [f for f in _HEALTH_READINGS if getattr(s, f) is None and f not in s.unsupported]
        if silent:
            problems.append(f"GPU {s.gpu} does not answer {', '.join(silent)}")
        if s.ecc_uncorrected_volatile:
            problems.append(
                f"GPU {s.gpu} has {s.ecc_uncorrected_volatile} uncorrectable ECC error(s) since reset{memory_cause}"
            )
        if s.remapped_rows_failure:
            problems.append(f"GPU {s.gpu} row remapping failed (no spare rows){memory_cause}")
        if s.remapped_rows_pending:
            problems.append(f"GPU {s.gpu} has a row remap pending (reset it){memory_cause}")
    n = len(readout.samples)
    if n < expect:
        problems.insert(0, f"{n} GPU(s) found, {expect} expected")
    kind = "simulated " if readout.simulated else ""
    if problems:
        return Check("gpu", FAIL, "; ".join(problems), readout.seconds)
    return Check("gpu", OK, f"{n} {kind}GPU(s) healthy", readout.seconds)


# -- kernel log -------------------------------------------------------------------------------


def _kernel_config(config: HealthCheckConfig, data_dir: Path, node: str) -> KernelLogConfig:
    kernel = dataclasses.replace(config.kernel, kernel_log_from_start=True)
    if config.gpu == "sim" and kernel.kernel_log == "auto":
        kernel = dataclasses.replace(kernel, kernel_log=str(sim_kmsg_path(data_dir, node)))
    return kernel


def _kernel_log(
    kernel: KernelLogConfig,
    node: str,
    now: float,
    identities: Sequence[GpuIdentity],
    cleared: dict[int | None, float],
    simulated: bool,
) -> tuple[Check, list[KernelLogEvent]]:
    """The check, and the fatal lines it found (for the GPU check to name the Xid behind a fault)."""
    if kernel.kernel_log == "none":
        return Check("kernel_log", SKIPPED, "not checked (--kernel-log none)"), []
    try:
        source = open_source(kernel)
        try:
            lines = source.read()
        finally:
            source.close()
    except OSError as exc:
        return Check("kernel_log", UNAVAILABLE, f"kernel log unavailable (Xids not checked): {exc}"), []
    boot_time = time.time() - time.monotonic()
    by_pci = {g.pci_bus_id: g.gpu for g in identities if g.pci_bus_id}
    fatal: list[KernelLogEvent] = []
    history = 0
    for line in lines:
        ev = parse_line(line, node=node, now=now, boot_time=boot_time, gpu_by_pci=by_pci, simulated=simulated)
        if ev is None or not (
            ev.kind == "gpu_fallen_off_bus" or (ev.kind == "xid" and ev.xid in IMMEDIATE_XIDS)
        ):
            continue
        node_clear = cleared.get(None, -math.inf)
        gpu_clear = -math.inf if ev.gpu is None else cleared.get(ev.gpu, -math.inf)
        if ev.time < max(node_clear, gpu_clear):
            history += 1
            continue
        fatal.append(ev)
    older = f"; {history} older than the node's last clear in the ledger" if history else ""
    if not fatal:
        return Check(
            "kernel_log", OK, f"no fatal Xid in {len(lines)} lines since boot ({source.description}){older}"
        ), []
    latest: dict[tuple[int | None, str | None, int | None], KernelLogEvent] = {}
    for ev in fatal:
        latest[(ev.gpu, None if ev.gpu is not None else ev.pci_bus_id, ev.xid)] = ev
    named = sorted(latest.values(), key=lambda e: e.time, reverse=True)
    parts = []
    for ev in named[:_MAX_NAMED]:
        what = _xid_text(ev.xid) if ev.xid is not None else "GPU fell off the bus"
        where = f"GPU {ev.gpu}" if ev.gpu is not None else f"PCI {ev.pci_bus_id or '?'}"
        parts.append(f"{what} on {where} at {display.when(ev.time)}")
    more = f" (+{len(named) - _MAX_NAMED} more)" if len(named) > _MAX_NAMED else ""
    return Check("kernel_log", FAIL, f"kernel log: {', '.join(parts)}{more}{older}"), fatal


# -- host -------------------------------------------------------------------------------------


def _host(config: HealthCheckConfig, data_dir: Path | None, node: str, now: float) -> tuple[Check, Check]:
    """(disk, memory) from the agent's host collector."""
    paths = list(dict.fromkeys([*([str(data_dir)] if data_dir else []), *(config.disk or ["/"])]))
    start = time.perf_counter()
    records = HostCollector(HostConfig(disk_paths=paths), node).collect(now)
    free = {r.path: r for r in records if isinstance(r, DiskSample)}
    unreadable = {r.source.removeprefix("disk:"): r.reason for r in records if isinstance(r, Unavailable)}
    limit = config.min_free_disk_gb * GB
    low, fine = [], []
    for p in paths:
        if p in unreadable:
            low.append(f"disk {p} not readable ({unreadable[p]})")
        elif p in free and free[p].free_bytes < limit:
            low.append(f"disk {p} {_gb(free[p].free_bytes)} free < {config.min_free_disk_gb:g} GB")
        elif p in free:
            fine.append(f"{p} {_gb(free[p].free_bytes)}")
    disk = Check("disk", FAIL, "; ".join(low)) if low else Check("disk", OK, "free: " + ", ".join(fine))
    host = next(r for r in records if isinstance(r, HostSample))
    available = host.memory_available_bytes
    if available is None:
        why = unreadable.get("proc:meminfo", "no MemAvailable")
        memory = Check("memory", UNAVAILABLE, f"available memory not checked: {why}")
    elif available < config.min_free_mem_gb * GB:
        memory = Check("memory", FAIL, f"memory {_gb(available)} available < {config.min_free_mem_gb:g} GB")
    else:
        memory = Check("memory", OK, f"{_gb(available)} available")
    disk.seconds = memory.seconds = (time.perf_counter() - start) / 2
    return disk, memory


# -- the command ------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_args(parser, HealthCheckConfig)
    add_config_args(parser, GpuConfig, skip=("gpu", "nvml_event_timeout_ms"))
    add_config_args(parser, KernelLogConfig, skip=("kernel_log_from_start",))
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def config_from(args: argparse.Namespace) -> HealthCheckConfig:
    return config_from_args(
        HealthCheckConfig,
        args,
        gpus=config_from_args(GpuConfig, args, gpu="none"),  # the backend comes from --gpu
        kernel=config_from_args(KernelLogConfig, args),
    )


def check_node(config: HealthCheckConfig) -> list[Check]:
    """Every check of this node, in the order the reason line names them. The ledger is read
    first (its clears date the kernel log's history), then the GPUs (their PCI addresses map
    the kernel log's lines), then the kernel log (its Xids name the cause of a GPU's fault)."""
    now = time.time()
    node = check_name("node name", config.resolved_node, source="the host name")
    data_dir = config.resolved_data_dir()
    sim_home = data_dir or data_dir_from_env(None)  # where the simulated GPUs' fault schedule is
    if config.gpu == "sim" and data_dir is not None and not data_dir.is_dir():
        # a check only reads: it must not make the folder a mistyped --data-dir names
        raise ConfigError(
            f"data directory {data_dir} does not exist; --gpu sim reads its simulated GPUs' "
            "fault schedule there: pass the --data-dir the agents and jobs use"
        )

    start = time.perf_counter()
    ledger = _ledger(data_dir, node)
    ledger.check.seconds = time.perf_counter() - start

    start = time.perf_counter()
    readout = _read_gpus(config, node, sim_home, now)
    readout.seconds = time.perf_counter() - start

    start = time.perf_counter()
    kernel, fatal = _kernel_log(
        _kernel_config(config, sim_home, node),
        node,
        now,
        readout.identities,
        ledger.cleared,
        readout.simulated,
    )
    kernel.seconds = time.perf_counter() - start

    gpu = _gpu_check(readout, config.expect_gpus, fatal)
    disk, memory = _host(config, data_dir, node, now)
    return [gpu, kernel, ledger.check, disk, memory]


_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")


def summary(node: str, checks: Sequence[Check], strict: bool) -> str:
    """The one line: healthy (what passed, what was skipped or could not be read), or
    UNHEALTHY and why."""
    failed = [c for c in checks if not c.passes(strict)]
    if failed:
        line = f"triage health-check: {node} UNHEALTHY: " + "; ".join(c.detail for c in failed)
    else:
        passed = ", ".join(c.name for c in checks if c.status == OK) or "nothing"
        line = f"triage health-check: {node} healthy: {passed} ok"
        if skipped := [c.name for c in checks if c.status == SKIPPED]:
            line += f"; skipped: {', '.join(skipped)}"
        if blind := [c.detail for c in checks if c.status == UNAVAILABLE]:
            line += "; warning: " + "; ".join(blind)
    line = _CONTROL.sub(" ", line)
    return line if len(line) <= REASON_MAX_CHARS else line[: REASON_MAX_CHARS - 3] + "..."


def run(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    config = config_from(args)
    # The collectors log for the agent's log file; here the one line says it all.
    logging.getLogger("triage").addHandler(logging.NullHandler())
    checks = check_node(config)
    seconds = time.perf_counter() - start
    node = config.resolved_node
    healthy = all(c.passes(config.strict) for c in checks)
    line = summary(node, checks, config.strict)
    if args.json:
        out: dict[str, Any] = {
            "node": node,
            "healthy": healthy,
            "exit_code": 0 if healthy else 1,
            "reason": line,
            "strict": config.strict,
            "seconds": round(seconds, 4),
            "checks": [c.to_dict(config.strict) for c in checks],
        }
        print(json.dumps(out))
    else:
        print(line, file=sys.stdout)
    return 0 if healthy else 1
