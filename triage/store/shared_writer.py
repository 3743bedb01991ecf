"""Short writes to a partition that other processes write too: wait for it, briefly.

The `supervisor` partition is written by every `triage run` on the data dir (incidents, attempt
outcomes, job scores, runs, the node health ledger) and by `triage nodes clear`. Each write
holds the partition's lock for milliseconds (a compaction for a second or so), so a second
writer that finds it busy waits a moment instead of failing: a supervised job must never die
because another job's supervisor was recording an incident at the same instant.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from triage.store.layout import LOCK_NAME, SUPERVISOR_PARTITION, partition_dir
from triage.store.writer import PartitionBusy, StoreWriter

#: Longest wait for a busy partition: far beyond any short write, short enough for a CLI.
DEFAULT_WAIT_S = 10.0
_RETRY_S = 0.05


@contextmanager
def shared_writer(
    data_dir: str | os.PathLike[str], partition: str = SUPERVISOR_PARTITION, wait_s: float = DEFAULT_WAIT_S
) -> Iterator[StoreWriter]:
    """A `StoreWriter` of `partition`, retried while another process holds it for at most
    `wait_s`; then `PartitionBusy` naming the holder."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            writer = StoreWriter(data_dir, partition)
            break
        except PartitionBusy:
            if time.monotonic() >= deadline:
                raise PartitionBusy(_busy_message(data_dir, partition, wait_s)) from None
            time.sleep(_RETRY_S)
    with writer:
        yield writer


def _busy_message(data_dir: str | os.PathLike[str], partition: str, wait_s: float) -> str:
    lock = partition_dir(data_dir, partition) / LOCK_NAME
    try:
        holder = lock.read_text(errors="replace").strip() or "?"
    except OSError:
        holder = "?"
    return (
        f"store partition {lock.parent} stayed busy for {wait_s:g} s (written by process "
        f"{holder}, normally another `triage run` or `triage nodes clear`); try again, or "
        "stop that process if it hangs"
    )
