"""A network port that lost its link names the culprit of the transport errors every rank prints.

When one rank's link goes, its peers' connections close too and every rank reports the same
"connection closed by peer" or collective timeout at about the same moment: symptoms that name
no culprit, or the wrong one (whichever rank printed first). The node agent's port samples
(`JobData.down_nics`, from sysfs: `collectors/nic.py`) say whose link it was. A port that went
down no more than the correlation window before an attempt's fatal transport failure (or a
few samples after it: the agent reads the port once a second or so) is that attempt's cause, if
the attempt had ranks on that node (on the GPU beside the port, where the agent could map one):
a network_error on its node, culprit the rank on that GPU, else the node. A port that went down
with no such failure is an advisory incident (a flap the job rode out, or a port the job does
not use), so a failing port is seen before it fails a job.
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
#: How long after the ranks' failure a port's reading may come and still explain it.
_SAMPLE_LAG_S = 10.0


def down_nic_findings(job: JobData, findings: list[Finding], cfg: AnalyzerConfig) -> list[Finding]:
    """One finding per port and attempt: the first reading that explains a transport failure
    of the attempt, else the port's first reading in it as an advisory."""
    chosen: dict[tuple[int, str, str], tuple[pd.Series, Finding | None]] = {}
    for _, row in job.down_nics.sort_values("first_time").iterrows():
        attempt = evidence_attempt(job, float(row["first_time"]), cfg)
        if attempt is None:
            continue
        key = (attempt, str(row["node"]), str(row["nic"]))
        if key in chosen and chosen[key][1] is not None:
            continue
        failed = _failure_it_explains(job, findings, attempt, row, cfg.correlation_window_s)
        if key not in chosen or failed is not None:
            chosen[key] = (row, failed)
    return [_finding(job, attempt, row, failed) for (attempt, _, _), (row, failed) in chosen.items()]


def _failure_it_explains(
    job: JobData, findings: list[Finding], attempt: int, row: pd.Series, window_s: float
) -> Finding | None:
    """The attempt's first fatal transport failure that this down port can explain: the port
    serves ranks of the attempt, and went down before the failure (or was read just after)."""
    if not _serves(job, attempt, row):
        return None
    t0, t1 = float(row["first_time"]), float(row["last_time"])
    return next(
        (
            f
            for f in sorted(findings, key=lambda f: f.time)
            if f.attempt == attempt
            and f.fatal
            and f.verdict.category in _TRANSPORT
            and t0 - _SAMPLE_LAG_S <= f.time <= t1 + window_s
        ),
        None,
    )


def _serves(job: JobData, attempt: int, row: pd.Series) -> bool:
    """Whether the attempt had ranks behind the port: on its node, on its GPU where known."""
    gpu = None if pd.isna(row["gpu"]) else int(row["gpu"])
    return bool(job.ranks_on(attempt, str(row["node"]), gpu))


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
