"""Silent data corruption: ranks that compute different numbers where all must agree.

Two signals, both with no error anywhere: the known-answer canary (every rank multiplies the same
matrices, healthy ranks produce bit-identical digests, so the minority is the culprit) and a
replicated loss (where most ranks report the bit-identical loss, the one that differs computed
something else). Without a majority nobody can be blamed, and the confidence says so.
"""

from __future__ import annotations

from collections import Counter

from triage.analyzers.config import AnalyzerConfig
from triage.analyzers.findings import (
    Finding,
    clock,
    rank_culprit,
    ranks_culprit,
    ranks_phrase,
    where,
)
from triage.store.job_data import JobData
from triage.taxonomy import Category
from triage.verdict import Culprit, Evidence, Verdict


def canary_findings(job: JobData, cfg: AnalyzerConfig) -> list[Finding]:
    findings = []
    for attempt, rows in job.canary_mismatches.groupby("attempt"):
        attempt = int(attempt)
        culprits: Counter[int] = Counter()
        first_time: float | None = None
        evidence = []
        split_steps = 0
        for step, g in rows.groupby("step", sort=True):
            counts = g["digest"].value_counts()
            if counts.iloc[0] * 2 <= len(g):
                continue  # no majority: which side is wrong cannot be told
            split_steps += 1
            majority = counts.index[0]
            bad = g[g["digest"] != majority]
            culprits.update(int(r) for r in bad["rank"])
            t = float(bad["time"].min())
            first_time = t if first_time is None else min(first_time, t)
            for _, r in bad.head(3).iterrows():
                evidence.append(
                    Evidence(
                        f"step {int(step)}: canary digest {r['digest']} on rank {int(r['rank'])}, "
                        f"{counts.iloc[0]} of {len(g)} ranks agree on {majority}",
                        "canary",
                        float(r["time"]),
                        int(r["rank"]),
                    )
                )
        if not culprits:
            t = float(rows["time"].min())
            findings.append(
                Finding(
                    attempt,
                    Verdict(
                        Category.SILENT_DATA_CORRUPTION,
                        0.4,
                        f"canary digests disagree with no majority at {clock(t)}",
                        Culprit(),
                        t,
                        [
                            Evidence(
                                f"step {int(r['step'])}: digest {r['digest']}",
                                "canary",
                                float(r["time"]),
                                int(r["rank"]),
                            )
                            for _, r in rows.head(10).iterrows()
                        ],
                    ),
                    fatal=False,
                )
            )
            continue
        ranks = [r for r, _ in culprits.most_common()]
        culprit = ranks_culprit(job, attempt, ranks)
        confidence = 0.9 if len(ranks) == 1 else 0.75
        summary = (
            f"{where(culprit, ranks)} computed a canary result that differs from the "
            f"other ranks' at {split_steps} check(s), first at {clock(first_time)}"
        )
        findings.append(
            Finding(
                attempt,
                Verdict(
                    Category.SILENT_DATA_CORRUPTION, confidence, summary, culprit, first_time, evidence[:10]
                ),
                fatal=False,
                ranks=tuple(ranks),
            )
        )
    return findings


def loss_outlier_findings(job: JobData, cfg: AnalyzerConfig) -> list[Finding]:
    findings = []
    for attempt, rows in job.loss_outliers.groupby("attempt"):
        attempt = int(attempt)
        per_rank = rows.groupby("rank").size().sort_values(ascending=False)
        rank = int(per_rank.index[0])
        mine = rows[rows["rank"] == rank]
        first = mine.iloc[0]
        culprit = rank_culprit(job, attempt, rank)
        others = sorted({int(r) for r in rows["rank"]} - {rank})
        also = f"; {ranks_phrase(others)} also differed" if others else ""
        summary = (
            f"{where(culprit)} reported loss {first['loss']:.6g} at step "
            f"{int(first['step'])} while {int(first['agreeing'])} of {int(first['ranks'])} "
            f"ranks agree on {first['agreed_loss']:.6g} ({len(mine)} step(s), first at "
            f"{clock(first['time'])}){also}"
        )
        evidence = [
            Evidence(
                f"step {int(r['step'])}: loss {r['loss']!r} vs agreed {r['agreed_loss']!r}",
                "steps",
                float(r["time"]),
                int(r["rank"]),
            )
            for _, r in mine.head(10).iterrows()
        ]
        confidence = 0.8 if len(mine) > 1 and not others else 0.65
        findings.append(
            Finding(
                attempt,
                Verdict(
                    Category.SILENT_DATA_CORRUPTION,
                    confidence,
                    summary,
                    culprit,
                    float(first["time"]),
                    evidence,
                ),
                fatal=False,
                ranks=(rank, *others),
            )
        )
    return findings


def sdc_findings(job: JobData, cfg: AnalyzerConfig) -> list[Finding]:
    return canary_findings(job, cfg) + loss_outlier_findings(job, cfg)
