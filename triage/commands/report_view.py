"""The reports people read in a terminal: `triage analyze`, and the end of `triage run` and
`triage demo`. One verdict block for all three, readable at 80 columns and at 200: the cause,
culprit, action and confidence first, then the evidence with times and sources, the
consequences folded to one line. Tables only where the data is a table (attempts, badput,
ranks, GPUs). Times are UTC (triage/display.py).
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Any

from rich import box
from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from triage.analyzers.job_analysis import JobAnalysis
from triage.analyzers.lost_time import incident_costs
from triage.display import Status, action_text, clock, culprit_text, duration, status_colour, when
from triage.supervisor.report import AttemptReport, JobReport

#: Evidence lines shown per verdict; `--json` carries them all.
EVIDENCE_SHOWN = 4
_LABEL_WIDTH = 10


def status_text(status: str) -> Text:
    return Text(status, style=f"bold {status_colour(status)}")


def _fields(rows: Sequence[tuple[str, RenderableType]]) -> Table:
    """`label   value` lines whose values wrap under themselves, not under the label."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(width=_LABEL_WIDTH, style="dim", no_wrap=True)
    grid.add_column(overflow="fold")
    for label, value in rows:
        grid.add_row(label, value)
    return grid


def _evidence(evidence: Sequence[Mapping[str, Any]]) -> Table:
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True, style="dim")  # time of day
    grid.add_column(no_wrap=True, style="dim")  # source
    grid.add_column(overflow="fold")
    for e in evidence[:EVIDENCE_SHOWN]:
        grid.add_row(clock(e.get("time")), str(e.get("source") or "-"), Text(str(e.get("text", ""))[:400]))
    if len(evidence) > EVIDENCE_SHOWN:
        grid.add_row(
            "", "", Text(f"(+{len(evidence) - EVIDENCE_SHOWN} more: --json lists them)", style="dim")
        )
    return grid


def verdict_block(
    verdict: Mapping[str, Any],
    *,
    title: str,
    action: str | None = None,
    excluded: Sequence[str] = (),
    why: str | None = None,
    lost: Mapping[str, Any] | None = None,
    decided: str | None = None,
) -> RenderableType:
    """One verdict as a block: a title line (what, how sure), its summary, culprit, action,
    evidence and the consequences in one folded line. `action` is the action taken (the
    supervisor's report knows it, and `why`); else the verdict's prescription is shown."""
    header = Text.assemble(
        (title, "bold"),
        "  ",
        (str(verdict.get("category", "-")), "bold"),
        f" ({verdict.get('layer', '-')} layer)  confidence {float(verdict.get('confidence', 0)):.2f}",
    )
    rows: list[tuple[str, RenderableType]] = [
        ("culprit", Text(culprit_text(verdict.get("culprit")) or "not named by the evidence")),
        ("action", Text(action_text(action or verdict.get("action"), excluded))),
    ]
    if why:
        rows.append(("why", Text(why)))
    if decided:
        rows.append(("supervisor", Text(decided)))
    if lost:
        rows.append(("cost", Text(cost_text(lost))))
    if verdict.get("evidence"):
        rows.append(("evidence", _evidence(verdict["evidence"])))
    consequences = list(verdict.get("consequences") or [])
    if consequences:
        first = consequences[0][:300]
        more = f" (+{len(consequences) - 1} more)" if len(consequences) > 1 else ""
        rows.append(("then", Text(f"{first}{more}", style="dim")))
    body = _fields([("", Text(str(verdict.get("summary", ""))))])
    return Group(header, body, _fields(rows))


#: How the lost-time buckets read in an incident's cost line.
_COST_WORDS = {
    "lost_progress": "progress redone",
    "detection_and_restart": "detection and restart",
    "initialization": "the restart's start-up",
    "checkpoint_load": "checkpoint load",
    "straggler_slowdown": "slow steps",
}


def gpu_time(gpu_seconds: float) -> str:
    return f"{gpu_seconds:.0f} GPU-s" if gpu_seconds < 3600 else f"{gpu_seconds / 3600:,.1f} GPU-h"


def cost_text(lost: Mapping[str, Any]) -> str:
    """What an incident cost the job (`analyzers.lost_time`): `41.2 s (165 GPU-s): detection
    and restart 15.0 s, progress redone 12.0 s, ...`, largest first."""
    parts = sorted(((float(v), k) for k, v in (lost.get("buckets") or {}).items() if v), reverse=True)
    listed = ", ".join(f"{_COST_WORDS.get(k, k)} {duration(v)}" for v, k in parts)
    return f"{duration(lost.get('seconds'))} of the job ({gpu_time(float(lost.get('gpu_seconds') or 0))}): {listed}"


