"""Goodput: how much of the wall time since the job's first start went into useful steps.

Google's goodput accounting: productive time is the step time the job kept, at most the ideal
step time per step (ideal = mean of the step times <= median + 3 MAD, so a few slow steps do not
raise the bar); the rest is badput, split by cause so an operator knows what to fix:
initialization (process start -> first step, less checkpoint loading), blocking checkpoint saves,
checkpoint loads, data wait, lost progress (steps a failed attempt computed that the next one had
to redo), detection and restart (an attempt's last step -> the next one's first process start, or
the end of a failed last attempt: a hang before the watchdog fires is spent here), straggler
slowdown (time above the ideal step time), and `other` for the unaccounted rest.
The recommended checkpoint interval is Daly's refinement of Young's sqrt(2 C MTBF).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from triage.store.job_data import JobData

BADPUT_BUCKETS = (
    "initialization",
    "checkpoint_save",
    "checkpoint_load",
    "data_wait",
    "lost_progress",
    "detection_and_restart",
    "straggler_slowdown",
    "other",
)


@dataclass
class Goodput:
    productive_s: float
    total_s: float
    badput: dict[str, float]
    ideal_step_s: float | None = None
    interruptions: int = 0
    mtbf_s: float | None = None
    checkpoint_cost_s: float | None = None
    checkpoint_interval_s: float | None = None  # median time between saves, as the job ran
    recommended_checkpoint_interval_s: float | None = None
    notes: list[str] = field(default_factory=list)
    attempts: list[AttemptGoodput] = field(default_factory=list)

    @property
    def ratio(self) -> float | None:
        return self.productive_s / self.total_s if self.total_s > 0 else None

    def to_dict(self) -> dict[str, object]:
        r = self.ratio
        return {
            "ratio": None if r is None else round(r, 4),
            "productive_s": round(self.productive_s, 3),
            "total_s": round(self.total_s, 3),
            "badput": {k: round(v, 3) for k, v in self.badput.items()},
            "ideal_step_s": self.ideal_step_s,
            "interruptions": self.interruptions,
            "mtbf_s": self.mtbf_s,
            "checkpoint_cost_s": self.checkpoint_cost_s,
            "checkpoint_interval_s": self.checkpoint_interval_s,
            "notes": list(self.notes),
            "attempts": [a.to_dict() for a in self.attempts],
        }


def young_interval(checkpoint_cost_s: float, mtbf_s: float) -> float:
    """Young (1974): the checkpoint interval that minimises expected lost plus saving time."""
    return math.sqrt(2.0 * checkpoint_cost_s * mtbf_s)


def daly_interval(checkpoint_cost_s: float, mtbf_s: float) -> float:
    """Daly (2006) higher-order form; equals Young's when the cost is small against the MTBF."""
    c, m = checkpoint_cost_s, mtbf_s
    if c >= 2.0 * m:
        return m
    x = c / (2.0 * m)
    return young_interval(c, m) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - c


#: Steps after each attempt's first, over the run, below which no step is called slow.
MIN_STEADY_STEPS = 5


def ideal_step_time(work_s: pd.Series) -> float | None:
    """Mean of the step times <= median + 3 MAD (Google's goodput definition)."""
    w = work_s.dropna()
    if w.empty:
        return None
    med = w.median()
    mad = (w - med).abs().median()
    return float(w[w <= med + 3.0 * mad].mean())


def _spans(events: pd.DataFrame, begin: str, end: str) -> pd.DataFrame:
    """(attempt, step, start, end) of each save/load, from its first begin to its last end."""
    ev = events[events["kind"].isin([begin, end])]
    if ev.empty:
        return pd.DataFrame(columns=["attempt", "step", "start", "end"])
    g = ev.groupby(["attempt", "step"])
    out = (
        pd.DataFrame(
            {
                "start": ev[ev["kind"] == begin].groupby(["attempt", "step"])["time"].min(),
                "end": ev[ev["kind"] == end].groupby(["attempt", "step"])["time"].max(),
            }
        )
        .reindex(g.size().index)
        .dropna()
        .reset_index()
    )
    return out[out["end"] >= out["start"]]


def _redone(timeline: pd.DataFrame, attempts: list[int]) -> pd.Series:
    """True for steps an attempt computed that a later attempt computed again."""
    first_step = timeline.groupby("attempt")["step"].min()
    redone = pd.Series(False, index=timeline.index)
    for i, a in enumerate(attempts):
        later = [first_step[b] for b in attempts[i + 1 :] if b in first_step.index]
        if later:
            resume = later[0]
            redone |= (timeline["attempt"] == a) & (timeline["step"] >= resume)
    return redone


@dataclass
class AttemptGoodput:
    """One attempt's share of the job's wall time: from its first process start to the next
    attempt's (the GPUs stay allocated across the restart gap, so the gap is this attempt's
    badput), the last attempt to the job's last record. Its buckets add up to its span."""

    attempt: int
    start: float
    end: float
    ranks_per_node: dict[str, int]
    productive_s: float
    badput: dict[str, float]

    @property
    def span_s(self) -> float:
        return self.end - self.start

    @property
    def gpus(self) -> int:
        return sum(self.ranks_per_node.values())

    def to_dict(self) -> dict[str, object]:
        return {
            "attempt": self.attempt,
            "start": self.start,
            "end": self.end,
            "gpus": self.gpus,
            "ranks_per_node": dict(self.ranks_per_node),
            "productive_s": round(self.productive_s, 3),
            "badput": {k: round(v, 3) for k, v in self.badput.items()},
        }


def _by_attempt(values: pd.Series, attempts: pd.Series) -> dict[int, float]:
    return {int(a): float(v) for a, v in values.groupby(attempts).sum().items()}


