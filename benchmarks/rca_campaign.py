"""The trials of `triage bench rca`: which faults, where and when, and what Triage should say.

Ground truth comes from the injection itself: the fault's kind gives the category (the table
below, the same one `tests/test_scenario_matrix.py` holds the analyzers to), its `rank=` the
culprit, and the store's `ranks` table where that rank ran (node and GPU, as the rendezvous
placed it). Placements are drawn from a seeded generator per kind and repeat, so `--kinds`
or `--quick` keep each kind's draws and a miss is reproduced by its seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from triage.taxonomy import Category

_C = Category


@dataclass(frozen=True)
class Layout:
    nnodes: int
    nproc: int

    @property
    def world(self) -> int:
        return self.nnodes * self.nproc

    def __str__(self) -> str:
        return f"{self.nnodes}x{self.nproc}"


LAYOUTS = (Layout(2, 2), Layout(1, 4))


@dataclass(frozen=True)
class FaultKind:
    """`specs`: `--inject` templates, one drawn per placement (`{r}` the rank, `{s}` the step);
    `fails`: the fault ends the attempt, by itself or by the supervisor's stop (silent data
    corruption), else the job runs on and the analysis must find it;
    `culprit`: the injected rank is the culprit to score; `gpu`: its GPU too."""

    name: str
    category: Category
    specs: tuple[str, ...]
    fails: bool = True
    culprit: bool = True
    gpu: bool = False


KINDS: dict[str, FaultKind] = {
    k.name: k
    for k in [
        FaultKind("exception", _C.USER_CODE_ERROR, ("exception@step={s},rank={r}",)),
        FaultKind("oom", _C.GPU_OOM, ("oom@step={s},rank={r}",), gpu=True),
        FaultKind("nan", _C.NUMERICAL_INSTABILITY, ("nan@step={s},rank={r}",)),
        FaultKind("hang", _C.COLLECTIVE_TIMEOUT, ("hang@step={s},rank={r}",)),
        # a SIGKILL with nothing else to say why: the rank is named, the category cannot be
        # (analyzers/lifecycle.py); a kernel OOM-kill line would make it host_oom
        FaultKind("kill", _C.UNKNOWN, ("kill@step={s},rank={r}",)),
        FaultKind("sigterm", _C.PREEMPTION, ("sigterm@step={s}",), culprit=False),
        FaultKind("data_error", _C.DATA_PIPELINE_ERROR, ("data_error@step={s},rank={r}",)),
        FaultKind("disk_full", _C.STORAGE_ERROR, ("disk_full@step={s},rank={r}",)),
        FaultKind("network", _C.NETWORK_ERROR, ("network@step={s},rank={r}",)),
        FaultKind(
            "gpu_lost",
            _C.GPU_FALLEN_OFF_BUS,
            tuple(f"xid@step={{s}},rank={{r}},xid={x}" for x in (79, 119, 120)),
            gpu=True,
        ),
        FaultKind(
            "ecc",
            _C.GPU_MEMORY_ERROR,
            ("ecc@step={s},rank={r}", *(f"xid@step={{s}},rank={{r}},xid={x}" for x in (48, 64, 94, 95))),
            gpu=True,
        ),
        FaultKind(
            "illegal_address",
            _C.CUDA_ERROR,
            tuple(f"xid@step={{s}},rank={{r}},xid={x}" for x in (13, 31, 43)),
            gpu=True,
        ),
        FaultKind(
            "nvlink", _C.NVLINK_ERROR, ("nvlink@step={s},rank={r}", "xid@step={s},rank={r},xid=74"), gpu=True
        ),
        FaultKind("slow", _C.STRAGGLER, ("slow@step={s},rank={r},factor=4",), fails=False),
        FaultKind(
            "thermal", _C.GPU_THROTTLING, ("thermal@step={s},rank={r},factor=3",), fails=False, gpu=True
        ),
        FaultKind("pcie", _C.PCIE_ERROR, ("pcie@step={s},rank={r}",), fails=False, gpu=True),
        FaultKind("sdc", _C.SILENT_DATA_CORRUPTION, ("sdc@step={s},rank={r}",)),
    ]
}


@dataclass(frozen=True)
class Expect:
    """One cause Triage should name in attempt `attempt` of its job: the verdict the attempt
    ended on (`ends_attempt`), else a finding of the job's final analysis."""

    attempt: int
    category: Category
    rank: int | None  # the culprit rank; None: no culprit to score
    gpu: bool
    ends_attempt: bool


