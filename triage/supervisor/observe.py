"""What the supervisor reads from the store: an attempt's step progress while it runs, the
analyzers' verdict once it ended, and the incident and outcome it records about it.

The store is the one source: the ranks' spools (ingested by the node agents, or by the
supervisor itself where no agent runs) and the agents' GPU and kernel-log records. Supervisors
write the `supervisor` partition, never an agent's; every `triage run` on the data dir shares
it, so each write waits briefly for another's (`shared_writer`). The node agents export what is
recorded there (incidents, job scores).
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from triage import display
from triage.analyzers.config import AnalyzerConfig
from triage.analyzers.gpu_health import IMMEDIATE_XIDS
from triage.analyzers.job_analysis import JobAnalysis, analyze_job
from triage.config import EXIT_PREEMPTED
from triage.store import compact, ingest_spools, open_snapshot
from triage.store.job_data import load_job
from triage.store.layout import spool_nodes
from triage.store.schema import (
    EVENT_SOURCE_SUPERVISOR,
    EVENT_SUPERVISOR_STOP,
    GOODPUT_RATIO,
    STRAGGLER_SCORE,
)
from triage.store.shared_writer import shared_writer
from triage.supervisor.identity import current_user
from triage.supervisor.processes import ObservedRank
from triage.supervisor.stall import Stall, read_stall, read_working
from triage.taxonomy import Category
from triage.verdict import Verdict

#: Small job-score segments the supervisor's partition holds before it merges them: one is
#: written per analysis (every `--score-interval`), and readers open every file.
_COMPACT_AT_SEGMENTS = 32
#: Throughput is measured over the steps that ended in this many recent seconds.
_RATE_WINDOW_S = 10.0
#: How far a node's clock may lag the supervisor's: a progress probe opens only the store
#: segments with records from this long before the attempt started on.
_CLOCK_SKEW_S = 600.0


@dataclass(frozen=True)
class Progress:
    """An attempt's progress as the store has it; None where no step is stored yet."""

    first_step: int | None = None
    last_step: int | None = None
    last_progress: float | None = None  # end time of the newest step
    first_step_end: float | None = None
    step_p50_s: float | None = None
    tokens_per_s: float | None = None
    failed_step: int | None = None  # the first step with a non-finite loss, if any
    #: ranks of the attempt that report through Triage's hooks, by how: "explicit" (the
    #: script's own TrainingMonitor, which reports every step) or "auto" (zero-code)
    hooks: tuple[str, ...] = ()
    #: a fatal Xid (`IMMEDIATE_XIDS`) on a GPU a rank of the attempt uses, since the attempt
    #: started: "Xid 79 on GPU 1 of node1 at 12:00:03 (...)"; None while there is none
    gpu_fault: str | None = None
    #: ranks blocked in a collective that others never entered, past the job's own bound
    stall: Stall | None = None
    #: the first step whose known-answer canary came out different on some ranks (silent data
    #: corruption, if a majority agrees: the analysis decides); None while all agree
    canary_split_step: int | None = None
    #: the last step before the split whose canary every rank computed alike: the hardware was
    #: right then, not necessarily one step later (canaries run every N steps, a fault starts
    #: when it starts), so only checkpoints up to it are known good; None: no such step
    canary_clean_step: int | None = None
    #: ranks making progress of their own while no steps come (`stall.WORKING_SQL`: data
    #: prepared in a pool or streamed from files, outside every collective; Python code running
    #: on the main thread since the last step), over the last `WORKING_WINDOW_S` (the main
    #: thread's: `MAIN_WORK_WINDOW_S`)
    working: tuple[int, ...] = ()
    #: steps since the last one with a finite loss whose loss came out NaN or Inf: a loss that
    #: stays non-finite is a model gone NaN, not an overflow skipped (those are the grad norm's)
    nonfinite_loss_steps: int = 0
    #: when the last of the ranks heard from so far came up (its hooks' process start, after
    #: the interpreter and torch were loaded): the start-up limit counts from there, so that
    #: ranks slow to import (a busy node, a shared file system) are not taken for hung
    ranks_up: float | None = None


