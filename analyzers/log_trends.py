"""Failures no single log line shows, read from a sequence of lines: a training loss that jumps
in the metric lines a trainer prints, and GPU peer-to-peer links that a P2P test measures broken.

The taxonomy's `numerical_instability` covers a loss that "spiked", and in a pasted log a spike
is often all there is: Megatron's `lm loss: 2.77E+00` rising to `7.34E+00` between two report
intervals, with no line saying anything went wrong. No single line shows it, so it is read from
the sequence of values, like the store-side rule (`numerical.loss_spike_findings`): a value far
above the median of the values before it, by a robust (median/MAD) score, so that ordinary noise
does not count. It is weak evidence by design (`SPIKE_STRENGTH`, read as a symptom): any other
failure line outranks it, since a loss also jumps when a rank's data or hardware goes wrong.
"""

from __future__ import annotations

import re
import statistics
from collections import deque
from dataclasses import dataclass, field

#: A training loss value in the forms trainers print: Megatron's `lm loss: 2.7E+00`, the HF
#: Trainer's `{'loss': 2.31, ...}`, Lightning's `loss=2.31` / `train_loss_step=2.31`, NeMo's
#: `reduced_train_loss=2.31`, nanoGPT's `loss 2.3101`, fairseq's `"loss": "2.31"`. `kl_loss`,
#: `val_loss`, `loss_scale` are other numbers.
_LOSS_RE = re.compile(
    r"(?<![\w./-])(?:lm[ _]loss|(?:reduced_)?train(?:ing)?[_/ ]loss(?:_step)?|loss(?:_step)?)['\"]?"
    r"(?:\s*[:=]\s*|\s+)['\"]?(?P<value>-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)(?![\w.])",
    re.IGNORECASE,
)
#: Lines about held-out data (their loss is another series, and naturally higher) and the HF
#: Trainer's end-of-run summary (`'train_loss': ...` is the mean over the whole run).
_NOT_TRAINING_RE = re.compile(
    r"\b(?:val|valid|validation|eval|evaluation|test|dev)\b|\b(?:val|eval)_|train_runtime|train_samples_per"
    r"|^\s*train_loss\s+=",
    re.IGNORECASE,
)
#: Where the run is (`iteration 29050`, `step: 120`, `'epoch': 1.85`): a value that goes back
#: means a restart, whose fresh loss is no spike.
_PROGRESS_RE = re.compile(
    r"\b(?:iteration|iter|global_step|step|epoch)['\"]?\s*[:=]?\s*(\d+(?:\.\d+)?)", re.I
)
#: Values of the series a new value is judged against.
WINDOW = 20
#: Fewest earlier values that make a baseline (a report interval of 10 steps: 30 steps of history).
MIN_HISTORY = 3
#: A spike is at least this many times the median before it ...
MIN_RATIO = 2.0
#: ... and this many robust standard deviations above it (as `AnalyzerConfig.loss_spike_z`),
MIN_Z = 8.0
#: ... the deviation taken as no less than this share of the median, nor this absolute amount
#: (a loss of 0.001 printed to 4 digits has no MAD to speak of).
MIN_SCALE_SHARE = 0.01
MIN_SCALE = 0.01
MAD_TO_SIGMA = 1.4826
#: A spike only decides a log where no other line says anything: it is read as a symptom
#: (anything with a cause, or a timeout every rank prints, outranks it), at this strength.
SPIKE_STRENGTH = 0.55


@dataclass
class _Series:
    values: deque[float] = field(default_factory=lambda: deque(maxlen=WINDOW))
    progress: float = -1.0
    #: a loss that went below zero (an RL objective, an ELBO) has no ratio to spike by
    signed: bool = False


@dataclass(frozen=True)
class LossReading:
    value: float
    #: what makes it a spike, else None
    spike: str | None


class LossTrend:
    """Training-loss values per printing rank (a launcher's `[rank3]:` prefix, or none), in order.

    `read` returns the line's training loss and whether it is a spike, or None when the line has
    none. Memory is bounded: `WINDOW` values per rank, and `max_series` ranks.
    """

    def __init__(self, max_series: int) -> None:
        self._series: dict[int | None, _Series] = {}
        self._max_series = max_series

    def read(self, text: str, rank: int | None) -> LossReading | None:
        """The line's training loss, or the first spike among its values: a progress bar written
        to a file is one line of updates joined by carriage returns, each with its own loss."""
        found: LossReading | None = None
        for segment in text.split("\r") if "\r" in text else (text,):
            reading = self._read_one(segment, rank)
            if reading is not None and not (found is not None and found.spike):
                found = reading
        return found

    def _read_one(self, text: str, rank: int | None) -> LossReading | None:
        m = _LOSS_RE.search(text)
        if m is None or _NOT_TRAINING_RE.search(text):
            return None
        value = float(m.group("value"))
        series = self._series.get(rank)
        if series is None:
            if len(self._series) >= self._max_series:
                return LossReading(value, None)
            series = self._series[rank] = _Series()
        if (p := _PROGRESS_RE.search(text)) is not None:
            progress = float(p.group(1))
            if progress < series.progress:
                series.values.clear()  # a restart: the loss starts over
            series.progress = progress
        series.signed = series.signed or value < 0
        spike = None if series.signed else _spike(value, series.values)
        series.values.append(value)
        return LossReading(value, spike)


