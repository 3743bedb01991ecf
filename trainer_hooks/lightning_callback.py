"""Triage in a PyTorch Lightning job, in one line (`pip install triage[lightning]`):

    trainer = lightning.Trainer(..., callbacks=[TriageCallback()])

From `setup` to the end of `fit` every optimizer step Lightning takes is a Triage step (time, loss
from the backward pass, grad norm where it is clipped), collectives are timed, heartbeats run,
and an exception Lightning raises is recorded with its traceback. Identity (job, attempt, rank,
node) comes from the environment as for `TrainingMonitor`.
"""

from __future__ import annotations

from typing import Any

try:
    import lightning.pytorch as pl
except ImportError:  # the older package name
    import pytorch_lightning as pl  # type: ignore[no-redef]

from triage.trainer_hooks.auto import AutoInstrument, attach, detach
from triage.trainer_hooks.config import MonitorConfig


class TriageCallback(pl.Callback):
    def __init__(self, config: MonitorConfig | None = None) -> None:
        self.config = config
        self.hooks: AutoInstrument | None = None

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if stage == "fit" and self.hooks is None:
            self.hooks = attach(pl_module, self.config)

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        # Lightning tears down before it calls this: close here, not in `teardown`
        if self.hooks is not None:
            self.hooks.monitor.record_exception(exception)
            detach(self.hooks)
            self.hooks = None

    def on_fit_end(self, trainer: Any, pl_module: Any) -> None:
        if self.hooks is not None:
            detach(self.hooks, 0)
            self.hooks = None
