"""Ends of an attempt that no error line explains: preemption and a vanished node.

Preemption: every rank of the attempt received SIGTERM (a launcher that kills the survivors of a
crash signals all but the crashed rank, and root cause anyway prefers an earlier fault). Node
failure: the heartbeats of every rank of one node stopped together, with no exit, exception or
SIGTERM recorded, while the ranks on other nodes lived on.
"""

from __future__ import annotations

from triage.analyzers.config import AnalyzerConfig
from triage.analyzers.findings import Finding, clock, ranks_phrase
from triage.store.job_data import JobData
from triage.taxonomy import Category
from triage.verdict import Culprit, Evidence, Verdict

_ENDINGS = ("exit", "exception", "sigterm")


def preemption_findings(job: JobData, cfg: AnalyzerConfig) -> list[Finding]:
    findings = []
    for attempt in job.attempts:
        ranks = set(job.ranks.loc[job.ranks["attempt"] == attempt, "rank"].astype(int))
        ev = job.events[(job.events["attempt"] == attempt) & (job.events["kind"] == "sigterm")]
        got = set(ev["rank"].dropna().astype(int))
        if not ranks or not ranks <= got:
            continue
        t = float(ev["time"].min())
        findings.append(Finding(attempt, Verdict(
            Category.PREEMPTION, 0.85,
            f"every rank ({ranks_phrase(ranks)}) received SIGTERM from {clock(t)} with no "
            f"fault before it: the job was stopped from outside", Culprit(), t,
            [Evidence(str(r["message"]), "event", float(r["time"]), int(r["rank"]))
             for _, r in ev.head(5).iterrows()]), fatal=True, ranks=tuple(sorted(ranks))))
    return findings


def node_failure_findings(job: JobData, cfg: AnalyzerConfig) -> list[Finding]:
    findings = []
    for attempt in job.attempts:
        hb = job.heartbeats[job.heartbeats["attempt"] == attempt].set_index("rank")["time"]
        ranks = job.ranks[job.ranks["attempt"] == attempt]
        if ranks["node"].nunique() < 2:
            continue
        ended = set(job.events.loc[(job.events["attempt"] == attempt)
                                   & job.events["kind"].isin(_ENDINGS), "rank"].dropna()
                    .astype(int))
        for node, on in ranks.groupby("node"):
            mine = [int(r) for r in on["rank"]]
            if not set(mine) <= set(hb.index) or set(mine) & ended:
                continue
            last = hb.loc[mine]
            others = hb.drop(index=mine, errors="ignore")
            if others.empty or last.max() - last.min() > cfg.node_silence_spread_s:
                continue
            if others.max() <= last.max() + cfg.heartbeat_stale_s:
                continue
            t = float(last.min())
            findings.append(Finding(attempt, Verdict(
                Category.NODE_FAILURE, 0.8,
                f"node {node} vanished at {clock(t)}: the heartbeats of all its ranks "
                f"({ranks_phrase(mine)}) stopped together with no error or exit recorded, while "
                f"the other nodes' ranks lived on for {others.max() - last.max():.0f} s",
                Culprit(node=str(node)), t,
                [Evidence(f"rank {r}: last heartbeat at {clock(hb[r])}", "heartbeats",
                          float(hb[r]), r) for r in mine[:8]]),
                fatal=True, ranks=tuple(mine)))
    return findings


def lifecycle_findings(job: JobData, cfg: AnalyzerConfig) -> list[Finding]:
    return preemption_findings(job, cfg) + node_failure_findings(job, cfg)
