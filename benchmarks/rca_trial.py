"""One trial of `triage bench rca`: its jobs run under the supervisor, then judged against the
injection. The expected action is the restart policy's own decision (`decide`) fed with the
true cause, so an action is wrong only where the diagnosis made it wrong, and the policy's
context rules (no node to leave out on a one-node job, escalation on a repeat) apply to both
sides alike.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from triage.benchmarks.rca_campaign import Expect, Job, Trial
from triage.benchmarks.rca_scoring import NONE, Culprit, Judgement
from triage.display import Status
from triage.store import open_snapshot
from triage.supervisor.config import SupervisorConfig
from triage.supervisor.policy import AttemptResult, Plan, decide
from triage.supervisor.report import AttemptReport, JobReport
from triage.supervisor.scenarios import train_argv
from triage.supervisor.supervisor import Supervisor
from triage.taxonomy import TAXONOMY, Category

#: The trainer's clocks, short so a trial takes under a minute: a dead peer fails a collective
#: in 5 s; the first step (ranks start unevenly on a loaded machine) may take 60 s.
COLLECTIVE_TIMEOUT_S = 5
STARTUP_TIMEOUT_S = 60
HANG_TIMEOUT_S = 15.0

Placement = dict[tuple[int, int], tuple[str, int | None]]


def train_command(job: Job) -> list[str]:
    return train_argv(
        nnodes=job.layout.nnodes,
        nproc_per_node=job.layout.nproc,
        steps=job.steps,
        checkpoint_every=2,
        collective_timeout=COLLECTIVE_TIMEOUT_S,
        shutdown_timeout=5,
        inject=tuple(job.inject),
        extra=("--startup-timeout", str(STARTUP_TIMEOUT_S)),
    )


def supervisor_config(job: Job, data_dir: Path) -> SupervisorConfig:
    return SupervisorConfig(
        job_id=job.job_id,
        data_dir=str(data_dir),
        max_restarts=job.max_restarts,
        hang_timeout=HANG_TIMEOUT_S,
        startup_timeout=STARTUP_TIMEOUT_S,
        backoff=0.0,
        grace=3.0,
        echo_output=False,
        sim_gpus=job.layout.nproc,
    )


def placement(data_dir: Path, job_id: str, run_id: str) -> Placement:
    """(attempt, rank) -> (node, GPU) as the run's ranks recorded them, the newest row of each
    rank (the zero-code hooks' first row knows no GPU yet; the trainer's own monitor's does), as
    the store reads them."""
    with open_snapshot(data_dir) as snap:
        rows = snap.sql(
            "SELECT attempt, rank, arg_max(node, start_time) AS node, arg_max(gpu, start_time) AS gpu "
            "FROM ranks WHERE job_id = $1 AND run_id = $2 GROUP BY attempt, rank",
            [job_id, run_id],
        )
    return {(int(r["attempt"]), int(r["rank"])): (str(r["node"]), r["gpu"]) for r in rows}


def _culprit(d: dict[str, Any] | None) -> Culprit:
    c = (d or {}).get("culprit") or {}
    return Culprit(c.get("rank"), c.get("node"), c.get("gpu"))


def _truth(expect: Expect, where: Placement) -> Culprit:
    if expect.rank is None:
        return Culprit()
    node, gpu = where.get((expect.attempt, expect.rank), (None, None))
    return Culprit(expect.rank, node, gpu)


def _expected_action(job: Job, report: JobReport, expect: Expect, where: Placement) -> str | None:
    """The policy's decision had every attempt up to this one been diagnosed right."""
    truths = sorted(
        (e for e in job.expects if e.ends_attempt and e.attempt <= expect.attempt), key=lambda e: e.attempt
    )
    history = []
    for e in truths:
        seen = report.attempts[e.attempt] if e.attempt < len(report.attempts) else None
        outcome = seen.outcome if seen is not None and seen.outcome != Status.COMPLETED else None
        if outcome is None:  # the fault went unnoticed; judge as if it had been seen
            outcome = Status.PREEMPTED if e.category is Category.PREEMPTION else Status.FAILED
        truth = _truth(e, where)
        last = None if seen is None else seen.last_step
        history.append(
            AttemptResult(e.attempt, outcome, e.category, truth.node, truth.rank, last, (last or 0) + 1)
        )
    seen = report.attempts[expect.attempt] if expect.attempt < len(report.attempts) else None
    decision = decide(
        history,
        nodes=[f"node{k}" for k in range(job.layout.nnodes)],
        plan=Plan(tuple((seen.plan if seen else {}).get("excluded_nodes", ()))),
        max_restarts=job.max_restarts,
        backoff_s=0.0,
    )
    return None if decision.action is None else decision.action.value


def _found(
    report: JobReport, expect: Expect, attempt: AttemptReport | None, *, explained: bool
) -> tuple[str, dict[str, Any] | None, str | None]:
    """(category, incident, action) for a cause the job should have run on: the analysis's
    incident of that category (the one on the culprit rank first); else, where the supervisor
    stopped the attempt and no other injected fault `explained` that, what it stopped it for;
    else an incident on the culprit rank; else none. A finding the job was not stopped for is
    acted on by alerting: every incident is exported, and the alert rules fire on it."""
    incidents = [i for i in (report.analysis or {}).get("incidents", []) if i["attempt"] == expect.attempt]
    same = sorted(
        (i for i in incidents if i["category"] == expect.category.value),
        key=lambda i: _culprit(i).rank != expect.rank,
    )
    verdict = None if attempt is None else attempt.verdict
    if verdict is not None and not explained and (verdict["category"] == expect.category.value or not same):
        return verdict["category"], verdict, None if attempt is None else attempt.action
    if same:
        return same[0]["category"], same[0], "alert"
    on_rank = [i for i in incidents if _culprit(i).rank == expect.rank]
    if on_rank:
        return on_rank[0]["category"], on_rank[0], "alert"
    return NONE, None, None


def judge(trial: Trial, job: Job, report: JobReport, where: Placement) -> list[Judgement]:
    out = []
    for e in job.expects:
        attempt = report.attempts[e.attempt] if e.attempt < len(report.attempts) else None
        detect_s = None
        if e.ends_attempt:
            verdict = None if attempt is None else attempt.verdict
            got = NONE if verdict is None else verdict["category"]
            action = None if attempt is None else attempt.action
            detect_s = None if attempt is None or verdict is None else attempt.detect_s
            expected_action = _expected_action(job, report, e, where)
        else:
            explained = any(o.ends_attempt and o.attempt == e.attempt for o in job.expects)
            got, verdict, action = _found(report, e, attempt, explained=explained)
            expected_action = TAXONOMY[e.category].action.value
        out.append(
            Judgement(
                trial=trial.name,
                kind=trial.kind,
                spec=" ".join(job.inject),
                attempt=e.attempt,
                expected=e.category.value,
                got=got,
                expected_culprit=_truth(e, where),
                got_culprit=_culprit(verdict),
                score_gpu=e.gpu,
                expected_action=expected_action,
                got_action=action,
                detect_s=None if detect_s is None else round(detect_s, 3),
                summary=str((verdict or {}).get("summary", ""))[:400],
            )
        )
    return out


def run_trial(trial: Trial, data_dir: Path) -> tuple[list[Judgement], dict[str, Any]]:
    """Run the trial's jobs in order on `data_dir`; its judgements and a record of each run."""
    judgements, runs = [], []
    for job in trial.jobs:
        started = time.time()
        report = Supervisor(supervisor_config(job, data_dir), train_command(job)).run()
        where = placement(data_dir, job.job_id, report.run_id)
        judgements += judge(trial, job, report, where)
        runs.append(
            {
                "job_id": job.job_id,
                "run_id": report.run_id,
                "layout": str(job.layout),
                "inject": list(job.inject),
                "status": report.status,
                "wall_s": round(time.time() - started, 1),
                "attempts": [
                    {
                        "outcome": a.outcome,
                        "detection": a.detection,
                        "category": (a.verdict or {}).get("category"),
                        "culprit": (a.verdict or {}).get("culprit"),
                        "action": a.action,
                        "last_step": a.last_step,
                        "excluded_nodes": a.plan.get("excluded_nodes"),
                    }
                    for a in report.attempts
                ],
            }
        )
    return judgements, {"trial": trial.name, "kind": trial.kind, "runs": runs}
