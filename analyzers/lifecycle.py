"""Ends of an attempt that no error line explains: preemption and a vanished node.

Preemption: every rank of the attempt received SIGTERM (a launcher that kills the survivors of a
crash signals all but the crashed rank, and root cause anyway prefers an earlier fault). Node
failure: the heartbeats of every rank of one node stopped together, with no exit, exception or
SIGTERM recorded, while the ranks on other nodes lived on. A single rank that went the same way
(SIGKILL, a segfault in native code) is named too: no category fits without more evidence (a
kernel OOM-kill line makes it host_oom), so it is `unknown` with that rank as the culprit, which
still puts the others' errors after it where they belong, as consequences.
"""

from __future__ import annotations

from triage.analyzers.config import AnalyzerConfig
from triage.analyzers.findings import Finding, clock, rank_culprit, ranks_phrase, where
from triage.store.job_data import JobData
from triage.store.schema import EVENT_SUPERVISOR_STOP
from triage.taxonomy import Category
from triage.verdict import Culprit, Evidence, Verdict

_ENDINGS = ("exit", "exception", "sigterm")


def preemption_findings(job: JobData, cfg: AnalyzerConfig) -> list[Finding]:
    findings = []
    for attempt in job.attempts:
        ranks = set(job.ranks.loc[job.ranks["attempt"] == attempt, "rank"].astype(int))
        mine = job.events[job.events["attempt"] == attempt]
        ev = mine[mine["kind"] == "sigterm"]
        stops = mine.loc[mine["kind"] == EVENT_SUPERVISOR_STOP, "time"]
        if not stops.empty:
            # The supervisor stopped the attempt: the SIGTERMs from then on are its own. Its
            # stop is stamped before it signals, and ranks on its node share its clock, so a
            # rank elsewhere whose clock is behind cannot make its SIGTERMs all seem earlier;
            # no margin, which a preemption it reacted to within the margin would fall into.
            ev = ev[ev["time"] < float(stops.min())]
        got = set(ev["rank"].dropna().astype(int))
        if not ranks or not ranks <= got:
            continue
        t = float(ev["time"].min())
        findings.append(
            Finding(
                attempt,
                Verdict(
                    Category.PREEMPTION,
                    0.85,
                    f"every rank ({ranks_phrase(ranks)}) received SIGTERM from {clock(t)} with no "
                    f"fault before it: the job was stopped from outside",
                    Culprit(),
                    t,
                    [
                        Evidence(str(r["message"]), "event", float(r["time"]), int(r["rank"]))
                        for _, r in ev.head(5).iterrows()
                    ],
                ),
                fatal=True,
                ranks=tuple(sorted(ranks)),
            )
        )
    return findings


def node_failure_findings(job: JobData, cfg: AnalyzerConfig) -> list[Finding]:
    findings = []
    for attempt in job.attempts:
        hb = job.heartbeats[job.heartbeats["attempt"] == attempt].set_index("rank")["time"]
        ranks = job.ranks[job.ranks["attempt"] == attempt]
        if ranks["node"].nunique() < 2:
            continue
        ended = set(
            job.events.loc[(job.events["attempt"] == attempt) & job.events["kind"].isin(_ENDINGS), "rank"]
            .dropna()
            .astype(int)
        )
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
            findings.append(
                Finding(
                    attempt,
                    Verdict(
                        Category.NODE_FAILURE,
                        0.8,
                        f"node {node} vanished at {clock(t)}: the heartbeats of all its ranks "
                        f"({ranks_phrase(mine)}) stopped together with no error or exit recorded, while "
                        f"the other nodes' ranks lived on for {others.max() - last.max():.0f} s",
                        Culprit(node=str(node)),
                        t,
                        [
                            Evidence(
                                f"rank {r}: last heartbeat at {clock(hb[r])}", "heartbeats", float(hb[r]), r
                            )
                            for r in mine[:8]
                        ],
                    ),
                    fatal=True,
                    ranks=tuple(mine),
                )
            )
    return findings


def vanished_rank_findings(job: JobData, cfg: AnalyzerConfig) -> list[Finding]:
    findings = []
    for attempt in job.attempts:
        hb = job.heartbeats[job.heartbeats["attempt"] == attempt].set_index("rank")["time"]
        # a rank that died before its first heartbeat was written: its start is its last sign
        started = job.ranks[job.ranks["attempt"] == attempt].set_index("rank")["start_time"]
        hb = hb.combine_first(started).dropna()
        ended = set(
            job.events.loc[(job.events["attempt"] == attempt) & job.events["kind"].isin(_ENDINGS), "rank"]
            .dropna()
            .astype(int)
        )
        silent = [int(r) for r in hb.index if int(r) not in ended]
        if len(silent) != 1 or len(hb) < 2:
            continue  # none, or several at once (a node: see node_failure_findings)
        r = silent[0]
        others = hb.drop(index=r)
        if others.max() - hb[r] < cfg.node_silence_spread_s:
            continue  # everyone stopped about together: nothing singles this rank out
        t = float(hb[r])
        culprit = rank_culprit(job, attempt, r)
        findings.append(
            Finding(
                attempt,
                Verdict(
                    Category.UNKNOWN,
                    0.6,
                    f"{where(culprit, [r])} ended abruptly at {clock(t)} with no exception or exit "
                    f"recorded (SIGKILL or a native crash; the kernel log would tell an OOM kill) while "
                    f"the other ranks lived on for {others.max() - t:.0f} s",
                    culprit,
                    t,
                    [
                        Evidence(
                            f"rank {r}: last heartbeat at {clock(t)}, no exit or exception recorded",
                            "heartbeats",
                            t,
                            r,
                        )
                    ],
                ),
                fatal=True,
                ranks=(r,),
            )
        )
    return findings


def lifecycle_findings(job: JobData, cfg: AnalyzerConfig) -> list[Finding]:
    return preemption_findings(job, cfg) + node_failure_findings(job, cfg) + vanished_rank_findings(job, cfg)
