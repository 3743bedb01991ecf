"""The `--inject KIND@key=value,...` language: which fault, on which rank, at which step.

Parsing is separate from acting the faults out (`faults.py`) so the launcher can reject a bad
spec with exit 2 before it starts a single rank.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from triage.config import ConfigError

#: kind -> what it does; the one source for `--help`, the README table and validation.
INJECT_KINDS: dict[str, str] = {
    "exception": "a bug in user code on that rank: a KeyError from the batch transform; the rank "
    "exits non-zero with the traceback on stderr",
    "oom": "torch.OutOfMemoryError with the CUDA caching allocator's message "
    "('CUDA out of memory. Tried to allocate ...')",
    "nan": "that rank's activations become NaN from that step; the NaN reaches every rank through "
    "the gradient and loss reductions and the NaN guard stops all ranks with "
    "'FloatingPointError: Loss is nan at step N'",
    "hang": "that rank stops entering collectives (sleeps, process alive; `seconds=S` ends the hang "
    "after S s); the others block until --collective-timeout and fail with gloo/NCCL's "
    "timeout error. It stands for a device that stopped answering (a stuck kernel), so its "
    "node is blamed as for one; a sleep in a job's own script is not",
    "slow": "that rank's compute takes `factor` (default 3) times longer from that step "
    "(`seconds=S`: S extra seconds per step instead); no crash",
    "kill": "SIGKILL of that rank's process",
    "sigterm": "preemption: every rank sends itself SIGTERM at that step (`rank` is ignored); the "
    "ranks agree at the end of the step, save a checkpoint and exit 143",
    "data_error": "that rank's DataLoader worker crashes (SIGSEGV, like a decoder on a corrupt "
    "sample) while fetching that step: 'DataLoader worker (pid N) is killed by signal: "
    "Segmentation fault.' as soon as the rank notices "
    "(workers prefetch, so possibly during an earlier step; needs --num-workers >= 1)",
    "disk_full": "the first checkpoint save at or after that step fails inside the DCP storage "
    "writer of that rank with OSError ENOSPC 'No space left on device' (torch's zip writer may "
    "report it as 'unexpected pos N vs M'), and the node's simulated disk reads full for 15 s",
    "ckpt_corrupt": "the first checkpoint completed at or after that step gets one of that rank's "
    "shard files truncated; the run goes on and the next resume fails with "
    "checkpoint_error and quarantines it",
    "network": "that rank's TCP sockets are shut down before its next collective: gloo connection "
    "errors on it and its peers, and the simulated NIC beside its GPU reads link down for 15 s",
    "sdc": "silent data corruption: that rank's matmul-family results (mm, matmul, addmm, bmm, "
    "linear) are perturbed by a small relative amount (`factor`, default 1e-3), no error",
    "xid": "GPU Xid `xid=N` (recorded in the GPU fault schedule for the simulated GPU), acted out: "
    "79/119/120 hang like `hang`; 48/64/94/95 raise 'CUDA error: uncorrectable ECC error "
    "encountered'; 13/31/43 raise 'CUDA error: an illegal memory access was encountered'; "
    "63 has no effect on the process; 74 breaks collectives like `network`",
    "ecc": "uncorrectable ECC error (recorded as Xid 48): RuntimeError 'CUDA error: uncorrectable "
    "ECC error encountered'",
    "thermal": "thermal slowdown (recorded for the simulated GPU): slower by `factor` (default 2), no crash",
    "pcie": "PCIe link degradation (recorded for the simulated GPU): mild slowdown, `factor` "
    "default 1.2, no crash",
    "nvlink": "NVLink failure (recorded as Xid 74): collectives fail like `network`",
}

XID_HANG = frozenset({79, 119, 120})
XID_ECC = frozenset({48, 64, 94, 95})
XID_ILLEGAL_ADDRESS = frozenset({13, 31, 43})
XID_HARMLESS = frozenset({63})
XID_LINK = frozenset({74})
SUPPORTED_XIDS = XID_HANG | XID_ECC | XID_ILLEGAL_ADDRESS | XID_HARMLESS | XID_LINK

_COMMON_KEYS = {"rank", "step", "attempt", "gpu"}
_EXTRA_KEYS: dict[str, set[str]] = {
    "hang": {"seconds"},
    "slow": {"factor", "seconds"},
    "sdc": {"factor"},
    "xid": {"xid"},
    "thermal": {"factor"},
    "pcie": {"factor"},
}
_DEFAULT_FACTOR = {"slow": 3.0, "sdc": 1e-3, "thermal": 2.0, "pcie": 1.2}


@dataclass(frozen=True)
class InjectSpec:
    kind: str
    step: int
    rank: int = 0
    attempt: int = 0
    gpu: int | None = None  # None: the rank's LOCAL_RANK
    factor: float | None = None
    seconds: float | None = None
    xid: int | None = None
    text: str = field(default="", compare=False)

    def applies(self, rank: int, attempt: int) -> bool:
        """Whether this rank acts the fault out in this attempt (sigterm hits every rank)."""
        return attempt == self.attempt and (self.kind == "sigterm" or rank == self.rank)


def parse_inject_spec(text: str) -> InjectSpec:
    """`KIND@step=N,rank=R,...` -> InjectSpec; raises ConfigError saying what to write instead."""
    kind, _, rest = text.strip().partition("@")
    if kind not in INJECT_KINDS:
        raise ConfigError(
            f"--inject {text!r}: unknown kind {kind!r}; choose one of {', '.join(INJECT_KINDS)}"
        )
    allowed = _COMMON_KEYS | _EXTRA_KEYS.get(kind, set())
    values: dict[str, float | int] = {}
    for item in filter(None, (s.strip() for s in rest.split(","))):
        key, eq, raw = item.partition("=")
        if not eq or key not in allowed:
            raise ConfigError(
                f"--inject {text!r}: bad item {item!r}; {kind} takes "
                f"{', '.join(sorted(allowed))} as key=value"
            )
        try:
            values[key] = float(raw) if key in ("factor", "seconds") else int(raw)
        except ValueError:
            raise ConfigError(f"--inject {text!r}: {key}={raw!r} is not a number") from None
    if "step" not in values:
        raise ConfigError(f"--inject {text!r}: say when, e.g. {kind}@step=5")
    if any(values.get(k, 0) < 0 for k in values):
        raise ConfigError(f"--inject {text!r}: values must not be negative")
    if kind == "xid" and values.get("xid") not in SUPPORTED_XIDS:
        raise ConfigError(
            f"--inject {text!r}: give xid=N with N one of {', '.join(map(str, sorted(SUPPORTED_XIDS)))}"
        )
    if kind in _DEFAULT_FACTOR:
        values.setdefault("factor", _DEFAULT_FACTOR[kind])
        if kind != "sdc" and values["factor"] < 1:
            raise ConfigError(f"--inject {text!r}: factor must be >= 1 (a slowdown)")
    return InjectSpec(kind=kind, text=text, **values)  # type: ignore[arg-type]


def inject_help() -> str:
    """The kinds table for `triage train --help`."""
    lines = [
        "--inject KIND@key=value,... (repeatable). Keys: step (required), rank (default 0), "
        "attempt (default 0: the fault fires only when TRIAGE_ATTEMPT equals it, so a "
        "restarted attempt runs clean), gpu (default the rank's LOCAL_RANK), and per kind "
        "factor, seconds, xid. Kinds:"
    ]
    lines += [f"  {kind:<13} {what}" for kind, what in INJECT_KINDS.items()]
    return "\n".join(lines)
