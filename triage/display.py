"""How Triage writes times, culprits and statuses for people: one definition for the CLI, the
supervisor's reports, the analyzers' summaries and the dashboard.

Time zone policy: every time shown to a person is UTC, marked as such where a full time is
shown. A job spans nodes, the operators reading one report sit in different zones, and the
kernel logs, Slurm and Prometheus that a report is read beside are kept in UTC on clusters; a
time of day inside a sentence (`at 02:51:07`) is UTC as well. Stored times are unix seconds.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from triage.verdict import Culprit


class Status(enum.StrEnum):
    """What became of an attempt or a run. Attempts are running, completed, failed or preempted
    in the store; the analysis adds hung; a supervised run can also give up (restarts
    exhausted, or a fail-fast verdict), be interrupted by its operator, or be requeued in Slurm
    (it goes on in the job's next incarnation)."""

    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    HUNG = "hung"
    PREEMPTED = "preempted"
    GAVE_UP = "gave_up"
    INTERRUPTED = "interrupted"
    REQUEUED = "requeued"  # handed back to Slurm to go on in the job's next incarnation

    @property
    def colour(self) -> str:
        """One colour per status, a hex value that rich styles and the dashboard's CSS both take."""
        return _COLOURS[self]

    @property
    def needs_attention(self) -> bool:
        """Whether a person should look: `triage analyze` and `triage jobs` exit 1 on these."""
        return self in (Status.FAILED, Status.HUNG, Status.GAVE_UP)


_COLOURS = {
    Status.RUNNING: "#1f77b4",
    Status.COMPLETED: "#2ca02c",
    Status.FAILED: "#d62728",
    Status.HUNG: "#d62728",
    Status.PREEMPTED: "#ff7f0e",
    Status.GAVE_UP: "#d62728",
    Status.INTERRUPTED: "#ff7f0e",
    Status.REQUEUED: "#ff7f0e",
}


def status_colour(status: str) -> str:
    """The colour of a status word; grey for one this version does not know."""
    try:
        return Status(status).colour
    except ValueError:
        return "#7f7f7f"


def _utc(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


def when(t: float | None) -> str:
    """A full time, `2026-12-06 02:51:07 UTC`; `-` when unknown."""
    if t is None or not math.isfinite(t):
        return "-"
    return _utc(t).strftime("%Y-%m-%d %H:%M:%S UTC")


def clock(t: float | None, unknown: str = "-") -> str:
    """A time of day in UTC, `02:51:07`, for lines whose date the report's header gives."""
    if t is None or not math.isfinite(t):
        return unknown
    return _utc(t).strftime("%H:%M:%S")


def duration(seconds: float | None) -> str:
    """`850 ms`, `12.3 s`, `4 min 05 s`, `2 h 03 min`: the unit a person would say."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"


def culprit_text(culprit: Culprit | Mapping[str, object] | None) -> str:
    """`rank 3 on node1, GPU 1 (GPU-8f1c...)`, or "" when the evidence names nobody."""
    if culprit is None:
        return ""
    c = culprit if isinstance(culprit, Mapping) else vars(culprit)
    rank, node, gpu, uuid = (c.get(k) for k in ("rank", "node", "gpu", "uuid"))
    text = f"rank {rank}" if rank is not None else ""
    if node is not None:
        text += f" on {node}" if text else str(node)
    if gpu is not None:
        text += f", GPU {gpu}" if text else f"GPU {gpu}"
    if uuid:
        text += f" ({uuid})"
    return text


#: What each action does, as a person would say it (the taxonomy's action values are ids).
ACTION_TEXT = {
    "restart": "restart from the last checkpoint",
    "restart_excluding_node": "restart from the last checkpoint without the culprit's node",
    "rollback": "roll back before the bad step and skip its batch",
    "checkpoint_and_requeue": "requeue from the last checkpoint (preempted)",
    "fail_fast": "stop: a restart would only repeat this failure",
    "alert": "keep running; alert",
}


def action_text(action: str | None, excluded: Sequence[str] = ()) -> str:
    """The action in words, naming the node a restart leaves out where the caller knows it."""
    if not action:
        return "-"
    text = ACTION_TEXT.get(action, action)
    if action == "restart_excluding_node" and excluded:
        text = f"restart from the last checkpoint without {', '.join(excluded)}"
    return text
