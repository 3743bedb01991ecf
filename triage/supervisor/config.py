"""`SupervisorConfig`: the knobs of `triage run`; its flags come from it."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from triage.config import ENV_JOB_ID, ConfigError
from triage.names import check_name
from triage.supervisor.identity import default_job_id

AGENT_GPUS = ("sim", "nvml", "auto", "none")


@dataclass
class SupervisorConfig:
    job_id: str | None = field(
        default=None,
        metadata={
            "help": "the job's id (default: env TRIAGE_JOB_ID, else a new job-<time>-<random>); "
            "running a job id again starts a new run of that job"
        },
    )
    max_restarts: int = field(
        default=3, metadata={"help": "give up after this many restarts (requeues after preemption count too)"}
    )
    hang_timeout: float | None = field(
        default=None,
        metadata={
            "help": "seconds without step progress that count as a hang (default: the analyzers' "
            "max(30 s, 10 x the median step time)); below about 20 s, work outside steps (an "
            "evaluation, a save) can be taken for a hang before its ranks' reports show it",
            "metavar": "S",
        },
    )
    backoff: float = field(default=2.0, metadata={"help": "seconds to wait before a restart", "metavar": "S"})
    grace: float = field(
        default=10.0,
        metadata={"help": "seconds the job gets to exit after SIGTERM before SIGKILL", "metavar": "S"},
    )
    startup_timeout: float | None = field(
        default=None,
        metadata={
            "help": "seconds an attempt's ranks may take from their start (once their hooks are "
            "loaded: the interpreter's and torch's imports are not counted) to the first stored step "
            "before the attempt counts as hung. "
            "Unset, 300 s where steps are known to come (the script's own TrainingMonitor, or an "
            "earlier attempt of the run that stepped) and no limit otherwise: a job that reports "
            "no steps is never stopped for the lack of them. Given, it applies to every attempt whose "
            "ranks report through hooks, auto-instrumentation too (its steps come once the loop "
            "steps a torch optimizer): a rank stuck before its first step (a start-up barrier one "
            "rank never reaches) is then found; a job with no hooks at all is never stopped for it",
            "metavar": "S",
        },
    )
    prepare_timeout: float = field(
        default=900.0,
        metadata={
            "help": "seconds without a step that a job may go on while a rank works outside "
            "steps: in child processes or reading data, outside every collective (a dataset "
            "mapped in a pool, a file read), or running Python code on its main thread (an "
            "evaluation, a dataset tokenized in place), before it counts as hung (a DataLoader "
            "worker looping on one sample looks the same: it is found this late; raise it for "
            "longer evaluations); the step timeout applies otherwise, counted from the last "
            "step or the end of that work",
            "metavar": "S",
        },
    )
    auto_hooks: bool = field(
        default=True,
        metadata={
            "help": "instrument torchrun ranks without changing the script (a sitecustomize on "
            "their PYTHONPATH): steps from the optimizer, collectives, exceptions, exits; "
            "--no-auto-hooks leaves the ranks as they are"
        },
    )
    echo_output: bool = field(
        default=True,
        metadata={
            "help": "show the ranks' output as it comes, besides keeping it under "
            "DATA_DIR/logs/ (--no-echo-output keeps it there only)"
        },
    )
    log_max_mb: float = field(
        default=64.0,
        metadata={
            "help": "MiB of an attempt's captured output kept under DATA_DIR/logs/<job>/<run>/ "
            "(attempt-N.log, rotated to attempt-N.log.1 at half of it; each rank's lines also in "
            "attempt-N/rank-R.log, an eighth of it each); the lines that decide a verdict go to "
            "the store whatever the bound",
            "metavar": "MB",
        },
    )
    score_interval: float = field(
        default=60.0,
        metadata={
            "help": "seconds between analyses of the running job whose goodput ratio and straggler "
            "scores the node agents export (slow signals: their alerts wait 15 min and 1 h)",
            "metavar": "S",
        },
    )
    data_dir: str | None = field(
        default=None,
        metadata={"help": "site data directory (default: env TRIAGE_DATA_DIR, else ./triage-data)"},
    )
    agents: str = field(
        default="auto",
        metadata={
            "help": "node agents to start: `auto` (one per simulated node of a local "
            "`triage train --nnodes N`, none otherwise), `none` (the cluster runs its own; "
            "without any agent the supervisor ingests the spools itself), or node names "
            "NODE,NODE",
            "metavar": "auto|none|NODES",
        },
    )
    agent_gpu: str = field(
        default="auto",
        metadata={
            "help": "--gpu of the agents started; auto: NVML where it initialises here, else simulated "
            "GPUs for the reference trainer (`triage train`, whose GPU faults the simulator plays) "
            "and none for any other command (no GPU health is shown rather than an invented one)",
            "choices": AGENT_GPUS,
        },
    )
    sim_gpus: int = field(
        default=2,
        metadata={
            "help": "simulated GPUs per agent (--gpu sim); for a local `triage train`, at least its "
            "--nproc-per-node (every rank's GPU is sampled)"
        },
    )
    agent_interval: float = field(
        default=1.0, metadata={"help": "sampling and ingest interval of the agents started", "metavar": "S"}
    )
    launcher: str = field(
        default="local",
        metadata={
            "help": "who starts each attempt: `local` (the command itself, on this machine) or "
            "`slurm` (inside an sbatch/salloc allocation: one srun step per attempt, one task per "
            "node; node exclusion, requeue and drain carried out by Slurm)",
            "choices": ("local", "slurm"),
        },
    )
    slurm_drain: bool = field(
        default=False,
        metadata={
            "help": "with --launcher slurm, drain a quarantined node in Slurm (scontrol update "
            "state=drain) so no job lands on it; off by default: it acts on the whole cluster"
        },
    )
    slurm_min_nodes: int = field(
        default=1,
        metadata={
            "help": "with --launcher slurm, fewest nodes an attempt may run on: when leaving a "
            "node out would leave fewer, the job is requeued without it instead",
            "metavar": "N",
        },
    )
    quarantine: bool = field(
        default=True,
        metadata={
            "help": "keep the nodes the node health ledger holds quarantined out of the job "
            "(`triage nodes`), and quarantine the culprit node of a hardware verdict; "
            "--no-quarantine does neither (a burn-in run on a node under repair)"
        },
    )

    def __post_init__(self) -> None:
        if self.max_restarts < 0:
            raise ConfigError(f"--max-restarts must be >= 0, got {self.max_restarts}")
        for flag, value in {"--backoff": self.backoff, "--grace": self.grace}.items():
            if value < 0:
                raise ConfigError(f"{flag} must be >= 0, got {value}")
        for flag, optional in {
            "--hang-timeout": self.hang_timeout,
            "--startup-timeout": self.startup_timeout,
            "--prepare-timeout": self.prepare_timeout,
            "--score-interval": self.score_interval,
            "--log-max-mb": self.log_max_mb,
            "--agent-interval": self.agent_interval,
        }.items():
            if optional is not None and optional <= 0:
                raise ConfigError(f"{flag} must be > 0, got {optional}")
        if self.agents not in ("auto", "none"):
            for node in (n.strip() for n in self.agents.split(",")):
                check_name("node name", node, source="--agents")
        if self.launcher not in ("local", "slurm"):
            raise ConfigError(f"--launcher {self.launcher!r}: choose local or slurm")
        if self.slurm_min_nodes < 1:
            raise ConfigError(f"--slurm-min-nodes must be >= 1, got {self.slurm_min_nodes}")
        if self.sim_gpus < 1:
            raise ConfigError(f"--sim-gpus must be >= 1, got {self.sim_gpus}")
        if self.agent_gpu not in AGENT_GPUS:
            raise ConfigError(f"--agent-gpu {self.agent_gpu!r}: choose one of {', '.join(AGENT_GPUS)}")
        if not self.agents.strip():
            raise ConfigError("--agents: say auto, none, or node names NODE,NODE")
        if self.job_id:
            check_name("job id", self.job_id, source="--job-id")
        elif os.environ.get(ENV_JOB_ID):
            self.job_id = check_name("job id", os.environ[ENV_JOB_ID], source=f"env {ENV_JOB_ID}")
        else:
            self.job_id = default_job_id()

    def agent_nodes(self, simulated: list[str]) -> list[str]:
        if self.agents == "auto":
            return simulated
        if self.agents == "none":
            return []
        return [n.strip() for n in self.agents.split(",") if n.strip()]