#: The window over which a rank's work outside steps is measured: in child processes and reads ...
WORKING_WINDOW_S = 20.0
#: ... and on its main thread (shorter: a hang inside a step is taken for work while the step's
#: own code before it is in the window).
MAIN_WORK_WINDOW_S = 10.0

_PROGRESS_SQL = """
WITH s AS (SELECT step, end_time, start_time, tokens, coalesce(nonfinite, false) AS bad, loss
           FROM steps
           WHERE job_id = $job AND run_id IS NOT DISTINCT FROM $run AND attempt = $attempt),
     f AS (SELECT max(step) AS step FROM s WHERE loss IS NOT NULL AND isfinite(loss)),
     e AS (SELECT min(step) AS step FROM events
           WHERE job_id = $job AND run_id IS NOT DISTINCT FROM $run AND attempt = $attempt
             AND kind = 'nonfinite'),
     h AS (SELECT DISTINCT coalesce(json_extract_string(detail, '$.hooks'), 'explicit') AS how
           FROM events
           WHERE job_id = $job AND run_id IS NOT DISTINCT FROM $run AND attempt = $attempt
             AND kind = 'process_start')
SELECT min(step), max(step) FILTER (WHERE NOT bad), max(end_time), min(end_time),
       median(end_time - start_time) FILTER (WHERE NOT bad),
       sum(tokens) FILTER (WHERE end_time > $now - $win),
       least(min(step) FILTER (WHERE bad), (SELECT step FROM e)),
       (SELECT list(how ORDER BY how) FROM h),
       count(DISTINCT step) FILTER (
           WHERE loss IS NOT NULL AND NOT isfinite(loss) AND step > coalesce((SELECT step FROM f), -1)),
       (SELECT max(time) FROM events
        WHERE job_id = $job AND run_id IS NOT DISTINCT FROM $run AND attempt = $attempt
          AND kind = 'process_start')
FROM s
"""


def ingest_pending(data_dir: Path, agent_nodes: Collection[str] = ()) -> None:
    """Move the ranks' spools into the store for the nodes without a live agent of ours (one
    that is starting must not find its partition taken); partitions another process holds
    are skipped."""
    for node in spool_nodes(data_dir):
        if node not in agent_nodes:
            ingest_spools(data_dir, node)


_GPU_FAULT_SQL = f"""
SELECT e.time, e.node, e.gpu, e.xid, e.text FROM gpu_events e
JOIN (SELECT DISTINCT node, gpu, gpu_uuid FROM ranks
      WHERE job_id = $job AND run_id IS NOT DISTINCT FROM $run AND attempt = $attempt) r
  -- a rank's GPU by its UUID where both know it: the index a rank sees (cuda:0 in a container
  -- given one GPU) need not be the node's, and the node's GPU 0 can be another job's
  ON e.node = r.node AND CASE WHEN r.gpu_uuid IS NOT NULL AND e.uuid IS NOT NULL
                              THEN e.uuid = r.gpu_uuid ELSE e.gpu = r.gpu END
WHERE e.kind = 'xid' AND e.xid IN ({", ".join(map(str, sorted(IMMEDIATE_XIDS)))})
  AND e.time >= $since
ORDER BY e.time LIMIT 1
"""


#: The first step whose canaries differ, and the last before it that as many ranks computed alike.
_CANARY_SPLIT_SQL = """
WITH c AS (
  SELECT step, count(DISTINCT message) AS answers, count(DISTINCT rank) AS ranks FROM events
  WHERE job_id = $job AND run_id IS NOT DISTINCT FROM $run AND attempt = $attempt AND kind = 'canary'
  GROUP BY step),
split AS (SELECT arg_min(step, step) AS step, arg_min(ranks, step) AS ranks FROM c WHERE answers > 1)
SELECT split.step, (SELECT max(c.step) FROM c WHERE c.answers = 1 AND c.step < split.step
                    AND c.ranks >= split.ranks)
FROM split
"""


