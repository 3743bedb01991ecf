"""`analyze_job`: every analyzer over one job snapshot, merged into what a face shows.

The result is what `triage analyze --json` prints and what the dashboard and supervisor read:
job status, attempts, incidents (one root cause per failed attempt, plus non-fatal findings),
goodput with its badput buckets, per-rank straggler scores and per-GPU health.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pandas as pd

from triage.analyzers.captured_output import SEEN_GONE, captured_output_findings
from triage.analyzers.config import AnalyzerConfig
from triage.analyzers.disk_space import full_disk_causes
from triage.analyzers.findings import Finding, ranks_phrase
from triage.analyzers.flight_recorder import flight_recorder_findings
from triage.analyzers.goodput import Goodput, compute_goodput
from triage.analyzers.gpu_health import gpu_health_findings, throttled_gpus
from triage.analyzers.hang import analysis_time, hang_findings
from triage.analyzers.inherited import ledger_findings
from triage.analyzers.lifecycle import lifecycle_findings
from triage.analyzers.log_events import log_findings
from triage.analyzers.lost_time import LostTime, incident_costs, lost_time
from triage.analyzers.nic_links import down_nic_findings
from triage.analyzers.numerical import numerical_findings
from triage.analyzers.root_cause import Incident, attribute
from triage.analyzers.sdc import sdc_findings
from triage.analyzers.straggler import RankScore, straggler_analysis
from triage.display import Status
from triage.store.job_data import JobData
from triage.store.schema import EVENT_SUPERVISOR_STOP
from triage.taxonomy import Category

#: Attempt and job statuses: the store's (running, completed, failed, preempted) plus `hung`,
#: a running attempt whose ranks live but make no progress.
STATUSES = (
    Status.RUNNING,
    Status.HUNG,
    Status.COMPLETED,
    Status.FAILED,
    Status.PREEMPTED,
    Status.INTERRUPTED,
)


@dataclass
class AttemptSummary:
    attempt: int
    status: str
    ranks: int
    nodes: list[str]
    start: float | None
    end: float | None
    first_step: int | None
    last_step: int | None
    #: what the supervisor decided after the attempt, in its words (None: no supervisor)
    supervisor: str | None = None
    #: the action it took on the attempt's root cause (a taxonomy action id; None: none recorded)
    supervisor_action: str | None = None

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass
class JobAnalysis:
    job_id: str
    run_id: str | None
    status: str
    attempts: list[AttemptSummary]
    incidents: list[Incident]
    goodput: Goodput
    stragglers: list[RankScore]
    gpus: list[dict[str, object]]
    lost_time: list[LostTime]

    def to_dict(self) -> dict[str, object]:
        costs = incident_costs(self.lost_time)
        incidents = []
        for i in self.incidents:
            d = i.to_dict()
            cost = costs.get((i.attempt, i.verdict.category.value))
            d["lost"] = None if cost is None else cost.to_dict()
            incidents.append(d)
        return {
            "job_id": self.job_id,
            "run_id": self.run_id,
            "status": self.status,
            "attempts": [a.to_dict() for a in self.attempts],
            "incidents": incidents,
            "goodput": self.goodput.to_dict(),
            "lost_time": [r.to_dict() for r in self.lost_time],
            "stragglers": [s.to_dict() for s in self.stragglers],
            "gpus": self.gpus,
            "recommended_checkpoint_interval_s": self.goodput.recommended_checkpoint_interval_s,
        }


def _alive(job: JobData, attempt: int, cfg: AnalyzerConfig) -> bool:
    """Recent heartbeats and not every rank has recorded its exit (the last heartbeat of a
    rank that exited cleanly is as recent as can be)."""
    if _all_exited(job, attempt):
        return False
    hb = job.heartbeats.loc[job.heartbeats["attempt"] == attempt, "time"]
    return not hb.empty and analysis_time(cfg) - float(hb.max()) < cfg.heartbeat_stale_s


def _all_exited(job: JobData, attempt: int) -> bool:
    ranks = set(job.ranks.loc[job.ranks["attempt"] == attempt, "rank"].astype(int))
    ev = job.events
    exited = set(ev.loc[(ev["attempt"] == attempt) & (ev["kind"] == "exit"), "rank"].dropna().astype(int))
    return bool(ranks) and ranks <= exited


def _recorded_status(job: JobData, attempt: int) -> str | None:
    """The supervisor's word on how the attempt ended, where it gave one."""
    out = job.attempt_outcomes
    row = out[out["attempt"] == attempt]
    if not row.empty and isinstance(row["status"].iloc[0], str):
        return str(row["status"].iloc[0])
    return None


