"""Failures no single log line shows, read from a sequence of lines: a training loss that jumps
in the metric lines a trainer prints, steps that spend most of their time waiting for data, ranks
whose timed-out collectives at one sequence number differ (a desync), and GPU peer-to-peer links
that a P2P test measures broken.

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


#: A metric logger's step time and the part of it spent waiting for the next batch: the
#: `time: 40.19  data: 38.06` of the MetricLogger that DeiT, MAE, BLIP and their descendants
#: print, mmengine's and detectron2's `time: 0.45  data_time: 0.02` (mmcv 1.x with commas),
#: YOLOX's `iter_time: 0.404s, data_time: 0.325s` and PyTorch's ImageNet example's
#: `Time 0.330 (21.103)  Data 0.212 (20.811)`. Each counts the wait in the step time, so the
#: share is their ratio.
_DATA_WAIT_RE = re.compile(
    r"(?<![\w.])(?:iter_)?time:?\s*(?P<step>\d+(?:\.\d+)?)s?(?:\s*\([^)]*\))?,?\s+"
    r"data(?:_time)?:?\s*(?P<data>\d+(?:\.\d+)?)s?(?![\w.])",
    re.IGNORECASE,
)
#: The iteration a metric line reports (`[  200/10175]`, `iter: 19`, `Iter [50/1000]`): the
#: first one pays the workers' start-up, so its wait says nothing about the pipeline.
_ITERATION_RE = re.compile(r"\[\s*(\d+)\s*/\s*\d+\]|\biter:\s*(\d+)")
#: Lines of an evaluation loop, whose cheap steps wait on data by nature.
_EVALUATION_RE = re.compile(
    r"\b(?:Test|Eval\w*|Valid\w*|Epoch\((?:val|test)\))\b|\b(?:val|test)_", re.IGNORECASE
)
#: How many lines above its times a metric line's iteration may be (the line wrapped).
_WRAPPED_LINES = 3
#: The taxonomy's "step time dominated by data wait": more than half of a step spent waiting ...
DATA_WAIT_MIN_SHARE = 0.5
#: ... in a step long enough for the wait to matter (a 5 ms step's 3 ms wait is noise).
DATA_WAIT_MIN_STEP_S = 0.1
#: Weaker than a loss spike: a slow pipeline is as often the symptom of something else (a host
#: short of memory, a filesystem) as a failure of its own; any other line outranks it.
DATA_WAIT_STRENGTH = 0.5


class DataWait:
    """The share of each training step a metric logger reports spent waiting for data.

    `read` says "dominated" (with what it shows) when a line past the first iteration shows a
    step dominated by the wait (the input pipeline cannot keep up: too few or too slow
    workers, a slow filesystem), "recovered" when a later line shows it no longer is (a
    logger's first report after start-up still averages in the workers' start), None
    otherwise.
    """

    def __init__(self) -> None:
        self._seen = False
        self._lines = 0
        self._dominated = False
        # the newest iteration a line named, and on which line: a metric line wrapped in a
        # pasted log keeps its iteration a line or two above its times
        self._iteration: tuple[int, int] | None = None

    def read(self, text: str) -> tuple[str, str] | None:
        self._lines += 1
        if (("/" in text and "[" in text) or "iter:" in text) and (it := _ITERATION_RE.search(text)):
            self._iteration = (int(it.group(1) or it.group(2)), self._lines)
        m = _DATA_WAIT_RE.search(text) if ("time" in text or "Time" in text) else None
        if m is None or _EVALUATION_RE.search(text):
            return None
        first, self._seen = not self._seen, True
        iteration = None
        if self._iteration is not None and self._lines - self._iteration[1] <= _WRAPPED_LINES:
            iteration = self._iteration[0]
        if iteration == 0 or (iteration is None and first):
            return None
        step, data = float(m.group("step")), float(m.group("data"))
        if data > step:
            return None  # not the two numbers this reads: the wait is part of the step
        if step < DATA_WAIT_MIN_STEP_S or data < DATA_WAIT_MIN_SHARE * step:
            if self._dominated:
                self._dominated = False
                return "recovered", f"{data:g} s of a {step:g} s step"
            return None
        if self._dominated:
            return None
        self._dominated = True
        at = "" if iteration is None else f" at iteration {iteration}"
        return "dominated", (
            f"the input pipeline holds training back: {data:g} s of a {step:g} s step{at} "
            f"({data / step:.0%}) waiting for data"
        )


#: NCCL's watchdog on a collective it timed out: the rank in its group, the collective's
#: sequence number in that group, its kind and its size.
_TIMED_OUT_WORK_RE = re.compile(
    r"\[Rank (?P<rank>\d+)\] Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(?P<seq>\d+), "
    r"OpType=(?P<op>\w+)(?:, NumelIn=(?P<numel>\d+))?"
)
#: The process group a watchdog line is about: `[PG 0 Rank 1]` (older) or `[PG ID 0 PG GUID
#: 0(default_pg) Rank 3]`, on the timeout's own line or on the one after it that names the same
#: work (`... at work: 3437`, `... at work sequence id: 7219`).
_GROUP_RE = re.compile(r"\[PG (?:ID )?(?P<pg>\d+)(?: PG GUID [^\]]*?)? Rank (?P<rank>\d+)\]")
_AT_WORK_RE = re.compile(r"at work(?: sequence id)?: (?P<seq>\d+)")
#: Collectives whose every rank passes the same kind and size: the ones where two ranks that
#: disagree at one sequence number called different things (all-to-all, scatter, gather and
#: point-to-point sizes differ by rank of their own accord).
_SAME_ON_EVERY_RANK = frozenset(
    {
        "ALLREDUCE",
        "BROADCAST",
        "_BROADCAST_OOP",
        "ALLGATHER",
        "_ALLGATHER_BASE",
        "REDUCE_SCATTER",
        "_REDUCE_SCATTER_BASE",
        "REDUCE",
        "_REDUCE_OOP",
        "BARRIER",
    }
)
#: PyTorch's `[rank3]:[E918 19:29:24...` in front of its C++ log lines, wherever on the line.
_C10D_RANK_RE = re.compile(r"\[rank(\d+)\]:\[[EWIF]\d")
#: Timed-out works remembered (a log of many timeouts keeps the newest).
MAX_TIMED_OUT_WORKS = 64


@dataclass
class _Work:
    rank: int
    seq: int
    op: str
    numel: int | None
    group: str | None = None


class TimedOutWorks:
    """The collectives NCCL's watchdog timed out, by process group and sequence number.

    Every rank numbers its group's collectives in the order it calls them, so two ranks that
    time out at one number of one group in different collectives (another kind, or another
    size of a collective every rank sizes alike) called different things there: the training
    code took a different path on each, and the hang is that desync, not the network. `read`
    says so at the line that shows it; None otherwise. Only where both lines' group is known
    (the watchdog names it on the timeout's line or the next): another group (a tensor- or
    pipeline-parallel one) numbers its own work, so equal numbers there mean nothing.
    """

    def __init__(self) -> None:
        self._works: list[_Work] = []
        self._told = False

    def read(self, text: str, global_rank: int | None) -> str | None:
        if self._told or ("Watchdog caught" not in text and "PG " not in text):
            return None
        if global_rank is None and (g := _C10D_RANK_RE.search(text)):
            global_rank = int(g.group(1))  # behind a progress bar's carriage-return update
        group = _GROUP_RE.search(text)
        m = _TIMED_OUT_WORK_RE.search(text)
        if m is not None:
            if m.group("op") not in _SAME_ON_EVERY_RANK:
                return None
            numel = m.group("numel")
            work = _Work(
                int(m.group("rank")),
                int(m.group("seq")),
                m.group("op"),
                None if numel is None else int(numel),
            )
            if group is not None and int(group.group("rank")) == work.rank:
                work.group = group.group("pg")
            if len(self._works) >= MAX_TIMED_OUT_WORKS:
                self._works.pop(0)
            self._works.append(work)
            return self._mismatch(work)
        if group is not None and (at := _AT_WORK_RE.search(text)):
            # the line after a timeout, naming its group: the newest work of that rank and number
            for work in reversed(self._works):
                if (
                    work.group is None
                    and work.rank == int(group.group("rank"))
                    and work.seq == int(at.group("seq"))
                ):
                    work.group = group.group("pg")
                    return self._mismatch(work)
        return None

    def _mismatch(self, work: _Work) -> str | None:
        if work.group is None:
            return None
        for other in self._works:
            if (
                other is work
                or other.group != work.group
                or other.seq != work.seq
                or other.rank == work.rank
                or (other.op == work.op and (work.numel is None or other.numel in (None, work.numel)))
            ):
                continue
            self._told = True
            return (
                f"the ranks called different collectives at sequence number {work.seq} of process group "
                f"{work.group}: rank {other.rank} a {_work(other.op, other.numel)}, rank {work.rank} a "
                f"{_work(work.op, work.numel)} (a desync in the training code: the others wait for a call that "
                "never comes)"
            )
        return None


def _work(op: str, numel: int | None) -> str:
    return op if numel is None else f"{op} of {numel} element(s)"


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
