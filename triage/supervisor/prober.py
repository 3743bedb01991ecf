"""The watch loop's store reads, on a thread of their own.

Reading an attempt's progress from the store (ingesting the spools of nodes without an agent,
opening a snapshot, the stall query) takes tens of milliseconds on an idle machine and seconds
on a busy one. The processes, though, are looked at every quarter second: a rank that died must
not wait for a store read to be noticed. So the reads run here, every `interval_s`, and the loop
takes the newest result when there is one.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Prober(Generic[T]):
    def __init__(self, probe: Callable[[], T | None], interval_s: float) -> None:
        self._probe = probe
        self._interval_s = interval_s
        self._lock = threading.Lock()
        self._newest: T | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="triage-progress-probe", daemon=True)
        self._busy_since: float | None = None  # monotonic start of the read under way

    def __enter__(self) -> Prober[T]:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        # not joined: a read under way finishes on its own, its result unused; whatever it
        # writes (an ingest) is serialised by the caller's own lock
        self._stop.set()

    def take(self) -> T | None:
        """The newest result not taken yet; None when there is none (or the read failed)."""
        with self._lock:
            newest, self._newest = self._newest, None
        return newest

    def stuck(self, after_s: float) -> str | None:
        """Where the read under way is, once it has taken longer than `after_s`: a store read
        that never returns leaves the supervisor blind (no hang is declared on no progress),
        so the caller says so, with this stack, instead of waiting in silence."""
        since = self._busy_since
        if since is None or time.monotonic() - since < after_s or self._thread.ident is None:
            return None
        frame = sys._current_frames().get(self._thread.ident)
        return "".join(traceback.format_stack(frame)) if frame is not None else None

    def _run(self) -> None:
        while not self._stop.is_set():
            self._busy_since = time.monotonic()
            result = self._probe()
            self._busy_since = None
            if result is not None and not self._stop.is_set():
                with self._lock:
                    self._newest = result
            self._stop.wait(self._interval_s)
