"""Triage in a Hugging Face `transformers.Trainer` job, in one line (`pip install triage[hf]`):

    trainer = transformers.Trainer(..., callbacks=[TriageTrainerCallback()])

From `on_train_begin` to `on_train_end` every optimizer step the Trainer takes is a Triage step
(time and loss from the backward pass), collectives are timed and heartbeats run; an uncaught
exception is recorded by the monitor's excepthook. No grad norm: the Trainer (through
accelerate 1.x) clips with `get_total_norm` + `clip_grads_with_norm_`, not through the
`clip_grad_norm_` the hooks see.
Identity (job, attempt, rank, node) comes from the environment as for `TrainingMonitor`.
"""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback

from triage.trainer_hooks.auto import AutoInstrument, attach, detach
from triage.trainer_hooks.config import MonitorConfig


class TriageTrainerCallback(TrainerCallback):
    def __init__(self, config: MonitorConfig | None = None) -> None:
        self.config = config
        self.hooks: AutoInstrument | None = None

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        if self.hooks is None:
            self.hooks = attach(model, self.config)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.hooks is not None:
            detach(self.hooks, 0)
            self.hooks = None
