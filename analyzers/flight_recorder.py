"""Hangs from PyTorch's Flight Recorder dumps (`fr_dump` events): who never entered the
collective the others wait in.

Every rank of a process group numbers its collectives alike (`collective_seq_id`), so within
one group the newest sequence number a rank entered says how far it got. When some ranks
entered collective S and others of the group stopped before it, the ones behind are the
culprits: the others wait for them (what PyTorch's `fr_trace` calls "missing ranks"). A rank
of the group that gave no dump although one was asked for is silent: dead, or stuck where
even a background thread cannot run. Unlike the heartbeats' in-flight collective, the recorder
sees collectives issued from C++ (DDP's gradient all-reduce), so this works on a script with
no code of Triage's in it. Triage adds what fr_trace cannot: where the culprit's main thread
is (its Python stack), and the category.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from typing import Any

import pandas as pd

from triage.analyzers.code_paths import dump_frame_waits_in_job_code
from triage.analyzers.config import AnalyzerConfig
from triage.analyzers.findings import Finding, clock, rank_culprit, ranks_phrase, where
from triage.store.job_data import JobData
from triage.store.schema import EVENT_FR_DUMP, EVENT_FR_REQUEST
from triage.taxonomy import Category
from triage.verdict import Culprit, Evidence, Verdict

BEHIND_CONFIDENCE = 0.85
SILENT_CONFIDENCE = 0.7


@dataclass(frozen=True)
class GroupState:
    """One rank's view of one process group."""

    entered: int  # newest collective sequence number it entered (-1: none)
    completed: int | None  # newest it completed, where the recorder counts that
    op: str  # the op of `entered`
    created: float | None  # when it entered `entered`
    members: tuple[int, ...] | None


def _members(value: object) -> tuple[int, ...] | None:
    try:
        ranks = ast.literal_eval(value) if isinstance(value, str) else value
        return tuple(sorted(int(r) for r in ranks)) if isinstance(ranks, (list, tuple)) else None
    except (ValueError, SyntaxError, TypeError):
        return None


def _groups(detail: dict[str, Any]) -> dict[str, GroupState]:
    out = {}
    for g in detail.get("groups") or []:
        if not isinstance(g, dict):
            continue
        colls = [c for c in g.get("collectives") or [] if isinstance(c, dict)]
        newest = max(colls, key=lambda c: c.get("seq", -1), default=None)
        entered = max([int(newest["seq"]) if newest else -1, int(g.get("last_enqueued_collective", -1))])
        completed = g.get("last_completed_collective")
        out[str(g.get("name"))] = GroupState(
            entered,
            int(completed) if isinstance(completed, int) else None,
            str(newest.get("op", "")) if newest and int(newest["seq"]) == entered else "",
            float(newest["created"]) if newest and newest.get("created") else None,
            _members(g.get("ranks")),
        )
    return out


def _main_frame(detail: dict[str, object]) -> str | None:
    stacks = detail.get("stacks")
    frames = stacks.get("MainThread") if isinstance(stacks, dict) else None
    return str(frames[-1]) if isinstance(frames, list) and frames else None


def _dumps(job: JobData, attempt: int) -> tuple[dict[int, dict[str, object]], bool]:
    ev = job.events[job.events["attempt"] == attempt]
    out = {}
    for _, row in ev[ev["kind"] == EVENT_FR_DUMP].sort_values("time").iterrows():
        try:
            d = json.loads(row["detail"]) if isinstance(row["detail"], str) else {}
        except json.JSONDecodeError:
            continue
        if isinstance(d, dict) and pd.notna(row["rank"]):
            out[int(row["rank"])] = d  # the newest dump of a rank wins
    return out, bool((ev["kind"] == EVENT_FR_REQUEST).any())


def _group_finding(
    job: JobData,
    attempt: int,
    name: str,
    states: dict[int, GroupState],
    dumps: dict[int, dict[str, object]],
    requested: bool,
) -> Finding | None:
    # The recorder's "completed" counter is no guide on gloo (a collective aborted by the stop
    # counts as completed), so, as fr_trace does, the ranks that entered the newest collective
    # are taken to wait in it when any member never entered it.
    top = max(s.entered for s in states.values())
    waiting = sorted(r for r, s in states.items() if s.entered == top)
    if top < 0:
        return None
    behind = sorted((r for r, s in states.items() if s.entered < top), key=lambda r: (states[r].entered, r))
    members = next((s.members for s in states.values() if s.members), None) or ()
    silent = sorted(set(members) - set(states)) if requested else []
    culprits, confidence = (behind, BEHIND_CONFIDENCE) if behind else (silent, SILENT_CONFIDENCE)
    if not culprits:
        return None
    w = states[waiting[0]]
    op = w.op or "a collective"
    t = min((created for r in waiting if (created := states[r].created)), default=None)
    first = culprits[0]
    culprit = rank_culprit(job, attempt, first)
    if behind:
        how = ", ".join(f"rank {r} at #{states[r].entered}" for r in behind[:8])
        what = (
            f"{where(culprit, culprits)} never entered {op} #{top} of process group "
            f"{name}, in which {ranks_phrase(waiting)} waited since {clock(t)} "
            f"(Flight Recorder: {how})"
        )
    else:
        what = (
            f"{where(culprit, culprits)} gave no Flight Recorder dump when asked (dead, or "
            f"stuck where not even a background thread runs) while {ranks_phrase(waiting)} "
            f"waited in {op} #{top} of process group {name} since {clock(t)}"
        )
    frame = _main_frame(dumps.get(first, {}))
    if frame:
        what += f"; rank {first}'s main thread is at {frame}"
        if dump_frame_waits_in_job_code(frame):
            # a sleep, a loop or a wait the script wrote: the code holds the others up, and the
            # node it ran on is not to blame (no exclusion, no quarantine)
            culprit = Culprit(rank=culprit.rank)
            what += ", in the job's own code, so its node is not blamed"
    evidence = [
        Evidence(
            f"rank {r}: entered {states[r].op or 'collective'} #{states[r].entered}"
            f" of group {name}, completed #{states[r].completed}",
            "flight_recorder",
            states[r].created,
            r,
        )
        for r in (behind + waiting)[:10]
    ]
    if frame:
        evidence.append(Evidence(f"rank {first} main thread: {frame}", "flight_recorder", None, first))
    return Finding(
        attempt,
        Verdict(Category.COLLECTIVE_TIMEOUT, confidence, what, culprit, t, evidence),
        fatal=True,
        ranks=tuple(culprits + waiting),
    )


def flight_recorder_findings(job: JobData, cfg: AnalyzerConfig) -> list[Finding]:
    findings = []
    for attempt in sorted(set(job.events["attempt"].dropna().astype(int))):
        dumps, requested = _dumps(job, attempt)
        if not dumps:
            continue
        by_group: dict[str, dict[int, GroupState]] = {}
        for rank, d in dumps.items():
            for name, state in _groups(d).items():
                by_group.setdefault(name, {})[rank] = state
        found = [
            f
            for name, states in sorted(by_group.items())
            if (f := _group_finding(job, attempt, name, states, dumps, requested))
        ]
        if found:  # the group whose stall started first holds the others up
            findings.append(min(found, key=lambda f: f.time))
    return findings