def read_attempt_progress(
    data_dir: Path, job_id: str, run_id: str, attempt: int, *, since: float | None = None
) -> Progress:
    """Step progress of one attempt of this run: never another run's, even of the same job;
    with `since` (the attempt's start), also the first fatal Xid on one of its GPUs after it
    (one from before is a condition the node had, never this attempt's fault)."""
    now = time.time()
    params = {"job": job_id, "run": run_id, "attempt": attempt}
    # every record of the attempt is newer than its start (less the nodes' clock skew): the
    # history of the data dir need not be opened on every probe
    newer_than = None if since is None else since - _CLOCK_SKEW_S
    with open_snapshot(data_dir, now=now, newer_than=newer_than) as snap:
        row = snap.con.execute(_PROGRESS_SQL, {**params, "now": now, "win": _RATE_WINDOW_S}).fetchone()
        fault = None
        if since is not None:
            fault = snap.con.execute(_GPU_FAULT_SQL, {**params, "since": since}).fetchone()
        assert row is not None  # an aggregate without GROUP BY always returns one row
        first_step, last_step, last_end, first_end, p50, recent_tokens, bad, hooks, nonfinite_run, up = row
        stall = read_stall(snap.con, params, p50, now) if last_step is not None else None
        split = snap.con.execute(_CANARY_SPLIT_SQL, params).fetchone()
        working = read_working(
            snap.con, params, now - WORKING_WINDOW_S, max(now - MAIN_WORK_WINDOW_S, last_end or 0.0)
        )
    return Progress(
        None if first_step is None else int(first_step),
        None if last_step is None else int(last_step),
        last_end,
        first_end,
        p50,
        None if recent_tokens is None else float(recent_tokens) / _RATE_WINDOW_S,
        None if bad is None else int(bad),
        tuple(hooks or ()),
        None
        if fault is None
        else (
            f"Xid {fault[3]} on GPU {fault[2]} of {fault[1]} at "
            f"{display.clock(fault[0])} UTC ({str(fault[4])[:160]})"
        ),
        stall,
        None if split is None or split[0] is None else int(split[0]),
        None if split is None or split[1] is None else int(split[1]),
        working,
        int(nonfinite_run or 0),
        up,
    )


_REPORTING_SQL = """
SELECT DISTINCT rank FROM heartbeats
WHERE job_id = $job AND run_id IS NOT DISTINCT FROM $run AND attempt = $attempt AND rank IS NOT NULL
"""


def read_reporting_ranks(data_dir: Path, job_id: str, run_id: str, attempt: int) -> set[int]:
    """The ranks of an attempt whose hooks have sent a heartbeat: where the ranks run on other
    nodes (a Slurm step's), the only list of them this process has."""
    params = {"job": job_id, "run": run_id, "attempt": attempt}
    with open_snapshot(data_dir) as snap:
        return {int(r) for (r,) in snap.con.execute(_REPORTING_SQL, params).fetchall()}


_EXITS_SQL = """
SELECT rank, kind, time, json_extract(detail, '$.exit_code') AS code FROM events
WHERE job_id = $job AND run_id IS NOT DISTINCT FROM $run AND attempt = $attempt
  AND kind IN ('exit', 'exception') AND rank IS NOT NULL
"""


def read_clean_exits(
    data_dir: Path, job_id: str, run_id: str, attempt: int, since: dict[int, float]
) -> set[int]:
    """Those ranks of `since` (rank -> when its process was first seen) whose hooks recorded
    an exit, at that time or later, with no exception and no non-zero exit code: a rank that
    ended its part of the job, while another (rank 0 saving the final model) still works. A
    rank without such a record died (SIGKILL, a signal) or failed. Exit 143 after a SIGTERM
    is a rank that saved its checkpoint and stopped as asked (preemption): the launcher's own
    exit status says what became of the job."""
    params = {"job": job_id, "run": run_id, "attempt": attempt}
    with open_snapshot(data_dir) as snap:
        rows = snap.con.execute(_EXITS_SQL, params).fetchall()
    clean: set[int] = set()
    failed: set[int] = set()
    for rank, kind, when, code in rows:
        if rank not in since or when < since[rank] - 1.0:
            continue  # an earlier process of that rank (a restart within the attempt)
        if kind == "exception" or (code is not None and int(code) not in (0, EXIT_PREEMPTED)):
            failed.add(rank)
        else:
            clean.add(rank)
    return clean - failed