def _root_cost(report: JobReport, attempt: int) -> Mapping[str, Any] | None:
    """The cost the final analysis charged to the attempt's root cause."""
    for i in (report.analysis or {}).get("incidents") or []:
        if i.get("attempt") == attempt and i.get("root_cause"):
            lost: Mapping[str, Any] | None = i.get("lost")
            return lost
    return None


def _titled_table(title: str) -> tuple[Text, Table]:
    """A title line (never squeezed to the table's width) and a light table under it."""
    return Text(title, style="bold"), Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)


def analysis_renderables(a: JobAnalysis) -> list[RenderableType]:
    """`triage analyze`'s report, top to bottom."""
    out: list[RenderableType] = []
    started = min((at.start for at in a.attempts if at.start is not None), default=None)
    head = Text.assemble(("Job ", "bold"), (a.job_id, "bold"), "  ", status_text(a.status))
    out.append(head)
    out.append(
        Text(
            f"run {a.run_id or '-'} · started {when(started)} · times in UTC",
            style="dim",
        )
    )

    attempts_title, attempts = _titled_table("Attempts")
    right = ("attempt", "ranks", "took")
    for col in ("attempt", "status", "ranks", "nodes", "steps", "started", "took"):
        attempts.add_column(col, justify="right" if col in right else "left")
    for at in a.attempts:
        steps = "-" if at.first_step is None else f"{at.first_step}-{at.last_step}"
        took = None if at.start is None or at.end is None else at.end - at.start
        attempts.add_row(
            str(at.attempt),
            status_text(at.status),
            str(at.ranks),
            ", ".join(at.nodes),
            steps,
            clock(at.start),
            duration(took),
        )
    out.extend([Text(""), attempts_title, attempts])

    if not a.incidents:
        out.append(Text("No incidents: nothing went wrong that the telemetry shows."))
    costs = incident_costs(a.lost_time)
    decided = {at.attempt: at.supervisor for at in a.attempts if at.supervisor}
    taken = {at.attempt: at.supervisor_action for at in a.attempts if at.supervisor_action}
    for i in sorted(a.incidents, key=lambda i: (i.attempt, not i.root)):
        title = f"Root cause, attempt {i.attempt}:" if i.root else f"Also in attempt {i.attempt}:"
        cost = costs.get((i.attempt, i.verdict.category.value))
        out.append(Text(""))
        out.append(
            verdict_block(
                i.verdict.to_dict(),
                title=title,
                lost=None if cost is None else cost.to_dict(),
                # what the supervisor did (a restart of an attempt that already ended on a
                # cause whose action is an alert), as `triage run` said it, and why; else the
                # action the cause calls for
                action=taken.get(i.attempt) if i.root else None,
                decided=decided.get(i.attempt) if i.root else None,
            )
        )

    g = a.goodput
    ratio = "-" if g.ratio is None else f"{g.ratio:.1%}"
    good_title, good = _titled_table(
        f"Goodput {ratio}: {duration(g.productive_s)} productive of {duration(g.total_s)}"
    )
    good.add_column("badput")
    good.add_column("time", justify="right")
    good.add_column("share", justify="right")
    for name, secs in g.badput.items():
        if secs > 0:
            good.add_row(name, duration(secs), f"{secs / g.total_s:.1%}" if g.total_s else "-")
    out.extend([Text(""), good_title, good])
    if g.recommended_checkpoint_interval_s is not None:
        out.append(
            Text(
                f"Checkpoint every {duration(g.recommended_checkpoint_interval_s)} (Young/Daly: "
                f"checkpoint cost {duration(g.checkpoint_cost_s)}, MTBF {duration(g.mtbf_s)})"
            )
        )
    out.extend(Text(note, style="dim") for note in g.notes)

    if a.stragglers:
        st_title, st = _titled_table("Slowest ranks (score: compute time over the median rank's)")
        for col in ("rank", "node", "score", "slow", "last in", "others waited", "straggler"):
            st.add_column(col)
        for s in sorted(a.stragglers, key=lambda s: (-s.straggler, -s.score))[:10]:
            st.add_row(
                str(s.rank),
                s.node or "-",
                f"{s.score:.2f}",
                f"{s.slow_share:.0%}",
                f"{s.last_share:.0%}",
                duration(s.wait_caused_s),
                Text("yes", style="bold red") if s.straggler else "no",
            )
        out.extend([Text(""), st_title, st])

    if a.gpus:
        gt_title, gt = _titled_table("GPU health")
        for col in ("node", "gpu", "ranks", "samples", "max temp", "throttled", "ECC", "Xids", "lost"):
            gt.add_column(col)
        for row in a.gpus:
            ranks = row["ranks"]
            gt.add_row(
                str(row["node"]),
                str(row["gpu"]),
                ",".join(map(str, ranks)) if isinstance(ranks, list) else "-",
                str(row["samples"]),
                _number(row["max_temperature_celsius"], ".0f", " C"),
                _number(row["throttled_share"], ".0%"),
                _number(row["ecc_uncorrected"], ".0f"),
                str(row["xid_events"]),
                Text("yes", style="bold red") if row["lost"] else "no",
            )
        out.extend([Text(""), gt_title, gt])
    return out


