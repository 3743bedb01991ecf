"""Scores of a root-cause campaign, as pure functions of its judgements, so that every number
`triage bench rca` publishes can be checked by hand on a list of made-up outcomes.

One judgement is one thing Triage should have named: the cause an attempt ended on, or a finding
of a job that ran on (a straggler, a throttled GPU, silent data corruption). Categories are
scored as single-label classification: `none` is what Triage said where it named nothing, a
label no true cause carries (so it costs recall, never a class of its own in the macro mean).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from triage.taxonomy import Action

#: What Triage said where it named no category at all.
NONE = "none"
#: Actions that start the job again; a deterministic bug must get none of them.
RESTARTS = frozenset(
    {
        Action.RESTART.value,
        Action.RESTART_EXCLUDING_NODE.value,
        Action.ROLLBACK.value,
        Action.CHECKPOINT_AND_REQUEUE.value,
    }
)


@dataclass(frozen=True)
class Culprit:
    rank: int | None = None
    node: str | None = None
    gpu: int | None = None


@dataclass(frozen=True)
class Judgement:
    """Expected against got for one cause. `expected_culprit.rank` None: no culprit to score;
    `score_gpu`: the GPU is part of the culprit (a GPU-layer fault, an OOM, a CUDA error);
    `expected_action` None: no action to score; `detect_s` only for a cause that ended its
    attempt (the supervisor's detection), None for a finding of the final analysis."""

    trial: str
    kind: str
    spec: str
    attempt: int
    expected: str
    got: str
    expected_culprit: Culprit = field(default_factory=Culprit)
    got_culprit: Culprit = field(default_factory=Culprit)
    score_gpu: bool = False
    expected_action: str | None = None
    got_action: str | None = None
    detect_s: float | None = None
    summary: str = ""

    @property
    def category_ok(self) -> bool:
        return self.expected == self.got

    @property
    def rank_ok(self) -> bool | None:
        want = self.expected_culprit.rank
        return None if want is None else self.got_culprit.rank == want

    @property
    def node_ok(self) -> bool | None:
        want = self.expected_culprit
        return None if want.rank is None or want.node is None else self.got_culprit.node == want.node

    @property
    def gpu_ok(self) -> bool | None:
        want = self.expected_culprit
        if not self.score_gpu or want.rank is None or want.gpu is None:
            return None
        return self.got_culprit.gpu == want.gpu

    @property
    def action_ok(self) -> bool | None:
        return None if self.expected_action is None else self.got_action == self.expected_action

    @property
    def missed(self) -> bool:
        """Wrong anywhere it is scored: category, culprit or action."""
        checks = (self.rank_ok, self.node_ok, self.gpu_ok, self.action_ok)
        return not self.category_ok or any(c is False for c in checks)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ClassScore:
    precision: float | None  # None: never predicted
    recall: float
    f1: float
    support: int


@dataclass(frozen=True)
class Ratio:
    hits: int
    total: int

    @property
    def value(self) -> float | None:
        return None if self.total == 0 else self.hits / self.total

    def to_dict(self) -> dict[str, Any]:
        return {"hits": self.hits, "total": self.total, "value": _round(self.value)}


def _f1(p: float, r: float) -> float:
    return 0.0 if p + r == 0 else 2 * p * r / (p + r)


def per_category(pairs: Sequence[tuple[str, str]]) -> dict[str, ClassScore]:
    """(expected, got) pairs -> precision, recall, F1 and support of every expected category."""
    tp = Counter(e for e, g in pairs if e == g)
    predicted = Counter(g for _, g in pairs)
    support = Counter(e for e, _ in pairs)
    out = {}
    for cat in sorted(support):
        p = tp[cat] / predicted[cat] if predicted[cat] else None
        r = tp[cat] / support[cat]
        out[cat] = ClassScore(p, r, _f1(p or 0.0, r), support[cat])
    return out


def macro_f1(scores: dict[str, ClassScore]) -> float | None:
    """Unweighted mean over the expected categories: a rare cause counts as much as a common one."""
    return sum(s.f1 for s in scores.values()) / len(scores) if scores else None


def micro_f1(pairs: Sequence[tuple[str, str]]) -> float | None:
    """Pooled over every judgement; with one label each it equals plain accuracy."""
    return sum(e == g for e, g in pairs) / len(pairs) if pairs else None


def confusion(pairs: Iterable[tuple[str, str]]) -> dict[str, dict[str, int]]:
    """expected -> got -> count, only the cells that occurred."""
    out: dict[str, dict[str, int]] = {}
    for e, g in pairs:
        row = out.setdefault(e, {})
        row[g] = row.get(g, 0) + 1
    return out


def _ratio(flags: Iterable[bool | None]) -> Ratio:
    scored = [f for f in flags if f is not None]
    return Ratio(sum(scored), len(scored))


def culprit_accuracy(judgements: Sequence[Judgement]) -> dict[str, Ratio]:
    return {
        "rank": _ratio(j.rank_ok for j in judgements),
        "node": _ratio(j.node_ok for j in judgements),
        "gpu": _ratio(j.gpu_ok for j in judgements),
    }


def action_scores(judgements: Sequence[Judgement]) -> dict[str, Ratio]:
    """Accuracy, and the two costly errors: a recoverable fault failed fast (the job lost for
    nothing) and a deterministic bug restarted (GPUs burnt repeating it)."""
    scored = [j for j in judgements if j.expected_action is not None]
    recoverable = [j for j in scored if j.expected_action != Action.FAIL_FAST.value]
    deterministic = [j for j in scored if j.expected_action == Action.FAIL_FAST.value]
    return {
        "accuracy": _ratio(j.action_ok for j in scored),
        "false_fail_fast": _ratio(j.got_action == Action.FAIL_FAST.value for j in recoverable),
        "false_restart": _ratio(j.got_action in RESTARTS for j in deterministic),
    }


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default), q in [0, 100]."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def detection_latency(judgements: Sequence[Judgement]) -> dict[str, dict[str, Any]]:
    """kind -> count, p50 and p90 of the supervisor's detection time (fault to detection)."""
    by_kind: dict[str, list[float]] = {}
    for j in judgements:
        if j.detect_s is not None:
            by_kind.setdefault(j.kind, []).append(j.detect_s)
    return {
        kind: {"n": len(v), "p50_s": _round(percentile(v, 50)), "p90_s": _round(percentile(v, 90))}
        for kind, v in sorted(by_kind.items())
    }


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def score(judgements: Sequence[Judgement]) -> dict[str, Any]:
    """Every published number of a campaign, JSON-ready."""
    pairs = [(j.expected, j.got) for j in judgements]
    cats = per_category(pairs)
    return {
        "judgements": len(judgements),
        "categories": {
            c: {
                "precision": _round(s.precision),
                "recall": _round(s.recall),
                "f1": _round(s.f1),
                "support": s.support,
            }
            for c, s in cats.items()
        },
        "macro_f1": _round(macro_f1(cats)),
        "micro_f1": _round(micro_f1(pairs)),
        "confusion": confusion(pairs),
        "culprit": {k: r.to_dict() for k, r in culprit_accuracy(judgements).items()},
        "action": {k: r.to_dict() for k, r in action_scores(judgements).items()},
        "detection_latency": detection_latency(judgements),
        "misses": [j.to_dict() for j in judgements if j.missed],
    }
