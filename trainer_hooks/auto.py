"""Zero-code instrumentation: Triage's hooks in a rank whose script has no Triage code in it.

`triage run` puts `autoload/` on the ranks' PYTHONPATH; its `sitecustomize` calls
`install_from_env()` in every Python process that torchrun starts as a rank (RANK and LOCAL_RANK
set, TRIAGE_AUTO_HOOKS=1) before the script's first line runs. What a loop gives without being
asked:

- steps from a global optimizer step hook (`register_optimizer_step_post_hook`): the first
  optimizer that steps drives the count, so a GAN's two optimizers or a scheduler do not double
  it. The step number is the optimizer's own (`state[p]["step"]` of Adam-family optimizers, which
  a resumed checkpoint restores), read at the first step and counted on from there; an
  optimizer without one (SGD) is counted from 1 per process.
  A step lasts from one optimizer step to the next; its compute share is what is left after the
  optimizer and the time blocked in collectives (an estimate: data loading is inside it);
- the loss from `Tensor.backward` on a one-element tensor and the grad norm from
  `clip_grad_norm_`, so non-finite values are flagged as for the reference trainer;
- collective timing and the in-flight collective in heartbeats (the collective wrapper),
  lifecycle events, uncaught exceptions with traceback, exit codes (the monitor's own hooks);
- file writes (`torch.save` to a path, safetensors', torch.distributed.checkpoint's), begun in
  the store as they start, so a rank 0 writing alone to slow storage while its peers wait is
  saving, not hung (`saves.py`).

A script that starts its own `TrainingMonitor` takes over: the automatic one retires quietly
(no exit event) and the explicit one reports from then on, so nothing is counted twice.
"""

from __future__ import annotations

import os
import time
from typing import Any

import torch

from triage.config import ENV_AUTO_HOOKS
from triage.trainer_hooks import saves
from triage.trainer_hooks.config import MonitorConfig
from triage.trainer_hooks.monitor import TrainingMonitor

#: Set in a rank once it is instrumented: a process it starts (a spawned DataLoader worker
#: inherits RANK too) sees another pid here and stays out.
ENV_HOOKED_PID = "TRIAGE_AUTO_HOOKED_PID"


