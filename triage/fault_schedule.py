"""The fault schedule: how an injected hardware fault reaches the simulated hardware.

The reference trainer's `--inject xid|ecc|thermal|pcie|nvlink@...` cannot break real hardware,
so at the moment the fault "happens" the rank appends a `GpuFault` here and then behaves as a
rank on such a GPU would; the simulated GPU backend (collectors) of that node reads the file and
shows the fault in its readings (Xid events, ECC counters, clock-event reasons, ...). One
append-only JSON-lines file per node: `<data_dir>/faults/<node>.jsonl`.

`--inject disk_full` is the one fault of the node rather than a GPU (`gpu` None): the simulated
disk (`collectors/sim_disk.py`) then reports the node's filesystems full for
`params["seconds"]`, as the agent's statvfs would on a node whose disk filled up.

`--inject network` records `nic_down` for the rank's GPU: the port of that GPU's rail lost its
link, and the simulated NIC (`collectors/sim_nic.py`) reports it down for `params["seconds"]`,
as the agent's sysfs reading of a real port would.

One more kind is no fault: `reset`, which `triage nodes clear` appends when a person returns
the node (or one GPU) to service, as a GPU reset or a reboot would on real hardware. The
trainer's `--inject` cannot write it.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

#: What `--inject` records for the simulated GPU.
GPU_FAULT_KINDS = ("xid", "ecc", "thermal", "pcie", "nvlink")
#: The node's filesystems are full (the simulated disk's fault; names no GPU).
DISK_FULL = "disk_full"
#: The network port next to one GPU lost its link (the simulated NIC's fault).
NIC_DOWN = "nic_down"
#: A GPU reset (`gpu` None: every GPU of the node): healthy again, aggregate counters kept.
RESET = "reset"
SCHEDULE_KINDS = (*GPU_FAULT_KINDS, DISK_FULL, NIC_DOWN, RESET)


@dataclass(frozen=True)
class GpuFault:
    time: float  # unix seconds when the fault starts
    node: str
    gpu: int | None  # local GPU index on the node; None for a node-wide RESET or a DISK_FULL
    kind: str  # one of SCHEDULE_KINDS
    xid: int | None = None  # for kind "xid" (and the Xid a simulated ECC/NVLink fault raises)
    rank: int | None = None
    job_id: str | None = None
    attempt: int | None = None
    params: dict[str, Any] = field(default_factory=dict)  # e.g. {"factor": 2.0} for thermal

    def __post_init__(self) -> None:
        if self.kind not in SCHEDULE_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; expected one of {SCHEDULE_KINDS}")
        if self.gpu is None and self.kind in GPU_FAULT_KINDS:
            raise ValueError(
                f"a {self.kind} fault names its GPU; only a {RESET} or {DISK_FULL} may name none"
            )


def schedule_path(data_dir: str | os.PathLike[str], node: str) -> Path:
    return Path(data_dir) / "faults" / f"{node}.jsonl"


def append_fault(data_dir: str | os.PathLike[str], fault: GpuFault) -> Path:
    """Append durably: the fault must be on disk before the rank acts it out and maybe dies."""
    path = schedule_path(data_dir, fault.node)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(asdict(fault), sort_keys=True) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    return path


def append_reset(
    data_dir: str | os.PathLike[str], node: str, gpu: int | None = None, now: float | None = None
) -> Path | None:
    """Reset the node's simulated GPUs (`gpu` None: all of them) where the node has a fault
    schedule, i.e. is simulated and ever had a fault; the schedule's path, or None."""
    if not schedule_path(data_dir, node).exists():
        return None
    return append_fault(
        data_dir, GpuFault(time=time.time() if now is None else now, node=node, gpu=gpu, kind=RESET)
    )


def read_faults(data_dir: str | os.PathLike[str], node: str, offset: int = 0) -> tuple[list[GpuFault], int]:
    """Faults appended since byte `offset`, and the offset to pass next time.

    A torn last line (writer still appending) is left for the next call; a malformed complete
    line is skipped, since one bad record must not blind the simulator to the rest.
    """
    path = schedule_path(data_dir, node)
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            data = fh.read()
    except FileNotFoundError:
        return [], offset
    faults: list[GpuFault] = []
    consumed = 0
    for raw in data.splitlines(keepends=True):
        if not raw.endswith(b"\n"):
            break
        consumed += len(raw)
        try:
            faults.append(GpuFault(**json.loads(raw)))
        except (ValueError, TypeError):
            continue
    return faults, offset + consumed


class TimedFaults:
    """The faults of some kinds on one node that are on at a given time: each lasts
    `params["seconds"]` from its start (a simulated device that is broken for a while)."""

    def __init__(self, data_dir: str | os.PathLike[str], node: str, kinds: tuple[str, ...]) -> None:
        self.data_dir, self.node, self.kinds = data_dir, node, kinds
        self._offset = 0
        self._faults: list[GpuFault] = []

    def active(self, now: float) -> list[GpuFault]:
        new, self._offset = read_faults(self.data_dir, self.node, self._offset)
        self._faults.extend(f for f in new if f.kind in self.kinds)
        self._faults = [f for f in self._faults if now < f.time + _seconds(f)]
        return [f for f in self._faults if f.time <= now]


def _seconds(fault: GpuFault) -> float:
    try:
        return float(fault.params.get("seconds", 0.0))
    except (TypeError, ValueError):
        return 0.0
