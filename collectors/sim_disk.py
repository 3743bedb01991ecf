"""A simulated disk for machines whose disks cannot be filled: the fault schedule's `disk_full`.

The reference trainer's `--inject disk_full` makes a checkpoint write fail with ENOSPC without
filling any real filesystem, so the host collector's statvfs sees plenty of space. This
collector shows what a real agent would read on a node whose disk filled up: while a
`disk_full` fault of the node is on (from its time, `params["seconds"]` long), a `DiskSample`
with no free bytes for each of the agent's disk paths. The paths are reported as
`sim:<path>` so nothing here passes for a real reading; outside a fault it reports nothing
(the host collector's real samples stand). Runs only beside the simulated GPUs (`--gpu sim`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from triage.collectors.records import DiskSample, Record
from triage.fault_schedule import DISK_FULL, TimedFaults

#: Prefix of a simulated disk's path in its samples.
SIM_DISK_PREFIX = "sim:"
#: Size the simulated filesystem reports when the real one cannot be read.
_FALLBACK_TOTAL_BYTES = 1 << 40


class SimDiskCollector:
    name = "sim_disk"

    def __init__(self, data_dir: str | os.PathLike[str], node: str, paths: Sequence[str]) -> None:
        self.node = node
        self.paths = list(paths)
        self._faults = TimedFaults(data_dir, node, (DISK_FULL,))

    def collect(self, now: float) -> list[Record]:
        if not self._faults.active(now):
            return []
        return [
            DiskSample(
                time=now,
                node=self.node,
                path=SIM_DISK_PREFIX + path,
                free_bytes=0,
                total_bytes=_total_bytes(path),
            )
            for path in self.paths
        ]

    def close(self) -> None:
        """Holds nothing open: the schedule is read per collect."""


def _total_bytes(path: str) -> int:
    """The real filesystem's size, so a full simulated disk reads like the node's own."""
    try:
        st = os.statvfs(path)
    except OSError:
        return _FALLBACK_TOTAL_BYTES
    return st.f_blocks * st.f_frsize
