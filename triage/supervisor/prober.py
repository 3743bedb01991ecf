"""The watch loop's store reads, on a thread of their own.

Reading an attempt's progress from the store (ingesting the spools of nodes without an agent,
opening a snapshot, the stall query) takes tens of milliseconds on an idle machine and seconds
on a busy one. The processes, though, are looked at every quarter second: a rank that died must
not wait for a store read to be noticed. So the reads run here, every `interval_s`, and the loop
takes the newest result when there is one.
"""

from __future__ import annotations

import threading
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

    def _run(self) -> None:
        while not self._stop.is_set():
            result = self._probe()
            if result is not None and not self._stop.is_set():
                with self._lock:
                    self._newest = result
            self._stop.wait(self._interval_s)
