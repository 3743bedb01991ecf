"""Schema migrations, as data: how a partition written by an older Triage reaches `SCHEMA_VERSION`.

Each step names the version it reaches and, per table it changes, an Arrow function from a part
of an old segment (its rows in the previous layout) to the same rows in the new layout (add a
column with a default, rename, re-type), keeping every row. The writer applies them
(`StoreWriter` on opening an older partition): each step's tables rewritten a part at a time,
the new segments and the new version committed in one manifest replacement, the old files
retired like compacted ones. A crash mid-step leaves the previous version live and orphans that
the next open deletes, and the step runs again. Steps are history: never edit one, append the
next, and write it against the layout of its own version, not the current `schema`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pyarrow as pa

from triage.store.schema import SCHEMA_VERSION


@dataclass(frozen=True)
class Migration:
    to_version: int
    why: str
    #: table -> a part of an old segment (its rows in the previous layout) in the new layout.
    rewrites: Mapping[str, Callable[[pa.Table], pa.Table]]


def _events_from_ranks(part: pa.Table) -> pa.Table:
    """v2 `events.source`: before it, ranks were the only writers of events."""
    return part.append_column(
        pa.field("source", pa.string()), pa.repeat(pa.scalar("rank", pa.string()), part.num_rows)
    )


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        2,
        "events say who wrote them (rank, store, supervisor); old rows came from ranks",
        {"events": _events_from_ranks},
    ),
)

if [m.to_version for m in MIGRATIONS] != list(range(2, SCHEMA_VERSION + 1)):
    raise RuntimeError("MIGRATIONS must hold one step per version 2..SCHEMA_VERSION")
