"""Training-side telemetry: what runs inside each rank and hands records to the per-rank spool.

`from triage.trainer_hooks import TrainingMonitor` (imported lazily, so that reading the spool
schema does not import torch).
"""

from typing import Any

__all__ = ["MonitorConfig", "TrainingMonitor"]


def __getattr__(name: str) -> Any:
    if name == "TrainingMonitor":
        from triage.trainer_hooks.monitor import TrainingMonitor

        return TrainingMonitor
    if name == "MonitorConfig":
        from triage.trainer_hooks.config import MonitorConfig

        return MonitorConfig
    raise AttributeError(name)
