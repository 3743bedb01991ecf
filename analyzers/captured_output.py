"""What `triage run` captured from an attempt's output (`events` of source `supervisor`).

Two kinds of evidence that nothing inside a rank can record:
- a rank the launcher saw die first, by a signal other than SIGTERM (torchrun's "Root Cause"
  entry, `exitcode: -9`): SIGKILL or a native crash leaves no exception behind, and the other
  ranks then fail with peer resets that name only themselves. Named as the culprit with
  category `unknown` (a kernel OOM-kill line for its pid makes it host_oom, through the kernel
  log analyzer; nothing else says why a process was killed);
- the decisive lines of ranks that recorded no exception themselves (a job without hooks, a
  launcher's own error such as a rendezvous timeout): the log classifier's verdict over them,
  the culprit rank from the `[rank<N>]:` prefix torchrun puts on each line. Where the ranks
  do report through hooks, these lines decide only when nothing better exists (they count as
  symptoms): a launcher prints rendezvous errors once a peer node died, and the hooks and
  agents saw that death first.
A rank whose hooks recorded its exception is judged by that record, not by its printed copy.
"""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Set as AbstractSet

import pandas as pd

from triage.analyzers.config import AnalyzerConfig
from triage.analyzers.findings import Finding, clock, rank_culprit, where
from triage.analyzers.log_classifier import LogClassifier, LogClassifierConfig
from triage.display import Status
from triage.store.job_data import JobData
from triage.store.schema import EVENT_LOG_LINE, EVENT_RANK_EXIT
from triage.taxonomy import Category
from triage.verdict import Culprit, Evidence, Verdict

#: Signals a launcher sends to stop the others once one failed, or an operator to stop a job:
#: they say nothing about the rank that got them.
_STOP_SIGNALS = frozenset({signal.SIGTERM.name, signal.SIGINT.name, signal.SIGHUP.name})
_RAW = LogClassifierConfig(threshold=0.0, max_evidence=5, max_consequences=0)
SIGNALLED_RANK_CONFIDENCE = 0.6
#: The evidence source of a rank the supervisor saw gone, by itself, before anything was stopped.
SEEN_GONE = "supervisor"


def _detail(value: object) -> dict[str, object]:
    try:
        d = json.loads(value) if isinstance(value, str) else {}
    except json.JSONDecodeError:
        return {}
    return d if isinstance(d, dict) else {}


def _culprit(job: JobData, attempt: int, rank: int | None, node: object) -> Culprit:
    if rank is None:
        return Culprit(node=str(node) if isinstance(node, str) else None)
    c = rank_culprit(job, attempt, rank)
    if c.node is None and isinstance(node, str):
        c = Culprit(rank=rank, node=node)
    return c


def _last_sign_of_life(job: JobData, attempt: int, rank: int, fallback: float) -> float:
    hb = job.heartbeats[(job.heartbeats["attempt"] == attempt) & (job.heartbeats["rank"] == rank)]
    return float(hb["time"].max()) if not hb.empty else fallback


def _first_failure(row: pd.Series, detail: dict[str, object], raised: set[int]) -> int | None:
    """The rank of an exit the launcher saw first, where no exception of its own explains it."""
    if not detail.get("first_observed") or pd.isna(row["rank"]) or int(row["rank"]) in raised:
        return None
    return int(row["rank"])


