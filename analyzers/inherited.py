"""Conditions a run inherited: hardware that was already bad when the job was placed on it.

Evidence belongs to its time and place. A GPU lost at 09:00 under another job, an old Xid or
last week's ECC count is not the root cause of an attempt that started at 10:00 and failed with
a `KeyError` in rank 1; but placing the job on that GPU is worth saying. So evidence dated
before an attempt's window (`AnalyzerConfig.evidence_lead_s`) and uncleared quarantines in the
fleet ledger become separate, non-fatal findings, "job placed on GPU X of node Y, which was
lost at T (job Z)", that never compete for the root cause.
"""

from __future__ import annotations

import math

import pandas as pd

from triage.analyzers.config import AnalyzerConfig
from triage.analyzers.findings import Finding, clock, gpu_culprit, ranks_phrase
from triage.store.job_data import JobData
from triage.store.node_health import CLEARED, HealthEntry, quarantines
from triage.taxonomy import Category
from triage.verdict import Evidence, Verdict

_CONFIDENCE = 0.8


def evidence_attempt(job: JobData, t: float, cfg: AnalyzerConfig) -> int | None:
    """The attempt whose window holds evidence at `t` (None: before or after the run)."""
    return job.attempt_of(t, cfg.evidence_lead_s, job.tail_s)


def _ledger_source(job: JobData, node: str, gpu: int | None, t: float) -> str:
    """`(job Z, run R)` of the quarantine the fleet ledger wrote for this fault, if any."""
    h = job.node_health
    if h.empty:
        return ""
    rows = h[(h["node"] == node) & (h["state"] == "quarantined") & (h["time"] >= t - 60.0)]
    if gpu is not None:
        rows = rows[rows["gpu"].isna() | (rows["gpu"] == gpu)]
    if rows.empty:
        return ""
    r = rows.iloc[0]
    run = f", run {r['run_id']}" if isinstance(r["run_id"], str) else ""
    return f" (job {r['job_id']}{run})" if isinstance(r["job_id"], str) else ""


def _cleared_between(job: JobData, node: str, gpu: int | None, t0: float, t1: float) -> bool:
    """Whether a person returned (node, gpu) to service (`triage nodes clear`) after the
    condition arose at `t0` and before the attempt started at `t1`: then it was repaired and
    is history, not a condition the job inherited."""
    h = job.node_health
    if h.empty:
        return False
    rows = h[(h["node"] == node) & (h["state"] == CLEARED) & (h["time"] >= t0) & (h["time"] < t1)]
    if gpu is not None:
        rows = rows[rows["gpu"].isna() | (rows["gpu"] == gpu)]
    return not rows.empty


def inherited_findings(
    job: JobData,
    node: str,
    gpu: int | None,
    category: Category,
    t: float,
    what: str,
    evidence: list[Evidence],
    cfg: AnalyzerConfig,
    source: str | None = None,
    applies_from: float | None = None,
) -> list[Finding]:
    """One non-fatal finding per attempt whose ranks ran on (node, gpu) once the condition
    seen at `t` held there: attempts started after `applies_from` (default: `t` plus the
    evidence lead, i.e. after it arose); none for attempts that did not use it."""
    found = []
    source = _ledger_source(job, node, gpu, t) if source is None else source
    after = t + cfg.evidence_lead_s if applies_from is None else applies_from
    for attempt in job.attempts:
        span = job.attempt_span(attempt)
        if span is None or span[0] <= after or _cleared_between(job, node, gpu, t, span[0]):
            continue
        culprit, ranks = gpu_culprit(job, attempt, node, gpu)
        if not ranks:
            continue
        place = f"GPU {gpu} of {node}" if gpu is not None else node
        when = "before" if t < span[0] else "as"
        summary = (
            f"job placed on {place} ({ranks_phrase(ranks)}), which {what} at "
            f"{clock(t)}{source}, {when} attempt {attempt} started at {clock(span[0])}"
        )
        found.append(
            Finding(
                attempt,
                Verdict(category, _CONFIDENCE, summary, culprit, span[0], evidence[:5]),
                fatal=False,
                ranks=ranks,
            )
        )
    return found


def ledger_findings(job: JobData, cfg: AnalyzerConfig) -> list[Finding]:
    """Quarantines that stood uncleared when an attempt was placed on the node or GPU."""
    if job.node_health.empty:
        return []
    entries = [
        HealthEntry.from_row({k: (None if _missing(v) else v) for k, v in row.items()})
        for row in job.node_health.to_dict("records")
    ]
    found: list[Finding] = []
    for attempt in job.attempts:
        span = job.attempt_span(attempt)
        if span is None:
            continue
        for node, standing in quarantines(entries, before=span[0]).items():
            for q in standing:
                gpu = None if q.gpu is None else int(q.gpu)
                who = f" (job {q.job_id})" if q.job_id else ""
                ev = [
                    Evidence(f"node health ledger: {q.where} quarantined: {q.reason}", "node_health", q.time)
                ]
                found += [
                    f
                    for f in inherited_findings(
                        job,
                        node,
                        gpu,
                        Category.parse(q.category),
                        q.time,
                        f"was quarantined ({q.reason})",
                        ev,
                        cfg,
                        who,
                        applies_from=-math.inf,
                    )
                    if f.attempt == attempt
                ]
    return found


def _missing(v: object) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA
