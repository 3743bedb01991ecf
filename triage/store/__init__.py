"""The store: a directory of immutable Parquet segments per table and node partition, a
manifest per partition, and DuckDB snapshots over them (see `layout` for the files).

Writers: `StoreWriter` (one per partition, `append_rows`/`append_records`), `ingest_spools`,
`apply_retention`, `compact`. Readers: `open_snapshot`.
"""

from triage.store.config import StoreConfig
from triage.store.ingest import IngestReport, SpoolError, ingest_partition, ingest_spools
from triage.store.layout import check_data_dir
from triage.store.maintenance import apply_retention, compact
from triage.store.schema import ATTEMPT_STATUSES, SCHEMA_VERSION, TABLES, schema_from_dataclass
from triage.store.snapshot import (
    AttemptSummary, JobSummary, LastArrival, RankProgress, Snapshot, open_snapshot,
)
from triage.store.writer import PartitionBusy, StoreError, StoreWriter

__all__ = [
    "ATTEMPT_STATUSES", "SCHEMA_VERSION", "TABLES", "AttemptSummary", "IngestReport", "JobSummary",
    "LastArrival", "PartitionBusy", "RankProgress", "Snapshot", "SpoolError", "StoreConfig",
    "StoreError", "StoreWriter", "apply_retention", "check_data_dir", "compact", "ingest_partition",
    "ingest_spools", "open_snapshot", "schema_from_dataclass",
]
