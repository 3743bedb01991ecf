"""What a supervised run reports: per attempt, per job, and the live state a progress display
shows while the job runs. The supervisor fills these in; `triage.commands.report_view` formats
them for people, `JobReport.to_dict` for machines."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from triage.display import Status
from triage.supervisor.observe import Progress


@dataclass
class AttemptReport:
    attempt: int
    started: float
    plan: dict[str, Any]
    ended: float | None = None
    outcome: str | None = None  # completed, failed, hung, preempted
    exit_code: int | None = None
    detection: str | None = None  # launcher_exit, rank_exit, hang, gpu_fault, interrupted
    detected_at: float | None = None
    diagnosed_at: float | None = None
    resumed_from_step: int | None = None
    last_step: int | None = None
    last_progress: float | None = None
    first_step_end: float | None = None
    ranks_seen_at: float | None = None  # when the last of its rank processes was first seen
    exited_first: list[int] = field(default_factory=list)  # ranks whose exit was noticed first
    first_exit_at: float | None = None  # when a rank was first seen gone
    #: ranks gone without a clean exit in their own records (no exception either: a signal)
    vanished: list[int] = field(default_factory=list)
    killed_pids: list[int] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    survivors: list[str] = field(default_factory=list)  # orphans that withstood SIGKILL
    verdict: dict[str, Any] | None = None
    action: str | None = None
    reason: str | None = None
    quarantine: dict[str, Any] | None = None  # the ledger entry this attempt's verdict wrote
    log: str | None = None  # the attempt's captured output (rotated to <log>.1 past its bound)

    @property
    def fault_at(self) -> float | None:
        """When the fault struck, as well as the record tells: where a rank's exit was what the
        supervisor detected, that exit (seen within one poll); else the verdict's first
        evidence; never before the last completed step (the fault followed it), which stands
        in where nothing else is known. Evidence first seen after the detection is no time of
        the fault: a hang whose only record is the ranks' heartbeats ending when the supervisor
        stopped them began at its last step."""
        if self.detection == "rank_exit" and self.first_exit_at is not None:
            return self.first_exit_at
        first_seen = (self.verdict or {}).get("first_seen")
        if first_seen is not None and self.detected_at is not None and first_seen > self.detected_at:
            first_seen = None
        if self.last_progress is None:
            return first_seen
        at = max(self.last_progress, first_seen if first_seen is not None else self.last_progress)
        # steps stored after the detection (a stop that came as they arrived) date no fault
        return None if self.detected_at is not None and at > self.detected_at else at

    @property
    def detect_s(self) -> float | None:
        """From the fault to its detection by the supervisor."""
        if self.detected_at is None or self.fault_at is None:
            return None
        return self.detected_at - self.fault_at


@dataclass
class JobReport:
    job_id: str
    run_id: str
    data_dir: str
    command: list[str]
    status: str = Status.RUNNING  # completed, failed, gave_up, interrupted
    reason: str = ""
    attempts: list[AttemptReport] = field(default_factory=list)
    excluded_nodes: list[str] = field(default_factory=list)
    #: node -> why the ledger held it out of this run from its start
    quarantined_at_start: dict[str, str] = field(default_factory=dict)
    store_errors: list[str] = field(default_factory=list)  # records the store did not take
    analysis: dict[str, Any] | None = None

    def recoveries(self) -> list[dict[str, Any]]:
        """Per restart: detection time, recovery time (the fault to the end of the next
        attempt's first step) and steps lost."""
        out = []
        for failed, nxt in zip(self.attempts, self.attempts[1:]):
            if failed.fault_at is None or nxt.first_step_end is None:
                continue
            resumed = nxt.resumed_from_step
            out.append(
                {
                    "attempt": failed.attempt,
                    "category": (failed.verdict or {}).get("category"),
                    "action": failed.action,
                    "detection": failed.detection,
                    "detect_s": round(failed.detect_s or 0.0, 3),
                    "recover_s": round(nxt.first_step_end - failed.fault_at, 3),
                    # where the recovery time went: stopping, diagnosing, backoff, then the new
                    # attempt's start-up (processes, rendezvous, checkpoint load, first step)
                    "breakdown_s": {
                        "stop": _span(failed.detected_at, failed.ended),
                        "diagnose": _span(failed.ended, failed.diagnosed_at),
                        "backoff": _span(failed.diagnosed_at, nxt.started),
                        "start_to_first_step": _span(nxt.started, nxt.first_step_end),
                    },
                    "steps_lost": (
                        None if resumed is None or failed.last_step is None else failed.last_step - resumed
                    ),
                }
            )
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "run_id": self.run_id,
            "data_dir": self.data_dir,
            "command": self.command,
            "status": self.status,
            "reason": self.reason,
            "excluded_nodes": self.excluded_nodes,
            "quarantined_at_start": self.quarantined_at_start,
            "store_errors": self.store_errors,
            "attempts": [
                {**asdict(a), "fault_at": a.fault_at, "detect_s": a.detect_s} for a in self.attempts
            ],
            "recoveries": self.recoveries(),
            "analysis": self.analysis,
        }


def _span(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(b - a, 3)


@dataclass(frozen=True)
class LiveState:
    """What a progress display shows while the job runs."""

    attempt: int
    state: str
    progress: Progress
    excluded_nodes: tuple[str, ...]
    incidents: tuple[str, ...]
    #: the attempt's rank processes: those seen since it started, and those still running
    ranks_seen: tuple[int, ...] = ()
    ranks_running: tuple[int, ...] = ()
