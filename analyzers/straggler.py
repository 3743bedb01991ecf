"""Stragglers: a rank or node that is persistently slower than its peers and holds every
collective back, with no error anywhere.

Two independent signals. Compute time: per window of steps, each rank's median `compute_s`
against the median over ranks, scored robustly (MAD), so one slow step or one noisy window
does not flag a rank; it must be slow in most windows. Arrival order: in a collective the rank
that enters last makes the others wait, and a straggler is last far more often than 1/N.
The per-rank score (compute time / median, 1.0 = typical) is what `triage_straggler_score`
exports. Whether a straggler is really a throttled GPU is decided in root cause, which sees
the GPU samples too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from triage.analyzers.config import AnalyzerConfig
from triage.analyzers.findings import Finding, clock, rank_culprit, where
from triage.analyzers.numerical import MAD_TO_SIGMA
from triage.store.job_data import JobData
from triage.taxonomy import Category
from triage.verdict import Culprit, Evidence, Verdict

#: Fewest ranks for which "slower than the others" means anything.
MIN_RANKS = 3


@dataclass(frozen=True)
class RankScore:
    attempt: int
    rank: int
    node: str | None
    score: float  # median over windows of compute time / median over ranks; 1.0 is typical
    slow_share: float  # share of the rank's windows in which it was flagged slow
    last_share: float  # share of its collectives it entered last
    wait_caused_s: float  # time the others spent waiting for it, summed over collectives
    straggler: bool

    def to_dict(self) -> dict[str, object]:
        return {
            "attempt": self.attempt,
            "rank": self.rank,
            "node": self.node,
            "score": round(self.score, 4),
            "slow_share": round(self.slow_share, 3),
            "last_share": round(self.last_share, 3),
            "wait_caused_s": round(self.wait_caused_s, 3),
            "straggler": self.straggler,
        }


@dataclass
class StragglerResult:
    findings: list[Finding]
    scores: list[RankScore]


def _window_scores(windows: pd.DataFrame, cfg: AnalyzerConfig) -> pd.DataFrame:
    """Per (rank, window): ratio to the window's median over ranks and whether it is slow."""
    w = windows.dropna(subset=["median_compute_s"]).copy()
    by = w.groupby("window")["median_compute_s"]
    med = by.transform("median")
    mad = (w["median_compute_s"] - med).abs().groupby(w["window"]).transform("median")
    scale = np.maximum(MAD_TO_SIGMA * mad, np.maximum(0.01 * med, 1e-9))
    w["ratio"] = w["median_compute_s"] / med.where(med > 0)
    w["z"] = (w["median_compute_s"] - med) / scale
    w["slow"] = (w["ratio"] - 1 > cfg.straggler_slowdown) & (w["z"] > cfg.straggler_mad_z)
    w["n"] = by.transform("size")
    return w[w["n"] >= MIN_RANKS]


def _attempt_scores(job: JobData, attempt: int, cfg: AnalyzerConfig) -> pd.DataFrame:
    ranks = job.ranks[job.ranks["attempt"] == attempt].set_index("rank")
    w = _window_scores(job.rank_windows[job.rank_windows["attempt"] == attempt], cfg)
    per = w.groupby("rank").agg(score=("ratio", "median"), slow_share=("slow", "mean"))
    per["first_slow"] = w[w["slow"]].groupby("rank")["start"].min()
    arr = job.arrivals[job.arrivals["attempt"] == attempt].set_index("rank")
    per = per.join(arr[["collectives", "last_arrivals", "wait_caused_s"]], how="outer")
    per["last_share"] = (per["last_arrivals"] / per["collectives"].where(per["collectives"] > 0)).fillna(0.0)
    per["wait_caused_s"] = per["wait_caused_s"].fillna(0.0)
    per["node"] = ranks["node"].reindex(per.index)
    n = len(per)
    per["by_compute"] = per["slow_share"].fillna(0) >= cfg.straggler_sustained
    rs = job.rank_steps[job.rank_steps["attempt"] == attempt]
    run_s = float((rs["last_end"] - rs["first_start"]).median()) if not rs.empty else 0.0
    # Arriving last matters only when the others' waiting adds up to a real share of the run.
    per["by_arrival"] = (
        (n >= MIN_RANKS)
        & (per["last_share"] >= cfg.straggler_last_share)
        & (per["wait_caused_s"] >= cfg.straggler_slowdown * run_s)
    )
    # A handful of steps (warm-up, a run cut short) says nothing about a persistent straggler.
    steps = (
        (rs.set_index("rank")["last_step"] - rs.set_index("rank")["first_step"] + 1)
        .groupby(level=0)
        .sum()
        .reindex(per.index)
        .fillna(0)
    )
    per["straggler"] = (per["by_compute"] | per["by_arrival"]) & (steps >= cfg.straggler_min_steps)
    return per