def signalled_rank_findings(
    job: JobData,
    attempt: int,
    events: pd.DataFrame,
    raised: set[int],
    printed: AbstractSet[int] = frozenset(),
) -> list[Finding]:
    """Ranks the launcher saw die of a signal first, with no exception of their own. A rank
    that printed a cause is explained by it where it crashed (SIGABRT after gloo's
    EnforceNotMet), not where it was killed: a SIGKILL comes from outside whatever it printed."""
    findings = []
    exits = events[events["kind"] == EVENT_RANK_EXIT]
    # what the launcher reported afterwards for a rank the supervisor saw vanish first (which
    # of the two sees a death first is a race of their polls)
    reported = {
        int(r["rank"]): sig
        for _, r in exits.iterrows()
        if pd.notna(r["rank"]) and isinstance(sig := _detail(r["detail"]).get("signal"), str)
    }
    for _, row in exits.iterrows():
        d = _detail(row["detail"])
        sig = d.get("signal")
        if d.get("vanished") and sig is None:
            # the supervisor saw it gone, with no exit of its own recorded; the launcher may
            # have said since by which signal (a stop signal would be its teardown, not this)
            late = reported.get(int(row["rank"])) if pd.notna(row["rank"]) else None
            sig = late if late is not None and late not in _STOP_SIGNALS else "a signal"
        rank = _first_failure(row, d, raised)
        if rank is None or not isinstance(sig, str) or sig in _STOP_SIGNALS:
            continue
        if rank in printed and sig != "SIGKILL":
            continue
        culprit = _culprit(job, attempt, rank, row["node"])
        t = _last_sign_of_life(job, attempt, rank, float(row["time"]))
        findings.append(
            Finding(
                attempt,
                Verdict(
                    Category.UNKNOWN,
                    SIGNALLED_RANK_CONFIDENCE,
                    f"{where(culprit, [rank])} was killed by {sig} with no exception of its own "
                    f"({'the supervisor saw it gone first' if d.get('vanished') else 'the launcher saw it fail first'}; "
                    "a kernel OOM-kill line would make it host_oom); "
                    f"the other ranks' errors after {clock(t)} followed from it",
                    culprit,
                    t,
                    [
                        Evidence(
                            str(row["message"]),
                            SEEN_GONE if d.get("vanished") else "launcher",
                            float(row["time"]),
                            rank,
                        )
                    ],
                ),
                fatal=True,
                ranks=(rank,),
            )
        )
    return findings


#: Exit codes a program chooses (`sys.exit(3)`, argparse's 2): not 1, any uncaught exception's
#: (an OOM whose traceback went elsewhere too), nor 128 and up, a shell's report of a signal
SELF_ENDED_CODES = range(2, 128)
SELF_ENDED_CONFIDENCE = 0.6


def self_ended_rank_findings(
    job: JobData, attempt: int, events: pd.DataFrame, raised: set[int]
) -> list[Finding]:
    """The rank the launcher saw fail first with an exit code of its own choosing and no
    exception recorded: the program ended itself, the same on every run; its peers' resets
    and timeouts followed from it."""
    findings = []
    for _, row in events[events["kind"] == EVENT_RANK_EXIT].iterrows():
        d = _detail(row["detail"])
        code = d.get("exit_code")
        rank = _first_failure(row, d, raised)
        if (
            rank is None
            or d.get("signal") is not None
            or not isinstance(code, int)
            or code not in SELF_ENDED_CODES
        ):
            continue
        culprit = _culprit(job, attempt, rank, row["node"])
        t = _last_sign_of_life(job, attempt, rank, float(row["time"]))
        summary = (
            f"{where(culprit, [rank])} exited with code {code} on its own (no signal, no exception "
            f"of its own) before the other ranks failed; their errors after {clock(t)} followed from it"
        )
        evidence = [Evidence(str(row["message"]), "launcher", float(row["time"]), rank)]
        findings.append(
            Finding(
                attempt,
                Verdict(Category.USER_CODE_ERROR, SELF_ENDED_CONFIDENCE, summary, culprit, t, evidence),
                fatal=True,
                ranks=(rank,),
            )
        )
    return findings