class AutoInstrument:
    """The global hooks around one automatic `TrainingMonitor`."""

    def __init__(self, monitor: TrainingMonitor) -> None:
        self.monitor = monitor
        self._driver: int | None = None  # id() of the optimizer whose steps are counted
        self._count = 0
        self._offset = 0  # the optimizer's own step count before this process's first step
        self._pre_t: float | None = None
        self._boundary: float | None = None  # perf_counter at the end of the previous step
        self._loss: Any = None
        self._grad_norm: Any = None
        self._handles: list[Any] = []
        self._backward: Any = None
        self._clip: Any = None

    def install(self) -> AutoInstrument:
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

        self._handles = [
            register_optimizer_step_pre_hook(self._pre),
            register_optimizer_step_post_hook(self._post),
        ]
        self._backward = torch.Tensor.backward
        original_backward = self._backward

        def backward(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if tensor.numel() == 1:
                self._loss = tensor
            return original_backward(tensor, *args, **kwargs)

        # a wrapper that forwards *args/**kwargs, not the stub's exact signature
        torch.Tensor.backward = backward  # type: ignore[method-assign,assignment]
        import torch.nn.utils as nn_utils
        import torch.nn.utils.clip_grad as clip_grad

        self._clip = clip_grad.clip_grad_norm_
        original_clip = self._clip

        def clip_grad_norm_(*args: Any, **kwargs: Any) -> Any:
            norm = original_clip(*args, **kwargs)
            self._grad_norm = norm
            return norm

        clip_grad.clip_grad_norm_ = clip_grad_norm_
        nn_utils.clip_grad_norm_ = clip_grad_norm_
        saves.watch(self.monitor)
        return self

    def uninstall(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        if self._backward is not None:
            torch.Tensor.backward = self._backward  # type: ignore[method-assign]
            self._backward = None
        if self._clip is not None:
            import torch.nn.utils as nn_utils
            import torch.nn.utils.clip_grad as clip_grad

            clip_grad.clip_grad_norm_ = self._clip
            nn_utils.clip_grad_norm_ = self._clip
            self._clip = None
        saves.unwatch(self.monitor)

    def retire(self) -> None:
        """A `TrainingMonitor` of the script's own takes over from here."""
        self.uninstall()
        self.monitor.retire()

    # -- the optimizer hooks --------------------------------------------------------------
    def _pre(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        if self._driver is None:
            self._driver = id(optimizer)
        if id(optimizer) == self._driver:
            self._pre_t = time.perf_counter()

    def _post(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        if id(optimizer) != self._driver or self._pre_t is None:
            return
        now = time.perf_counter()
        self._count += 1
        if self._count == 1:
            self.monitor.set_device(_device_of(optimizer))
            own = _own_step(optimizer)  # read once: `.item()` on every step would cost 3 us
            self._offset = 0 if own is None else own - 1
        t = self.monitor.step(self._offset + self._count)
        start = self._pre_t if self._boundary is None else self._boundary
        duration = now - start
        optimizer_s = now - self._pre_t
        blocked = self.monitor._collectives.blocked_s
        t.set_phases(start, 0.0, max(0.0, duration - optimizer_s - blocked), optimizer_s)
        t.loss = t.grad_norm = None
        t.record(loss=self._loss, grad_norm=self._grad_norm)
        self._loss = self._grad_norm = None
        self.monitor._finish_step(t, duration)
        self._boundary = now
        self.monitor._collectives.step = t.step + 1


def _device_of(optimizer: torch.optim.Optimizer) -> torch.device:
    try:
        param = optimizer.param_groups[0]["params"][0]
    except (IndexError, KeyError):
        return torch.device("cpu")
    local = getattr(param, "_local_tensor", param)  # a DTensor's shard lives on the rank's GPU
    device: torch.device = local.device
    return device


def _own_step(optimizer: torch.optim.Optimizer) -> int | None:
    """The optimizer's step count where it keeps one on the host (Adam, AdamW, ...): restored
    with its state from a checkpoint, so a resumed attempt goes on numbering where it left off.
    A count on the GPU (capturable or fused) is not read: that would wait for the device."""
    try:
        first = optimizer.param_groups[0]["params"][0]
        value = optimizer.state.get(first, {}).get("step")
    except (IndexError, KeyError, TypeError):
        return None
    if isinstance(value, torch.Tensor):
        return int(value.item()) if value.device.type == "cpu" and value.numel() == 1 else None
    return int(value) if isinstance(value, (int, float)) else None


_active: AutoInstrument | None = None


def active() -> AutoInstrument | None:
    return _active


def retire() -> None:
    """Called by an explicit `TrainingMonitor.start()`: the automatic hooks step aside."""
    global _active
    if _active is not None:
        _active.retire()
        _active = None


def wanted(env: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    """This process is a rank started under `triage run` with auto-hooks on, and not a child
    of an instrumented rank."""
    if env.get(ENV_AUTO_HOOKS) != "1" or "RANK" not in env or "LOCAL_RANK" not in env:
        return False
    hooked = env.get(ENV_HOOKED_PID)
    return hooked is None or hooked == str(os.getpid())


def install_from_env() -> AutoInstrument | None:
    """Instrument this rank where `wanted()`; None otherwise."""
    global _active
    if _active is not None or not wanted():
        return _active
    os.environ[ENV_HOOKED_PID] = str(os.getpid())
    # No canary: the device a script trains on is not known before it picks one.
    monitor = TrainingMonitor(MonitorConfig(mode="auto", canary_every=0))
    monitor.start()
    _active = AutoInstrument(monitor).install()
    return _active


def attach(model: torch.nn.Module | None = None, config: MonitorConfig | None = None) -> AutoInstrument:
    """What the framework callbacks use: a `TrainingMonitor` of the script's own (it retires
    the zero-code one where `triage run` started that) fed by the same optimizer and backward
    hooks, so every optimizer step the framework takes is a step. Undo with `detach`."""
    monitor = TrainingMonitor(config or MonitorConfig(canary_every=0), model=model)
    monitor.start()
    return AutoInstrument(monitor).install()


def detach(hooks: AutoInstrument, exit_code: int | None = None) -> None:
    """Remove the hooks `attach` installed and close its monitor (its exit event, a flush)."""
    hooks.uninstall()
    hooks.monitor.close(exit_code)