def _number(value: object, spec: str, unit: str = "") -> str:
    """A GPU health figure, `-` where the GPU did not report it."""
    return f"{value:{spec}}{unit}" if isinstance(value, numbers.Real) else "-"


def print_analysis(a: JobAnalysis, console: Console | None = None) -> None:
    console = console or Console()
    for part in analysis_renderables(a):
        console.print(part)


def job_report_renderables(report: JobReport) -> list[RenderableType]:
    """The end of `triage run` (and `triage demo`): what became of each attempt, what was
    detected, how and how fast, the verdict and the action taken."""
    out: list[RenderableType] = [
        Text.assemble(("Job ", "bold"), (report.job_id, "bold"), "  ", status_text(report.status)),
        Text(f"{report.reason} · run {report.run_id} · times in UTC", style="dim"),
    ]
    recoveries = {r["attempt"]: r for r in report.recoveries()}
    for a in report.attempts:
        # the steps it recorded, as `triage analyze` lists them (its first is the one after
        # the step it resumed from)
        steps = (
            "-"
            if a.resumed_from_step is None or a.last_step is None
            else f"{a.resumed_from_step + 1}-{a.last_step}"
        )
        outcome = a.outcome or Status.RUNNING
        detected = a.detection if a.detection and outcome != Status.COMPLETED else None
        out.append(Text(""))
        out.append(
            Text.assemble(
                (f"attempt {a.attempt}", "bold"),
                f"  {clock(a.started)}  ",
                status_text(outcome),
                f"  steps {steps}",
                f"  detected by {detected}" if detected else "",
            )
        )
        action = a.action
        if (
            a is report.attempts[-1]
            and report.status == Status.GAVE_UP
            and action in ("restart", "restart_excluding_node", "rollback")
        ):
            # the taxonomy's action was due, but the run stopped (see why)
            action = f"none: gave up ({action_text(action)} was due)"
        if a.verdict:
            out.append(
                verdict_block(
                    a.verdict,
                    title="verdict",
                    action=action,
                    excluded=_newly_excluded(report, a),
                    why=a.reason,
                    lost=_root_cost(report, a.attempt),
                )
            )
        rows: list[tuple[str, RenderableType]] = []
        if a.quarantine:
            q = a.quarantine
            where = q["node"] if q["gpu"] is None else f"{q['node']} GPU {q['gpu']}"
            rows.append(
                (
                    "quarantine",
                    Text(
                        f"{where} for later jobs ({q['source']}); `triage nodes clear {q['node']}` returns it"
                    ),
                )
            )
        r = recoveries.get(a.attempt)
        if r:
            n = r["steps_lost"]
            lost = "" if n is None else f", {n} step{'' if n == 1 else 's'} lost"
            rows.append(
                (
                    "recovery",
                    Text(
                        f"detected {duration(r['detect_s'])} after the fault, training again "
                        f"{duration(r['recover_s'])} after it{lost}"
                    ),
                )
            )
        if a.orphans:
            rows.append(("WARNING", Text(f"processes outlived the attempt: {a.orphans}", style="bold red")))
        if a.log:
            rows.append(("output", Text(a.log, style="dim")))
        if rows:
            out.append(_fields(rows))
    out.append(Text(""))
    for node, why in report.quarantined_at_start.items():
        out.append(Text(f"left out from the start, quarantined: {node} ({why})"))
    if report.excluded_nodes:
        out.append(Text(f"excluded nodes: {', '.join(report.excluded_nodes)}"))
    goodput = (report.analysis or {}).get("goodput") or {}
    if goodput.get("ratio") is not None:
        out.append(Text(f"goodput: {goodput['ratio']:.1%} of {duration(goodput['total_s'])}"))
    for error in report.store_errors:
        out.append(Text(f"WARNING: the store did not take a record: {escape(error)}", style="bold red"))
    return out


def _newly_excluded(report: JobReport, attempt: AttemptReport) -> list[str]:
    """The nodes the attempt after this one left out that this one ran on."""
    following = [a for a in report.attempts if a.attempt == attempt.attempt + 1]
    if not following:
        return []
    before = set(attempt.plan.get("excluded_nodes") or [])
    return sorted(set(following[0].plan.get("excluded_nodes") or []) - before)


def print_job_report(report: JobReport, console: Console | None = None) -> None:
    console = console or Console()
    for part in job_report_renderables(report):
        console.print(part)
