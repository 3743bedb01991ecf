"""Ctrl-C and SIGTERM to the supervisor, held as a flag while the job runs."""

from __future__ import annotations

import signal
import time
from typing import Any


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM to the supervisor: stop the job and the agents, then exit 130."""


class StopSignals:
    """SIGINT/SIGTERM only set a flag that the watch loop turns into `Interrupted`: raised from
    the handler itself, the exception could land inside a DuckDB query, which converts it to its
    own error that the store's readers treat as a failed read, and the Ctrl-C would be lost.
    The previous handlers are back on leaving the `with` block."""

    def __init__(self, *, term_is_preemption: bool = False) -> None:
        self.received: str | None = None
        #: when the stop signal came (a terminal's Ctrl-C reaches the ranks at that moment too)
        self.received_at: float | None = None
        #: Under Slurm a SIGTERM is the scheduler's notice (`--signal=B:TERM@60`, preemption):
        #: the job is to checkpoint and be requeued, not interrupted.
        self.term_is_preemption = term_is_preemption
        self.preemption: bool = False
        #: SIGTERMs received as preemption notices: a second one is Slurm ending the job now.
        self.notices = 0
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if signum == signal.SIGTERM and self.term_is_preemption:
            self.preemption = True
            self.notices += 1
            return
        self.received = signal.Signals(signum).name
        self.received_at = self.received_at or time.time()

    def check(self) -> None:
        if self.received is not None:
            raise Interrupted(self.received)

    def __exit__(self, *exc: Any) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
