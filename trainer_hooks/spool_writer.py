"""The background thread that turns buffered records into spool segments.

Training threads only append tuples to a `RecordBuffer`; this thread, once per flush interval,
adds the heartbeat, turns each table's rows into columns, completes the columns of the tables
whose producers buffer them unfinished (`finish`: derived columns and names the hot path leaves
out, computed a column at a time), converts them to Arrow and writes one segment per flush,
holding every non-empty table (see spool_schema).
A write that fails (disk full, spool unwritable) is reported once on stderr, the rows go back to
the buffer to be retried, and training is never interrupted.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from triage.trainer_hooks.buffer import RecordBuffer
from triage.trainer_hooks.spool_schema import IDENTITY_FIELDS, SPOOL_TABLES, write_segment

_N_IDENTITY = len(IDENTITY_FIELDS)


class SpoolWriter:
    def __init__(
        self,
        directory: Path,
        identity: tuple[Any, ...],
        buffer: RecordBuffer,
        flush_interval_s: float,
        on_tick: Callable[[], None] | None = None,
        finish: Mapping[str, Callable[[list[Sequence[Any]]], list[Sequence[Any]]]] | None = None,
    ) -> None:
        if len(identity) != _N_IDENTITY:
            raise ValueError(
                f"identity needs {_N_IDENTITY} values (job_id, run_id, attempt, rank, node, gpu)"
            )
        self.directory = directory
        self.identity = identity
        self.buffer = buffer
        self.flush_interval_s = flush_interval_s
        self.on_tick = on_tick
        self.finish = dict(finish or {})
        self.segments_written = 0
        self.rows_written = 0
        self.last_error: str | None = None
        self._seq = 0
        self._reported = False
        self._flush_lock = threading.Lock()
        self._flushing: int | None = None  # the thread in a flush, if any
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="triage-spool-writer", daemon=True)

    def start(self) -> None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self._report(exc)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.flush_interval_s):
            self.tick()

    def tick(self) -> None:
        if self.on_tick is not None:
            try:
                self.on_tick()
            except Exception as exc:  # noqa: BLE001 (telemetry must never take the rank down)
                self._report(exc)
        self.flush()

    def flush(self, lock_timeout: float = -1) -> bool:
        """Write every buffered row now. Safe to call from any thread (exit paths call it).
        With `lock_timeout` (seconds) it gives up, False, when another thread's flush holds the
        spool that long, and at once when the flush is this thread's own, which a signal
        handler has interrupted (it cannot go on while the handler waits)."""
        if self._flushing == threading.get_ident():
            return False
        if not self._flush_lock.acquire(timeout=lock_timeout):
            return False
        self._flushing = threading.get_ident()
        try:
            drained = {t: rows for t in self.buffer.tables() if (rows := self.buffer.drain(t))}
            if not drained:
                return True
            try:
                self._write(drained)
            except Exception as exc:  # noqa: BLE001 (rows go back to the buffer; the next tick retries)
                for table, rows in drained.items():
                    self.buffer.requeue_front(table, rows)
                self._report(exc)
                return True
            if self._reported and self.last_error is not None:
                print(f"triage: telemetry spool {self.directory} is writable again", file=sys.stderr)
                self.last_error = None
                self._reported = False
            return True
        finally:
            self._flushing = None
            self._flush_lock.release()

    def _write(self, drained: dict[str, list[tuple[Any, ...]]]) -> None:
        tables = {}
        for table, rows in drained.items():
            schema = SPOOL_TABLES[table]
            n = len(rows)
            values: list[Sequence[Any]] = list(zip(*rows))
            finish = self.finish.get(table)
            if finish is not None:
                values = finish(values)
            columns = [pa.array([v] * n, type=f.type) for v, f in zip(self.identity, IDENTITY_FIELDS)]
            for i, column in enumerate(values):
                columns.append(pa.array(column, type=schema.field(_N_IDENTITY + i).type))
            tables[table] = pa.Table.from_arrays(columns, schema=schema)
        self.directory.mkdir(parents=True, exist_ok=True)
        write_segment(self.directory, self._seq, tables)
        self._seq += 1
        self.segments_written += 1
        self.rows_written += sum(len(rows) for rows in drained.values())

    def _report(self, exc: BaseException) -> None:
        self.last_error = f"{type(exc).__name__}: {exc}"
        if not self._reported:
            self._reported = True
            print(
                f"triage: WARNING: cannot write telemetry to {self.directory}: {self.last_error}. "
                "Training continues; records are kept in memory (up to the buffer capacity) "
                "and written when the spool is writable again.",
                file=sys.stderr,
                flush=True,
            )

    def close(self, timeout: float = 5.0) -> None:
        """Stop the thread and write what is left; called on clean exit and on exceptions."""
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)
        self.tick()