def _status(job: JobData, attempt: int, root: Incident | None, alive: bool) -> str:
    recorded = _recorded_status(job, attempt)
    if recorded is not None:
        return recorded
    if root is not None:
        if root.verdict.category is Category.PREEMPTION:
            return Status.PREEMPTED
        hang = root.verdict.category is Category.COLLECTIVE_TIMEOUT and alive
        return Status.HUNG if hang else Status.FAILED
    if alive:
        return Status.RUNNING
    return Status.COMPLETED if _all_exited(job, attempt) else Status.FAILED


def _attempt_summary(job: JobData, attempt: int, status: str) -> AttemptSummary:
    r = job.ranks[job.ranks["attempt"] == attempt]
    rs = job.rank_steps[job.rank_steps["attempt"] == attempt]
    span = job.attempt_span(attempt)
    outcome = job.attempt_outcomes[job.attempt_outcomes["attempt"] == attempt]
    said = outcome["reason"].dropna()
    took = outcome["action"].dropna()
    return AttemptSummary(
        attempt,
        status,
        int(r["rank"].nunique()),
        sorted(str(n) for n in r["node"].unique()),
        span[0] if span else None,
        span[1] if span else None,
        int(rs["first_step"].min()) if not rs.empty else None,
        int(rs["last_step"].max()) if not rs.empty else None,
        str(said.iloc[-1]) if not said.empty and str(said.iloc[-1]) else None,
        str(took.iloc[-1]) if not took.empty else None,
    )


def _gpu_table(job: JobData, cfg: AnalyzerConfig) -> list[dict[str, object]]:
    """Per (node, gpu) of the job: its ranks, temperature, throttling, ECC and Xid counts.
    Xids and a lost GPU count from the run's start: the lead before it (kept to recognise
    older evidence) can hold an earlier job's lost GPU, since reset."""
    span = job.span()
    if job.ranks.empty or span is None:
        return []
    start = span[0]
    last = job.ranks[job.ranks["attempt"] == job.attempts[-1]]
    health = job.gpu_health.set_index(["node", "gpu"]) if not job.gpu_health.empty else None
    throttled = {tuple(x) for x in throttled_gpus(job, cfg)[["node", "gpu"]].values.tolist()}
    events = job.gpu_events.dropna(subset=["gpu"])
    xids = events[events["time"] >= start].groupby(["node", "gpu"]).size()
    rows = []
    for (node, gpu), on in last.dropna(subset=["gpu"]).groupby(["node", "gpu"]):
        key = (node, int(gpu))
        h = health.loc[key] if health is not None and key in health.index else None
        rows.append(
            {
                "node": str(node),
                "gpu": int(gpu),
                "uuid": next((u for u in on["gpu_uuid"] if isinstance(u, str)), None),
                "ranks": sorted(int(x) for x in on["rank"]),
                "samples": int(h["samples"]) if h is not None else 0,
                "max_temperature_celsius": _num(h, "max_temperature_celsius"),
                "throttled_share": (
                    round(float(h["throttled_samples"]) / max(1, int(h["samples"])), 3)
                    if h is not None
                    else None
                ),
                "throttling": key in throttled,
                "ecc_uncorrected": _num(h, "ecc_uncorrected"),
                "xid_events": int(xids.get(key, 0)),
                "lost": bool(
                    h is not None and pd.notna(h["last_lost_time"]) and h["last_lost_time"] >= start
                ),
            }
        )
    return rows