@dataclass(frozen=True)
class Job:
    """One `triage run` of the reference trainer. `job_id` repeats within a trial where a
    later run of the same job is the point (a run must not read another run's evidence)."""

    job_id: str
    layout: Layout
    steps: int
    inject: tuple[str, ...]
    expects: tuple[Expect, ...]
    max_restarts: int = 0  # the decision is judged, not the recovery (`triage bench recovery`)


@dataclass(frozen=True)
class Trial:
    """Jobs run one after another on one data dir (a fresh one per trial)."""

    name: str
    kind: str
    jobs: tuple[Job, ...]


#: Kinds that are no single fault; `--kinds` selects them by these names too.
COMPOSITES = ("ckpt_corrupt", "pair_hw_sw", "pair_straggler_hang", "startup", "sequence")
#: CI's campaign: the kinds no other CI test judges end to end under `triage run` (a SIGKILLed
#: rank and a NaN are judged in tests/test_supervisor_actions.py).
QUICK_KINDS = ("exception", "hang", "gpu_lost", "ecc", "pair_straggler_hang")
#: Fault steps of failing faults: after the first checkpoint (step 2) and the first steps'
#: start-up skew, before the end; start-up faults strike the first step.
FAIL_STEPS = (2, 3, 4, 5)
#: Steps of a job that runs on: the analyzers judge no rank a straggler before it has
#: completed 10 steps (AnalyzerConfig.straggler_min_steps).
FINDING_STEPS = 12
#: A pair's second fault waits for those 10 steps, so the first one can be found.
PAIR_SECOND_STEP = 12
PAIR_STEPS = 14
STARTUP_KINDS = ("exception", "kill", "hang", "gpu_lost", "oom")


def _expect(kind: FaultKind, rank: int, attempt: int = 0) -> Expect:
    return Expect(attempt, kind.category, rank if kind.culprit else None, kind.gpu, kind.fails)


def _spec(kind: FaultKind, rng: random.Random, rank: int, step: int) -> str:
    return rng.choice(kind.specs).format(r=rank, s=step)


def _single(kind: FaultKind, rng: random.Random, layout: Layout, rank: int, name: str) -> Job:
    if kind.name == "sdc":  # the canary that catches it runs at the first step and every 10 after
        step, steps = rng.choice((1, 2)), FINDING_STEPS
    elif kind.fails:
        step = rng.choice(FAIL_STEPS)
        steps = step + 3
    else:  # a finding the job runs on
        step = rng.choice((2, 3))
        steps = FINDING_STEPS
    return Job(name, layout, steps, (_spec(kind, rng, rank, step),), (_expect(kind, rank),))


def _two_ranks(rng: random.Random, layout: Layout) -> tuple[int, int]:
    a, b = rng.sample(range(layout.world), 2)
    return a, b


def _ckpt_corrupt(rng: random.Random, layout: Layout, rank: int, name: str) -> Job:
    """A load fault: the step-2 checkpoint gets a shard truncated, another rank is SIGKILLed
    at step 4 (before the step-4 save), which forces a resume from it, which fails; the next
    attempt sets it aside and starts over. (Not a data-loader crash: its workers prefetch, so
    it can fire before the step-2 save, and the resume then finds no checkpoint at all.)"""
    other = rng.choice([r for r in range(layout.world) if r != rank])
    kill = KINDS["kill"]
    return Job(
        name,
        layout,
        6,
        (f"ckpt_corrupt@step=2,rank={rank}", f"kill@step=4,rank={other}"),
        (_expect(kill, other), Expect(1, _C.CHECKPOINT_ERROR, None, False, True)),
        max_restarts=2,
    )


