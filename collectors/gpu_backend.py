"""Which GPU collector a node runs (`--gpu nvml|sim|none`), and building it.

Both backends share one interface (`GpuCollector`): the agent and the kernel-log collector get
the GPUs' identities (index, UUID, PCI bus id) from whichever one runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Protocol

from triage.collectors.nvml_gpu import NvmlGpuCollector
from triage.collectors.protocol import Collector
from triage.collectors.records import GpuIdentity
from triage.collectors.sim_gpu import MAX_SIM_GPUS, LoadProvider, SimGpuCollector, idle_load
from triage.config import ConfigError

GPU_BACKENDS = ("nvml", "sim", "none")


class GpuCollector(Collector, Protocol):
    def identities(self) -> list[GpuIdentity]: ...


@dataclass
class GpuConfig:
    gpu: str = field(
        default="nvml",
        metadata={
            "help": "GPU health source: nvml (real GPUs), sim (simulated H100s, for machines "
            "without GPUs), none",
            "choices": GPU_BACKENDS,
        },
    )
    sim_gpus: int = field(default=8, metadata={"help": "simulated GPUs per node (--gpu sim)"})
    sim_seed: int = field(default=0, metadata={"help": "seed of the simulated GPUs' noise"})
    nvml_event_timeout_ms: int = field(
        default=500,
        metadata={"help": "how long the NVML Xid event thread waits per call; bounds how fast it stops"},
    )

    def __post_init__(self) -> None:
        if self.gpu not in GPU_BACKENDS:
            raise ConfigError(f"--gpu must be one of {', '.join(GPU_BACKENDS)}, got {self.gpu!r}")
        if not 1 <= self.sim_gpus <= MAX_SIM_GPUS:
            raise ConfigError(f"--sim-gpus must be between 1 and {MAX_SIM_GPUS}, got {self.sim_gpus}")
        if self.nvml_event_timeout_ms < 1:
            raise ConfigError(f"--nvml-event-timeout-ms must be >= 1, got {self.nvml_event_timeout_ms}")


def make_gpu_collector(
    config: GpuConfig, node: str, data_dir: str | os.PathLike[str], load: LoadProvider = idle_load
) -> GpuCollector | None:
    """The configured GPU collector, or None for `--gpu none`."""
    if config.gpu == "sim":
        return SimGpuCollector(node, data_dir, num_gpus=config.sim_gpus, seed=config.sim_seed, load=load)
    if config.gpu == "nvml":
        return NvmlGpuCollector(node, event_timeout_ms=config.nvml_event_timeout_ms)
    return None