def analyze(
    data_dir: Path, job_id: str, run_id: str, cfg: AnalyzerConfig | None = None
) -> JobAnalysis | None:
    """The analyzers over this run of the job as the store has it now; None when the store
    knows no rank or event of it (a command without the hooks, or one that died before its
    first flush)."""
    with open_snapshot(data_dir) as snap:
        try:
            job = load_job(snap.con, job_id, run=run_id)
        except KeyError:
            return None
    if job.ranks.empty and job.events.empty:
        return None
    return analyze_job(job, cfg or AnalyzerConfig())


def root_verdict(analysis: JobAnalysis | None, attempt: int) -> Verdict | None:
    if analysis is None:
        return None
    return next((i.verdict for i in analysis.incidents if i.attempt == attempt and i.root), None)


def corruption_verdict(analysis: JobAnalysis | None, attempt: int) -> Verdict | None:
    """The attempt's silent data corruption with a culprit node (a majority of ranks agreed
    and one node's did not): the one finding of a running job that the supervisor stops it
    for, since every step after it trains on wrong numbers."""
    if analysis is None:
        return None
    return next(
        (
            i.verdict
            for i in analysis.incidents
            if i.attempt == attempt
            and i.verdict.category is Category.SILENT_DATA_CORRUPTION
            and i.verdict.culprit.node is not None
        ),
        None,
    )


def stop_event_row(
    job_id: str, run_id: str, attempt: int, host: str, at: float, detection: str
) -> dict[str, object]:
    """The event saying this supervisor stopped the attempt at `at` (`EVENT_SUPERVISOR_STOP`)."""
    return {
        "job_id": job_id,
        "run_id": run_id,
        "attempt": attempt,
        "source": EVENT_SOURCE_SUPERVISOR,
        "rank": None,
        "node": host,
        "time": at,
        "kind": EVENT_SUPERVISOR_STOP,
        "message": f"the supervisor stopped the attempt ({detection}): the ranks' SIGTERMs after it are its own",
        "detail": None,
    }


def record_output(
    data_dir: Path,
    job_id: str,
    run_id: str,
    attempt: int,
    *,
    events: list[dict[str, object]],
    ranks: Collection[ObservedRank],
    host: str,
) -> int:
    """What the attempt's captured output showed (`rank_logs`), and, for ranks that recorded
    nothing themselves (`ranks`: a job without hooks), where they ran as seen from outside:
    with these the analyzers place and judge a job that gives no other signal. Rows written."""
    rows = [
        {
            "job_id": job_id,
            "run_id": run_id,
            "attempt": attempt,
            "rank": r.rank,
            "node": r.node or host,
            "gpu": None,
            "pid": r.pid,
            "local_rank": r.local_rank,
            "world_size": r.world_size,
            "hostname": host,
            "device": None,
            "gpu_uuid": None,
            "start_time": r.first_seen,
        }
        for r in ranks
    ]
    if not rows and not events:
        return 0
    with shared_writer(data_dir) as writer:
        written = writer.append_rows("ranks", rows) if rows else 0
        return written + (writer.append_rows("events", events) if events else 0)


def record_attempt(
    data_dir: Path,
    job_id: str,
    run_id: str,
    attempt: int,
    *,
    status: str,
    exit_code: int | None,
    reason: str,
    verdict: Verdict | None,
    action: str | None,
) -> None:
    """The attempt's outcome, and its root cause with the action taken, in the store."""
    now = time.time()
    with shared_writer(data_dir) as writer:
        if verdict is not None:
            d = verdict.to_dict()
            d["action"] = action or d["action"]
            c = verdict.culprit
            writer.append_rows(
                "incidents",
                [
                    {
                        "job_id": job_id,
                        "run_id": run_id,
                        "attempt": attempt,
                        "time": now,
                        "category": d["category"],
                        "layer": d["layer"],
                        "action": d["action"],
                        "confidence": verdict.confidence,
                        "summary": verdict.summary,
                        "culprit_rank": c.rank,
                        "culprit_node": c.node,
                        "culprit_gpu": c.gpu,
                        "culprit_uuid": c.uuid,
                        "first_seen": verdict.first_seen,
                        "verdict": json.dumps(d),
                    }
                ],
            )
        writer.append_rows(
            "attempt_outcomes",
            [
                {
                    "job_id": job_id,
                    "run_id": run_id,
                    "attempt": attempt,
                    "time": now,
                    "status": status,
                    "exit_code": exit_code,
                    "reason": reason,
                }
            ],
        )


