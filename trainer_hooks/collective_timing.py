"""Timing of every collective issued through the `torch.distributed` Python API.

FSDP2's all-gather and reduce-scatter, DDP-style all-reduce, broadcast and barrier all go through
module-level functions of `torch.distributed.distributed_c10d`, looked up at call time, so
wrapping those functions sees every such call without touching the training code. (Functional
collectives used inside DTensor redistribution and p2p send/recv are not seen.)

Per call the hot path takes a timestamp, bumps the group's sequence number and appends one tuple;
completion comes from the call returning (blocking op), from the work's future (async op), or on
CUDA from events resolved later by the writer thread, never by a device sync. Bandwidth follows
nccl-tests: algbw = bytes / time, busbw = algbw x the op's factor; the writer thread computes
it, and names the dtype, so that the hot path only reads what it must read at the call.
None of the wrapped functions calls another (tests/test_trainer_hooks.py checks each op records
one row), so the wrapper keeps no per-thread "already inside" state: a collective that a
process-group backend written in Python issues inside one is recorded as one of its own group.
"""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Callable, Iterator, Sequence
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
        return x.nbytes
    if isinstance(x, (list, tuple)):
        return sum(_nbytes(t) for t in x)
    return 0


def _dtype(x: Any) -> torch.dtype | None:
    """The data's dtype object: its name is looked up by the writer thread (`dtype_name`)."""
    if isinstance(x, torch.Tensor):
        return x.dtype
    if isinstance(x, (list, tuple)) and x:
        return _dtype(x[0])
    return None


_DTYPE_NAMES: dict[torch.dtype | None, str] = {None: ""}


def dtype_name(dtype: torch.dtype | None) -> str:
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype).removeprefix("torch.")
    return name


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


#: A collective as the hot path knows it on entry: (seq, op, group, group size, bytes, dtype,
#: step, enter). What it buffers is this row with its end (None while unknown) appended: one
#: flat tuple of plain values, the cheapest record to build and one the garbage collector stops
#: tracking at its first pass. The dtype is torch's object and the bandwidths are left out: the
#: writer thread names and derives them (`spool_columns`).
_Row = tuple[int, str, str, int, int, torch.dtype | None, int | None, float]
#: What the hot path keeps per process group: its name, size and sequence numbers.
_Group = tuple[str, int, Iterator[int]]


def spool_columns(columns: list[Sequence[Any]]) -> list[Sequence[Any]]:
    """Buffered collectives, as columns, as the spool's `collectives` columns, with the names
    and bandwidths the hot path leaves to the writer thread."""
    seq, op, group, size, nbytes, dtype, step, enter, end = columns
    algbw = [
        b / (e - s) if e is not None and e > s and b > 0 else None for b, s, e in zip(nbytes, enter, end)
    ]
    busbw = [a * busbw_factor(o, n) if a is not None else None for a, o, n in zip(algbw, op, size)]
    return [seq, op, group, size, nbytes, list(map(dtype_name, dtype)), step, enter, end, algbw, busbw]