def _spike(value: float, before: deque[float]) -> str | None:
    if len(before) < MIN_HISTORY:
        return None
    median = statistics.median(before)
    if median <= 0:
        return None
    mad = statistics.median(abs(v - median) for v in before)
    scale = max(MAD_TO_SIGMA * mad, MIN_SCALE_SHARE * median, MIN_SCALE)
    if value < MIN_RATIO * median or (value - median) / scale < MIN_Z:
        return None
    return (
        f"the training loss spiked to {value:.4g}, {value / median:.1f}x the median {median:.4g} "
        f"of the {len(before)} value(s) before it"
    )


#: The matrices CUDA's p2pBandwidthLatencyTest prints, which users run when NCCL hangs or crawls
#: inside one node: `Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)`,
#: `P2P=Enabled Latency (P2P Writes) Matrix (us)`, and their P2P=Disabled baselines.
_P2P_HEADER_RE = re.compile(
    r"(?P<kind>Unidirectional|Bidirectional)?\s*P2P=(?P<p2p>Enabled|Disabled) (?P<what>Latency|Bandwidth)"
    r"[^\n]*?Matrix \((?:us|GB/s)\)",
    re.IGNORECASE,
)
_MATRIX_ROW_RE = re.compile(r"^\s*(\d+)((?:\s+\d+(?:\.\d+)?)+)\s*$")
#: srun --label's `0: ` or pdsh's `node2: ` in front of every line of a task's output
_TASK_LABEL_RE = re.compile(r"^\s*[\w.-]+:\s")
#: A GPU-to-GPU write slower than this (microseconds) never crossed a working peer link: P2P
#: latency is 1-30 us over NVLink or PCIe.
P2P_MAX_LATENCY_US = 1000.0
#: Peer-to-peer bandwidth below this share of the copy through the host it should beat.
P2P_MIN_BANDWIDTH_SHARE = 0.5


class P2PMatrices:
    """The p2pBandwidthLatencyTest matrices in a log, row by row.

    `read` names a broken peer link when a line is a row of a P2P=Enabled
    matrix with an off-diagonal cell that shows one: a latency past `P2P_MAX_LATENCY_US`, or a
    bandwidth below `P2P_MIN_BANDWIDTH_SHARE` of the same cell with P2P disabled (the IOMMU or
    ACS routing peer traffic through the root complex, a riser, a BIOS setting).
    """

    def __init__(self) -> None:
        self._current: tuple[str, str, str] | None = None  # (kind, what, Enabled/Disabled)
        self._cells: dict[tuple[str, str, str], dict[tuple[int, int], float]] = {}

    def read(self, text: str) -> tuple[int, str] | None:
        """(the GPU whose row shows a broken link, what it shows), or None."""
        if "P2P=" in text and (h := _P2P_HEADER_RE.search(text)):
            self._current = ((h.group("kind") or "").lower(), h.group("what").lower(), h.group("p2p").lower())
            self._cells.setdefault(self._current, {})
            return None
        if self._current is None:
            return None
        text = _TASK_LABEL_RE.sub("", text, count=1)
        row = _MATRIX_ROW_RE.match(text)
        if row is None:
            if self._cells[self._current] and not text.strip().startswith(("D\\D", "GPU")):
                self._current = None  # the matrix ended
            return None
        i = int(row.group(1))
        cells = self._cells[self._current]
        values = [float(v) for v in row.group(2).split()]
        for j, v in enumerate(values):
            cells[(i, j)] = v
        kind, what, p2p = self._current
        if p2p != "enabled":
            return None
        if what == "latency":
            slow = [(j, v) for j, v in enumerate(values) if j != i and v > P2P_MAX_LATENCY_US]
            if slow:
                j, v = max(slow, key=lambda c: c[1])
                return i, (
                    f"GPU {i} reaches {len(slow)} peer(s) only in up to {v:.0f} us (GPU {j}); a working "
                    f"peer link takes microseconds"
                )
            return None
        baseline = self._cells.get((kind, what, "disabled"), {})
        low = [
            (j, v, baseline[(i, j)])
            for j, v in enumerate(values)
            if j != i and (i, j) in baseline and v < P2P_MIN_BANDWIDTH_SHARE * baseline[(i, j)]
        ]
        if low:
            j, v, b = min(low, key=lambda c: c[1] / c[2])
            return i, (
                f"GPU {i}'s peer-to-peer bandwidth to GPU {j} is {v:g} GB/s, below the {b:g} GB/s it gets "
                f"with P2P disabled"
            )
        return None
