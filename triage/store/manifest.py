"""The manifest of a partition: the only mutable file of the store.

It names the live segments, the schema version they follow, the ingest watermarks (per spool
writer directory, the highest segment sequence number consumed) and the retired segments
waiting out their grace period. It is replaced whole (temp file, fsync, `os.replace`, fsync of
the directory), so a reader sees the old or the new state, and a segment file that no manifest
names (a crash between writing it and committing) is an orphan the writer deletes.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from triage.durable import fsync_path
from triage.store.layout import MANIFEST_NAME

FORMAT = "triage-store-partition"


@dataclass(frozen=True)
class Segment:
    """One immutable Parquet file of one table; `file` is relative to the partition dir."""

    table: str
    file: str
    rows: int
    bytes: int
    min_time: float | None
    max_time: float | None
    created: float


@dataclass(frozen=True)
class Retired:
    file: str
    at: float


@dataclass
class Manifest:
    schema_version: int
    generation: int = 0
    segments: list[Segment] = field(default_factory=list)
    watermarks: dict[str, int] = field(default_factory=dict)
    retired: list[Retired] = field(default_factory=list)

    def table_segments(self, table: str) -> list[Segment]:
        return [s for s in self.segments if s.table == table]

    def to_json(self) -> str:
        return json.dumps({"format": FORMAT, **asdict(self)}, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str, where: Path) -> Manifest:
        raw = json.loads(text)
        if raw.get("format") != FORMAT:
            raise ValueError(f"{where} is not a Triage store manifest")
        return cls(
            schema_version=int(raw["schema_version"]),
            generation=int(raw["generation"]),
            segments=[Segment(**s) for s in raw["segments"]],
            watermarks={k: int(v) for k, v in raw["watermarks"].items()},
            retired=[Retired(**r) for r in raw["retired"]],
        )


class ManifestError(ValueError):
    """A partition's manifest cannot be read: truncated, not JSON, not a Triage manifest."""


def load_manifest(partition: Path) -> Manifest | None:
    """The partition's manifest; None where it has none; `ManifestError` where it is damaged
    (readers skip that partition and say so; a writer refuses it)."""
    path = partition / MANIFEST_NAME
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{path} cannot be read ({exc})") from None
    try:
        return Manifest.from_json(text, path)
    except (ValueError, KeyError, TypeError) as exc:
        raise ManifestError(
            f"{path} is damaged ({type(exc).__name__}: {str(exc)[:200]}); "
            "restore it from a backup, or move the partition aside"
        ) from None


def save_manifest(partition: Path, manifest: Manifest) -> None:
    """Durable on return: only then may the spool segments it records be deleted."""
    tmp = partition / f".{MANIFEST_NAME}.tmp"
    with open(tmp, "w") as f:
        f.write(manifest.to_json())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, partition / MANIFEST_NAME)
    fsync_path(partition)
