"""`AgentConfig`: the per-node agent's own settings, composed with its collectors' and the
store's config dataclasses (each keeps its own flags and validation)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from triage.collectors.gpu_backend import GpuConfig
from triage.collectors.host import HostConfig
from triage.collectors.kernel_log import KernelLogConfig
from triage.config import ENV_NODE, ConfigError
from triage.names import check_name
from triage.store.config import StoreConfig

AGENT_GPU_CHOICES = ("auto", "nvml", "sim", "none")


@dataclass
class AgentConfig:
    data_dir: str | None = field(
        default=None,
        metadata={
            "help": "data directory the node's ranks spool into and the store lives in "
            "(default: $TRIAGE_DATA_DIR, else ./triage-data)",
            "metavar": "DIR",
        },
    )
    node: str | None = field(
        default=None, metadata={"help": "this node's name (default: $TRIAGE_NODE, else the host name)"}
    )
    interval: float = field(
        default=1.0, metadata={"help": "seconds between collector samples", "metavar": "SECONDS"}
    )
    port: int = field(
        default=9400, metadata={"help": "port /metrics is served on (0: any free port, logged)"}
    )
    bind: str = field(
        default="127.0.0.1",
        metadata={"help": "address /metrics is served on; 0.0.0.0 lets a remote Prometheus scrape it"},
    )
    gpu: str = field(
        default="auto",
        metadata={
            "help": "GPU health source: auto (NVML when it initialises, else none), nvml, sim "
            "(simulated H100s, for machines without GPUs), none",
            "choices": AGENT_GPU_CHOICES,
        },
    )
    store_interval: float = field(
        default=15.0,
        metadata={
            "help": "seconds between ingests of the ranks' spools, writes of the collectors' "
            "records to the store and reads of the supervisor's incidents and job scores",
            "metavar": "SECONDS",
        },
    )
    maintenance_interval: float = field(
        default=300.0,
        metadata={
            "help": "seconds between applications of retention and compaction to the node's store partition",
            "metavar": "SECONDS",
        },
    )
    backoff_max: float = field(
        default=60.0,
        metadata={
            "help": "longest wait before retrying a collector that raised (the wait doubles per "
            "failure from --interval)",
            "metavar": "SECONDS",
        },
    )
    job_expiry: float = field(
        default=3600.0,
        metadata={"help": "a job silent this long is no longer exported", "metavar": "SECONDS"},
    )
    max_pending_records: int = field(
        default=200_000,
        metadata={
            "help": "collector records kept in memory while the store cannot be written; the "
            "oldest are dropped (and counted in the log) beyond this"
        },
    )
    gpus: GpuConfig = field(default_factory=GpuConfig, metadata={"cli": False})
    host: HostConfig = field(default_factory=HostConfig, metadata={"cli": False})
    kernel: KernelLogConfig = field(default_factory=KernelLogConfig, metadata={"cli": False})
    store: StoreConfig = field(default_factory=StoreConfig, metadata={"cli": False})

    def __post_init__(self) -> None:
        if self.gpu not in AGENT_GPU_CHOICES:
            raise ConfigError(f"--gpu must be one of {', '.join(AGENT_GPU_CHOICES)}, got {self.gpu!r}")
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"--port must be in 0..65535, got {self.port}")
        for flag, value in {
            "--interval": self.interval,
            "--store-interval": self.store_interval,
            "--maintenance-interval": self.maintenance_interval,
            "--backoff-max": self.backoff_max,
            "--job-expiry": self.job_expiry,
        }.items():
            if not value > 0:
                raise ConfigError(f"{flag} must be > 0 seconds, got {value}")
        if self.store_interval < self.interval:
            raise ConfigError(
                f"--store-interval ({self.store_interval}) must be at least --interval ({self.interval})"
            )
        if self.max_pending_records < 1:
            raise ConfigError(f"--max-pending-records must be >= 1, got {self.max_pending_records}")
        if self.node is not None:
            check_name("node name", self.node, source="--node")
        elif os.environ.get(ENV_NODE):
            check_name("node name", os.environ[ENV_NODE], source=f"env {ENV_NODE}")
