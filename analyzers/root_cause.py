"""Cross-rank root cause: every analyzer's findings about an attempt become its incidents.

The rules of attribution (docs/failure-taxonomy.md), applied to the fatal findings of one attempt:
- symptoms (watchdog timeouts, peer resets) and hangs explain nothing while a causal fault
  exists: a collective timeout on the other ranks is a consequence of the culprit's fault;
- the earliest causal fault leads; among the faults within the correlation window after it, the
  lowest layer wins, then the one that names a culprit (hardware signals often precede the software error by up to a collective
  timeout, and the agent's Xid on a rank's GPU outranks the CUDA error that rank printed);
- a preemption is the cause only when no fault came before it;
- everything else that went wrong in the attempt is listed as a consequence.
So a failed attempt has exactly one root-cause incident. Non-fatal findings (throttling,
stragglers, PCIe, SDC, loss spikes) stay separate incidents, except that a straggler running on
a throttled GPU is folded into the throttling incident as its consequence.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from triage.analyzers.config import AnalyzerConfig
from triage.analyzers.findings import Finding, clock, ranks_phrase
from triage.store.job_data import JobData
from triage.taxonomy import Category
from triage.verdict import Evidence, Verdict

#: Most evidence items and consequences one incident carries (a 1024-rank cascade stays readable).
MAX_EVIDENCE = 12
MAX_CONSEQUENCES = 50


@dataclass
class Incident:
    """`root`: the cause the attempt ended on (at most one per attempt)."""

    attempt: int
    verdict: Verdict
    root: bool

    def to_dict(self) -> dict[str, object]:
        return {"attempt": self.attempt, "root_cause": self.root, **self.verdict.to_dict()}


def _causal(fatal: list[Finding]) -> list[Finding]:
    rules: tuple[Callable[[Finding], bool], ...] = (
        lambda f: not f.symptom and f.verdict.category is not Category.COLLECTIVE_TIMEOUT,
        lambda f: not f.symptom,
        lambda f: True,
    )
    for keep in rules:
        chosen = [f for f in fatal if keep(f)]
        if chosen:
            return chosen
    return []


def choose_root(fatal: list[Finding], cfg: AnalyzerConfig) -> Finding | None:
    causal = _causal(fatal)
    if not causal:
        return None
    earliest = min(causal, key=lambda f: (f.time, -f.verdict.layer.depth))
    if earliest.verdict.category is Category.PREEMPTION:
        return earliest
    window = [
        f
        for f in causal
        if f.time <= earliest.time + cfg.correlation_window_s
        and f.verdict.category is not Category.PREEMPTION
    ]
    # a finding sure enough to be reported outranks a guess (a rank's bare `EOFError` from the
    # store whose host was just SIGKILLed is no deeper cause than that kill); on a tie in layer,
    # a finding that names its culprit says more than one that cannot (a stall seen in the
    # heartbeats vs. the rank the Flight Recorder shows never arrived)
    return max(
        window,
        key=lambda f: (
            f.verdict.confidence >= cfg.confidence_threshold,
            f.verdict.layer.depth,
            f.verdict.culprit.rank is not None,
            -f.time,
            f.verdict.confidence,
        ),
    )


def _same_place(a: Finding, b: Finding) -> bool:
    ca, cb = a.verdict.culprit, b.verdict.culprit
    if ca.node is not None and ca.node == cb.node and ca.gpu is not None and ca.gpu == cb.gpu:
        return True
    return bool(set(a.ranks[:1]) & set(b.ranks)) or bool(set(b.ranks[:1]) & set(a.ranks))


def _root_incident(root: Finding, others: list[Finding]) -> Verdict:
    v = root.verdict
    corroborating = [f for f in others if f.verdict.category is v.category and _same_place(root, f)]
    rest = sorted((f for f in others if f not in corroborating), key=lambda f: f.time)
    evidence = list(v.evidence)
    for f in corroborating:
        evidence.extend(f.verdict.evidence[:2])
    consequences = list(v.consequences)
    consequences += [f"{f.verdict.category.value}: {f.verdict.summary}" for f in rest]
    by_category: dict[Category, set[int]] = defaultdict(set)
    culprits = set(root.ranks[:1])
    for f in rest:
        by_category[f.verdict.category].update(set(f.ranks) - culprits)
    tail = "; ".join(
        f"{ranks_phrase(ranks) + ' then hit' if ranks else 'then'} {cat.value}"
        for cat, ranks in sorted(by_category.items(), key=lambda kv: kv[0].value)
    )
    summary = v.summary + (f"; {tail}" if tail else "")
    confidence = min(0.99, v.confidence + 0.05 * min(2, len(corroborating)))
    # one failure reached by two routes (a rank's own exception record and its captured output,
    # two analyzers of one consequence) is said once
    firsts: dict[tuple[str, str, int | None], Evidence] = {}
    for e in evidence:
        firsts.setdefault((e.text, e.source, e.rank), e)
    evidence = list(firsts.values())
    return dataclasses.replace(
        v,
        confidence=confidence,
        summary=summary,
        evidence=evidence[:MAX_EVIDENCE],
        consequences=_capped(list(dict.fromkeys(consequences))),
    )


def _capped(items: list[str]) -> list[str]:
    if len(items) <= MAX_CONSEQUENCES:
        return items
    return items[:MAX_CONSEQUENCES] + [f"... and {len(items) - MAX_CONSEQUENCES} more"]


def _fold_throttled_stragglers(advisory: list[Finding]) -> list[Finding]:
    """A straggler on a throttled GPU is the throttling's consequence, not its own incident."""
    throttled = [f for f in advisory if f.verdict.category is Category.GPU_THROTTLING]
    kept = []
    for f in advisory:
        if f.verdict.category is Category.STRAGGLER:
            host = next((t for t in throttled if set(f.ranks) & set(t.ranks)), None)
            if host is not None:
                tv = host.verdict
                host.verdict = dataclasses.replace(
                    tv,
                    confidence=min(0.99, tv.confidence + 0.1),
                    summary=tv.summary + f"; it made {ranks_phrase(f.ranks)} a straggler",
                    consequences=tv.consequences + [f"straggler: {f.verdict.summary}"],
                    evidence=(tv.evidence + f.verdict.evidence[:2])[:MAX_EVIDENCE],
                )
                continue
        kept.append(f)
    return kept


