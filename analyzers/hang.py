"""Hangs: no step progress for far longer than a step takes, while the processes still live.

PyTorch's watchdog waits 10 minutes by default and then only says that a collective timed out.
Heartbeats say more: each carries the oldest collective its rank entered and has not finished,
(group, seq); the ranks of that group whose last entered seq is below it never arrived, and
they are the culprit. The stall threshold adapts to the job: max(`hang_min_s`,
`hang_step_factor` x the median step time), so a 30 s step does not read as a hang.
"""

from __future__ import annotations

import math

import pandas as pd

from triage.analyzers.config import AnalyzerConfig
from triage.analyzers.findings import (
    Finding,
    clock,
    ranks_culprit,
    ranks_phrase,
    where,
)
from triage.store.job_data import JobData
from triage.store.schema import EVENT_RANK_EXIT
from triage.taxonomy import Category
from triage.verdict import Culprit, Evidence, Verdict

#: The name torch gives the default (world) process group, as the hooks record it.
WORLD_GROUP = "0"


def analysis_time(cfg: AnalyzerConfig) -> float:
    """`cfg.now`; without one the analysis is a post-mortem: no rank counts as alive any more."""
    return math.inf if cfg.now is None else cfg.now


def stall_threshold(job: JobData, attempt: int, cfg: AnalyzerConfig) -> float:
    rs = job.rank_steps[job.rank_steps["attempt"] == attempt]["median_step_s"].dropna()
    p50 = float(rs.median()) if not rs.empty else 0.0
    return max(cfg.hang_min_s, cfg.hang_step_factor * p50)


def _stalls(job: JobData, attempt: int, cfg: AnalyzerConfig) -> pd.DataFrame:
    """Per rank with heartbeats: last progress, alive-until, stall seconds, in-flight collective."""
    now = analysis_time(cfg)
    hb = job.heartbeats[job.heartbeats["attempt"] == attempt].set_index("rank")
    rs = job.rank_steps[job.rank_steps["attempt"] == attempt].set_index("rank")
    starts = job.ranks[job.ranks["attempt"] == attempt].set_index("rank")["start_time"]
    out = hb[["time", "inflight_op", "inflight_group", "inflight_seq", "inflight_since"]].copy()
    # A rank that recorded its exception or exit is gone, however recent its last heartbeat.
    ev = job.events
    ended = ev.loc[(ev["attempt"] == attempt) & ev["kind"].isin(("exception", "exit")), "rank"]
    out["alive"] = ((now - out["time"]) < cfg.heartbeat_stale_s) & ~out.index.isin(ended)
    out["alive_until"] = out["time"].where(~out["alive"], now)
    progress = rs["last_end"].reindex(out.index)
    fallback = starts.reindex(out.index).fillna(hb["first_time"])
    out["last_progress"] = progress.fillna(fallback)
    out["stall_s"] = out["alive_until"] - out["last_progress"]
    return out


def hang_findings(job: JobData, cfg: AnalyzerConfig) -> list[Finding]:
    findings = []
    for attempt in job.attempts:
        f = _attempt_hang(job, attempt, cfg)
        if f is not None:
            findings.append(f)
    return findings