class CollectiveRecorder:
    """Installs the wrappers and records one `collectives` row per call into the buffer."""

    def __init__(self, buffer: RecordBuffer, clock: Callable[[], float] = time.time) -> None:
        self.buffer = buffer
        self.clock = clock
        self.step: int | None = None
        self.blocked_s = 0.0  # time the calling thread spent inside blocking collectives
        # the sequence numbers of each group name, kept when the group is destroyed: a group
        # made again under the same name goes on counting, so its rows stay apart from the old
        self._seq: dict[str, Iterator[int]] = {}
        # (name, size, sequence numbers) by the id of the group object a call passed (None: the
        # default group), emptied when a group is destroyed: a later group may get a dead one's id
        self._groups: dict[int, _Group] = {}
        # Rows entered and not finished, oldest first; a list, not a dict keyed by (group, seq):
        # an append and a remove of the last entry cost less than building a key and hashing it.
        # Each row is removed by its own call, once; a closing monitor hides them instead.
        self._inflight: list[_Row] = []
        self._inflight_forgotten = False
        self._pending_cuda: list[tuple[_Row, Any, Any, float]] = []
        self._originals: dict[str, Callable[..., Any]] = {}

    # -- install -------------------------------------------------------------------------------
    def install(self) -> None:
        if self._originals:
            return
        for name, spec in WRAPPED.items():
            original = getattr(c10d, name, None)
            if original is not None:
                self._patch(name, original, self._wrap(original, spec))
        self._patch(
            "destroy_process_group",
            c10d.destroy_process_group,
            self._forgets_groups(c10d.destroy_process_group),
        )

    def _patch(self, name: str, original: Callable[..., Any], replacement: Callable[..., Any]) -> None:
        self._originals[name] = original
        setattr(c10d, name, replacement)
        if getattr(dist, name, None) is original:
            setattr(dist, name, replacement)

    def uninstall(self) -> None:
        for name, original in self._originals.items():
            if getattr(dist, name, None) is getattr(c10d, name, None):
                setattr(dist, name, original)
            setattr(c10d, name, original)
        self._originals.clear()

    # -- hot path ------------------------------------------------------------------------------
    def _describe(self, group: Any) -> _Group | None:
        """A group seen for the first time, cached; None while there is no default group to
        stand for `group=None`."""
        pg = c10d.GroupMember.WORLD if group is None else group
        if pg is None:
            return None
        try:
            name, size = str(pg.group_name), int(pg.size())
        except Exception:  # noqa: BLE001 (a group torch cannot describe keeps a synthetic name)
            name, size = f"pg{id(pg):x}", 0
        described = (name, size, self._seq.setdefault(name, itertools.count(1)))
        self._groups[id(group)] = described
        return described

    def _forgets_groups(self, destroy: Callable[..., Any]) -> Callable[..., Any]:
        """`destroy_process_group` that also empties the group cache: the default group a later
        `init_process_group` makes may have another size."""

        def destroy_process_group(*args: Any, **kwargs: Any) -> Any:
            try:
                return destroy(*args, **kwargs)
            finally:
                self._groups.clear()

        return destroy_process_group

    def _wrap(self, original: Callable[..., Any], spec: _OpSpec) -> Callable[..., Any]:
        # Everything the wrapper reads per call is a local of this closure: an attribute or a
        # global lookup costs as much as the append that records the row.
        recorder, clock, inflight, groups = self, self.clock, self._inflight, self._groups
        queue, capacity = self.buffer.queue("collectives"), self.buffer.capacity
        op, group_pos, async_pos = spec.op, spec.group_pos, spec.async_pos
        # an op without data (barrier) looks for it where no call puts it
        data_name, data_pos = (spec.data_name, spec.data_pos) if spec.data_name else ("", sys.maxsize)
        tensor_type = torch.Tensor
        # without a GPU no tensor is on CUDA: not asking saves one tensor attribute per call
        cuda_possible = torch.cuda.is_available()

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            n = len(args)
            data = args[data_pos] if n > data_pos else kwargs.get(data_name)
            group = args[group_pos] if n > group_pos else kwargs.get("group")
            async_op = args[async_pos] if n > async_pos else kwargs.get("async_op", False)
            described = groups.get(id(group)) or recorder._describe(group)
            if described is None:  # not initialised: torch raises its own error
                return original(*args, **kwargs)
            gname, gsize, seqs = described
            seq = next(seqs)
            dtype: torch.dtype | None
            if isinstance(data, tensor_type):
                nbytes, dtype, cuda = data.nbytes, data.dtype, cuda_possible and not async_op and data.is_cuda
            else:
                nbytes, dtype, cuda = _nbytes(data), _dtype(data), False
            step = recorder.step
            enter = clock()
            row: _Row = (seq, op, gname, gsize, nbytes, dtype, step, enter)
            inflight.append(row)
            if async_op or cuda:
                return recorder._call_completed_later(original, args, kwargs, row, cuda)
            try:
                result = original(*args, **kwargs)
            except BaseException:
                inflight.remove(row)
                raise
            end = clock()
            inflight.remove(row)
            recorder.blocked_s += end - enter
            if len(queue) < capacity:
                queue.append((seq, op, gname, gsize, nbytes, dtype, step, enter, end))
            else:
                recorder.buffer.drop("collectives")
            return result

        wrapper.__wrapped__ = original  # type: ignore[attr-defined]
        wrapper.__name__ = getattr(original, "__name__", "collective")
        wrapper.__doc__ = original.__doc__
        return wrapper

    def _call_completed_later(
        self, original: Callable[..., Any], args: Any, kwargs: Any, row: _Row, cuda: bool
    ) -> Any:
        """A collective whose end is not the call's return: an async op (its work's future)
        or a blocking one on CUDA (events the writer thread reads once they complete)."""
        start_ev = None
        if cuda:
            # torch.cuda.Event's constructor is unannotated
            start_ev = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            start_ev.record()
        try:
            result = original(*args, **kwargs)
        except BaseException:
            self._inflight.remove(row)
            raise
        if start_ev is not None:
            end_ev = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            end_ev.record()
            self._pending_cuda.append((row, start_ev, end_ev, row[7]))
            self._inflight.remove(row)
        elif result is not None and hasattr(result, "get_future"):
            self._complete_on_future(row, result)
        else:  # no work to wait for (a rank outside the group): done when the call returned
            end = self.clock()
            self._inflight.remove(row)
            self.blocked_s += end - row[7]
            self.buffer.put("collectives", row + (end,))
        return result

    def _complete_on_future(self, row: _Row, work: Any) -> None:
        try:
            fut = work.get_future()
        except Exception:  # noqa: BLE001 (no futures on this backend: completion unknown)
            self._inflight.remove(row)
            self.buffer.put("collectives", row + (None,))
            return

        def done(_: Any) -> None:
            self._inflight.remove(row)
            self.buffer.put("collectives", row + (self.clock(),))

        fut.add_done_callback(done)

    # -- writer thread -------------------------------------------------------------------------
    def resolve_cuda(self) -> None:
        """Complete CUDA-timed rows whose events have finished; never waits on the device."""
        still = []
        for row, start_ev, end_ev, enter in self._pending_cuda:
            if end_ev.query():
                self.buffer.put("collectives", row + (enter + start_ev.elapsed_time(end_ev) / 1000.0,))
            else:
                still.append((row, start_ev, end_ev, enter))
        self._pending_cuda = still

    def oldest_inflight(self) -> tuple[str, str, int, float] | None:
        """(op, group, seq, since) of the longest-waiting unfinished collective, for heartbeats."""
        rows = list(self._inflight)
        if not rows or self._inflight_forgotten:
            return None
        seq, op, group, _, _, _, _, since = min(rows, key=lambda r: r[7])
        return op, group, seq, since

    def forget_inflight(self) -> None:
        """From now on no collective is reported in flight (a rank that exits is not blocked)."""
        self._inflight_forgotten = True
