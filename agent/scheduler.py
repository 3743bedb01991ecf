"""When each collector runs next, and the backoff that keeps a raising one from spinning.

A collector that raises is retried after `interval`, then twice that, ... up to `backoff_max_s`,
so a broken source costs little and is noticed again once it works; the other collectors keep
their own schedule. A collector that reports a source as `Unavailable` did not raise: it keeps
its interval (it retries the source itself) but the attempt counts as failed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from triage.collectors.protocol import Collector, collect_isolated
from triage.collectors.records import Record, Unavailable

log = logging.getLogger(__name__)


@dataclass
class CollectResult:
    records: list[Record]
    ok: bool  # no source unavailable and no exception
    raised: bool


class ScheduledCollector:
    def __init__(self, collector: Collector, interval_s: float, backoff_max_s: float) -> None:
        self.collector = collector
        self.interval_s = interval_s
        self.backoff_max_s = backoff_max_s
        self.next_due = float("-inf")
        self.failures = 0  # consecutive collects that raised

    @property
    def name(self) -> str:
        return self.collector.name

    def due(self, now: float) -> bool:
        return now >= self.next_due

    def run(self, now: float, node: str) -> CollectResult:
        records = collect_isolated(self.collector, now, node)
        raised = any(
            isinstance(r, Unavailable) and r.source == "collector" and r.collector == self.name
            for r in records
        )
        if raised:
            self.failures += 1
            delay = min(self.interval_s * 2**self.failures, self.backoff_max_s)
            log.warning(
                "collector %s failed %d time(s) in a row; next try in %.1f s", self.name, self.failures, delay
            )
        else:
            if self.failures:
                log.info("collector %s works again after %d failure(s)", self.name, self.failures)
            self.failures = 0
            delay = self.interval_s
        # Keep the cadence: the next slot follows the previous one, not this collect's end.
        base = self.next_due if now - self.next_due < self.interval_s else now
        self.next_due = base + delay
        ok = not any(isinstance(r, Unavailable) for r in records)
        return CollectResult(records, ok, raised)
