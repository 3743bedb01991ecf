"""Numerical instability: NaN/Inf loss or grad-norm, and loss spikes.

The culprit of a NaN is the first rank whose *local* loss went non-finite: once gradients are
all-reduced every rank is poisoned within a step, so only the order in time tells who started
it. A spike is a step whose job-wide loss (the median over ranks) sits far above the preceding
window by a robust (median/MAD) z-score, so that one noisy step does not move the baseline.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from triage.analyzers.config import AnalyzerConfig
from triage.analyzers.findings import Finding, clock, rank_culprit, ranks_phrase, where
from triage.store.job_data import JobData
from triage.taxonomy import Category
from triage.verdict import Culprit, Evidence, Verdict

#: MAD -> standard deviation for normally distributed data.
MAD_TO_SIGMA = 1.4826


def _nonfinite_rows(job: JobData) -> pd.DataFrame:
    """Step rows with NaN/Inf, plus `nonfinite` events for steps whose rows never arrived."""
    rows = job.nonfinite_steps.assign(
        text=lambda d: [
            f"step {int(s)}: loss={loss} grad_norm={g}"
            for s, loss, g in zip(d["step"], d["loss"], d["grad_norm"])
        ],
        source="steps",
    )
    ev = job.events[job.events["kind"] == "nonfinite"]
    ev = pd.DataFrame(
        {
            "attempt": ev["attempt"],
            "rank": ev["rank"],
            "step": ev["step"],
            "time": ev["time"],
            "text": ev["message"],
            "source": "event",
        }
    )
    both = pd.concat([rows[ev.columns], ev], ignore_index=True) if not rows.empty else ev
    return both.sort_values(["time", "rank"]).drop_duplicates(["attempt", "rank", "step"])


def nonfinite_findings(job: JobData, cfg: AnalyzerConfig) -> list[Finding]:
    findings = []
    for attempt, rows in _nonfinite_rows(job).groupby("attempt"):
        first = rows.iloc[0]
        rank = int(first["rank"])
        attempt = int(attempt)
        culprit = rank_culprit(job, attempt, rank)
        others = sorted({int(r) for r in rows["rank"]} - {rank})
        then = f"; {ranks_phrase(others)} followed" if others else ""
        summary = (
            f"{where(culprit)} was the first to produce a non-finite loss/grad-norm "
            f"(step {int(first['step'])}) at {clock(first['time'])}{then}"
        )
        evidence = [
            Evidence(str(r["text"]), str(r["source"]), float(r["time"]), int(r["rank"]))
            for _, r in rows.head(10).iterrows()
        ]
        consequences = [
            f"rank {int(r['rank'])}: non-finite at step {int(r['step'])}"
            for _, r in rows.iloc[1:].drop_duplicates("rank").head(20).iterrows()
        ]
        findings.append(
            Finding(
                attempt,
                Verdict(
                    Category.NUMERICAL_INSTABILITY,
                    0.9,
                    summary,
                    culprit,
                    float(first["time"]),
                    evidence,
                    consequences,
                ),
                fatal=True,
                ranks=(rank, *others),
            )
        )
    return findings


def robust_z(values: pd.Series, window: int) -> pd.Series:
    """Each value's z-score against the median and MAD of the `window` values before it."""
    prev = values.shift(1)
    med = prev.rolling(window, min_periods=max(5, window // 5)).median()
    mad = (prev - med).abs().rolling(window, min_periods=max(5, window // 5)).median()
    scale = np.maximum(MAD_TO_SIGMA * mad, np.maximum(1e-3 * med.abs(), 1e-12))
    return (values - med) / scale


def loss_spike_findings(job: JobData, cfg: AnalyzerConfig) -> list[Finding]:
    findings = []
    tl = job.step_timeline.dropna(subset=["loss"])
    for attempt, g in tl.groupby("attempt"):
        g = g.sort_values("step")
        z = robust_z(g["loss"].astype(float), cfg.loss_spike_window)
        spikes = g[z > cfg.loss_spike_z]
        if spikes.empty:
            continue
        first = spikes.iloc[0]
        base = g[g["step"] < first["step"]]["loss"].tail(cfg.loss_spike_window).median()
        zf = float(z[spikes.index[0]])
        summary = (
            f"the loss spiked to {first['loss']:.4g} at step {int(first['step'])} "
            f"({clock(first['end'])}), {zf:.0f} robust sigmas above the recent median "
            f"{base:.4g}; {len(spikes)} spike step(s) in attempt {int(attempt)}"
        )
        evidence = [
            Evidence(
                f"step {int(r['step'])}: median loss over ranks {r['loss']:.6g}", "steps", float(r["end"])
            )
            for _, r in spikes.head(10).iterrows()
        ]
        confidence = 0.7 if len(spikes) > 1 else 0.6
        findings.append(
            Finding(
                int(attempt),
                Verdict(
                    Category.NUMERICAL_INSTABILITY,
                    confidence,
                    summary,
                    Culprit(),
                    float(first["end"]),
                    evidence,
                ),
                fatal=False,
            )
        )
    return findings


def numerical_findings(job: JobData, cfg: AnalyzerConfig) -> list[Finding]:
    return nonfinite_findings(job, cfg) + loss_spike_findings(job, cfg)
