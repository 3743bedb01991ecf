"""A simulated network port per GPU, for machines whose links cannot be cut: the schedule's `nic_down`.

The reference trainer's `--inject network` breaks one rank's connections in-process; no real
port goes down, so `collectors/nic.py` sees nothing. This collector shows what it would read on a
rail-optimised node whose port beside that rank's GPU lost its link: while a `nic_down` fault of
the node is on (from its time, `params["seconds"]` long), a `NicSample` of port `sim:nic<gpu>`
with the link down and that GPU as its neighbour. Outside a fault it reports nothing. Runs only
beside the simulated GPUs (`--gpu sim`).
"""

from __future__ import annotations

import os

from triage.collectors.records import NicSample, Record
from triage.fault_schedule import NIC_DOWN, TimedFaults

#: Prefix of a simulated port's name in its samples, so none passes for a real reading.
SIM_NIC_PREFIX = "sim:nic"


class SimNicCollector:
    name = "sim_nic"

    def __init__(self, data_dir: str | os.PathLike[str], node: str) -> None:
        self.node = node
        self._faults = TimedFaults(data_dir, node, (NIC_DOWN,))

    def collect(self, now: float) -> list[Record]:
        down = sorted({f.gpu for f in self._faults.active(now)}, key=lambda g: -1 if g is None else g)
        return [
            NicSample(now, self.node, f"{SIM_NIC_PREFIX}{'' if gpu is None else gpu}", False, None, gpu)
            for gpu in down
        ]

    def close(self) -> None:
        """Holds nothing open: the schedule is read per collect."""
