"""Exceptions the ranks recorded and kernel-log lines the agent read, through the log classifier.

The classifier names what a text says; this module adds what only the store knows: which rank
raised it (the event row's rank, with its node, GPU and UUID), which ranks a kernel line concerns
(its pid, or its (node, gpu)), and when.
"""

from __future__ import annotations

import json

import pandas as pd

from triage.analyzers.config import AnalyzerConfig
from triage.analyzers.findings import (
    ADVISORY_CATEGORIES,
    Finding,
    clock,
    gpu_culprit,
    rank_culprit,
    where,
)
from triage.analyzers.gpu_health import NON_FATAL_XIDS
from triage.analyzers.inherited import evidence_attempt
from triage.analyzers.log_classifier import LogClassifier, LogClassifierConfig, classify_line
from triage.store.job_data import JobData
from triage.taxonomy import Category
from triage.verdict import Culprit, Evidence, Verdict

#: Confidence of an exception no signature explains: an uncaught error in training code
#: (taxonomy: user_code_error) is the best guess, too weak to stand without a human.
UNEXPLAINED_EXCEPTION_CONFIDENCE = 0.4
#: Keep every match: thresholding happens once, after root cause.
_RAW = LogClassifierConfig(threshold=0.0, max_evidence=5, max_consequences=0)


def _exception_lines(row: pd.Series) -> list[str]:
    message = str(row["message"] or "")
    try:
        detail = json.loads(row["detail"]) if isinstance(row["detail"], str) else {}
    except json.JSONDecodeError:
        detail = {}
    tb = detail.get("traceback") if isinstance(detail, dict) else None
    return tb.splitlines() if isinstance(tb, str) and tb.strip() else message.splitlines()


def exception_findings(job: JobData, cfg: AnalyzerConfig) -> list[Finding]:
    findings = []
    for _, row in job.events[job.events["kind"] == "exception"].iterrows():
        attempt, t = int(row["attempt"]), float(row["time"])
        rank = None if pd.isna(row["rank"]) else int(row["rank"])
        classifier = LogClassifier("exception", _RAW).feed_all(_exception_lines(row))
        v = classifier.verdict()
        # A failure gathered from every rank (DCP's "rank 3: OSError ...") names where it
        # happened; each rank that re-raises it is not the culprit.
        if v.culprit.rank is not None and v.category is not Category.UNKNOWN:
            rank = v.culprit.rank
        culprit = rank_culprit(job, attempt, rank) if rank is not None else v.culprit
        cause = classifier.cause()
        if (
            cause is not None
            and cause.symptom
            and v.category is Category.COLLECTIVE_TIMEOUT
            and v.culprit.rank is None
        ):
            # a rank whose collective timed out waited for another: it reports the hang, it
            # is not where it is (the stall and Flight Recorder readings name that rank)
            culprit = Culprit()
        first_line = str(row["message"] or "").splitlines()[0][:200] if row["message"] else "?"
        if v.category is Category.UNKNOWN:
            category, confidence, symptom = (
                Category.USER_CODE_ERROR,
                UNEXPLAINED_EXCEPTION_CONFIDENCE,
                False,
            )
            evidence = [Evidence(first_line, "exception", t, rank)]
        else:
            # the whole traceback's reading decides, not its last line alone: a plain
            # RuntimeError the job's own code raised is a cause, the same words from a library
            # a symptom
            category, confidence = v.category, v.confidence
            symptom = bool(cause and cause.symptom)
            evidence = [Evidence(e.text, "exception", t, rank, e.line) for e in v.evidence]
        summary = f"{where(culprit)} raised `{first_line}` at {clock(t)}"
        findings.append(
            Finding(
                attempt,
                Verdict(category, confidence, summary, culprit, t, evidence),
                fatal=True,
                symptom=symptom,
                ranks=(rank,) if rank is not None else (),
            )
        )
    return findings


def _kernel_culprit(
    job: JobData, attempt: int, row: pd.Series, gpu: int | None
) -> tuple[Culprit, tuple[int, ...]]:
    node = str(row["node"])
    if pd.notna(row["pid"]):
        r = job.ranks[
            (job.ranks["attempt"] == attempt)
            & (job.ranks["node"] == node)
            & (job.ranks["pid"] == int(row["pid"]))
        ]
        if not r.empty:
            rank = int(r["rank"].iloc[0])
            return rank_culprit(job, attempt, rank), (rank,)
    return gpu_culprit(job, attempt, node, gpu)


def kernel_findings(job: JobData, cfg: AnalyzerConfig) -> list[Finding]:
    findings = []
    for _, row in job.kernel_events.iterrows():
        text = str(row["message"] or row["raw"] or "")
        match = classify_line(text)
        if match is None:
            continue
        t = float(row["time"])
        attempt = evidence_attempt(job, t, cfg)
        if attempt is None:  # another job's, or before this run: the GPU events say what stood
            continue
        gpu = int(row["gpu"]) if pd.notna(row["gpu"]) else None
        culprit, ranks = _kernel_culprit(job, attempt, row, gpu)
        summary = f"{where(culprit, ranks)}: kernel log reports {match.description} at {clock(t)}"
        fatal = match.category not in ADVISORY_CATEGORIES and match.xid not in NON_FATAL_XIDS
        findings.append(
            Finding(
                attempt,
                Verdict(
                    match.category,
                    match.strength,
                    summary,
                    culprit,
                    t,
                    [Evidence(str(row["raw"] or text), "kernel_log", t)],
                ),
                fatal=fatal,
                symptom=match.symptom,
                ranks=ranks,
            )
        )
    return findings


def log_findings(job: JobData, cfg: AnalyzerConfig) -> list[Finding]:
    return exception_findings(job, cfg) + kernel_findings(job, cfg)
