"""`DashboardConfig`: where the dashboard reads, where it listens and how often it refreshes.

`triage dashboard` builds it from its flags and hands the reading side to the Streamlit process
through the environment (`to_env` / `from_env`), because `streamlit run` owns that process's
command line and the app module is also run by AppTest, which passes no arguments at all.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from triage.config import ENV_DATA_DIR, ConfigError, data_dir_from_env

ENV_REFRESH_S = "TRIAGE_DASHBOARD_REFRESH_S"
ENV_CACHE_TTL_S = "TRIAGE_DASHBOARD_CACHE_TTL_S"
ENV_MAX_JOBS = "TRIAGE_DASHBOARD_MAX_JOBS"


@dataclass
class DashboardConfig:
    data_dir: str | None = field(
        default=None, metadata={"help": "Triage data directory (default: $TRIAGE_DATA_DIR or ./triage-data)"}
    )
    port: int = field(default=8501, metadata={"help": "TCP port to serve the dashboard on"})
    bind: str = field(
        default="127.0.0.1",
        metadata={"help": "address to listen on; keep the loopback default unless the network is trusted"},
    )
    refresh_s: float = field(
        default=5.0, metadata={"help": "seconds between automatic refreshes of the open page"}
    )
    cache_ttl_s: float = field(
        default=3.0, metadata={"help": "seconds a store read is reused before a fresh snapshot is opened"}
    )
    max_jobs: int = field(
        default=20, metadata={"help": "newest jobs the fleet page analyses for goodput and incidents"}
    )

    def __post_init__(self) -> None:
        if not 1 <= self.port <= 65535:
            raise ConfigError(f"--port must lie in 1..65535, got {self.port}")
        if not self.bind.strip():
            raise ConfigError("--bind must name an address, e.g. 127.0.0.1")
        if not self.refresh_s > 0:
            raise ConfigError(f"--refresh-s must be > 0, got {self.refresh_s}")
        if not 0 <= self.cache_ttl_s <= self.refresh_s:
            raise ConfigError(
                f"--cache-ttl-s must lie in [0, --refresh-s={self.refresh_s}] so "
                f"every refresh can see new data, got {self.cache_ttl_s}"
            )
        if self.max_jobs < 1:
            raise ConfigError(f"--max-jobs must be >= 1, got {self.max_jobs}")

    def to_env(self) -> dict[str, str]:
        """What the Streamlit process needs to know, as environment variables."""
        return {
            ENV_DATA_DIR: str(data_dir_from_env(self.data_dir).resolve()),
            ENV_REFRESH_S: repr(self.refresh_s),
            ENV_CACHE_TTL_S: repr(self.cache_ttl_s),
            ENV_MAX_JOBS: str(self.max_jobs),
        }

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> DashboardConfig:
        """The settings `to_env` wrote; defaults where a variable is unset."""
        try:
            return cls(
                data_dir=str(data_dir_from_env(env.get(ENV_DATA_DIR))),
                refresh_s=float(env.get(ENV_REFRESH_S, cls.refresh_s)),
                cache_ttl_s=float(env.get(ENV_CACHE_TTL_S, cls.cache_ttl_s)),
                max_jobs=int(env.get(ENV_MAX_JOBS, cls.max_jobs)),
            )
        except ValueError as exc:
            if isinstance(exc, ConfigError):
                raise
            raise ConfigError(f"bad dashboard setting in the environment: {exc}") from None