def _num(h: pd.Series | None, col: str) -> float | None:
    return None if h is None or pd.isna(h[col]) else float(h[col])


_CULPRITLESS_SYMPTOMS = (Category.COLLECTIVE_TIMEOUT, Category.NETWORK_ERROR)


def _drop_vague_duplicates(findings: list[Finding]) -> list[Finding]:
    """An `unknown` finding about one rank ("ended abruptly", "killed by SIGKILL") gives way to
    a categorised cause that blames the same rank in the same attempt, which says more (a
    symptom, such as a launcher's guess that a SIGKILL was the OOM killer, does not); a timeout
    or transport error that names no culprit gets that rank as its culprit (the peer that
    stopped answering). A rank the supervisor saw die by itself keeps its finding over a
    collective timeout that blames it: it never entered the collective because it was dead."""
    blamed: dict[tuple[int, int], set[Category]] = {}
    for f in findings:
        if (
            f.verdict.category is not Category.UNKNOWN
            and f.verdict.culprit.rank is not None
            and not f.symptom
        ):
            blamed.setdefault((f.attempt, f.verdict.culprit.rank), set()).add(f.verdict.category)
    kept = []
    for f in findings:
        v = f.verdict
        seen_gone = any(e.source == SEEN_GONE for e in v.evidence)
        if v.category is not Category.UNKNOWN or v.culprit.rank is None or not f.fatal:
            kept.append(f)
        elif (f.attempt, v.culprit.rank) in blamed and not (
            seen_gone and blamed[(f.attempt, v.culprit.rank)] == {Category.COLLECTIVE_TIMEOUT}
        ):
            continue
        elif seen_gone:
            kept.append(f)  # the cause itself, not a culprit for a stall to borrow
        else:
            orphan = next(
                (
                    g
                    for g in findings
                    if g.attempt == f.attempt
                    and g.fatal
                    and g.verdict.category in _CULPRITLESS_SYMPTOMS
                    and g.verdict.culprit.rank is None
                ),
                None,
            )
            if orphan is None:
                kept.append(f)
                continue
            orphan.verdict.culprit = v.culprit
            orphan.verdict.evidence = list(v.evidence) + orphan.verdict.evidence
            orphan.verdict.summary += f"; {v.summary}"
    return kept


def _flight_recorder_over_heartbeats(findings: list[Finding]) -> list[Finding]:
    """A hang the heartbeats name and the Flight Recorder names too, with the same culprit, is
    one hang seen twice: the recorder's finding also says where the culprit's main thread is, so
    it is the one reported, and the heartbeats' becomes its corroboration (a symptom, so it no
    longer competes for the root by which witness happened to timestamp the wait first)."""
    recorded = {
        (f.attempt, f.verdict.culprit.rank)
        for f in findings
        if f.verdict.category is Category.COLLECTIVE_TIMEOUT
        and f.verdict.culprit.rank is not None
        and any(e.source == "flight_recorder" for e in f.verdict.evidence)
    }
    for f in findings:
        v = f.verdict
        if (
            v.category is Category.COLLECTIVE_TIMEOUT
            and (f.attempt, v.culprit.rank) in recorded
            and not any(e.source == "flight_recorder" for e in v.evidence)
        ):
            f.symptom = True
    return findings


_WORKER_DEATH = re.compile(r"DataLoader worker \(pids?")