def straggler_analysis(job: JobData, cfg: AnalyzerConfig) -> StragglerResult:
    findings: list[Finding] = []
    scores: list[RankScore] = []
    for attempt in job.attempts:
        per = _attempt_scores(job, attempt, cfg)
        scores += _rank_scores(attempt, per)
        findings += _findings(job, attempt, per)
    return StragglerResult(findings, scores)


def _rank_scores(attempt: int, per: pd.DataFrame) -> list[RankScore]:
    """A score per rank, read column by column: a walk over rows builds a Series per rank,
    seconds of the whole analysis at 16k ranks."""
    columns = (
        per[c].tolist() for c in ("node", "score", "slow_share", "last_share", "wait_caused_s", "straggler")
    )
    return [
        RankScore(
            attempt,
            int(r),
            None if pd.isna(node) else str(node),
            float(score) if pd.notna(score) else 1.0,
            float(slow) if pd.notna(slow) else 0.0,
            float(last),
            float(wait),
            bool(flag),
        )
        for r, node, score, slow, last, wait, flag in zip(per.index.tolist(), *columns)
    ]


def _findings(job: JobData, attempt: int, per: pd.DataFrame) -> list[Finding]:
    flagged = per[per["straggler"]]
    if flagged.empty:
        return []
    node_size = per.groupby("node").size()
    slow_nodes = [
        node
        for node, g in flagged.groupby("node")
        if len(g) == node_size.get(node, 0) > 1 and len(g) < len(per)
    ]
    out = []
    for node in slow_nodes:
        g = flagged[flagged["node"] == node]
        out.append(_finding(job, attempt, g, Culprit(node=str(node))))
    for r in flagged[~flagged["node"].isin(slow_nodes)].index:
        out.append(_finding(job, attempt, flagged.loc[[r]], rank_culprit(job, attempt, int(r))))
    return out


def _finding(job: JobData, attempt: int, g: pd.DataFrame, culprit: Culprit) -> Finding:
    ranks = [int(r) for r in g.index]
    parts = []
    if g["by_compute"].any():
        parts.append(
            f"computed {g['score'].median() - 1:.0%} slower than the median rank in "
            f"{g['slow_share'].median():.0%} of step windows"
        )
    if g["by_arrival"].any():
        parts.append(f"arrived last in {g['last_share'].median():.0%} of collectives")
    waited = float(g["wait_caused_s"].sum())
    first = g["first_slow"].min()
    first_seen = float(first) if pd.notna(first) else None
    summary = (
        f"{where(culprit, ranks)} "
        + " and ".join(parts)
        + (f", making the others wait {waited:.1f} s in total" if waited > 0 else "")
        + (f" (from {clock(first_seen)})" if first_seen is not None else "")
    )
    both = bool(g["by_compute"].any() and g["by_arrival"].any())
    excess = float(np.nan_to_num(g["score"].median() - 1, nan=0.0))
    confidence = min(0.95, 0.6 + (0.15 if both else 0.0) + min(0.2, excess / 2))
    evidence = [
        Evidence(
            f"rank {int(r)}: compute score {row['score']:.2f} (1.0 = median), slow "
            f"in {row['slow_share']:.0%} of windows, last to arrive in "
            f"{row['last_share']:.0%} of {int(row['collectives'] or 0)} collectives",
            "steps",
            first_seen,
            int(r),
        )
        for r, row in g.fillna({"collectives": 0, "slow_share": 0, "score": 1.0}).head(10).iterrows()
    ]
    return Finding(
        attempt,
        Verdict(Category.STRAGGLER, confidence, summary, culprit, first_seen, evidence),
        fatal=False,
        ranks=tuple(ranks),
    )