def _pair_hw_sw(rng: random.Random, layout: Layout, name: str) -> Job:
    """A hardware fault that lets the job run (a hot GPU, a degrading PCIe link) on one rank,
    then a bug on another: the bug ends the attempt and must fail fast, the hardware fault
    must still be reported, on its own rank."""
    hw_rank, sw_rank = _two_ranks(rng, layout)
    hw = KINDS[rng.choice(("thermal", "pcie"))]
    sw = KINDS["exception"]
    return Job(
        name,
        layout,
        PAIR_STEPS,
        (_spec(hw, rng, hw_rank, 2), _spec(sw, rng, sw_rank, PAIR_SECOND_STEP)),
        (_expect(sw, sw_rank), _expect(hw, hw_rank)),
    )


def _pair_straggler_hang(rng: random.Random, layout: Layout, name: str) -> Job:
    """A slow rank, then a hang on another: the hung rank is the culprit, not the slow one."""
    slow_rank, hang_rank = _two_ranks(rng, layout)
    slow, hang = KINDS["slow"], KINDS["hang"]
    return Job(
        name,
        layout,
        PAIR_STEPS,
        (_spec(slow, rng, slow_rank, 2), _spec(hang, rng, hang_rank, PAIR_SECOND_STEP)),
        (_expect(hang, hang_rank), _expect(slow, slow_rank)),
    )


def _startup(rng: random.Random, layout: Layout, rank: int, name: str) -> Job:
    kind = KINDS[rng.choice(STARTUP_KINDS)]
    return Job(name, layout, 4, (_spec(kind, rng, rank, 1),), (_expect(kind, rank),))


def _sequence(rng: random.Random, name: str) -> tuple[Job, ...]:
    """Three runs on one data dir: a lost GPU quarantines its node, so the next job starts on
    the other node alone (2 ranks) and fails on a bug; a new run of that same job then runs
    out of memory. Each run is judged on its own evidence only."""
    layout, rest = LAYOUTS[0], Layout(1, 2)
    lost, bug, oom = KINDS["gpu_lost"], KINDS["exception"], KINDS["oom"]
    r0 = rng.randrange(layout.world)
    r1, r2 = rng.randrange(rest.world), rng.randrange(rest.world)
    later = f"{name}-b"
    return (
        Job(f"{name}-a", layout, 6, (_spec(lost, rng, r0, 3),), (_expect(lost, r0),)),
        # launched as 2x2: the quarantine leaves one node, the ranks are renumbered 0..1
        Job(later, layout, 6, (_spec(bug, rng, r1, 3),), (_expect(bug, r1),)),
        Job(later, layout, 6, (_spec(oom, rng, r2, 2),), (_expect(oom, r2),)),
    )


def plan(seed: int, kinds: tuple[str, ...], repeats: int) -> list[Trial]:
    """Every trial of the campaign, in a fixed order; layouts alternate per repeat from a
    seeded start, culprit ranks are drawn without replacement while a kind has ranks left."""
    trials = []
    for kind in kinds:
        ranks: list[int] = []
        for i in range(repeats):
            rng = random.Random(f"{seed}:{kind}:{i}")
            layout = LAYOUTS[(random.Random(f"{seed}:{kind}").randrange(2) + i) % 2]
            if not ranks:
                ranks = random.Random(f"{seed}:{kind}:ranks:{i}").sample(range(4), 4)
            rank = ranks.pop()
            name = f"{kind}-{i}"
            if kind in KINDS:
                jobs: tuple[Job, ...] = (_single(KINDS[kind], rng, layout, rank, name),)
            elif kind == "ckpt_corrupt":
                jobs = (_ckpt_corrupt(rng, layout, rank, name),)
            elif kind == "pair_hw_sw":
                jobs = (_pair_hw_sw(rng, layout, name),)
            elif kind == "pair_straggler_hang":
                jobs = (_pair_straggler_hang(rng, layout, name),)
            elif kind == "startup":
                jobs = (_startup(rng, layout, rank, name),)
            elif kind == "sequence":
                jobs = _sequence(rng, name)
            else:
                raise ValueError(f"unknown kind {kind!r}")
            trials.append(Trial(name, kind, jobs))
    return trials


ALL_KINDS = (*KINDS, *COMPOSITES)
