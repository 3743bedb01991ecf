"""The links of the node's network ports, from sysfs: Ethernet/IPoIB interfaces and InfiniBand ports.

A rank whose NIC lost its link sees its peers' connections close, and so do the peers: every
rank of the job prints the same "connection closed by peer", and the logs alone cannot say whose
link went. The node's own view can: `/sys/class/net/<if>/operstate` and `carrier_changes`, and
`/sys/class/infiniband/<hca>/ports/<n>/state` with its `link_downed` counter. Each port is
mapped to the GPU that shares its PCIe switch (the rail that GPU's traffic uses on rail-optimised
clusters) by comparing the two devices' sysfs paths, so the analysis can name the rank.

Only physical ports are read (an interface without a `device` link is a bridge, veth or
loopback), and a port is reported from the first collect that finds it up: a port that was
never up since the agent started carries no job traffic, and reporting every unused, unplugged
port as down would blame every node. The agent passes the ports its predecessors on the node
stored as up lately (`known_up`), so a port that died while the agent was down is still
reported. (A port dead before any agent saw it up is not; a slave of a bond is, as a port of
its own: the bond runs on with less.) An interface on an InfiniBand/RoCE adapter (IPoIB's
`ib0`, a RoCE port's Ethernet interface) is the same link as the adapter's port: only the port
is reported, so one lost link is one port down, not two.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from triage.collectors.records import GpuIdentity, NicSample, Record


class NicCollector:
    name = "nic"

    def __init__(
        self,
        node: str,
        gpus: Sequence[GpuIdentity] = (),
        *,
        sysfs: str | os.PathLike[str] = "/sys",
        known_up: Iterable[str] = (),
    ):
        self.node = node
        self.sysfs = Path(sysfs)
        self._gpu_paths = {
            g.gpu: path
            for g in gpus
            if g.pci_bus_id is not None
            and (path := _device_path(self.sysfs / "bus" / "pci" / "devices" / f"{g.pci_bus_id}.0"))
        }
        self._seen_up: set[str] = set(known_up)
        self._gpu_of: dict[str, int | None] = {}

    def collect(self, now: float) -> list[Record]:
        records: list[Record] = []
        for nic, up, downs, device in self._ports():
            if up:
                self._seen_up.add(nic)
            if nic not in self._seen_up:
                continue
            if nic not in self._gpu_of:
                self._gpu_of[nic] = self._nearest_gpu(device)
            records.append(NicSample(now, self.node, nic, up, downs, self._gpu_of[nic]))
        return records

    def close(self) -> None:
        """Holds nothing open: sysfs is read per collect."""

    def _ports(self) -> list[tuple[str, bool, int | None, Path | None]]:
        """(name, link up, link losses so far, PCI device path) of every physical port."""
        ports: list[tuple[str, bool, int | None, Path | None]] = []
        hcas = _children(self.sysfs / "class" / "infiniband")
        hca_devices = {d for hca in hcas if (d := _device_path(hca / "device")) is not None}
        for iface in _children(self.sysfs / "class" / "net"):
            device = _device_path(iface / "device")
            if device is None or device in hca_devices:
                continue
            state = _read(iface / "operstate")
            up = state == "up" or (state == "unknown" and _read(iface / "carrier") == "1")
            downs = _int(_read(iface / "carrier_down_count"))
            if downs is None and (changes := _int(_read(iface / "carrier_changes"))) is not None:
                downs = changes // 2
            ports.append((iface.name, up, downs, device))
        for hca in hcas:
            device = _device_path(hca / "device")
            for port in _children(hca / "ports"):
                state = _read(port / "state") or ""  # "4: ACTIVE", "5: ACTIVE_DEFER", "1: DOWN"
                downs = _int(_read(port / "counters" / "link_downed"))  # 8 bits: stops at 255
                ports.append((f"{hca.name}/{port.name}", "ACTIVE" in state, downs, device))
        return ports

    def _nearest_gpu(self, device: Path | None) -> int | None:
        """The one GPU below the same PCIe switch or root port as `device`, else None."""
        if device is None:
            return None
        shared = {gpu: _shared_pci_depth(device, path) for gpu, path in self._gpu_paths.items()}
        best = max(shared.values(), default=0)
        nearest = [gpu for gpu, depth in shared.items() if depth == best]
        return nearest[0] if best > 0 and len(nearest) == 1 else None


def _shared_pci_depth(a: Path, b: Path) -> int:
    """How many PCI devices (root port, switch ports) the two devices' paths have in common."""
    depth = 0
    for x, y in zip(a.parts, b.parts, strict=False):
        if x != y:
            break
        depth += x.count(":") == 2  # "0000:17:00.0", not "pci0000:17"
    return depth


def _children(path: Path) -> list[Path]:
    try:
        return sorted(path.iterdir())
    except OSError:
        return []


def _device_path(link: Path) -> Path | None:
    """Where a sysfs device link points, or None when there is none (a virtual interface)."""
    if not link.exists():
        return None
    return Path(os.path.realpath(link))


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:  # absent, or EINVAL (carrier of a port that is administratively down)
        return None


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None