def _dedupe(findings: list[Finding]) -> list[Finding]:
    """One incident per (category, culprit): the first, with the others' evidence."""
    seen: dict[tuple[Category, int | None, str | None, int | None], Finding] = {}
    for f in sorted(findings, key=lambda f: f.time):
        c = f.verdict.culprit
        key = (f.verdict.category, c.rank, c.node, c.gpu)
        if key in seen:
            first = seen[key]
            first.verdict = dataclasses.replace(
                first.verdict,
                confidence=max(first.verdict.confidence, f.verdict.confidence),
                evidence=(first.verdict.evidence + f.verdict.evidence)[:MAX_EVIDENCE],
            )
        else:
            seen[key] = f
    return list(seen.values())


def silent_end(job: JobData, attempt: int) -> Verdict:
    """An attempt that stopped with no fault, exit or SIGTERM recorded: a blind spot, said so."""
    hb = job.heartbeats[job.heartbeats["attempt"] == attempt]
    t = float(hb["time"].max()) if not hb.empty else None
    ranks = sorted(int(r) for r in hb["rank"]) if not hb.empty else []
    return Verdict(
        Category.UNKNOWN,
        0.3,
        f"{ranks_phrase(ranks) if ranks else 'the ranks'} stopped at {clock(t)} with "
        f"no error, exit or SIGTERM recorded (killed from outside, or telemetry lost)",
        first_seen=t,
        evidence=[Evidence(f"last heartbeat at {clock(t)}", "heartbeats", t)] if t is not None else [],
    )


def attribute(
    job: JobData, findings: list[Finding], cfg: AnalyzerConfig, ended_silently: set[int]
) -> list[Incident]:
    """Incidents of every attempt, in time order, each verdict thresholded.

    `ended_silently`: attempts known to have ended without any exit record; when no fatal
    finding explains one, it gets an `unknown` root incident rather than looking healthy.
    """
    incidents: list[Incident] = []
    for attempt in sorted({f.attempt for f in findings} | ended_silently):
        mine = [f for f in findings if f.attempt == attempt]
        fatal = [f for f in mine if f.fatal]
        root = choose_root(fatal, cfg)
        if root is not None:
            others = [f for f in fatal if f is not root]
            incidents.append(Incident(attempt, _root_incident(root, others), True))
        elif attempt in ended_silently:
            incidents.append(Incident(attempt, silent_end(job, attempt), True))
        advisory = _dedupe(_fold_throttled_stragglers([f for f in mine if not f.fatal]))
        for f in advisory:
            if root is not None and f.verdict.category is root.verdict.category and _same_place(root, f):
                continue
            incidents.append(Incident(attempt, f.verdict, False))
    incidents.sort(key=lambda i: (i.attempt, not i.root, i.verdict.first_seen or 0.0))
    return [
        dataclasses.replace(i, verdict=i.verdict.thresholded(cfg.confidence_threshold)) for i in incidents
    ]
