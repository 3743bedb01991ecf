"""A network port that lost its link names the culprit of the transport errors every rank prints.

When one rank's link goes, its peers' connections close too and every rank reports the same
"connection closed by peer" or collective timeout at about the same moment: symptoms that name
no culprit, or the wrong one (whichever rank printed first). The node agent's port samples
(`JobData.down_nics`, from sysfs: `collectors/nic.py`) say whose link it was. A port that went
down within the correlation window of an attempt's fatal transport failure is that attempt's
cause: a network_error on its node, culprit the rank on the GPU beside the port (its rail) where
the agent could map one, else the node. A port that went down with no failure around it is an
advisory incident (a flap the job rode out), so a failing port is seen before it fails a job.
"""

from __future__ import annotations

import pandas as pd

from triage.analyzers.config import AnalyzerConfig
from triage.analyzers.findings import Finding, clock, ranks_phrase
from triage.analyzers.inherited import evidence_attempt
from triage.store.job_data import JobData
from triage.taxonomy import Category
from triage.verdict import Culprit, Evidence, Verdict

#: Categories that a dead link shows up as on the ranks: what a down port explains.
_TRANSPORT = (Category.NETWORK_ERROR, Category.COLLECTIVE_TIMEOUT)
_CAUSE_CONFIDENCE = 0.9
_FLAP_CONFIDENCE = 0.6


def down_nic_findings(job: JobData, findings: list[Finding], cfg: AnalyzerConfig) -> list[Finding]:
    """One finding per port that went down during an attempt (the first sample of each)."""
    out: list[Finding] = []
    seen: set[tuple[int, str, str]] = set()
    for _, row in job.down_nics.sort_values("first_time").iterrows():
        t = float(row["first_time"])
        attempt = evidence_attempt(job, t, cfg)
        if attempt is None or (key := (attempt, str(row["node"]), str(row["nic"]))) in seen:
            continue
        seen.add(key)
        failed = _transport_failure_near(findings, attempt, t, cfg.correlation_window_s)
        out.append(_finding(job, attempt, row, failed))
    return out


def _transport_failure_near(
    findings: list[Finding], attempt: int, t: float, window_s: float
) -> Finding | None:
    return next(
        (
            f
            for f in sorted(findings, key=lambda f: f.time)
            if f.attempt == attempt
            and f.fatal
            and f.verdict.category in _TRANSPORT
            and abs(f.time - t) <= window_s
        ),
        None,
    )


def _finding(job: JobData, attempt: int, row: pd.Series, failed: Finding | None) -> Finding:
    node, nic, t = str(row["node"]), str(row["nic"]), float(row["first_time"])
    gpu = None if pd.isna(row["gpu"]) else int(row["gpu"])
    on_node = tuple(job.ranks_on(attempt, node, None))
    beside = tuple(job.ranks_on(attempt, node, gpu)) if gpu is not None else on_node
    rank = beside[0] if len(beside) == 1 else None
    place = f"port {nic} on {node}"
    next_to = [f"beside GPU {gpu}"] if gpu is not None else []
    who = (
        f" ({', '.join([*next_to, ranks_phrase(beside)] if beside else next_to)})"
        if next_to or beside
        else ""
    )
    reading = f"{place}{who}: link down at {clock(t)}"
    evidence = [Evidence(reading, "nic", t)]
    if failed is None:
        summary = f"{place}{who} lost its link at {clock(t)}; the attempt went on"
        confidence, fatal = _FLAP_CONFIDENCE, False
    else:
        summary = (
            f"{place}{who} lost its link at {clock(t)}: the transport failure the ranks "
            f"reported ({failed.verdict.category.value} at {clock(failed.time)}) came from it"
        )
        confidence, fatal = _CAUSE_CONFIDENCE, True
        evidence += failed.verdict.evidence[:2]
    verdict = Verdict(Category.NETWORK_ERROR, confidence, summary, Culprit(rank=rank, node=node), t, evidence)
    ranks = (rank,) if rank is not None else on_node
    return Finding(attempt, verdict, fatal=fatal, ranks=ranks)
