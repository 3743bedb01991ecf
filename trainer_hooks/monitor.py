"""`TrainingMonitor`: the few lines a training loop adopts to be observed by Triage.

    monitor = TrainingMonitor(model=model).start()        # identity from TRIAGE_*/torchrun env
    for step in range(start, steps):
        with monitor.step(step, tokens=B * T, samples=B) as s:
            with s.data():
                batch = next(loader)
            with s.compute():
                loss = model(batch); loss.backward()
            with s.optimizer():
                optimizer.step(); optimizer.zero_grad()
            s.record(loss=loss, grad_norm=grad_norm)
    monitor.close()

Inside a step nothing touches the disk or waits for the device: rows are tuples appended to a
bounded buffer, CUDA timings and scalars are read back by the writer thread once their events
have completed, and the writer thread also emits the heartbeat. The hot path records only what
must be read at the moment (clocks, sizes, scalars); whatever follows from that (wall-clock
times, MFU, bandwidths, dtype names) the writer thread derives (`triage bench hooks` measures
both sides).
"""

from __future__ import annotations

import atexit
import json
import math
import os
import resource
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import torch

from triage.trainer_hooks import activity
from triage.trainer_hooks.buffer import RecordBuffer
from triage.trainer_hooks.canary import Canary
from triage.trainer_hooks.collective_timing import CollectiveRecorder
from triage.trainer_hooks.collective_timing import spool_columns as spool_collectives
from triage.trainer_hooks.config import MonitorConfig
from triage.trainer_hooks.flight_recorder import FlightRecorderDumper
from triage.trainer_hooks.flight_recorder import dump_dir as fr_dump_dir
from triage.trainer_hooks.flight_recorder import enabled as flight_recorder_enabled
from triage.trainer_hooks.spool_schema import SPOOL_TABLES, new_incarnation, writer_dir

if TYPE_CHECKING:
    from triage.trainer_hooks.spool_writer import SpoolWriter


# module globals: one lookup on the hot path, not two
_perf_counter = time.perf_counter
_isfinite = math.isfinite

#: The longest a SIGTERM handler waits for the writer thread's flush before the process dies
#: without its last records: a flush takes milliseconds, and a stopped attempt's ranks get
#: 1.5 s before SIGKILL (`supervisor._SETTLE_S`).
SIGTERM_FLUSH_S = 1.0


#: What the hot path buffers per step: (step, start on the perf_counter clock, duration, data,
#: compute and optimizer seconds, seconds blocked in collectives, tokens, samples, loss, grad
#: norm, peak memory bytes); `_spool_steps` derives the rest of the spool's row from it.
_StepRow = tuple[int, float, float, float, float, float, float, int, int, Any, Any, int]


def _nonfinite(loss: float | None, gnorm: float | None) -> bool:
    return (loss is not None and not _isfinite(loss)) or (gnorm is not None and not _isfinite(gnorm))


def _is_cuda(device: torch.device | None) -> bool:
    return device is not None and device.type == "cuda"


def node_gpu_index(device: torch.device) -> int | None:
    """The node's number of a CUDA device, which the agent's samples use: a process numbers the
    GPUs it sees from 0, so under CUDA_VISIBLE_DEVICES (how Slurm and Kubernetes bind GPUs)
    `cuda:0` can be the node's GPU 5. Where the list holds UUIDs the store matches the GPU by
    its UUID instead. None for a device that is no GPU."""
    if not _is_cuda(device):
        return None
    index = device.index if device.index is not None else torch.cuda.current_device()
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")]
    if index < len(visible) and visible[index].isdigit():
        return int(visible[index])
    return index


class _Phase:
    """A reusable timer for one phase of the step: sums its durations within the step."""

    __slots__ = ("_t0", "seconds")

    def __init__(self) -> None:
        self._t0 = 0.0
        self.seconds = 0.0

    def __enter__(self) -> _Phase:
        self._t0 = _perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.seconds += _perf_counter() - self._t0


