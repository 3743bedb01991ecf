"""Configuration of the in-rank telemetry (`TrainingMonitor`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from triage.config import (
    ENV_ATTEMPT,
    ENV_AUTO_HOOKS,
    ENV_JOB_ID,
    ENV_NODE,
    ENV_RUN_ID,
    ConfigError,
    data_dir_from_env,
    node_name,
)
from triage.names import check_name, is_valid_name

#: The folder whose `sitecustomize` instruments torchrun ranks without code in the script
#: (`triage.trainer_hooks.auto`): `triage run` puts it first on the ranks' PYTHONPATH.
AUTOLOAD_DIR = Path(__file__).resolve().parent / "autoload"


def auto_hooks_env(env: dict[str, str]) -> dict[str, str]:
    """`env` with the zero-code instrumentation switched on for the Python ranks it starts."""
    env[ENV_AUTO_HOOKS] = "1"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(AUTOLOAD_DIR), env.get("PYTHONPATH", "")) if p)
    return env


def run_id_from_env() -> str | None:
    """The supervisor's run id; under plain torchrun its rendezvous run id (shared by every
    node of one launch) where one was given, so a reused job id still splits into runs."""
    run = os.environ.get(ENV_RUN_ID)
    if run:
        return run
    elastic = os.environ.get("TORCHELASTIC_RUN_ID", "")
    return elastic if elastic and elastic != "none" else None


@dataclass
class MonitorConfig:
    data_dir: Path = field(
        default_factory=data_dir_from_env,
        metadata={"help": "Triage data directory (spools are written under it)"},
    )
    job_id: str = field(
        default_factory=lambda: os.environ.get(ENV_JOB_ID, "local"),
        metadata={"help": "job id (env TRIAGE_JOB_ID)"},
    )
    run_id: str | None = field(
        default_factory=run_id_from_env, metadata={"help": "run id (env TRIAGE_RUN_ID, set by triage run)"}
    )
    attempt: int = field(
        default_factory=lambda: int(os.environ.get(ENV_ATTEMPT, "0")),
        metadata={"help": "restart attempt (env TRIAGE_ATTEMPT)"},
    )
    rank: int = field(default_factory=lambda: int(os.environ.get("RANK", "0")))
    local_rank: int = field(default_factory=lambda: int(os.environ.get("LOCAL_RANK", "0")))
    world_size: int = field(default_factory=lambda: int(os.environ.get("WORLD_SIZE", "1")))
    node: str = field(default_factory=node_name)
    gpu: int | None = field(
        default=None,
        metadata={
            "help": "the node's number of the GPU this rank drives, where its device does not "
            "tell it (a simulated GPU); unset: the CUDA device's, none on a CPU-only rank",
            "cli": False,
        },
    )
    flush_interval_s: float = field(
        default=1.0,
        metadata={
            "help": "how often buffered records are written to the spool; a SIGKILL loses at most this much"
        },
    )
    heartbeat_interval_s: float = field(default=1.0, metadata={"help": "heartbeat period"})
    buffer_capacity: int = field(
        default=200_000,
        metadata={"help": "records held in memory per table before new ones are dropped (and counted)"},
    )
    canary_every: int = field(
        default=10,
        metadata={
            "help": "run the known-answer SDC canary on the first step and every N steps after "
            "(0 disables it); one 64x64 matmul, read back off the hot path"
        },
    )
    flops_per_token: float | None = field(
        default=None,
        metadata={"help": "model FLOPs per trained token (6N rule) for MFU; unknown leaves MFU empty"},
    )
    peak_flops: float | None = field(
        default=None, metadata={"help": "the device's peak FLOP/s for MFU (e.g. 989e12 for H100 bf16 dense)"}
    )
    collectives: bool = field(default=True, metadata={"help": "time every torch.distributed collective"})
    capture_uncaught: bool = field(
        default=True,
        metadata={"help": "record uncaught exceptions and exits through sys.excepthook and atexit"},
    )
    mode: str = field(
        default="explicit",
        metadata={
            "help": "how the monitor came to this rank: `explicit` (the script's own "
            "TrainingMonitor, which reports steps) or `auto` (triage run's zero-code "
            "instrumentation, which reports steps only where the loop steps a torch "
            "optimizer)",
            "cli": False,
        },
    )

    def __post_init__(self) -> None:
        self.data_dir = Path(self.data_dir)
        check_name("job id", self.job_id, source=f"env {ENV_JOB_ID} or MonitorConfig.job_id")
        check_name("node name", self.node, source=f"env {ENV_NODE} or the host name")
        if self.run_id is not None and not is_valid_name(self.run_id):
            self.run_id = None  # a foreign launcher's id (torchrun accepts any text): not ours
        if self.flush_interval_s <= 0 or self.heartbeat_interval_s <= 0:
            raise ConfigError("flush and heartbeat intervals must be positive seconds")
        if self.buffer_capacity < 100:
            raise ConfigError(f"buffer_capacity {self.buffer_capacity} is too small (min 100)")
        if self.canary_every < 0:
            raise ConfigError("canary_every must be >= 0")
        if self.mode not in ("explicit", "auto"):
            raise ConfigError(f"mode must be explicit or auto, got {self.mode!r}")
        if self.rank < 0 or self.world_size < 1:
            raise ConfigError(f"bad rank/world size {self.rank}/{self.world_size}")
