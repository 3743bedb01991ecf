"""A bounded, lock-free (under the GIL) record buffer between the training thread and the writer.

`deque.append` and `deque.popleft` are atomic, so the hot path pays one length check and one
append; when a table is full the record is dropped and counted rather than blocking training.
Rows are whatever their producer appends (tuples of primitives, not yet spool rows): turning
them into the spool's columns is the writer thread's work.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any


class RecordBuffer:
    def __init__(self, tables: Iterable[str], capacity: int) -> None:
        self.capacity = capacity
        self._queues: dict[str, deque[tuple[Any, ...]]] = {t: deque() for t in tables}
        self.dropped: dict[str, int] = dict.fromkeys(self._queues, 0)

    def put(self, table: str, row: tuple[Any, ...]) -> bool:
        q = self._queues[table]
        if len(q) >= self.capacity:
            self.dropped[table] += 1
            return False
        q.append(row)
        return True

    def queue(self, table: str) -> deque[tuple[Any, ...]]:
        """The table's queue itself, for a per-event hot path that appends without a call: it
        appends only below `capacity` and calls `drop` instead (as `put` does)."""
        return self._queues[table]

    def drop(self, table: str) -> None:
        self.dropped[table] += 1

    def drain(self, table: str, limit: int | None = None) -> list[tuple[Any, ...]]:
        """Take up to `limit` rows in arrival order (all that are there when called)."""
        q = self._queues[table]
        n = len(q) if limit is None else min(limit, len(q))
        return [q.popleft() for _ in range(n)]

    def requeue_front(self, table: str, rows: list[tuple[Any, ...]]) -> None:
        """Give rows back after a failed write so they are retried first; beyond capacity the
        oldest are dropped and counted, since memory is the one thing training must not run out of."""
        q = self._queues[table]
        q.extendleft(reversed(rows))
        while len(q) > self.capacity:
            q.popleft()
            self.dropped[table] += 1

    def pending(self) -> int:
        return sum(len(q) for q in self._queues.values())

    def tables(self) -> list[str]:
        return list(self._queues)
