"""Which network ports a node's agents have seen up lately, from the node's own partition.

The NIC collector reports a port only from the first time it finds it up: a port never up
carries no job traffic, and reporting every unplugged port as down would blame every node. A
restarted agent starts with nothing seen, so a port that died while the agent was down (an
upgrade, a crash) would never be reported; the ports its predecessors stored as up say which
ones the node was using. Read with pyarrow alone: the agent must not load DuckDB.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from triage.store.layout import parquet_unreadable
from triage.store.writer import StoreWriter

#: How far back a port seen up still counts: a port up a day ago and down now is news; one
#: unplugged for good a week ago is not (and retention would forget it anyway).
SEEN_UP_WITHIN_S = 24 * 3600.0


def ports_seen_up(writer: StoreWriter, now: float, within_s: float = SEEN_UP_WITHIN_S) -> set[str]:
    """The ports (`nic` names) stored up in the partition's `nic_samples` in the last
    `within_s` seconds. An unreadable segment is skipped: it costs at most a port unreported."""
    seen: set[str] = set()
    for segment in writer.manifest.table_segments("nic_samples"):
        if segment.max_time is not None and segment.max_time < now - within_s:
            continue
        path = writer.segment_path(segment)
        if parquet_unreadable(path) is not None:
            continue
        try:
            rows = pq.read_table(path, columns=["time", "nic", "up"])
        except (pa.ArrowException, OSError):
            continue
        up = rows.filter(pc.and_(pc.equal(rows["up"], True), pc.greater_equal(rows["time"], now - within_s)))
        seen.update(n for n in up["nic"].to_pylist() if n is not None)
    return seen