def _attempt_hang(job: JobData, attempt: int, cfg: AnalyzerConfig) -> Finding | None:
    st = _stalls(job, attempt, cfg)
    threshold = stall_threshold(job, attempt, cfg)
    # A rank whose last heartbeat shows it blocked in a collective for several heartbeats died
    # waiting there (the collective timeout fired, or it was stopped): post-mortem, that is the
    # same hang, whatever the timeout was set to.
    ev = job.events[job.events["attempt"] == attempt]
    failed = set(ev.loc[ev["kind"] == "exception", "rank"].dropna().astype(int))
    exited = set(ev.loc[ev["kind"] == "exit", "rank"].dropna().astype(int))
    clean = [r for r in st.index if int(r) in exited and int(r) not in failed]
    blocked_at_end = (
        ~st["alive"]
        & st["inflight_seq"].notna()
        & ~st.index.isin(clean)
        & ((st["time"] - st["inflight_since"]) >= cfg.blocked_at_end_s)
    )
    stalled = st[(st["stall_s"] > threshold) | blocked_at_end]
    if stalled.empty:
        return None
    waiting = stalled.dropna(subset=["inflight_group", "inflight_seq"])
    if waiting.empty:
        t = float(stalled["last_progress"].min())
        ranks = sorted(int(r) for r in stalled.index)
        return Finding(
            attempt,
            Verdict(
                Category.COLLECTIVE_TIMEOUT,
                0.55,
                f"{ranks_phrase(ranks)} made no step progress for "
                f"{stalled['stall_s'].max():.0f} s (threshold {threshold:.0f} s) while still "
                f"heartbeating, outside any recorded collective; last progress at {clock(t)}",
                Culprit(),
                t,
                [
                    Evidence(
                        f"rank {int(r)}: no step since {clock(row['last_progress'])}, "
                        f"last heartbeat {clock(row['time'])}",
                        "heartbeats",
                        float(row["time"]),
                        int(r),
                    )
                    for r, row in stalled.head(10).iterrows()
                ],
            ),
            fatal=True,
            ranks=tuple(ranks),
        )
    key = waiting.groupby(["inflight_group", "inflight_seq"]).size().idxmax()
    group, seq = str(key[0]), int(key[1])
    waiters = waiting[(waiting["inflight_group"] == group) & (waiting["inflight_seq"] == seq)]
    op = str(waiters["inflight_op"].iloc[0])
    since = float(waiters["inflight_since"].min())
    lc = job.last_collectives
    members = lc[(lc["attempt"] == attempt) & (lc["group"] == group)].set_index("rank")
    absent: list[int] = []
    if group == WORLD_GROUP:
        # every rank of the attempt is of the world group; one that has entered none of its
        # collectives yet has no row (a start-up barrier its peers wait at, never reached)
        absent = [r for r in st.index if r not in members.index and r not in waiters.index]
        if absent:
            members = pd.concat(
                [
                    members,
                    pd.DataFrame(
                        {"last_entered_seq": 0, "last_op": None, "last_enter_time": float("nan")},
                        index=pd.Index(absent, name=members.index.name),
                    ),
                ]
            )
    # A blocked collective has no row yet (rows are written when a collective completes), so
    # the waiters are known from their heartbeats; the others below `seq` never entered it.
    missing = members[(members["last_entered_seq"] < seq) & ~members.index.isin(waiters.index)]
    culprits = sorted(int(r) for r in missing.index)
    waited_s = float((waiters["alive_until"] - waiters["inflight_since"]).max())
    waiter_ranks = sorted(int(r) for r in waiters.index)
    evidence = [
        Evidence(
            f"rank {int(r)} waiting in {op} #{seq} (group {group}) since {clock(row['inflight_since'])}",
            "heartbeats",
            float(row["time"]),
            int(r),
        )
        for r, row in waiters.head(5).iterrows()
    ]
    for r, row in missing.head(5).iterrows():
        hb = st["time"].get(r)
        seen = f", last heartbeat at {clock(hb)}" if hb is not None and not math.isnan(hb) else ""
        entered = (
            f"last entered {row['last_op']} #{int(row['last_entered_seq'])}"
            if int(row["last_entered_seq"]) > 0
            else "entered none of its collectives"
        )
        when = float(row["last_enter_time"])
        evidence.append(
            Evidence(
                f"rank {int(r)} {entered} (group {group}){seen}",
                "collectives" if int(row["last_entered_seq"]) > 0 else "heartbeats",
                hb if math.isnan(when) and hb is not None else when,
                int(r),
            )
        )
    consequences = [
        f"rank {int(r)}: waiting in {op} #{seq} (group {group}) since {clock(row['inflight_since'])}"
        for r, row in waiters.iterrows()
    ][:50]
    # Ranks that failed before the waiters gave up left the group (they raised an error, lost
    # their connections, or died: a SIGKILLed rank says nothing itself, the supervisor or the
    # launcher recorded its `rank_exit`): the wait follows from their failure, however long a
    # slow start had kept the others waiting before it. Ranks that never entered and failed
    # in no way meanwhile are stuck elsewhere: the hang's culprits when they are fewer than
    # half of the group. In a pair (or any even split) the heartbeats cannot tell the stuck rank:
    # "outside every collective" means outside the collectives the hooks see (DDP's C++
    # all-reduce, DTensor's and p2p ones are not), and a peer uploading a checkpoint or
    # evaluating on I/O is idle too. The Flight Recorder's stacks name it there.
    failed_at = ev[ev["kind"].isin(("exception", EVENT_RANK_EXIT))].groupby("rank")["time"].min()
    # the waiters waited until they were stopped: up to a heartbeat period after their last beat
    # (a death the supervisor noticed between two beats, then stopped them for)
    wait_end = float(waiters["alive_until"].max()) + cfg.heartbeat_period_s
    # In a pair the heartbeats alone cannot tell (above), but the timeouts can: every waiter's
    # wait ended in an error (its collective timed out) while the ranks that never entered
    # lived on past it with none of their own (stopped only with the job, after). A rank
    # blocked in a collective the hooks do not see would have timed out as well, so they were
    # stuck outside every collective.
    waiters_failed = [float(failed_at[r]) for r in waiter_ranks if r in failed_at.index]
    waiters_ended = (
        min(waiters_failed) if waiters_failed and len(waiters_failed) == len(waiter_ranks) else None
    )
    left = [
        r
        for r in culprits
        if r in failed_at.index
        and float(failed_at[r]) <= wait_end
        and (waiters_ended is None or float(failed_at[r]) < waiters_ended)
    ]
    # the world group holds every rank that heartbeats, the waiters without rows among them
    size = max(len(members), len(st.index)) if group == WORLD_GROUP else len(members)
    outlived = (
        waiters_ended is not None
        and bool(culprits)
        and not left
        and all(
            float(st["time"].get(r, float("nan"))) >= waiters_ended - cfg.heartbeat_period_s for r in culprits
        )
    )
    if culprits and len(left) < len(culprits) and (len(culprits) * 2 < size or outlived):
        culprit = ranks_culprit(job, attempt, culprits)
        # a pair told apart by who timed out is a reading less direct than a lone rank
        confidence = 0.85 if len(culprits) * 2 < size else 0.75
        if not (set(culprits) - set(absent)) and job.rank_steps[job.rank_steps["attempt"] == attempt].empty:
            # before any step, ranks that reached no collective may be preparing on purpose (rank 0
            # downloading while the others wait, `main_process_first`): named, their node not
            # blamed, and less sure than a rank that stopped between collectives
            culprit, confidence = Culprit(rank=culprits[0]), 0.55
        summary = (
            f"{ranks_phrase(waiter_ranks)} hung in {op} #{seq} (group {group}) for "
            f"{waited_s:.0f} s from {clock(since)}, waiting for {where(culprit, culprits)},"
            f" which never entered it"
        )
        return Finding(
            attempt,
            Verdict(Category.COLLECTIVE_TIMEOUT, confidence, summary, culprit, since, evidence, consequences),
            fatal=True,
            ranks=tuple(culprits + waiter_ranks),
        )
    if not culprits and waiters["inflight_op"].nunique() > 1:
        return _desync(job, attempt, waiters, group, seq, since, waited_s, evidence, consequences)
    waited = f"{waited_s:.0f} s from {clock(since)}"
    symptom = bool(culprits) and len(left) == len(culprits)
    if symptom:
        summary = (
            f"{ranks_phrase(waiter_ranks)} waited in {op} #{seq} (group {group}) for {waited}, "
            f"left behind by {ranks_phrase(culprits)}, which failed before entering it"
        )
    elif culprits:
        summary = (
            f"{ranks_phrase(waiter_ranks)} hung in {op} #{seq} (group {group}) for {waited}; "
            f"{ranks_phrase(culprits)} never entered it"
        )
    else:
        summary = (
            f"{ranks_phrase(waiter_ranks)} hung in {op} #{seq} (group {group}) for {waited}; "
            f"every member entered it, so the transport or a kernel on one of them stalled"
        )
    return Finding(
        attempt,
        Verdict(
            Category.COLLECTIVE_TIMEOUT,
            0.5 if symptom else 0.6,
            summary,
            Culprit(),
            since,
            evidence,
            consequences,
        ),
        fatal=True,
        symptom=symptom,
        ranks=tuple(waiter_ranks),
    )


