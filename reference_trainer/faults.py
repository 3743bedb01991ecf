"""Acting out `--inject` faults inside a rank, each as close to the real failure as a CPU allows.

The training loop calls the injector at its phase boundaries (`transform_batch`,
`before_compute`, `after_compute`, `disk_full_at`, `after_checkpoint`); each fault fires once,
at the first boundary of its step, on its rank, in its attempt.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from triage.config import node_name
from triage.fault_schedule import DISK_FULL, NIC_DOWN, GpuFault, append_fault
from triage.reference_trainer.checkpoint import truncate_shard
from triage.reference_trainer.inject_spec import XID_ECC, XID_HANG, XID_ILLEGAL_ADDRESS, XID_LINK, InjectSpec
from triage.reference_trainer.injection_log import record_injection
from triage.reference_trainer.model import GPT

#: How long a disk_full fault keeps the node's simulated disk full: long enough for the agent
#: (1 s samples) to see it, short enough that the next attempt finds the space freed.
DISK_FULL_S = 15.0
#: Likewise for the network fault's port: the simulated NIC reports its link down this long.
NIC_DOWN_S = 15.0

_CUDA_ERROR_TAIL = (
    "\nCUDA kernel errors might be asynchronously reported at some other API "
    "call, so the stacktrace below might be incorrect.\nFor debugging consider "
    "passing CUDA_LAUNCH_BLOCKING=1\nCompile with `TORCH_USE_CUDA_DSA` to enable "
    "device-side assertions.\n"
)
_DEFAULT_XID = {"ecc": 48, "nvlink": 74}


def oom_message(gpu: int) -> str:
    """The caching allocator's message, numbers of an 80 GB GPU that is nearly full."""
    return (
        f"CUDA out of memory. Tried to allocate 2.00 GiB. GPU {gpu} has a total capacity of "
        "79.11 GiB of which 1.23 GiB is free. Including non-PyTorch memory, this process has "
        "77.86 GiB memory in use. Of the allocated memory 75.20 GiB is allocated by PyTorch, "
        "and 1.10 GiB is reserved by PyTorch but unallocated. If reserved but unallocated "
        "memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to "
        "avoid fragmentation.  See documentation for Memory Management  "
        "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )


class PerturbMatmuls(TorchFunctionMode):
    """Silent data corruption: matmul-family results come out scaled by (1 + factor)."""

    TARGETS = frozenset(
        {
            torch.mm,
            torch.matmul,
            torch.addmm,
            torch.bmm,
            torch.nn.functional.linear,
            torch.Tensor.mm,
            torch.Tensor.matmul,
            torch.Tensor.bmm,
            torch.Tensor.addmm,
            torch.Tensor.__matmul__,
        }
    )

    def __init__(self, factor: float) -> None:
        super().__init__()
        self.factor = factor

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        out = func(*args, **(kwargs or {}))
        if func in self.TARGETS and isinstance(out, torch.Tensor) and out.is_floating_point():
            return out * (1.0 + self.factor)
        return out


def shutdown_tcp_sockets() -> int:
    """Break this process's TCP connections (gloo's pairs, the store) without closing the fds,
    so the owners see a dead transport rather than a recycled descriptor. Listening sockets are
    left alone: gloo aborts the process when its listener fails, which a cut link does not do.
    Returns the count."""
    count = 0
    for fd_name in os.listdir("/proc/self/fd"):
        fd = int(fd_name)
        try:
            if not os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                continue
            sock = socket.socket(fileno=fd)
        except OSError:
            continue
        try:
            listening = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
            if (
                sock.family in (socket.AF_INET, socket.AF_INET6)
                and sock.type == socket.SOCK_STREAM
                and not listening
            ):
                sock.shutdown(socket.SHUT_RDWR)
                count += 1
        except OSError:
            pass
        finally:
            sock.detach()
    return count


def busy_wait(seconds: float) -> None:
    """Spin for `seconds`. The host thread of a GPU-bound step spins in the stream synchronize
    (CUDA's default schedule), so a simulated slow GPU spins too: its rank looks busy, as on a
    GPU, not idle like a hung one (the supervisor's stall rule tells them apart by CPU time)."""
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        pass


def hang(seconds: float | None) -> None:
    """Stop taking part: a lost GPU or a stuck kernel never answers, not even a polite SIGTERM."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    deadline = None if seconds is None else time.monotonic() + seconds
    while deadline is None or time.monotonic() < deadline:
        time.sleep(0.5)


class FaultInjector:
    def __init__(
        self,
        specs: Iterable[InjectSpec],
        *,
        rank: int,
        local_rank: int,
        attempt: int,
        job_id: str,
        data_dir: str,
        model: GPT,
    ) -> None:
        self.specs = [s for s in specs if s.applies(rank, attempt)]
        self.rank, self.local_rank, self.attempt = rank, local_rank, attempt
        self.job_id, self.data_dir = job_id, data_dir
        self._fired: set[InjectSpec] = set()
        self._slowdowns: list[InjectSpec] = []
        self._nan = False
        model.ln_f.register_forward_hook(self._nan_hook)

    def _due(self, step: int, kinds: Iterable[str]) -> list[InjectSpec]:
        due = [s for s in self.specs if s.kind in kinds and s not in self._fired and step >= s.step]
        self._fired.update(due)
        return due

    def data_worker_kill_steps(self) -> frozenset[int]:
        return frozenset(s.step for s in self.specs if s.kind == "data_error")

    def transform_batch(self, step: int, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The exception fault: a batch transform that loses a key, as buggy user code does."""
        for spec in self._due(step, ("exception",)):
            self._log(spec)
            return {k: v for k, v in batch.items() if k != "labels"}
        return batch

    def before_compute(self, step: int) -> None:
        for spec in self._due(
            step,
            (
                "kill",
                "sigterm",
                "hang",
                "oom",
                "network",
                "nan",
                "slow",
                "sdc",
                "xid",
                "ecc",
                "thermal",
                "pcie",
                "nvlink",
            ),
        ):
            self._fire(spec)

    def _fire(self, spec: InjectSpec) -> None:
        print(f"[triage inject] rank {self.rank}: {spec.text}", file=sys.stderr, flush=True)
        self._log(spec)
        gpu = self.local_rank if spec.gpu is None else spec.gpu
        if spec.kind in ("xid", "ecc", "thermal", "pcie", "nvlink"):
            self._record_gpu_fault(spec, gpu)
        xid = spec.xid if spec.kind == "xid" else _DEFAULT_XID.get(spec.kind)
        if spec.kind == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif spec.kind == "sigterm":
            os.kill(os.getpid(), signal.SIGTERM)
        elif spec.kind == "hang" or xid in XID_HANG:
            hang(spec.seconds if spec.kind == "hang" else None)
        elif spec.kind == "oom":
            raise torch.OutOfMemoryError(oom_message(gpu))
        elif spec.kind == "ecc" or xid in XID_ECC:
            raise RuntimeError("CUDA error: uncorrectable ECC error encountered" + _CUDA_ERROR_TAIL)
        elif xid in XID_ILLEGAL_ADDRESS:
            raise RuntimeError("CUDA error: an illegal memory access was encountered" + _CUDA_ERROR_TAIL)
        elif spec.kind == "network":
            self._schedule(NIC_DOWN, gpu, None, {"seconds": NIC_DOWN_S})
            shutdown_tcp_sockets()
        elif spec.kind == "nvlink" or xid in XID_LINK:
            shutdown_tcp_sockets()
        elif spec.kind == "nan":
            self._nan = True
        elif spec.kind == "sdc":
            # never exited: the GPU stays bad (torch leaves TorchFunctionMode.__enter__ unannotated)
            PerturbMatmuls(spec.factor or 0.0).__enter__()  # type: ignore[no-untyped-call,unused-ignore]
        elif spec.kind in ("slow", "thermal", "pcie"):
            self._slowdowns.append(spec)

    def _log(self, spec: InjectSpec) -> None:
        record_injection(self.data_dir, self.job_id, self.attempt, self.rank, spec.text)

    def _record_gpu_fault(self, spec: InjectSpec, gpu: int) -> None:
        params = {"factor": spec.factor} if spec.factor is not None else {}
        xid = spec.xid if spec.kind == "xid" else _DEFAULT_XID.get(spec.kind)
        self._schedule(spec.kind, gpu, xid, params)

    def _schedule(self, kind: str, gpu: int | None, xid: int | None, params: dict[str, Any]) -> None:
        """Tell this node's simulated hardware (the fault schedule) that the fault happens now."""
        append_fault(
            self.data_dir,
            GpuFault(
                time=time.time(),
                node=node_name(),
                gpu=gpu,
                kind=kind,
                xid=xid,
                rank=self.rank,
                job_id=self.job_id,
                attempt=self.attempt,
                params=params,
            ),
        )

    def _nan_hook(self, module: nn.Module, inputs: Any, output: torch.Tensor) -> torch.Tensor | None:
        return output * float("nan") if self._nan else None

    def after_compute(self, compute_seconds: float) -> None:
        """Stretch this step's compute as a slow or throttled GPU would."""
        extra = sum(
            s.seconds if s.seconds is not None else ((s.factor or 1.0) - 1) * compute_seconds
            for s in self._slowdowns
        )
        if extra > 0:
            busy_wait(extra)

    def disk_full_at(self, step: int) -> bool:
        """Whether this step's checkpoint save runs out of space; the node's simulated disk is
        then full (the fault schedule), as the agent of a real node would see it."""
        due = self._due(step, ("disk_full",))
        for spec in due:
            self._log(spec)
            self._schedule(DISK_FULL, None, None, {"seconds": DISK_FULL_S})
        return bool(due)

    def after_checkpoint(self, step: int, path: Path) -> None:
        for spec in self._due(step, ("ckpt_corrupt",)):
            self._log(spec)
            shard = truncate_shard(path, self.rank)
            print(
                f"[triage inject] rank {self.rank}: {spec.text}: truncated {shard}",
                file=sys.stderr,
                flush=True,
            )