class StepTimer:
    """Collects one step's phases and scalars; reused from step to step (no allocation)."""

    def __init__(self, monitor: TrainingMonitor) -> None:
        self._monitor = monitor
        self._data = _Phase()
        self._compute = _Phase()
        self._optimizer = _Phase()
        self.step = 0
        self.tokens = 0
        self.samples = 0
        self.loss: Any = None
        self.grad_norm: Any = None
        self._t0 = 0.0

    def data(self) -> _Phase:
        return self._data

    def compute(self) -> _Phase:
        return self._compute

    def optimizer(self) -> _Phase:
        return self._optimizer

    def set_phases(self, start: float, data_s: float, compute_s: float, optimizer_s: float) -> None:
        """For a caller that times the step itself (the zero-code hooks): its start on the
        `time.perf_counter` clock and its phases."""
        self._t0 = start
        self._data.seconds, self._compute.seconds, self._optimizer.seconds = data_s, compute_s, optimizer_s

    def record(self, loss: Any = None, grad_norm: Any = None) -> None:
        """Loss and grad-norm as floats or tensors (a CUDA tensor is read later, without a sync).

        A host value that is NaN/Inf is flagged at once, before the step goes on: the rank whose
        own loss diverged first is the culprit, and a global-loss check that then raises on
        every rank must not hide it. A finite float, the common case, is kept as it is."""
        if loss is not None:
            self.loss = (
                loss
                if loss.__class__ is float and _isfinite(loss)
                else self._monitor._check_finite(self.step, "loss", loss)
            )
        if grad_norm is not None:
            self.grad_norm = (
                grad_norm
                if grad_norm.__class__ is float and _isfinite(grad_norm)
                else self._monitor._check_finite(self.step, "grad_norm", grad_norm)
            )

    def __enter__(self) -> StepTimer:
        self._data.seconds = self._compute.seconds = self._optimizer.seconds = 0.0
        self.loss = self.grad_norm = None
        coll = self._monitor._collectives
        coll.step = self.step
        coll.blocked_s = 0.0
        self._t0 = _perf_counter()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self._monitor._finish_step(self, _perf_counter() - self._t0)


class _NoPhase:
    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


class NullStep:
    """The step API with telemetry off, so a loop keeps one shape whether it is observed or not."""

    _phase = _NoPhase()

    def __enter__(self) -> NullStep:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def data(self) -> _NoPhase:
        return self._phase

    compute = optimizer = data

    def record(self, loss: Any = None, grad_norm: Any = None) -> None:
        return None


def _host_scalar(x: Any) -> float | Callable[[], float | None] | None:
    """A float now where that costs nothing; for a CUDA tensor, a reader to call once it is ready."""
    if x is None:
        return None
    if isinstance(x, torch.Tensor):
        t = x.detach()
        if t.is_cuda:
            host = torch.empty((), dtype=torch.float64, pin_memory=True)
            host.copy_(t.reshape(()).double(), non_blocking=True)
            # torch.cuda.Event's constructor and query() are unannotated
            ev = torch.cuda.Event()  # type: ignore[no-untyped-call]
            ev.record()
            return lambda: float(host) if ev.query() else None  # type: ignore[no-untyped-call]
        return float(t)
    return float(x)


def _main_thread_clock() -> int | None:
    """The CPU-time clock of the main thread (the one that trains), read from the writer
    thread; None where the platform has none."""
    try:
        ident = threading.main_thread().ident
        return None if ident is None else time.pthread_getcpuclockid(ident)
    except (AttributeError, OSError):
        return None


def _main_thread_runnable() -> int | None:
    """The main thread's id for `activity.runnable_s`, where the kernel keeps its account."""
    tid = threading.main_thread().native_id
    return tid if tid is not None and activity.runnable_s(tid) is not None else None


