"""Pending spools ingested before a reading command looks at the store, with what went wrong
said on stderr: a segment that could not be read is set aside (quarantined, never deleted) and
its records are missing from what the command shows, so the reader must be told."""

from __future__ import annotations

import sys
from pathlib import Path

from triage.store import IngestReport, StoreConfig, StoreError, ingest_spools


def ingest_pending(data_dir: Path, command: str, config: StoreConfig | None = None) -> IngestReport | None:
    """The ingest's result, or None where it could not run (said, and the command reads what
    is stored)."""
    try:
        result = ingest_spools(data_dir, config=config)
    except (OSError, StoreError) as exc:
        print(
            f"triage {command}: warning: could not ingest pending spools ({exc}); reading what is stored",
            file=sys.stderr,
        )
        return None
    for err in result.errors:
        print(
            f"triage {command}: warning: {err.path}: {err.error} (kept in {err.quarantined_to}); "
            "its records are missing from what follows",
            file=sys.stderr,
        )
    for why in result.refused:
        print(f"triage {command}: warning: {why}", file=sys.stderr)
    return result
