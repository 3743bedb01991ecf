"""Timing of every collective issued through the `torch.distributed` Python API.

FSDP2's all-gather and reduce-scatter, DDP-style all-reduce, broadcast and barrier all go through
module-level functions of `torch.distributed.distributed_c10d`, looked up at call time, so
wrapping those functions sees every such call without touching the training code. (Functional
collectives used inside DTensor redistribution and p2p send/recv are not seen.)

Per call the hot path takes a timestamp, bumps the group's sequence number and appends one tuple;
completion comes from the call returning (blocking op), from the work's future (async op), or on
CUDA from events resolved later by the writer thread, never by a device sync. Bandwidth follows
nccl-tests: algbw = bytes / time, busbw = algbw x the op's factor.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from triage.trainer_hooks.buffer import RecordBuffer


def busbw_factor(op: str, n: int) -> float:
    """nccl-tests' bus-bandwidth factor for an op over `n` ranks."""
    if n <= 1:
        return 1.0
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0


def _nbytes(x: Any) -> int:
    if isinstance(x, torch.Tensor):
        return x.numel() * x.element_size()
    if isinstance(x, (list, tuple)):
        return sum(_nbytes(t) for t in x)
    return 0


_DTYPE_NAMES: dict[torch.dtype, str] = {}


def _dtype(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        name = _DTYPE_NAMES.get(x.dtype)
        if name is None:
            name = _DTYPE_NAMES[x.dtype] = str(x.dtype).removeprefix("torch.")
        return name
    if isinstance(x, (list, tuple)) and x:
        return _dtype(x[0])
    return ""


@dataclass(frozen=True)
class _OpSpec:
    """Where a wrapped function keeps its data, group and async_op arguments."""

    op: str  # canonical (nccl-tests) name
    data_name: str | None
    data_pos: int
    group_pos: int
    async_pos: int


# name in torch.distributed -> spec. For all-gather the size is the gathered output, for
# reduce-scatter the full input, as nccl-tests counts them.
WRAPPED: dict[str, _OpSpec] = {
    "all_reduce": _OpSpec("all_reduce", "tensor", 0, 2, 3),
    "all_reduce_coalesced": _OpSpec("all_reduce", "tensors", 0, 2, 3),
    "broadcast": _OpSpec("broadcast", "tensor", 0, 2, 3),
    "reduce": _OpSpec("reduce", "tensor", 0, 3, 4),
    "all_gather": _OpSpec("all_gather", "tensor_list", 0, 2, 3),
    "all_gather_single": _OpSpec("all_gather", "output_tensor", 0, 2, 3),
    "reduce_scatter": _OpSpec("reduce_scatter", "input_list", 1, 3, 4),
    "reduce_scatter_single": _OpSpec("reduce_scatter", "input", 1, 3, 4),
    "all_to_all_single": _OpSpec("all_to_all", "input", 1, 4, 5),
    "all_to_all": _OpSpec("all_to_all", "input_tensor_list", 1, 2, 3),
    "barrier": _OpSpec("barrier", None, -1, 0, 1),
}


#: A `collectives` row up to its end: (seq, op, group, group size, bytes, dtype, step, enter).
_Row = tuple[int, str, str, int, int, str, int | None, float]


class CollectiveRecorder:
    """Installs the wrappers and records one `collectives` row per call into the buffer."""

    def __init__(self, buffer: RecordBuffer, clock: Callable[[], float] = time.time) -> None:
        self.buffer = buffer
        self.clock = clock
        self.step: int | None = None
        self.blocked_s = 0.0  # time the calling thread spent inside blocking collectives
        self.recorded = 0
        self._seq: dict[str, int] = {}
        self._groups: dict[int, tuple[str, int]] = {}
        self._inflight: dict[tuple[str, int], tuple[str, float]] = {}
        self._pending_cuda: list[tuple[_Row, Any, Any, float]] = []
        self._originals: dict[str, Callable[..., Any]] = {}
        self._local = threading.local()

    # -- install -------------------------------------------------------------------------------
    def install(self) -> None:
        if self._originals:
            return
        for name, spec in WRAPPED.items():
            original = getattr(c10d, name, None)
            if original is None:
                continue
            self._originals[name] = original
            wrapper = self._wrap(original, spec)
            setattr(c10d, name, wrapper)
            if getattr(dist, name, None) is original:
                setattr(dist, name, wrapper)

    def uninstall(self) -> None:
        for name, original in self._originals.items():
            if getattr(dist, name, None) is getattr(c10d, name, None):
                setattr(dist, name, original)
            setattr(c10d, name, original)
        self._originals.clear()

    # -- hot path ------------------------------------------------------------------------------
    def _group(self, group: Any) -> tuple[str, int]:
        if group is None:
            group = c10d.GroupMember.WORLD or c10d._get_default_group()
        key = id(group)
        cached = self._groups.get(key)
        if cached is None:
            try:
                cached = (str(group.group_name), int(group.size()))
            except Exception:  # noqa: BLE001 (a group torch cannot describe keeps a synthetic name)
                cached = (f"pg{key:x}", 0)
            self._groups[key] = cached
        return cached

    def _wrap(self, original: Callable[..., Any], spec: _OpSpec) -> Callable[..., Any]:
        recorder = self

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            local = recorder._local
            if getattr(local, "active", False):
                return original(*args, **kwargs)
            if spec.data_name is None:
                data = None
            elif len(args) > spec.data_pos:
                data = args[spec.data_pos]
            else:
                data = kwargs.get(spec.data_name)
            group = args[spec.group_pos] if len(args) > spec.group_pos else kwargs.get("group")
            async_op = args[spec.async_pos] if len(args) > spec.async_pos else kwargs.get("async_op", False)
            try:
                gname, gsize = recorder._group(group)
            except Exception:  # noqa: BLE001 (not initialised / not a member: let torch raise its own error)
                return original(*args, **kwargs)
            seq = recorder._seq.get(gname, 0) + 1
            recorder._seq[gname] = seq
            nbytes = _nbytes(data)
            enter = recorder.clock()
            key = (gname, seq)
            recorder._inflight[key] = (spec.op, enter)
            cuda = isinstance(data, torch.Tensor) and data.is_cuda
            start_ev = None
            if cuda and not async_op:
                # torch.cuda.Event's constructor is unannotated
                start_ev = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
                start_ev.record()
            local.active = True
            try:
                result = original(*args, **kwargs)
            except BaseException:
                recorder._inflight.pop(key, None)
                raise
            finally:
                local.active = False
            row: _Row = (seq, spec.op, gname, gsize, nbytes, _dtype(data), recorder.step, enter)
            if async_op and result is not None and hasattr(result, "get_future"):
                recorder._complete_on_future(row, key, result)
            elif start_ev is not None:
                # torch.cuda.Event's constructor is unannotated
                end_ev = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
                end_ev.record()
                recorder._pending_cuda.append((row, start_ev, end_ev, enter))
                recorder._inflight.pop(key, None)
            else:
                end = recorder.clock()
                recorder._inflight.pop(key, None)
                recorder.blocked_s += end - enter
                recorder._emit(row, end)
            return result

        wrapper.__wrapped__ = original  # type: ignore[attr-defined]
        wrapper.__name__ = getattr(original, "__name__", "collective")
        wrapper.__doc__ = original.__doc__
        return wrapper

    def _complete_on_future(self, row: _Row, key: tuple[str, int], work: Any) -> None:
        try:
            fut = work.get_future()
        except Exception:  # noqa: BLE001 (no futures on this backend: completion unknown)
            self._inflight.pop(key, None)
            self._emit(row, None)
            return

        def done(_: Any) -> None:
            self._inflight.pop(key, None)
            self._emit(row, self.clock())

        fut.add_done_callback(done)

    def _emit(self, row: _Row, end: float | None) -> None:
        enter = row[-1]
        algbw = busbw = None
        if end is not None and end > enter and row[4] > 0:
            algbw = row[4] / (end - enter)
            busbw = algbw * busbw_factor(row[1], row[3])
        self.buffer.put("collectives", row + (end, algbw, busbw))
        self.recorded += 1

    # -- writer thread -------------------------------------------------------------------------
    def resolve_cuda(self) -> None:
        """Complete CUDA-timed rows whose events have finished; never waits on the device."""
        still = []
        for row, start_ev, end_ev, enter in self._pending_cuda:
            if end_ev.query():
                self._emit(row, enter + start_ev.elapsed_time(end_ev) / 1000.0)
            else:
                still.append((row, start_ev, end_ev, enter))
        self._pending_cuda = still

    def oldest_inflight(self) -> tuple[str, str, int, float] | None:
        """(op, group, seq, since) of the longest-waiting unfinished collective, for heartbeats."""
        items = list(self._inflight.items())
        if not items:
            return None
        (group, seq), (op, since) = min(items, key=lambda kv: kv[1][1])
        return op, group, seq, since

    def forget_inflight(self) -> None:
        self._inflight.clear()

    def take_blocked(self) -> float:
        value, self.blocked_s = self.blocked_s, 0.0
        return value
