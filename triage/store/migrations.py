"""Schema migrations: how a partition written by an older Triage reaches `SCHEMA_VERSION`.

Each step rewrites the segments of the tables it changes with a SELECT over the old segment
(add a column with a default, rename, re-type), keeping every row, and commits the new segments
and the new version in one manifest replacement; the old files are retired like compacted ones.
A crash mid-step leaves the previous version live and orphans that the next open deletes, and
the step runs again. Steps are history: never edit one, append the next.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from triage.store.schema import SCHEMA_VERSION
from triage.store.sql import parquet_source

if TYPE_CHECKING:
    from triage.store.writer import StoreWriter


@dataclass(frozen=True)
class Migration:
    to_version: int
    why: str
    #: table -> SELECT list over the old segment (`*` is the old row) giving the new layout.
    rewrites: dict[str, str]


MIGRATIONS: list[Migration] = [
    Migration(2, "events say who wrote them (rank, store, supervisor); old rows came from ranks",
              {"events": "*, 'rank' AS source"}),
]

if [m.to_version for m in MIGRATIONS] != list(range(2, SCHEMA_VERSION + 1)):
    raise RuntimeError("MIGRATIONS must hold one step per version 2..SCHEMA_VERSION")


def migrate(writer: "StoreWriter") -> list[int]:
    """Bring the writer's partition to `SCHEMA_VERSION`; the versions stepped through."""
    done = []
    for step in MIGRATIONS:
        if step.to_version <= writer.manifest.schema_version:
            continue
        added, removed = [], []
        for table, select in step.rewrites.items():
            for old in writer.manifest.table_segments(table):
                source = parquet_source([writer.segment_path(old)])
                new = writer.write_segment(table, writer.query_parts(f"SELECT {select} FROM {source}"))
                added += [new] if new else []
                removed.append(old)
        writer.commit(added, removed, schema_version=step.to_version)
        done.append(step.to_version)
    return done
