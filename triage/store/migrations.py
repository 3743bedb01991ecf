"""Schema migrations: how a partition written by an older Triage reaches `SCHEMA_VERSION`.

Each step rewrites the segments of the tables it changes with an Arrow function applied to the
old segment a part at a time (add a column with a default, rename, re-type), keeping every row,
and commits the new segments and the new version in one manifest replacement; the old files are
retired like compacted ones. A crash mid-step leaves the previous version live and orphans that
the next open deletes, and the step runs again. Steps are history: never edit one, append the
next, and write it against the layout of its own version, not the current `schema`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from triage.store.schema import SCHEMA_VERSION

if TYPE_CHECKING:
    from triage.store.writer import StoreWriter


@dataclass(frozen=True)
class Migration:
    to_version: int
    why: str
    #: table -> a part of an old segment (its rows in the previous layout) in the new layout.
    rewrites: dict[str, Callable[[pa.Table], pa.Table]]


def _events_from_ranks(part: pa.Table) -> pa.Table:
    """v2 `events.source`: before it, ranks were the only writers of events."""
    return part.append_column(
        pa.field("source", pa.string()), pa.repeat(pa.scalar("rank", pa.string()), part.num_rows)
    )


MIGRATIONS: list[Migration] = [
    Migration(
        2,
        "events say who wrote them (rank, store, supervisor); old rows came from ranks",
        {"events": _events_from_ranks},
    ),
]

if [m.to_version for m in MIGRATIONS] != list(range(2, SCHEMA_VERSION + 1)):
    raise RuntimeError("MIGRATIONS must hold one step per version 2..SCHEMA_VERSION")


def migrate(writer: StoreWriter) -> list[int]:
    """Bring the writer's partition to `SCHEMA_VERSION`; the versions stepped through."""
    done = []
    for step in MIGRATIONS:
        if step.to_version <= writer.manifest.schema_version:
            continue
        added, removed = [], []
        for table, rewrite in step.rewrites.items():
            for old in writer.manifest.table_segments(table):
                new = writer.write_segment(table, (rewrite(p) for p in writer.read_parts([old])))
                added += [new] if new else []
                removed.append(old)
        writer.commit(added, removed, schema_version=step.to_version)
        done.append(step.to_version)
    return done
