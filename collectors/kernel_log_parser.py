"""Parse kernel-log lines into `KernelLogEvent`s: NVRM Xid, GPU fallen off the bus, PCIe AER, OOM kill.

Pure functions, so the same parser serves /dev/kmsg, `journalctl -k`, a dmesg capture and the
simulator's kernel-log file, and is tested on real lines (tests/data/kmsg/). A line's time comes
from its own prefix when it has one: raw /dev/kmsg records and `[12345.678]` carry seconds since
boot (turned into unix time with `boot_time`), journal/ISO, syslog and `dmesg -T` prefixes carry
wall-clock time; a line with no time gets the time it was read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TypedDict

from triage.collectors.pci import normalize_pci_bus_id
from triage.collectors.records import GpuEvent, GpuIdentity, KernelLogEvent

_KMSG_RECORD = re.compile(r"^(?P<prio>\d+),(?P<seq>\d+),(?P<usec>\d+),[^;]*;(?P<msg>.*)$")
_ISO = re.compile(
    r"^(?P<ts>\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)"
    r"\s+(?:(?P<host>\S+)\s+kernel:\s*)?"
)
_SYSLOG = re.compile(r"^(?P<ts>[A-Z][a-z]{2}\s+\d{1,2}\s+\d{2}:\d{2}:\d{2})\s+\S+\s+kernel:\s*")
_CTIME = re.compile(r"^\[(?P<ts>[A-Z][a-z]{2} [A-Z][a-z]{2}\s+\d{1,2} \d{2}:\d{2}:\d{2} \d{4})\]\s*")
_UPTIME = re.compile(r"^\[\s*(?P<up>\d+\.\d+)\]\s*")
_KERNEL_TAG = re.compile(r"^kernel:\s*")

_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9a-fA-F]{1,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.[0-7])?"
    r"(?P<mig>[^)]*)\):\s*(?P<xid>\d+)(?:,\s*(?P<rest>.*))?$"
)
_MIG_GI = re.compile(r"GPU-I:\s*(\d+)")
_MIG_CI = re.compile(r"GPU-CI:\s*(\d+)")
_PID = re.compile(r"^pid=(?P<pid>\d+|'[^']*'|\S+?),\s*")
_NAME = re.compile(r"^name=(?P<name>[^,]*),?\s*")
_FALLEN = re.compile(
    r"NVRM: GPU (?:at )?(?:PCI:)?(?P<pci>[0-9a-fA-F]{1,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}"
    r"(?:\.[0-7])?):? GPU has fallen off the bus"
)
_FALLEN_BARE = re.compile(r"NVRM: GPU has fallen off the bus")
_AER = re.compile(
    r"(?P<port>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]): AER: (?:Multiple )?"
    r"(?P<sev>Corrected|Correctable|Uncorrected \(Non-Fatal\)|Uncorrectable \(Non-Fatal\)|"
    r"Uncorrected \(Fatal\)|Uncorrectable \(Fatal\)) error(?: message)? received"
    r"(?:(?::| from) (?P<src>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]))?"
)
# "Out of memory: Killed process", "Memory cgroup out of memory: Killed process" and, on old
# kernels, a bare "Killed process"; a name may itself hold parentheses ("((resolved))").
_OOM_KILLED = re.compile(r"Killed process (?P<pid>\d+) \((?P<name>.*?)\)(?=[\s,]|$)")
_OOM_SUMMARY = re.compile(r"^oom-kill:.*?\btask=(?P<name>[^,]*),pid=(?P<pid>\d+)")


@dataclass(frozen=True)
class _Stripped:
    message: str
    time: float


def _strip_prefix(line: str, now: float, boot_time: float) -> _Stripped:
    """Remove the timestamp/syslog prefix and work out the line's unix time."""
    m = _KMSG_RECORD.match(line)
    if m:
        return _Stripped(m["msg"], boot_time + int(m["usec"]) / 1e6)
    wall: float | None = None
    rest = line
    if m := _ISO.match(rest):
        wall = datetime.fromisoformat(m["ts"].replace(",", ".").replace(" ", "T")).timestamp()
        rest = rest[m.end() :]
    elif m := _SYSLOG.match(rest):
        # Syslog omits the year: take the current one, in local time as syslog writes it.
        year = datetime.fromtimestamp(now).year
        wall = datetime.strptime(f"{year} {m['ts']}", "%Y %b %d %H:%M:%S").timestamp()
        rest = rest[m.end() :]
    elif m := _CTIME.match(rest):
        wall = datetime.strptime(" ".join(m["ts"].split()), "%a %b %d %H:%M:%S %Y").timestamp()
        rest = rest[m.end() :]
    rest = _KERNEL_TAG.sub("", rest, count=1)
    if m := _UPTIME.match(rest):
        if wall is None:
            wall = boot_time + float(m["up"])
        rest = rest[m.end() :]
    return _Stripped(rest.strip(), now if wall is None else wall)


