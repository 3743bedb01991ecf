"""The training loop of one rank, in distinct phases so telemetry hooks can wrap each one.

Phases of a step: `fetch_batch` (data), `forward_backward` (compute, incl. FSDP2 all-gathers and
gradient reduce-scatter), `reduce_loss` (the one extra all-reduce: global loss + preemption
flag), `optimizer_step`; around them `load_checkpoint` at start and `save_checkpoint` every
`--checkpoint-every` steps and on preemption.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import PrefixStore, Store
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.distributed_c10d import _set_pg_timeout  # private; torchtitan relies on it too
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.rendezvous import rendezvous

from triage.config import EXIT_PREEMPTED
from triage.display import Status
from triage.reference_trainer.checkpoint import Checkpointer, step_dir
from triage.reference_trainer.data import TokenBatches, make_loader, skip_steps_from_env, training_steps
from triage.reference_trainer.faults import FaultInjector
from triage.reference_trainer.model import GPT
from triage.reference_trainer.model_sizes import MODEL_SIZES
from triage.reference_trainer.summary import ProgressLog, progress_path
from triage.reference_trainer.train_config import TrainConfig
from triage.trainer_hooks.config import MonitorConfig
from triage.trainer_hooks.monitor import NullStep, TrainingMonitor

#: Dense bf16 peak FLOP/s by GPU name fragment, for MFU (vendor datasheets).
PEAK_BF16_FLOPS = {"H200": 989e12, "H100": 989e12, "A100": 312e12, "L40S": 362e12}


class Preempted(SystemExit):
    """Raised once the checkpoint of a SIGTERM'd job is safe; exits the rank with 143."""


class SigtermFlag:
    """SIGTERM only sets a flag; the loop acts on it at a step boundary, where every rank agrees
    through the loss all-reduce, so all ranks save the same step and nobody blocks alone."""

    def __init__(self) -> None:
        self.raised = False
        signal.signal(signal.SIGTERM, self._handle)

    def _handle(self, signum: int, frame: Any) -> None:
        self.raised = True


def init_distributed(timeout_s: float) -> torch.device:
    """NCCL with GPUs (plus gloo for CPU-side collectives such as async checkpointing), gloo on CPU."""
    timeout = timedelta(seconds=timeout_s)
    store, rank, world_size = _restart_store(timeout)
    if torch.cuda.is_available():
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
        dist.init_process_group(
            "cpu:gloo,cuda:nccl",
            store=store,
            rank=rank,
            world_size=world_size,
            timeout=timeout,
            device_id=device,
        )
    else:
        device = torch.device("cpu")
        torch.set_num_threads(1)  # ranks share the cores; oversubscription only adds noise
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size, timeout=timeout)
    torch.use_deterministic_algorithms(True)
    return device


def _restart_store(timeout: timedelta) -> tuple[Store, int, int]:
    """torchrun's env:// store, with its keys kept apart per restart of a one-node worker group.

    torchrun's c10d rendezvous hands every round the same agent store, and torch's env://
    handler adds no per-round prefix, so the keys a process group publishes its ranks'
    addresses under outlive a restart: a restarted rank that reads a peer's key before the peer
    rewrote it dials the dead process's port (gloo: `connectFullMesh failed ... Connection
    refused`), and torchrun's own `--max-restarts` never comes back. With one agent,
    TORCHELASTIC_RESTART_COUNT numbers the rounds, so a prefix per count gives each round keys
    of its own. With several agents it does not: each counts only its own failures (a healthy
    node restarts on the others' rendezvous without counting), so ranks of one round could
    disagree on the prefix and never meet; there the keys stay torch's own. `triage run`
    launches every attempt afresh and is not affected either way."""
    store, rank, world_size = next(rendezvous("env://", timeout=timeout))
    if os.environ.get("GROUP_WORLD_SIZE", "1") != "1":
        return store, rank, world_size
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return PrefixStore(f"triage/restart_{restart}", store), rank, world_size


