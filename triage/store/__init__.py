"""The store: a directory of immutable Parquet segments per table and node partition, a
manifest per partition, and DuckDB snapshots over them (see `layout` for the files).

Writers: `StoreWriter` (one per partition, `append_rows`/`append_records`), `ingest_spools`,
`apply_retention`, `compact`, `summarise_segments`. Readers: `open_snapshot`.

The reader's names are imported on first use: they bring DuckDB (~55 MB resident), which a
writer such as the node agent must not pay for by importing this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from triage.store.config import StoreConfig
from triage.store.ingest import IngestReport, SpoolError, ingest_partition, ingest_spools
from triage.store.layout import check_data_dir
from triage.store.maintenance import apply_retention, compact, summarise_segments
from triage.store.schema import ATTEMPT_STATUSES, SCHEMA_VERSION, TABLES, schema_from_dataclass
from triage.store.writer import PartitionBusy, StoreError, StoreWriter

if TYPE_CHECKING:
    from triage.store.snapshot import (
        AttemptSummary,
        JobSummary,
        LastArrival,
        RankProgress,
        RunSummary,
        Snapshot,
        open_snapshot,
    )

_SNAPSHOT_NAMES = frozenset(
    {
        "AttemptSummary",
        "JobSummary",
        "LastArrival",
        "RankProgress",
        "RunSummary",
        "Snapshot",
        "open_snapshot",
    }
)

__all__ = [
    "ATTEMPT_STATUSES",
    "SCHEMA_VERSION",
    "TABLES",
    "AttemptSummary",
    "IngestReport",
    "JobSummary",
    "LastArrival",
    "PartitionBusy",
    "RankProgress",
    "RunSummary",
    "Snapshot",
    "SpoolError",
    "StoreConfig",
    "StoreError",
    "StoreWriter",
    "apply_retention",
    "check_data_dir",
    "compact",
    "ingest_partition",
    "ingest_spools",
    "open_snapshot",
    "schema_from_dataclass",
    "summarise_segments",
]


def __getattr__(name: str) -> object:
    """A reader's name from `snapshot`, imported (with DuckDB) only when first asked for."""
    if name not in _SNAPSHOT_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from triage.store import snapshot

    value = getattr(snapshot, name)
    globals()[name] = value
    return value