def log_line_findings(
    job: JobData, attempt: int, events: pd.DataFrame, raised: set[int], *, hooked: bool
) -> list[Finding]:
    lines = events[(events["kind"] == EVENT_LOG_LINE) & ~events["rank"].isin(list(raised))].sort_values(
        "time", kind="stable"
    )
    if lines.empty:
        return []
    classifier = LogClassifier("captured output", _RAW).feed_all(str(m) for m in lines["message"])
    v = classifier.verdict()
    if v.category is Category.UNKNOWN or not v.evidence:
        return []
    rows = lines.reset_index(drop=True)
    first = rows.iloc[(v.evidence[0].line or 1) - 1]
    t = float(first["time"])
    rank = v.culprit.rank
    culprit = _culprit(job, attempt, rank, first["node"])
    if v.culprit.gpu is not None and culprit.gpu is None:
        culprit = Culprit(rank=culprit.rank, node=culprit.node, gpu=v.culprit.gpu)
    # the whole output's reading decides, not the deciding line alone (a plain RuntimeError the
    # job's own code raised is a cause; the same words from a library are a symptom)
    cause = classifier.cause()
    evidence = [
        Evidence(e.text, "captured_output", float(rows.iloc[(e.line or 1) - 1]["time"]), e.rank, e.line)
        for e in v.evidence
    ]
    what = cause.description if cause else v.category.value
    summary = (
        f"{where(culprit, [rank] if rank is not None else [])} printed "
        f"`{_body(v.evidence[0].text)}` at {clock(t)}: {what}"
    )
    return [
        Finding(
            attempt,
            Verdict(v.category, v.confidence, summary, culprit, t, evidence),
            # an attempt its supervisor saw complete was not ended by what it printed (torchrun's
            # store warns of a connection reset as the ranks leave at the end)
            fatal=not _completed(job, attempt),
            # with hooks in the ranks their exceptions say it better, and a line no rank printed
            # (the launcher's own, after a peer died) is a consequence; a rank that printed a
            # cause and raised nothing (a C++ abort: gloo's EnforceNotMet) is its own witness
            symptom=(hooked and pd.isna(first["rank"])) or bool(cause and cause.symptom),
            ranks=(rank,) if rank is not None else (),
        )
    ]


def _completed(job: JobData, attempt: int) -> bool:
    """Whether the supervisor recorded the attempt as completed."""
    out = job.attempt_outcomes
    return bool((out.loc[out["attempt"] == attempt, "status"] == Status.COMPLETED).any())


def _body(text: str) -> str:
    """The line without the launcher's `[rank<N>]:` prefixes, cut for a summary."""
    return re.sub(r"^(?:\s*\[(?:rank|default)?\d+\]:)+\s*", "", text)[:160]


def _ranks_that_printed_a_cause(events: pd.DataFrame) -> set[int]:
    """Ranks whose own captured lines name a cause (gloo's `EnforceNotMet` on a collective
    mismatch before its abort): their exit is explained by what they printed, not a bare
    signal or code, and the output's reading names it."""
    lines = events[(events["kind"] == EVENT_LOG_LINE) & events["rank"].notna()]
    out = set()
    for rank, own in lines.groupby("rank"):
        cause = LogClassifier("captured output", _RAW).feed_all(str(m) for m in own["message"]).cause()
        if cause is not None and not cause.symptom and cause.category is not Category.UNKNOWN:
            out.add(int(rank))
    return out


def captured_output_findings(job: JobData, cfg: AnalyzerConfig) -> list[Finding]:
    ev = job.events
    mine = ev[ev["kind"].isin([EVENT_LOG_LINE, EVENT_RANK_EXIT])]
    findings: list[Finding] = []
    for attempt, events in mine.groupby("attempt"):
        a = int(attempt)
        raised = set(ev.loc[(ev["attempt"] == a) & (ev["kind"] == "exception"), "rank"].dropna().astype(int))
        hooked = bool(((ev["attempt"] == a) & (ev["kind"] == "process_start")).any())
        printed = _ranks_that_printed_a_cause(events)
        findings += signalled_rank_findings(job, a, events, raised, printed)
        findings += self_ended_rank_findings(job, a, events, raised | printed)
        findings += log_line_findings(job, a, events, raised, hooked=hooked)
    return findings
