"""Configuration of the store writer: retention bounds, compaction and ingest batching."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from triage.config import ConfigError
from triage.store.schema import TABLES

_DURATION = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_SIZE = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
_SPEC_RE = re.compile(r"^(?P<table>[a-z_*]+)=(?P<num>\d+(?:\.\d+)?)(?P<unit>[a-z]*)$")


def _parse_bounds(specs: list[str], units: dict[str, int], what: str) -> dict[str, float]:
    """`["*=30d", "collectives=7d"]` -> {"*": 2592000, "collectives": 604800}."""
    out: dict[str, float] = {}
    for spec in specs:
        m = _SPEC_RE.match(spec.strip().lower())
        unit = m and m["unit"].removesuffix("ib").removesuffix("b")
        if not m or unit not in units:
            raise ConfigError(
                f"bad {what} bound {spec!r}: write TABLE=NUMBER[{'|'.join(u for u in units if u)}],"
                f" e.g. collectives=7d or *=20g"
            )
        if m["table"] != "*" and m["table"] not in TABLES:
            raise ConfigError(
                f"{what} bound {spec!r} names no store table; known: {', '.join(sorted(TABLES))}"
            )
        out[m["table"]] = float(m["num"]) * units[unit]
    return out


@dataclass
class StoreConfig:
    max_age: list[str] = field(
        default_factory=lambda: ["*=30d", "collectives=7d", "gpu_samples=7d", "host_samples=7d"],
        metadata={
            "help": "drop rows older than this, per table: TABLE=AGE with s/m/h/d, `*` for the rest",
            "flag": "--retain-age",
            "repeatable": True,
        },
    )
    max_bytes: list[str] = field(
        default_factory=list,
        metadata={
            "help": "keep at most this much per table and node partition, oldest dropped first: "
            "TABLE=SIZE with k/m/g/t, `*` for the rest (default: no size bound)",
            "flag": "--retain-bytes",
            "repeatable": True,
        },
    )
    compact_below_bytes: int = field(
        default=32 * 2**20, metadata={"help": "segments smaller than this are merged by compaction"}
    )
    compact_target_bytes: int = field(
        default=256 * 2**20, metadata={"help": "compaction stops growing a merged segment at about this size"}
    )
    retire_grace_s: float = field(
        default=600.0,
        metadata={
            "help": "segments replaced by compaction or dropped by retention are deleted only after "
            "this long, so snapshots opened before keep working"
        },
    )
    ingest_batch_bytes: int = field(
        default=128 * 2**20,
        metadata={"help": "spool bytes ingested per store commit (bounds the ingester's memory)"},
    )
    heartbeat_timeout_s: float = field(
        default=60.0,
        metadata={"help": "an attempt whose last heartbeat is older than this is no longer running"},
    )
    max_age_s: dict[str, float] = field(init=False, repr=False)
    max_bytes_per_table: dict[str, float] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.max_age_s = _parse_bounds(self.max_age, _DURATION, "age")
        self.max_bytes_per_table = _parse_bounds(self.max_bytes, _SIZE, "size")
        for name in ("compact_below_bytes", "compact_target_bytes", "ingest_batch_bytes"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
        if self.compact_target_bytes < self.compact_below_bytes:
            raise ConfigError("compact_target_bytes must be >= compact_below_bytes")
        if self.retire_grace_s < 0:
            raise ConfigError(f"--retire-grace-s must be >= 0, got {self.retire_grace_s}")
        if self.heartbeat_timeout_s <= 0:
            raise ConfigError(f"--heartbeat-timeout-s must be > 0, got {self.heartbeat_timeout_s}")

    def age_bound(self, table: str) -> float | None:
        return self.max_age_s.get(table, self.max_age_s.get("*"))

    def size_bound(self, table: str) -> float | None:
        return self.max_bytes_per_table.get(table, self.max_bytes_per_table.get("*"))