class TrainingMonitor:
    def __init__(
        self,
        config: MonitorConfig | None = None,
        *,
        model: torch.nn.Module | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        self.config = config or MonitorConfig()
        cfg = self.config
        self.device = (
            torch.device(device)
            if device is not None
            else (next(model.parameters()).device if model is not None else torch.device("cpu"))
        )
        if cfg.flops_per_token is None and model is not None:
            # 6N rule: forward + backward cost ~6 FLOPs per parameter per token (Kaplan et al.).
            cfg.flops_per_token = 6.0 * sum(p.numel() for p in model.parameters())
        self.pid = os.getpid()
        self._main_clock = _main_thread_clock()
        self._main_tid = _main_thread_runnable()
        main_ident = threading.main_thread().ident
        self._terminating = False
        self._main_stack = None if main_ident is None else activity.MainStack(main_ident)
        self._cuda = _is_cuda(self.device)
        self._wall_offset = time.time() - time.perf_counter()
        self._peak_rss = 0
        self.identity = self._identity()
        self.spool_dir = writer_dir(
            cfg.data_dir, cfg.node, cfg.job_id, cfg.attempt, cfg.rank, self.pid, new_incarnation(), cfg.run_id
        )
        self.buffer = RecordBuffer(SPOOL_TABLES, cfg.buffer_capacity)
        self._collectives = CollectiveRecorder(self.buffer)
        self._writer: SpoolWriter | None = None
        self._timer = StepTimer(self)
        self._canary = Canary(self.device) if cfg.canary_every else None
        self._pending: list[tuple[_StepRow, Any, Any]] = []  # step rows awaiting CUDA scalars (readers)
        self._pending_canary: list[tuple[int, float, torch.Tensor, Any]] = []  # (.., CUDA event)
        self.last_step: int | None = None
        self._saves_begun: set[tuple[int, str]] = set()  # (step, path) recorded as begun, not ended
        self._flagged_step: int | None = None  # the step whose non-finite value is reported
        self._first_step_seen = False
        self._closed = False
        self._reported_drops = 0
        self._prev_excepthook: Callable[..., Any] | None = None
        self._prev_sigterm: Any = None
        self._fr = (
            FlightRecorderDumper(fr_dump_dir(cfg.data_dir, cfg.job_id, cfg.run_id, cfg.attempt), cfg.rank)
            if flight_recorder_enabled()
            else None
        )

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> TrainingMonitor:
        from triage.trainer_hooks.spool_writer import SpoolWriter

        cfg = self.config
        if cfg.mode == "explicit" and "triage.trainer_hooks.auto" in sys.modules:
            sys.modules["triage.trainer_hooks.auto"].retire()
        if not self._cuda:
            self._peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        self._writer = SpoolWriter(
            self.spool_dir,
            self.identity,
            self.buffer,
            min(cfg.flush_interval_s, cfg.heartbeat_interval_s),
            self._tick,
            finish={"steps": self._spool_steps, "collectives": spool_collectives},
        )
        self._put_rank_row()
        self.event(
            "process_start",
            f"rank {cfg.rank} of {cfg.world_size} on {cfg.node}",
            pid=self.pid,
            device=str(self.device),
            hooks=cfg.mode,
        )
        if cfg.collectives:
            self._collectives.install()
        if cfg.capture_uncaught:
            self._prev_excepthook = sys.excepthook
            sys.excepthook = self._excepthook
            atexit.register(self._atexit)
            if threading.current_thread() is threading.main_thread():
                self._prev_sigterm = signal.getsignal(signal.SIGTERM)
                signal.signal(signal.SIGTERM, self._on_sigterm)
        # Written now, not at the first tick: a rank that dies in its first second must still
        # be known to have existed (rank -> node, GPU, pid).
        self._writer.flush()
        self._writer.start()
        return self

    def _put_rank_row(self) -> None:
        cfg = self.config
        uuid = None
        if self._cuda:
            uuid = "GPU-" + str(torch.cuda.get_device_properties(self.device).uuid)
        self.buffer.put(
            "ranks",
            (
                self.pid,
                cfg.local_rank,
                cfg.world_size,
                socket.gethostname(),
                str(self.device),
                uuid,
                time.time(),
            ),
        )

    def _identity(self) -> tuple[str, str | None, int, int, str, int | None]:
        cfg = self.config
        gpu = cfg.gpu if cfg.gpu is not None else node_gpu_index(self.device)
        return (cfg.job_id, cfg.run_id, cfg.attempt, cfg.rank, cfg.node, gpu)

    def set_device(self, device: torch.device | str) -> None:
        """The device the rank turned out to train on (the automatic monitor learns it at the
        first optimizer step): a new `ranks` row, which the store takes over the first, so a
        GPU verdict names this rank's GPU; records written from now on carry it too."""
        device = torch.device(device)
        if device == self.device:
            return
        self.device, self._cuda = device, _is_cuda(device)
        self.identity = self._identity()
        if self._writer is not None:
            self._writer.identity = self.identity
        self._put_rank_row()

    def retire(self) -> None:
        """Stop reporting without an exit event: another monitor in this process takes over
        (an explicit `TrainingMonitor` after the automatic one)."""
        if self._closed:
            return
        self._closed = True
        self._collectives.uninstall()
        self._restore_process_hooks()
        if self._writer is not None:
            self._writer.close()

    def _restore_process_hooks(self) -> None:
        """Undo what `start` installed in the process (excepthook, SIGTERM handler, atexit hook):
        a library inside a user's loop leaves the process as it found it. Only where ours are
        still installed: the script may have put its own on top since."""
        if self._prev_excepthook is not None and sys.excepthook == self._excepthook:
            sys.excepthook = self._prev_excepthook
        if (
            self._prev_sigterm is not None
            and threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGTERM) == self._on_sigterm
        ):
            signal.signal(signal.SIGTERM, self._prev_sigterm)
        atexit.unregister(self._atexit)

    def __enter__(self) -> TrainingMonitor:
        return self.start() if self._writer is None else self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc is not None and not isinstance(exc, SystemExit):
            self.record_exception(exc)
        self.close()

    def close(self, exit_code: int | None = None) -> None:
        """Record the exit (with its code where the caller knows it) and write everything that
        is buffered. Idempotent; the atexit hook calls it without a code."""
        if self._closed:
            return
        self._closed = True
        detail = {} if exit_code is None else {"exit_code": exit_code}
        self.event(
            "exit",
            "process exiting" if exit_code is None else f"exit code {exit_code}",
            step=self.last_step,
            **detail,
        )
        self._collectives.uninstall()
        self._collectives.forget_inflight()  # the last heartbeat must not show a rank exiting as blocked
        self._restore_process_hooks()
        if self._writer is not None:
            self._writer.close()

    def init_done(self) -> None:
        """Marks the end of start-up (initialization badput) and writes out what start-up
        recorded; called once, outside any step."""
        self.event("init_done", "initialisation finished")
        if self._writer is not None:
            self._writer.tick()

    # -- per step ------------------------------------------------------------------------------
    def step(self, step: int, *, tokens: int = 0, samples: int = 0) -> StepTimer:
        t = self._timer
        t.step, t.tokens, t.samples = step, tokens, samples
        return t

    def _finish_step(self, t: StepTimer, duration: float) -> None:
        """Buffer the step's raw values (`_StepRow`); the writer thread turns them into the
        spool's row (`_spool_steps`)."""
        coll = self._collectives
        blocked, coll.blocked_s = coll.blocked_s, 0.0
        loss, gnorm = t.loss, t.grad_norm
        row: _StepRow = (
            t.step,
            t._t0,
            duration,
            t._data.seconds,
            t._compute.seconds,
            t._optimizer.seconds,
            blocked,
            t.tokens,
            t.samples,
            loss,
            gnorm,
            # CUDA's allocator statistic is a host-side counter; on CPU the process's peak RSS
            # is read by the writer thread once per tick (a syscall per step would cost more).
            torch.cuda.max_memory_allocated(self.device) if self._cuda else self._peak_rss,
        )
        if isinstance(loss, torch.Tensor) or isinstance(gnorm, torch.Tensor):
            # CUDA tensors that `record` passed through: copied now, read once they are ready
            self._pending.append((row, _host_scalar(loss), _host_scalar(gnorm)))
        else:
            self.buffer.put("steps", row)
        self.last_step = t.step
        first = not self._first_step_seen
        if first:
            self._first_step_seen = True
            self.event("first_step", f"first step {t.step} done in {duration:.3f} s", step=t.step)
        # every N steps, and on each attempt's first step so even a short run is checked
        if self._canary is not None and (first or t.step % self.config.canary_every == 0):
            result = self._canary.run()
            ready = None
            if result.is_cuda:
                ready = torch.cuda.Event()  # type: ignore[no-untyped-call]  # unannotated in torch
                ready.record()
            self._pending_canary.append((t.step, time.time(), result, ready))

    def _spool_steps(self, columns: list[Sequence[Any]]) -> list[Sequence[Any]]:
        """Buffered steps, as columns, as the spool's `steps` columns: wall-clock times, the
        non-finite flag and MFU, derived on the writer thread."""
        step, t0, duration, data_s, compute_s, optimizer_s, blocked, tokens, samples, loss, gnorm, peak = (
            columns
        )
        offset = self._wall_offset  # perf_counter -> unix time, fixed once at start
        start = [t + offset for t in t0]
        cfg = self.config
        per_token = cfg.flops_per_token / cfg.peak_flops if cfg.flops_per_token and cfg.peak_flops else None
        mfu = [
            n * per_token / d if per_token is not None and d > 0 and n else None
            for n, d in zip(tokens, duration)
        ]
        return [
            step,
            start,
            [s + d for s, d in zip(start, duration)],
            data_s,
            compute_s,
            optimizer_s,
            blocked,
            tokens,
            samples,
            loss,
            gnorm,
            list(map(_nonfinite, loss, gnorm)),
            peak,
            mfu,
        ]

    def _check_finite(self, step: int, name: str, value: Any) -> Any:
        """A host scalar as a float, flagged now when non-finite; CUDA tensors pass through
        (read later by the writer thread, and flagged when their step row is written)."""
        if isinstance(value, torch.Tensor) and value.is_cuda:
            return value
        v = cast("float | None", _host_scalar(value))  # not a CUDA tensor: never a reader
        if v is not None and not math.isfinite(v) and self._flagged_step != step:
            self._flagged_step = step
            self.event("nonfinite", f"non-finite {name}={v} at step {step}", step=step, **{name: str(v)})
        return v

    def _emit_resolved(self, row: _StepRow) -> None:
        """A step whose CUDA scalars have been read: buffered, and flagged where they are not
        finite (host values were flagged by `record`)."""
        self.buffer.put("steps", row)
        step, loss, gnorm = row[0], row[9], row[10]
        if _nonfinite(loss, gnorm) and self._flagged_step != step:
            self._flagged_step = step
            self.event(
                "nonfinite",
                f"non-finite loss={loss} grad_norm={gnorm} at step {step}",
                step=step,
                loss=str(loss),
                grad_norm=str(gnorm),
            )

    # -- events --------------------------------------------------------------------------------
    def event(self, kind: str, message: str = "", step: int | None = None, **detail: Any) -> None:
        self.buffer.put(
            "events", (time.time(), kind, step, message, json.dumps(detail, default=str) if detail else None)
        )

    def checkpoint_save_started(self, step: int, path: str) -> float:
        """Record a save's begin as it starts (its start time is returned for `checkpoint_saved`):
        a reader of the store then sees the save in progress, so peers that wait in a collective
        while this rank writes to slow storage are not taken for a hang
        (`triage.supervisor.stall`). End it with `checkpoint_saved` or `checkpoint_save_failed`."""
        started = time.time()
        self.buffer.put("events", (started, "checkpoint_save_begin", step, path, None))
        self._saves_begun.add((step, path))
        return started

    def checkpoint_save_failed(self, step: int, path: str, error: BaseException) -> None:
        """A save begun with `checkpoint_save_started` that raised: over, and no checkpoint."""
        self._saves_begun.discard((step, path))
        self.event(
            "checkpoint_save_failed",
            f"checkpoint at step {step} to {path} failed: {type(error).__name__}: {error}",
            step=step,
            path=path,
        )

    def file_save_started(self, path: str) -> float:
        """A file write the hooks cannot tell from a checkpoint (the zero-code hooks' `torch.save`
        to a path: a debug dump as well as a model), begun in the store as it starts, so the
        collective stall sees the rank saving; no checkpoint (the checkpoint list, the last
        checkpoint's age and goodput's save time count only `checkpoint_*` saves)."""
        started = time.time()
        self.buffer.put("events", (started, "file_save_begin", self.last_step, path, None))
        return started

    def file_save_ended(self, path: str, started: float, error: BaseException | None = None) -> None:
        what = f"wrote {path}" if error is None else f"writing {path} failed: {type(error).__name__}: {error}"
        self.event(
            "file_save_end",
            what,
            step=self.last_step,
            path=path,
            seconds=time.time() - started,
            failed=error is not None,
        )

    def checkpoint_saved(self, step: int, started: float, nbytes: int | None, path: str) -> None:
        """Blocking save time is badput; record the end with the bytes written, and the begin
        at `started` unless `checkpoint_save_started` recorded it."""
        if (step, path) in self._saves_begun:
            self._saves_begun.discard((step, path))
        else:
            self.buffer.put("events", (started, "checkpoint_save_begin", step, path, None))
        self.event(
            "checkpoint_save_end",
            f"checkpoint at step {step} saved to {path}",
            step=step,
            bytes=nbytes,
            seconds=time.time() - started,
            path=path,
        )

    def checkpoint_loaded(self, step: int, started: float, path: str) -> None:
        self.buffer.put("events", (started, "checkpoint_load_begin", step, path, None))
        self.event(
            "checkpoint_load_end",
            f"resumed from checkpoint at step {step} ({path})",
            step=step,
            seconds=time.time() - started,
            path=path,
        )

    def record_exception(self, exc: BaseException) -> None:
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        self.event(
            "exception",
            f"{type(exc).__name__}: {exc}",
            step=self.last_step,
            type=type(exc).__name__,
            traceback=tb,
        )
        if self._writer is not None:
            self._writer.flush()
        if self._fr is not None:
            self._fr.dump(f"{type(exc).__name__} raised")

    def _excepthook(self, exc_type: type, exc: BaseException, tb: Any) -> None:
        if not isinstance(exc, (SystemExit, KeyboardInterrupt)):
            self.record_exception(exc)
        (self._prev_excepthook or sys.__excepthook__)(exc_type, exc, tb)

    def _atexit(self) -> None:
        self.close()

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        # A rank may get two (the supervisor's and its launcher's, passed on): recorded once.
        first, self._terminating = not self._terminating, True
        if first:
            self.event("sigterm", "SIGTERM received", step=self.last_step)
            if self._fr is not None:
                self._fr.dump("SIGTERM received")
        prev = self._prev_sigterm
        if callable(prev):
            prev(signum, frame)  # its exit, if it exits, goes through the exit paths, which flush
        elif prev == signal.SIG_DFL:
            if not first:
                return  # the first is writing the buffer and ends the process once it has
            # The default action ends the process at once, past every exit path: what the
            # writer thread has not written yet (up to a flush interval of steps, this event)
            # would be lost, as it was for a rank torchrun stopped after its peer died. The
            # wait is bounded, and none where the signal interrupted a flush of this thread.
            if self._writer is not None:
                self._writer.flush(lock_timeout=SIGTERM_FLUSH_S)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

    # -- writer thread -------------------------------------------------------------------------
    def _main_cpu_s(self) -> float | None:
        """The main thread's runnable seconds where Linux tells them, else its CPU seconds
        (one measure for the rank's life: the hang rule takes differences of it)."""
        if self._main_tid is not None:
            return activity.runnable_s(self._main_tid)
        if self._main_clock is None:
            return None
        try:
            return time.clock_gettime(self._main_clock)
        except OSError:  # the main thread has ended (the process is exiting)
            return None

    def _tick(self) -> None:
        if self._fr is not None:
            self._fr.poll()
        if not self._cuda:
            self._peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        self._collectives.resolve_cuda()
        if self._pending:
            still = []
            for row, loss, gnorm in self._pending:
                lv = loss() if callable(loss) else loss
                gv = gnorm() if callable(gnorm) else gnorm
                if (callable(loss) and lv is None) or (callable(gnorm) and gv is None):
                    still.append((row, loss, gnorm))
                else:
                    self._emit_resolved((*row[:9], lv, gv, row[11]))
            self._pending = still
        if self._pending_canary:
            still_c = []
            for step, when, result, ready in self._pending_canary:
                if ready is not None and not ready.query():
                    still_c.append((step, when, result, ready))
                    continue
                digest, total = Canary.digest(result)
                self.buffer.put(
                    "events", (when, "canary", step, digest, json.dumps({"digest": digest, "sum": total}))
                )
            self._pending_canary = still_c
        dropped = sum(self.buffer.dropped.values())
        if dropped > self._reported_drops:
            self._reported_drops = dropped
            self.event(
                "telemetry_dropped",
                f"{dropped} telemetry records dropped: buffer full",
                **self.buffer.dropped,
            )
        inflight = self._collectives.oldest_inflight()
        op, group, seq, since = inflight if inflight else (None, None, None, None)
        self.buffer.put(
            "heartbeats",
            (
                time.time(),
                self.last_step,
                self.pid,
                op,
                group,
                seq,
                since,
                self._main_cpu_s(),
                activity.children_cpu_s(),
                activity.read_bytes(),
                None if self._main_stack is None else self._main_stack.look(),
            ),
        )