def _pid_and_name(rest: str) -> tuple[int | None, str | None, str]:
    pid: int | None = None
    name: str | None = None
    if m := _PID.match(rest):
        raw = m["pid"]
        pid = int(raw) if raw.isdigit() else None
        rest = rest[m.end() :]
        if m := _NAME.match(rest):
            value = m["name"].strip()
            name = None if value in ("<unknown>", "'<unknown>'", "N/A", "") else value
            rest = rest[m.end() :]
    return pid, name, rest


def _aer_severity(text: str) -> str:
    if text.startswith("Correct"):
        return "corrected"
    return "fatal" if "(Fatal)" in text else "non_fatal"


class _Common(TypedDict):
    """The `KernelLogEvent` fields that every kind of line fills."""

    time: float
    node: str
    raw: str
    message: str
    simulated: bool


def parse_line(
    line: str,
    *,
    node: str,
    now: float,
    boot_time: float,
    gpu_by_pci: Mapping[str, int] | None = None,
    simulated: bool = False,
) -> KernelLogEvent | None:
    """The event one kernel-log line reports, or None when it reports none we watch."""
    line = line.rstrip("\r\n")
    if not line or (line[0].isspace() and "=" in line.split()[0]):
        return None  # /dev/kmsg continuation ("  SUBSYSTEM=pci")
    s = _strip_prefix(line, now, boot_time)
    msg = s.message
    gpus = gpu_by_pci or {}
    base = _Common(time=s.time, node=node, raw=line, message=msg, simulated=simulated)

    if m := _XID.search(msg):
        pci = normalize_pci_bus_id(m["pci"])
        gi = _MIG_GI.search(m["mig"])
        ci = _MIG_CI.search(m["mig"])
        pid, name, _ = _pid_and_name(m["rest"] or "")
        return KernelLogEvent(
            kind="xid",
            xid=int(m["xid"]),
            pci_bus_id=pci,
            gpu=gpus.get(pci),
            gpu_instance=int(gi[1]) if gi else None,
            compute_instance=int(ci[1]) if ci else None,
            pid=pid,
            process_name=name,
            **base,
        )
    if m := _FALLEN.search(msg):
        pci = normalize_pci_bus_id(m["pci"])
        return KernelLogEvent(kind="gpu_fallen_off_bus", pci_bus_id=pci, gpu=gpus.get(pci), **base)
    if _FALLEN_BARE.search(msg):
        return KernelLogEvent(kind="gpu_fallen_off_bus", **base)
    if m := _AER.search(msg):
        pci = normalize_pci_bus_id(m["src"] or m["port"])
        return KernelLogEvent(
            kind="pcie_aer", severity=_aer_severity(m["sev"]), pci_bus_id=pci, gpu=gpus.get(pci), **base
        )
    if m := _OOM_KILLED.search(msg) or _OOM_SUMMARY.search(msg):
        return KernelLogEvent(kind="oom_kill", pid=int(m["pid"]), process_name=m["name"], **base)
    return None


def gpu_event_from(event: KernelLogEvent, gpus: Mapping[int, GpuIdentity]) -> GpuEvent | None:
    """The GPU event a kernel-log Xid or fallen-off-the-bus line stands for (source kernel_log)."""
    if event.kind not in ("xid", "gpu_fallen_off_bus"):
        return None
    ident = gpus.get(event.gpu) if event.gpu is not None else None
    return GpuEvent(
        time=event.time,
        node=event.node,
        gpu=event.gpu,
        uuid=ident.uuid if ident else None,
        kind="xid" if event.kind == "xid" else "gpu_lost",
        xid=event.xid,
        text=event.message,
        source="kernel_log",
        simulated=event.simulated,
        pci_bus_id=event.pci_bus_id,
    )
