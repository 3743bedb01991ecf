"""`TrainConfig`: every knob of the reference trainer; `triage train`'s flags come from it.

The launcher validates it once (bad input -> ConfigError -> exit 2) and hands it to every rank
as JSON, so the ranks run exactly what was validated.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triage.config import ENV_ATTEMPT, ENV_JOB_ID, ConfigError, data_dir_from_env
from triage.reference_trainer.inject_spec import InjectSpec, parse_inject_spec
from triage.reference_trainer.model_sizes import MODEL_SIZES


@dataclass
class TrainConfig:
    nproc_per_node: int = field(default=2, metadata={"help": "ranks per node"})
    nnodes: int = field(
        default=1,
        metadata={
            "help": "nodes; without --node-rank all of them start here on loopback as simulated "
            "nodes node0, node1, ..."
        },
    )
    node_rank: int | None = field(
        default=None,
        metadata={
            "help": "run only this node (one `triage train` per node on a real cluster); "
            "needs --rdzv-endpoint"
        },
    )
    rdzv_endpoint: str | None = field(
        default=None,
        metadata={
            "help": "HOST:PORT of the c10d rendezvous (default: a free port on 127.0.0.1)",
            "metavar": "HOST:PORT",
        },
    )
    steps: int = field(default=50, metadata={"help": "train up to this global step"})
    checkpoint_every: int = field(
        default=10, metadata={"help": "save a sharded DCP checkpoint every N steps (0: never)"}
    )
    keep: int = field(default=2, metadata={"help": "keep the newest K complete checkpoints"})
    async_checkpoint: bool = field(
        default=False, metadata={"help": "save checkpoints in the background (dcp.async_save)"}
    )
    run_dir: str | None = field(
        default=None,
        metadata={
            "help": "checkpoints and progress of this job; a restart resumes from the newest "
            "complete checkpoint here (default: DATA_DIR/runs/JOB_ID)"
        },
    )
    job_id: str | None = field(
        default=None, metadata={"help": "job id (default: env TRIAGE_JOB_ID, else train-<time>)"}
    )
    seed: int = field(default=0, metadata={"help": "seed of the model init and the data"})
    model: str = field(
        default="tiny",
        metadata={
            "help": "model size: tiny (tests) or small (~26M params, benchmarks)",
            "choices": tuple(MODEL_SIZES),
        },
    )
    batch_size: int = field(default=8, metadata={"help": "sequences per rank per step"})
    seq_len: int = field(default=64, metadata={"help": "tokens per sequence"})
    lr: float = field(default=3e-3, metadata={"help": "AdamW learning rate"})
    data: str | None = field(
        default=None,
        metadata={
            "help": "train on this file's bytes instead of the synthetic token stream",
            "metavar": "PATH",
        },
    )
    num_workers: int = field(default=1, metadata={"help": "DataLoader worker processes per rank"})
    collective_timeout: float = field(
        default=60.0,
        metadata={
            "help": "seconds a collective may block before gloo/NCCL fails it, once the first step "
            "has completed"
        },
    )
    startup_timeout: float = field(
        default=300.0,
        metadata={
            "help": "the same bound until the first step completes: ranks start unevenly (imports, "
            "data workers, loading a checkpoint), and a short --collective-timeout must not "
            "turn that skew into a failure"
        },
    )
    max_restarts: int = field(
        default=0,
        metadata={
            "help": "torchrun's own restarts of every rank after one fails (its --max-restarts). "
            "Under `triage run` leave 0: the supervisor restarts, from a diagnosis. Each torchrun "
            "restart is the next attempt in the ranks' records and in --inject"
        },
    )
    shutdown_timeout: int = field(
        default=30,
        metadata={
            "help": "seconds torchrun waits for ranks to exit after SIGTERM (a preempted job saves "
            "its checkpoint in this time) before SIGKILL"
        },
    )
    mixed_precision: bool | None = field(
        default=None,
        metadata={"help": "bf16 compute with fp32 gradients reduction (default: on with GPUs, off on CPU)"},
    )
    activation_checkpointing: bool | None = field(
        default=None,
        metadata={"help": "recompute block activations in backward (default: on with GPUs, off on CPU)"},
    )
    grad_clip: float = field(
        default=1.0,
        metadata={"help": "clip the global gradient norm to this (its value is the recorded grad-norm)"},
    )
    telemetry: bool = field(
        default=True,
        metadata={
            "help": "record steps, collectives, events and heartbeats into the Triage spool "
            "(--no-telemetry runs the bare trainer, for overhead comparisons)"
        },
    )
    inject: list[str] = field(
        default_factory=list,
        metadata={
            "help": "inject a fault, KIND@step=N,rank=R,... (repeatable; kinds below)",
            "repeatable": True,
            "metavar": "SPEC",
        },
    )
    summary: str | None = field(
        default=None,
        metadata={
            "help": "write the run's JSON summary here when it ends, also when it fails",
            "metavar": "PATH",
        },
    )
    data_dir: str | None = field(
        default=None,
        metadata={"help": "site data directory (default: env TRIAGE_DATA_DIR, else ./triage-data)"},
    )

    def __post_init__(self) -> None:
        for name in ("nproc_per_node", "nnodes", "steps", "keep", "batch_size", "seq_len"):
            if getattr(self, name) < 1:
                raise ConfigError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        for name in ("checkpoint_every", "num_workers", "shutdown_timeout", "max_restarts"):
            if getattr(self, name) < 0:
                raise ConfigError(f"--{name.replace('_', '-')} must be >= 0")
        if min(self.collective_timeout, self.startup_timeout, self.lr, self.grad_clip) <= 0:
            raise ConfigError("--collective-timeout, --startup-timeout, --lr and --grad-clip must be > 0")
        if self.model not in MODEL_SIZES:
            raise ConfigError(f"--model {self.model!r}: choose one of {', '.join(MODEL_SIZES)}")
        if self.seq_len > MODEL_SIZES[self.model].max_seq_len:
            raise ConfigError(
                f"--seq-len {self.seq_len} exceeds the model's {MODEL_SIZES[self.model].max_seq_len}"
            )
        if self.node_rank is not None and not (0 <= self.node_rank < self.nnodes and self.rdzv_endpoint):
            raise ConfigError(
                "--node-rank K needs 0 <= K < --nnodes and --rdzv-endpoint HOST:PORT (the same on every node)"
            )
        if self.rdzv_endpoint is not None:
            host, _, port = self.rdzv_endpoint.rpartition(":")
            if not host or not port.isdigit():
                raise ConfigError(f"--rdzv-endpoint {self.rdzv_endpoint!r}: expected HOST:PORT")
        if self.data is not None:
            size = Path(self.data).stat().st_size if Path(self.data).is_file() else 0
            if size <= self.seq_len + 1:
                raise ConfigError(
                    f"--data {self.data}: not a readable file longer than "
                    f"--seq-len + 1 = {self.seq_len + 1} bytes"
                )
        specs = self.inject_specs()
        if any(s.kind == "data_error" for s in specs) and self.num_workers < 1:
            raise ConfigError("--inject data_error needs --num-workers >= 1 (it kills a worker)")
        for s in specs:
            # a drill whose fault can never fire would pass as a run Triage saw nothing wrong in;
            # the world it is checked against is this attempt's (a restart may run on fewer
            # nodes, where an earlier attempt's fault is long done)
            if s.kind != "sigterm" and s.attempt == attempt_from_env() and s.rank >= self.world_size:
                raise ConfigError(
                    f"--inject {s.text!r}: rank {s.rank} is outside the job's {self.world_size} ranks "
                    f"(0..{self.world_size - 1})"
                )
            if s.step > self.steps:
                raise ConfigError(
                    f"--inject {s.text!r}: step {s.step} comes after --steps {self.steps}: it would never fire"
                )
            if s.gpu is not None and s.gpu >= self.nproc_per_node:
                raise ConfigError(
                    f"--inject {s.text!r}: no rank uses GPU {s.gpu} (each node's ranks use GPUs "
                    f"0..{self.nproc_per_node - 1})"
                )
        self.job_id = (
            self.job_id or os.environ.get(ENV_JOB_ID) or time.strftime("train-%Y%m%d-%H%M%S", time.gmtime())
        )
        self.data_dir = str(data_dir_from_env(self.data_dir))
        self.run_dir = self.run_dir or str(Path(self.data_dir) / "runs" / self.job_id)
        if Path(self.run_dir).exists() and not Path(self.run_dir).is_dir():
            raise ConfigError(f"--run-dir {self.run_dir} is a file, not a directory; pass a directory path")

    @property
    def world_size(self) -> int:
        return self.nproc_per_node * self.nnodes

    def inject_specs(self) -> list[InjectSpec]:
        return [parse_inject_spec(s) for s in self.inject or []]

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> TrainConfig:
        values: dict[str, Any] = json.loads(text)
        return cls(**values)


def rank_attempt_from_env() -> int:
    """A rank's attempt: the supervisor's counter plus the restarts torchrun made itself
    (TORCHELASTIC_RESTART_COUNT), so that a rank torchrun restarts is a new attempt too."""
    restarts = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return attempt_from_env() + (int(restarts) if restarts.isdigit() else 0)


def attempt_from_env() -> int:
    """The supervisor's restart counter (TRIAGE_ATTEMPT, default 0)."""
    raw = os.environ.get(ENV_ATTEMPT, "0")
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"env {ENV_ATTEMPT}={raw!r} is not an integer") from None