def _desync(
    job: JobData,
    attempt: int,
    waiters: pd.DataFrame,
    group: str,
    seq: int,
    since: float,
    waited_s: float,
    evidence: list[Evidence],
    consequences: list[str],
) -> Finding:
    """Every rank entered the group's collective number `seq`, but not the same one (one rank
    all-gathers for one more batch while another has gone on to the next step's
    reduce-scatter): the ranks took different paths through the training code, and each waits
    for the others in a collective they never call. The rank or ranks alone in their op, fewer
    than half the group, are the ones that took the other path."""
    by_op = waiters.groupby("inflight_op").groups
    ops = sorted(by_op, key=lambda op: (len(by_op[op]), str(op)))
    fewest = sorted(int(r) for r in by_op[ops[0]])
    alone = 2 * len(fewest) < len(waiters) and len(by_op[ops[0]]) < len(by_op[ops[1]])
    culprit = ranks_culprit(job, attempt, fewest) if alone else Culprit()
    calls = "; ".join(f"{ranks_phrase(sorted(int(r) for r in by_op[op]))} in {op}" for op in ops)
    summary = (
        f"the ranks called different collectives as number {seq} of group {group} ({calls}) and "
        f"waited {waited_s:.0f} s from {clock(since)}, each for a collective the others never "
        f"call: the training code took different paths on different ranks (a desync)"
    )
    return Finding(
        attempt,
        Verdict(Category.USER_CODE_ERROR, 0.8, summary, culprit, since, evidence, consequences),
        fatal=True,
        ranks=tuple(sorted(int(r) for r in waiters.index)),
    )
