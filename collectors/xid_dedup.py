"""Merge the two reports of one Xid: NVML's event (number and device only) and the kernel log's
line (text, pid, subcodes). docs/field-facts.md: use both sources and de-duplicate.

Repeats from the same source are kept: a burst of Xid 45 lines is a burst, not one event.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from triage.collectors.records import GpuEvent


@dataclass
class _Seen:
    event: GpuEvent
    matched: bool = False


class XidDeduplicator:
    """`admit(event)` is False for the second report of an Xid already reported by another source
    within `window_s` on the same node, GPU and Xid number; each report pairs with at most one."""

    def __init__(self, window_s: float = 5.0) -> None:
        if window_s < 0:
            raise ValueError(f"window_s must be >= 0, got {window_s}")
        self.window_s = window_s
        self._recent: deque[_Seen] = deque()

    @staticmethod
    def _key(ev: GpuEvent) -> tuple[str, int | str | None, str, int | None]:
        return ev.node, ev.gpu if ev.gpu is not None else ev.pci_bus_id, ev.kind, ev.xid

    def admit(self, event: GpuEvent) -> bool:
        while self._recent and self._recent[0].event.time < event.time - 2 * self.window_s:
            self._recent.popleft()
        key = self._key(event)
        for seen in self._recent:
            if (
                not seen.matched
                and seen.event.source != event.source
                and self._key(seen.event) == key
                and abs(seen.event.time - event.time) <= self.window_s
            ):
                seen.matched = True
                return False
        self._recent.append(_Seen(event))
        return True