def record_scores(data_dir: Path, analysis: JobAnalysis, attempt: int) -> int:
    """The job's goodput ratio and its ranks' straggler scores in `attempt`, as the node agents
    export them (`triage_job_goodput_ratio`, `triage_straggler_score`); rows written."""
    now = time.time()
    key = {"job_id": analysis.job_id, "run_id": analysis.run_id, "attempt": attempt, "time": now}
    rows = [
        {**key, "name": STRAGGLER_SCORE, "rank": s.rank, "node": s.node, "value": s.score}
        for s in analysis.stragglers
        if s.attempt == attempt
    ]
    ratio = analysis.goodput.ratio
    if ratio is not None:
        rows.append({**key, "name": GOODPUT_RATIO, "rank": None, "node": None, "value": ratio})
    if not rows:
        return 0
    with shared_writer(data_dir) as writer:
        writer.append_rows("job_scores", rows)
        if len(writer.manifest.table_segments("job_scores")) >= _COMPACT_AT_SEGMENTS:
            compact(writer)
    return len(rows)


def _cause_columns(v: Verdict | None) -> dict[str, object]:
    return {
        "cause_category": None if v is None else v.category.value,
        "cause_layer": None if v is None else v.layer.value,
        "culprit_node": None if v is None else v.culprit.node,
        "culprit_gpu": None if v is None else v.culprit.gpu,
        "prescribed_action": None if v is None else v.action.value,
    }


def record_accounting(data_dir: Path, analysis: JobAnalysis) -> int:
    """What the run held and made per attempt and node, and its badput charged to causes
    (`attempt_usage`, `lost_time`): what `triage report` and the node agents' fleet counters
    add up. Written once, when the run has ended; rows written."""
    now = time.time()
    g = analysis.goodput
    key = {"job_id": analysis.job_id, "run_id": analysis.run_id, "time": now}
    status = {a.attempt: a.status for a in analysis.attempts}
    job_gpus = g.attempts[0].gpus if g.attempts else 0
    roots = {i.attempt: i.verdict for i in analysis.incidents if i.root}
    usage = [
        {
            **key,
            "attempt": a.attempt,
            "node": node,
            "gpus": ranks,
            "start_time": a.start,
            "end_time": a.end,
            "productive_s": a.productive_s,
            "status": status.get(a.attempt),
            "job_gpus": job_gpus,
            "checkpoint_cost_s": g.checkpoint_cost_s,
            "checkpoint_interval_s": g.checkpoint_interval_s,
            **_cause_columns(roots.get(a.attempt)),
        }
        for a in g.attempts
        for node, ranks in a.ranks_per_node.items()
    ]
    lost = [{**key, **r.to_dict()} for r in analysis.lost_time]
    if not usage:
        return 0
    with shared_writer(data_dir) as writer:
        writer.append_rows("attempt_usage", usage)
        if lost:
            writer.append_rows("lost_time", lost)
        if any(
            len(writer.manifest.table_segments(t)) >= _COMPACT_AT_SEGMENTS
            for t in ("attempt_usage", "lost_time")
        ):
            compact(writer)
    return len(usage) + len(lost)


@dataclass(frozen=True)
class RunRecord:
    """What the `runs` table says of a run; one row at its start and one at its end."""

    job_id: str
    run_id: str
    start_time: float
    command: str


def record_run(
    data_dir: Path, run: RunRecord, *, status: str, reason: str = "", end_time: float | None = None
) -> None:
    """A run is in the store from its start, so `triage jobs` and `analyze` know it even when
    no rank ever writes telemetry."""
    with shared_writer(data_dir) as writer:
        writer.append_rows(
            "runs",
            [
                {
                    "job_id": run.job_id,
                    "run_id": run.run_id,
                    "time": time.time(),
                    "start_time": run.start_time,
                    "end_time": end_time,
                    "status": status,
                    "reason": reason,
                    "command": run.command,
                    "host": socket.gethostname(),
                    "pid": os.getpid(),
                    "user": current_user(),
                }
            ],
        )
