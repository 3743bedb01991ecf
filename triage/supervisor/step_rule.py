"""The step-progress rule: a job that makes no step for long enough is hung.

"Long enough" is the step timeout, unless a rank makes progress of its own while no steps come
(`stall.WORKING_SQL`: data prepared in a pool or streamed from files, an evaluation, a dataset
tokenized on the main thread), which may go on up to the prepare timeout. The end of that work
is no hang either: the step that follows it takes a while to run and to reach the store (a
step, a flush, an ingest, a probe), and meanwhile no rank works outside steps any more; measured
from the last step, a ten-minute preparation would have the job stopped the moment it ended.
So the timeout counts from the last step or the last time a rank was seen working past it,
whichever is later. The price: a hang inside a step that ran Python code before it stuck is
taken for work while that code is in the window work is measured over (`observe`: 10 s for the
main thread's), and then given the timeout once more: found up to that window and one timeout
later than at the last step's timeout.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class StepState(enum.Enum):
    RUNNING = "running"  # a step within the timeout, or seen working moments ago
    WORKING = "working"  # no step for longer than the timeout, but ranks work outside steps
    HUNG = "hung"


@dataclass
class StepWatch:
    """One attempt's step-progress rule; `worked_at` is when a probe last saw a rank working."""

    prepare_timeout_s: float
    worked_at: float | None = None

    def judge(self, now: float, last_progress: float, limit_s: float | None, working: bool) -> StepState:
        """`last_progress`: the newest step's end (the attempt's start before its first step);
        `limit_s`: the step timeout, None where the rule does not apply (no steps known to
        come); `working`: whether the probe found ranks working outside steps."""
        since_step = now - last_progress
        if limit_s is None or since_step <= limit_s:
            return StepState.RUNNING
        if working:
            if since_step >= self.prepare_timeout_s:
                return StepState.HUNG  # the allowance is spent, even if the work were ending now
            self.worked_at = now  # only here: a step's own work is no reason to wait after it
            return StepState.WORKING
        if self.worked_at is not None and now - self.worked_at <= limit_s:
            return StepState.RUNNING  # its work just ended: the step after it is on its way
        return StepState.HUNG
