"""`AnalyzerConfig`: the thresholds every analyzer of a job snapshot shares.

Defaults come from what the field sees: hardware signals lead software symptoms by up to a
collective timeout (hence a 120 s correlation window), a hang is a stall many times longer
than a normal step, a straggler is slower than its peers by a margin that persists.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from triage.config import ConfigError
from triage.taxonomy import DEFAULT_CONFIDENCE_THRESHOLD


@dataclass
class AnalyzerConfig:
    """`now` None (the API default; the CLI passes the current time) is a post-mortem: every
    rank's last heartbeat is its last, so no rank counts as alive."""

    now: float | None = field(
        default=None,
        metadata={
            "help": "analyse as of this unix time (default: the current time); decides whether "
            "ranks that went quiet are still alive",
            "metavar": "UNIX_TIME",
        },
    )
    confidence_threshold: float = field(
        default=DEFAULT_CONFIDENCE_THRESHOLD,
        metadata={"help": "verdicts below this confidence are reported as `unknown`"},
    )
    correlation_window_s: float = field(
        default=120.0,
        metadata={"help": "faults this close in time are one incident; within it the lower layer wins"},
    )
    hang_min_s: float = field(default=30.0, metadata={"help": "shortest stall that counts as a hang"})
    hang_step_factor: float = field(
        default=10.0, metadata={"help": "a stall longer than this many median step times counts as a hang"}
    )
    blocked_at_end_s: float = field(
        default=2.5,
        metadata={
            "help": "a rank whose last heartbeat shows it this long inside one collective died "
            "blocked in it (heartbeats come every second; healthy collectives take ms)"
        },
    )
    heartbeat_period_s: float = field(
        default=1.0,
        metadata={
            "help": "how often ranks send heartbeats (the hooks' heartbeat_interval_s): a rank's "
            "last one is at most this long before it stopped"
        },
    )
    heartbeat_stale_s: float = field(
        default=15.0,
        metadata={"help": "a rank whose last heartbeat is older than this (before `now`) is not alive"},
    )
    node_silence_spread_s: float = field(
        default=5.0,
        metadata={"help": "heartbeats of one node's ranks that stop within this spread stopped together"},
    )
    straggler_slowdown: float = field(
        default=0.15,
        metadata={"help": "a rank this much slower than the median (0.15 = 15%%) may be a straggler"},
    )
    straggler_mad_z: float = field(
        default=3.5, metadata={"help": "robust z-score (MAD) a straggler's compute time must also exceed"}
    )
    straggler_sustained: float = field(
        default=0.5,
        metadata={"help": "share of a rank's step windows that must be slow for it to be a straggler"},
    )
    straggler_last_share: float = field(
        default=0.5,
        metadata={"help": "share of collectives a rank must arrive last in to be a straggler by arrival"},
    )
    straggler_min_steps: int = field(
        default=10,
        metadata={"help": "fewest steps a rank must have completed in an attempt to be judged a straggler"},
    )
    throttle_min_share: float = field(
        default=0.2,
        metadata={
            "help": "share of a GPU's samples with a health throttle reason that counts as "
            "sustained throttling"
        },
    )
    throttle_min_samples: int = field(
        default=3, metadata={"help": "fewest throttled samples that count as throttling"}
    )
    loss_spike_z: float = field(
        default=8.0,
        metadata={"help": "robust z-score of a step's loss over the preceding window that is a spike"},
    )
    loss_spike_window: int = field(
        default=50, metadata={"help": "steps of history a loss spike is measured against"}
    )
    xid_burst_gap_s: float = field(
        default=180.0, metadata={"help": "Xids on one GPU separated by less silence than this are one burst"}
    )
    evidence_lead_s: float = field(
        default=10.0,
        metadata={
            "help": "hardware evidence up to this long before an attempt's first rank started "
            "still belongs to it (a GPU failing during start-up, clocks a little apart); "
            "anything older is a condition the attempt inherited, never its root cause"
        },
    )
    lost_gpu_slack_s: float = field(
        default=5.0,
        metadata={
            "help": "a GPU whose ranks completed steps longer than this after it was reported "
            "lost was not lost by that report (a step in flight may still end)"
        },
    )

    def __post_init__(self) -> None:
        if self.now is not None and self.now < 0:
            raise ConfigError(f"--now must be a unix time (seconds since 1970), got {self.now:g}")
        if not 0.0 <= self.confidence_threshold <= 1.0:
            raise ConfigError(f"--confidence-threshold must lie in [0, 1], got {self.confidence_threshold}")
        positive = {
            "--correlation-window-s": self.correlation_window_s,
            "--hang-min-s": self.hang_min_s,
            "--hang-step-factor": self.hang_step_factor,
            "--heartbeat-stale-s": self.heartbeat_stale_s,
            "--heartbeat-period-s": self.heartbeat_period_s,
            "--blocked-at-end-s": self.blocked_at_end_s,
            "--node-silence-spread-s": self.node_silence_spread_s,
            "--straggler-slowdown": self.straggler_slowdown,
            "--straggler-mad-z": self.straggler_mad_z,
            "--loss-spike-z": self.loss_spike_z,
            "--xid-burst-gap-s": self.xid_burst_gap_s,
            "--lost-gpu-slack-s": self.lost_gpu_slack_s,
        }
        for flag, value in positive.items():
            if not value > 0:
                raise ConfigError(f"{flag} must be > 0, got {value}")
        for flag, value in {
            "--straggler-sustained": self.straggler_sustained,
            "--straggler-last-share": self.straggler_last_share,
            "--throttle-min-share": self.throttle_min_share,
        }.items():
            if not 0.0 < value <= 1.0:
                raise ConfigError(f"{flag} must lie in (0, 1], got {value}")
        if self.evidence_lead_s < 0:
            raise ConfigError(f"--evidence-lead-s must be >= 0, got {self.evidence_lead_s}")
        if self.straggler_min_steps < 1:
            raise ConfigError(f"--straggler-min-steps must be >= 1, got {self.straggler_min_steps}")
        if self.throttle_min_samples < 1:
            raise ConfigError(f"--throttle-min-samples must be >= 1, got {self.throttle_min_samples}")
        if self.loss_spike_window < 5:
            raise ConfigError(f"--loss-spike-window must be >= 5 steps, got {self.loss_spike_window}")