def _save_interval(saves: pd.DataFrame) -> float | None:
    """Median time between the starts of consecutive saves within an attempt."""
    gaps = saves.sort_values("start").groupby("attempt")["start"].diff().dropna()
    return float(gaps.median()) if not gaps.empty else None


def compute_goodput(job: JobData, failed_attempts: set[int]) -> Goodput:
    """`failed_attempts`: those that ended in a fault or preemption (for the MTBF, and because
    the time from their last step to their end was spent detecting the failure)."""
    interruptions = len(failed_attempts)
    span = job.span()
    if span is None:
        return Goodput(0.0, 0.0, dict.fromkeys(BADPUT_BUCKETS, 0.0), notes=["no telemetry for this job"])
    attempts = [a for a in job.attempts if job.attempt_span(a) is not None]
    tl = job.step_timeline.copy()
    tl["wall"] = (tl["end"] - tl["start"]).clip(lower=0)
    tl["data"] = tl["data_wait_s"].fillna(0.0).clip(lower=0)
    tl["work"] = (tl["wall"] - tl["data"]).clip(lower=0)
    redone = _redone(tl, attempts)
    kept = tl[~redone]
    ideal = ideal_step_time(kept["work"])
    useful = kept["work"].clip(upper=ideal) if ideal is not None else kept["work"] * 0.0
    # The first step of an attempt pays one-off warm-up (allocator, lazy init, compilation):
    # Google's goodput books that as first-step overhead, here part of initialization.
    first_rows = kept.groupby("attempt")["step"].transform("min") == kept["step"]
    steady = int((~first_rows).sum())
    too_few = ideal is not None and 0 < steady < MIN_STEADY_STEPS
    if too_few:
        # a handful of steps has no normal pace to be slow against: their spread above its
        # mean is the run's jitter, not a straggler (a 3-step run lost "14% to stragglers")
        useful = useful.where(first_rows, kept["work"])
    excess = kept["work"] - useful
    productive = _by_attempt(useful, kept["attempt"])
    warmup = _by_attempt(excess[first_rows], kept.loc[first_rows, "attempt"])
    slowdown = _by_attempt(excess[~first_rows], kept.loc[~first_rows, "attempt"])
    data_wait = _by_attempt(kept["data"], kept["attempt"])
    lost = _by_attempt(tl.loc[redone, "wall"], tl.loc[redone, "attempt"])
    saves = _spans(job.events, "checkpoint_save_begin", "checkpoint_save_end")
    loads = _spans(job.events, "checkpoint_load_begin", "checkpoint_load_end")
    save_s = _by_attempt(saves["end"] - saves["start"], saves["attempt"])
    load_s = _by_attempt(loads["end"] - loads["start"], loads["attempt"])
    per_attempt = []
    for i, a in enumerate(attempts):
        s = job.attempt_span(a)
        assert s is not None
        nxt = job.attempt_span(attempts[i + 1]) if i + 1 < len(attempts) else None
        start = span[0] if i == 0 else s[0]
        end = nxt[0] if nxt is not None else span[1]
        steps = tl[tl["attempt"] == a]
        first = float(steps["start"].min()) if not steps.empty else s[1]
        last = float(steps["end"].max()) if not steps.empty else s[1]
        loading = loads[(loads["attempt"] == a) & (loads["end"] <= first)]
        b = dict.fromkeys(BADPUT_BUCKETS, 0.0)
        b["initialization"] = warmup.get(a, 0.0) + max(
            0.0, first - s[0] - float((loading["end"] - loading["start"]).sum())
        )
        b["checkpoint_save"] = save_s.get(a, 0.0)
        b["checkpoint_load"] = load_s.get(a, 0.0)
        b["data_wait"] = data_wait.get(a, 0.0)
        b["lost_progress"] = lost.get(a, 0.0)
        if nxt is not None:
            b["detection_and_restart"] = max(0.0, nxt[0] - last)
        elif a in failed_attempts:
            b["detection_and_restart"] = max(0.0, s[1] - last)
        b["straggler_slowdown"] = slowdown.get(a, 0.0)
        b["other"] = max(0.0, (end - start) - productive.get(a, 0.0) - sum(b.values()))
        nodes = job.ranks[job.ranks["attempt"] == a].groupby("node", dropna=False)["rank"].nunique()
        per_attempt.append(
            AttemptGoodput(
                a,
                start,
                end,
                {str(n) if isinstance(n, str) else "": int(c) for n, c in nodes.items()},
                productive.get(a, 0.0),
                b,
            )
        )
    buckets = {k: sum(p.badput[k] for p in per_attempt) for k in BADPUT_BUCKETS}
    g = Goodput(
        sum(p.productive_s for p in per_attempt),
        span[1] - span[0],
        buckets,
        ideal,
        interruptions,
        attempts=per_attempt,
    )
    if not saves.empty:
        g.checkpoint_cost_s = float((saves["end"] - saves["start"]).median())
        g.checkpoint_interval_s = _save_interval(saves)
    if interruptions:
        g.mtbf_s = g.total_s / interruptions
    if too_few:
        g.notes.append(
            f"{steady} steps after the first: too few to tell a slow step from the run's pace "
            f"(straggler slowdown is booked from {MIN_STEADY_STEPS})"
        )
    if g.checkpoint_cost_s is None:
        g.notes.append("no checkpoint save recorded: no checkpoint interval can be recommended")
    elif g.mtbf_s is None:
        g.notes.append(
            "no failure observed yet: the MTBF, and so the optimal checkpoint interval, is unknown"
        )
    else:
        g.recommended_checkpoint_interval_s = daly_interval(g.checkpoint_cost_s, g.mtbf_s)
    return g