def _teardown_consequences(findings: list[Finding], cfg: AnalyzerConfig) -> list[Finding]:
    """A DataLoader worker that died on one rank after another rank was killed is the launcher's
    teardown, not a data fault: torchrun stops every rank's process group once one rank fails,
    and the rank whose worker it stopped reports "worker exited unexpectedly". Such a finding
    becomes a symptom, so the killed rank stays the cause (its own time is its last heartbeat,
    before any teardown)."""
    killed = [
        f
        for f in findings
        if f.fatal
        and f.verdict.category is Category.UNKNOWN
        and f.ranks
        and any(e.source in (SEEN_GONE, "launcher") for e in f.verdict.evidence)
    ]
    for f in findings:
        v = f.verdict
        if f.symptom or v.category is not Category.DATA_PIPELINE_ERROR:
            continue
        if not any(_WORKER_DEATH.search(e.text) for e in v.evidence):
            continue
        first = next(
            (
                k
                for k in sorted(killed, key=lambda k: k.time)
                if k.attempt == f.attempt
                and not set(k.ranks) & set(f.ranks)
                and k.time <= f.time <= k.time + cfg.correlation_window_s
            ),
            None,
        )
        if first is not None:
            f.symptom = True
            v.summary += f"; after {ranks_phrase(first.ranks)} had been killed (the launcher stops every rank's workers)"
    return findings


def _before_the_operators_stop(job: JobData, findings: list[Finding]) -> list[Finding]:
    """An attempt its operator stopped (Ctrl-C, scancel: recorded `interrupted`, with the
    supervisor's stop) failed on nothing found after the stop: its ranks' KeyboardInterrupts,
    the peers that lost them, the save cut short are the stop's doing. What went wrong before
    it stays."""
    stops = job.events[job.events["kind"] == EVENT_SUPERVISOR_STOP]
    cut: dict[int, float] = {}
    for attempt in job.attempts:
        if _recorded_status(job, attempt) != Status.INTERRUPTED:
            continue
        at = stops.loc[stops["attempt"] == attempt, "time"]
        if not at.empty:
            cut[attempt] = float(at.min())
    if not cut:
        return findings
    return [f for f in findings if f.attempt not in cut or f.time < cut[f.attempt]]


def analyze_job(job: JobData, cfg: AnalyzerConfig) -> JobAnalysis:
    stragglers = straggler_analysis(job, cfg)
    findings: list[Finding] = [
        *gpu_health_findings(job, cfg),
        *numerical_findings(job, cfg),
        *sdc_findings(job, cfg),
        *hang_findings(job, cfg),
        *log_findings(job, cfg),
        *lifecycle_findings(job, cfg),
        *captured_output_findings(job, cfg),
        *flight_recorder_findings(job, cfg),
        *stragglers.findings,
        *ledger_findings(job, cfg),
    ]
    findings = _flight_recorder_over_heartbeats(findings)
    findings = full_disk_causes(job, _drop_vague_duplicates(_teardown_consequences(findings, cfg)), cfg)
    findings += down_nic_findings(job, findings, cfg)
    findings = _before_the_operators_stop(job, findings)
    alive = {a: _alive(job, a, cfg) for a in job.attempts}
    # a job without hooks records no exits: the supervisor's "completed" is its clean end, and
    # its "interrupted" the operator's stop
    ended_silently = {
        a
        for a in job.attempts
        if not alive[a]
        and not _all_exited(job, a)
        and _recorded_status(job, a) not in (Status.COMPLETED, Status.INTERRUPTED)
    }
    incidents = attribute(job, findings, cfg, ended_silently)
    roots = {i.attempt: i for i in incidents if i.root}
    attempts = [_attempt_summary(job, a, _status(job, a, roots.get(a), alive[a])) for a in job.attempts]
    goodput = compute_goodput(job, {a for a in job.attempts if a in roots and not alive[a]})
    latest = max((s.attempt for s in stragglers.scores), default=None)
    return JobAnalysis(
        job.job_id,
        job.run_id,
        attempts[-1].status if attempts else Status.FAILED,
        attempts,
        incidents,
        goodput,
        [s for s in stragglers.scores if s.attempt == latest],
        _gpu_table(job, cfg),
        lost_time(goodput, incidents),
    )
