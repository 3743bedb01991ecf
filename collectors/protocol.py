"""The interface the agent schedules every collector through, and the guard that isolates one.

Every collector (NVML, simulated GPUs, host, kernel log) has a `name`, returns records from
`collect(now)` and releases what it holds in `close()`. A collector never lets a source it cannot
read crash the agent: it returns an `Unavailable` record instead. `collect_isolated` adds the
last line of defence for a collector that raises anyway.
"""

from __future__ import annotations

import logging
from typing import Protocol, runtime_checkable

from triage.collectors.records import Record, Unavailable

log = logging.getLogger(__name__)


@runtime_checkable
class Collector(Protocol):
    name: str

    def collect(self, now: float) -> list[Record]:
        """Records for this interval; `now` is unix seconds, passed in so tests are exact."""
        ...

    def close(self) -> None: ...


def collect_isolated(collector: Collector, now: float, node: str) -> list[Record]:
    """`collector.collect(now)`, but an exception becomes an `Unavailable` record for that
    collector, so one broken source neither stops the others nor looks like a healthy one."""
    try:
        return collector.collect(now)
    except Exception as exc:
        log.exception("collector %s failed", collector.name)
        return [
            Unavailable(
                time=now,
                node=node,
                collector=collector.name,
                source="collector",
                reason=f"{type(exc).__name__}: {exc}",
            )
        ]