class Trainer:
    def __init__(self, cfg: TrainConfig, *, attempt: int, device: torch.device) -> None:
        # TrainConfig.__post_init__ fills in the directories and the job id.
        assert cfg.run_dir is not None and cfg.data_dir is not None and cfg.job_id is not None
        self.cfg, self.attempt, self.device = cfg, attempt, device
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        on_gpu = device.type == "cuda"
        torch.manual_seed(cfg.seed)
        self.model = GPT(
            MODEL_SIZES[cfg.model],
            activation_checkpointing=on_gpu
            if cfg.activation_checkpointing is None
            else cfg.activation_checkpointing,
        ).to(device)
        mixed = on_gpu if cfg.mixed_precision is None else cfg.mixed_precision
        policy = (
            MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
            if mixed
            else MixedPrecisionPolicy()
        )
        mesh = init_device_mesh(device.type, (self.world_size,))
        for block in self.model.blocks:
            fully_shard(block, mesh=mesh, mp_policy=policy)
        fully_shard(self.model, mesh=mesh, mp_policy=policy)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=cfg.lr, weight_decay=0.01)
        self.checkpointer = Checkpointer(cfg.run_dir, keep=cfg.keep, async_save=cfg.async_checkpoint)
        self.injector = FaultInjector(
            cfg.inject_specs(),
            rank=self.rank,
            local_rank=int(os.environ.get("LOCAL_RANK", "0")),
            attempt=attempt,
            job_id=cfg.job_id,
            data_dir=cfg.data_dir,
            model=self.model,
        )
        self.sigterm = SigtermFlag()
        self.monitor = self._start_monitor() if cfg.telemetry else None
        self.progress = ProgressLog(progress_path(cfg.run_dir, attempt)) if self.rank == 0 else None
        self.step = 0
        self.position = 0  # global sequences consumed

    def _start_monitor(self) -> TrainingMonitor:
        """Started after the SIGTERM flag so its handler chains to it (records, then flags)."""
        peak = None
        if self.device.type == "cuda":
            name = torch.cuda.get_device_name(self.device)
            peak = next((v for k, v in PEAK_BF16_FLOPS.items() if k in name), None)
        assert self.cfg.data_dir is not None  # filled in by TrainConfig.__post_init__
        cfg = MonitorConfig(
            data_dir=Path(self.cfg.data_dir),
            job_id=str(self.cfg.job_id),
            attempt=self.attempt,
            rank=self.rank,
            world_size=self.world_size,
            # on CPU the rank drives its node's simulated GPU of its local rank's number
            gpu=None if self.device.type == "cuda" else self.injector.local_rank,
            peak_flops=peak,
        )
        return TrainingMonitor(cfg, model=self.model, device=self.device).start()

    # -- checkpoint phases ------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        model_sd, optim_sd = get_state_dict(self.model, self.optimizer)
        trainer = torch.tensor([self.step, self.position, self.cfg.seed], dtype=torch.int64)
        return {"model": model_sd, "optim": optim_sd, "trainer": trainer}

    def load_checkpoint(self) -> int | None:
        """Resume from the newest complete checkpoint; the step resumed from, None if fresh."""
        found = self.checkpointer.newest()
        if found is None:
            return None
        step, path = found
        started = time.time()
        state = self._state()
        self.checkpointer.load(path, state)
        set_state_dict(
            self.model, self.optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"]
        )
        self.step, self.position, seed = (int(v) for v in state["trainer"])
        if seed != self.cfg.seed:
            print(
                f"warning: checkpoint {path} was trained with --seed {seed}, continuing with {self.cfg.seed}",
                file=sys.stderr,
            )
        if self.monitor is not None:
            self.monitor.checkpoint_loaded(step, started, str(path))
        return step

    def save_checkpoint(self) -> None:
        assert self.cfg.run_dir is not None  # filled in by TrainConfig.__post_init__
        path = str(step_dir(self.cfg.run_dir, self.step))
        mon = self.monitor
        # begun in the store before it is written: peers waiting on a slow write are no hang
        started = mon.checkpoint_save_started(self.step, path) if mon else time.time()
        try:
            self.checkpointer.save(self.step, self._state(), disk_full=self.injector.disk_full_at(self.step))
        except BaseException as exc:
            if mon is not None:
                mon.checkpoint_save_failed(self.step, path, exc)
            raise
        if mon is not None:  # the blocking part of the save is what training lost
            mon.checkpoint_saved(self.step, started, None, path)
        self._after_sealed()

    def _after_sealed(self) -> None:
        for step, path in self.checkpointer.drain_sealed():
            self.injector.after_checkpoint(step, path)

    # -- step phases ------------------------------------------------------------------------
    def fetch_batch(self, batches: Any) -> tuple[torch.Tensor, torch.Tensor]:
        batch = self.injector.transform_batch(self.step, next(batches))
        return batch["input_ids"].to(self.device), batch["labels"].to(self.device)

    def forward_backward(self, inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        self.injector.before_compute(self.step)
        start = time.perf_counter()
        loss = self.model(inputs, labels)
        loss.backward()
        self.injector.after_compute(time.perf_counter() - start)
        detached: torch.Tensor = loss.detach()
        return detached

    def reduce_loss(self, loss: torch.Tensor) -> tuple[float, bool]:
        """Global mean loss and whether any rank got SIGTERM, in one all-reduce."""
        packed = torch.stack([loss.float(), torch.tensor(float(self.sigterm.raised), device=loss.device)])
        dist.all_reduce(packed)
        mean, flags = packed.tolist()
        mean /= self.world_size
        if mean != mean or mean in (float("inf"), float("-inf")):
            raise FloatingPointError(f"Loss is {mean} at step {self.step}")
        return mean, flags > 0

    def optimizer_step(self) -> torch.Tensor:
        """Clip, step, and hand back the pre-clip global gradient norm (the recorded grad-norm)."""
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return norm.full_tensor() if hasattr(norm, "full_tensor") else norm

    # -- the run ------------------------------------------------------------------------------
    def _record(self, event: str, **fields: Any) -> None:
        if self.progress is not None:
            self.progress.record(event, **fields)

    def run(self) -> None:
        cfg = self.cfg
        try:
            resumed = self.load_checkpoint()
            self._record("start", world_size=self.world_size, resumed_from_step=resumed, attempt=self.attempt)
            dataset = TokenBatches(
                seed=cfg.seed,
                rank=self.rank,
                world_size=self.world_size,
                batch_size=cfg.batch_size,
                seq_len=cfg.seq_len,
                start_step=self.step,
                start_position=self.position,
                data_path=cfg.data,
                kill_worker_at=self.injector.data_worker_kill_steps(),
            )
            skip = skip_steps_from_env()  # after a rollback: batches that poisoned the run
            batches = iter(
                make_loader(dataset, training_steps(self.step + 1, cfg.steps, skip), cfg.num_workers)
            )
            tokens_per_step = cfg.batch_size * cfg.seq_len * self.world_size
            mon = self.monitor
            if mon is not None:
                mon.init_done()
            no_step = NullStep()
            first_step = None
            while self.step < cfg.steps:
                self.step += 1
                if self.step in skip:  # no update; the batch counts as consumed
                    self.position = dataset.position_after(self.step)
                    self._record("skipped", step=self.step)
                    continue
                first_step = first_step or self.step
                torch.manual_seed(cfg.seed * 1_000_003 + self.step)  # RNG is a function of position
                start = time.perf_counter()
                with (
                    mon.step(self.step, tokens=cfg.batch_size * cfg.seq_len, samples=cfg.batch_size)
                    if mon
                    else no_step
                ) as observed:
                    with observed.data():
                        inputs, labels = self.fetch_batch(batches)
                    with observed.compute():
                        loss = self.forward_backward(inputs, labels)
                    observed.record(loss=loss)  # this rank's own loss: the first to go NaN
                    mean_loss, preempt = self.reduce_loss(loss)
                    with observed.optimizer():
                        grad_norm = self.optimizer_step()
                    observed.record(grad_norm=grad_norm)
                if self.step == first_step:  # every rank is through start-up
                    _set_pg_timeout(timedelta(seconds=cfg.collective_timeout))
                self.position = dataset.position_after(self.step)
                self._record(
                    "step",
                    step=self.step,
                    loss=mean_loss,
                    tokens=tokens_per_step,
                    step_time_s=time.perf_counter() - start,
                )
                if preempt:
                    self.save_checkpoint()
                    self.checkpointer.wait()
                    self._record("preempted", step=self.step)
                    print(f"preempted (SIGTERM): checkpoint saved at step {self.step}", flush=True)
                    raise Preempted(EXIT_PREEMPTED)
                if cfg.checkpoint_every and self.step % cfg.checkpoint_every == 0:
                    self.save_checkpoint()
            self.checkpointer.wait()
            self._after_sealed()
            self._record("end", exit=Status.COMPLETED)
        except Preempted:
            raise
        except BaseException as exc:
            self._record("error", message=f"{type(exc).__name__}: {exc}", step=self.step)
            raise
