"""Pure reshaping of one job's analysis and telemetry into what its charts and panels show.

No I/O and no Streamlit here, so every rule a page relies on (which markers go on the time
axis, what counts as the action taken on an incident) is unit-tested without a browser.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from triage.analyzers.fleet import FleetReport
from triage.analyzers.goodput import Goodput
from triage.analyzers.lost_time import OVERHEAD
from triage.dashboard.queries import HEALTH_REASON_BITS, JobView, clock_event_names
from triage.display import action_text, culprit_text
from triage.store.job_data import JobData
from triage.taxonomy import Action, Category

MARKER_COLUMNS = ["time", "kind", "label"]


def job_markers(view: JobView) -> pd.DataFrame:
    """Incidents, restarts and completed checkpoints on one time axis (unix seconds)."""
    rows = [
        {
            "time": i.verdict.first_seen,
            "kind": "incident",
            "label": f"{i.verdict.category.value} (attempt {i.attempt})",
        }
        for i in view.analysis.incidents
        if i.verdict.first_seen is not None
    ]
    rows += [
        {"time": a.start, "kind": "restart", "label": f"attempt {a.attempt} starts"}
        for a in view.analysis.attempts
        if a.attempt > 0 and a.start is not None
    ]
    ck = view.checkpoints.dropna(subset=["end_time"])
    if not ck.empty:
        per_step = ck.groupby(["attempt", "step"], as_index=False)["end_time"].max()
        rows += [
            {"time": r.end_time, "kind": "checkpoint", "label": f"checkpoint step {r.step}"}
            for r in per_step.itertuples()
        ]
    return pd.DataFrame(rows, columns=MARKER_COLUMNS).sort_values("time", ignore_index=True)


def goodput_frame(goodput: Goodput) -> pd.DataFrame:
    """Productive time and each non-zero badput bucket, in seconds and as a share of the total."""
    rows = [{"bucket": "productive", "seconds": goodput.productive_s, "kind": "goodput"}]
    rows += [
        {"bucket": name, "seconds": secs, "kind": "badput"}
        for name, secs in goodput.badput.items()
        if secs > 0
    ]
    df = pd.DataFrame(rows, columns=["bucket", "seconds", "kind"])
    df["share"] = df["seconds"] / goodput.total_s if goodput.total_s > 0 else None
    return df


def clock_event_points(series: pd.DataFrame) -> pd.DataFrame:
    """One row per (sample, active clock-event reason), idle left out; `health` marks the
    reasons that hold a GPU back for its health (HW slowdown, thermal, power brake)."""
    rows = [
        {"time": r["time"], "gpu": r["gpu"], "reason": name, "health": HEALTH_REASON_BITS[name]}
        for r in series.to_dict("records")
        for name in clock_event_names(r.get("clock_event_reasons"))
        if name != "idle"
    ]
    return pd.DataFrame(rows, columns=["time", "gpu", "reason", "health"])


def xid_points(data: JobData, node: str) -> pd.DataFrame:
    """The node's Xids and GPU-loss events during the job, from NVML events and the kernel log."""
    gpu = data.gpu_events[data.gpu_events["node"] == node]
    kern = data.kernel_events[
        (data.kernel_events["node"] == node) & data.kernel_events["kind"].isin(["xid", "gpu_fallen_off_bus"])
    ]
    frames = [
        f
        for f in (
            pd.DataFrame(
                {
                    "time": gpu["time"],
                    "gpu": gpu["gpu"],
                    "xid": gpu["xid"],
                    "text": gpu["text"],
                    "source": gpu["source"],
                }
            ),
            pd.DataFrame(
                {
                    "time": kern["time"],
                    "gpu": kern["gpu"],
                    "xid": kern["xid"],
                    "text": kern["message"],
                    "source": "kernel_log",
                }
            ),
        )
        if not f.empty
    ]
    if not frames:
        return pd.DataFrame(columns=["time", "gpu", "xid", "text", "source"])
    out = pd.concat(frames, ignore_index=True)
    return out.sort_values("time", ignore_index=True)


@dataclass
class IncidentDetail:
    attempt: int
    root_cause: bool
    verdict: dict[str, Any]  # Verdict.to_dict()
    culprit: str  # triage.display.culprit_text, "-" where the verdict names nobody
    evidence: pd.DataFrame  # time, source, rank, line, text
    consequences: list[str]
    action_taken: str
    result: str


def incident_detail(view: JobView, index: int) -> IncidentDetail:
    """Everything the incident page shows; IndexError when the job has no such incident."""
    inc = view.analysis.incidents[index]
    v = inc.verdict.to_dict()
    evidence = pd.DataFrame(v["evidence"], columns=["time", "source", "rank", "line", "text"])
    return IncidentDetail(
        inc.attempt,
        inc.root,
        v,
        culprit_text(v["culprit"]) or "-",
        evidence,
        v["consequences"],
        _action_taken(view, inc.attempt, v),
        _result(view, inc.attempt),
    )


def _action_taken(view: JobView, attempt: int, verdict: dict[str, Any]) -> str:
    """What the supervisor recorded for the attempt (the same category first), in words, else
    that nothing was recorded and what the taxonomy recommends. The culprit's node is named
    as left out only where the action was `restart_excluding_node`: the supervisor records
    the culprit's node with every action, and a fail-fast or plain restart excludes nobody."""
    sup = view.supervisor_incidents
    mine = sup[sup["attempt"] == attempt]
    same = mine[mine["category"] == verdict["category"]]
    row = (same if not same.empty else mine).tail(1)
    if row.empty:
        return f"none recorded by the supervisor (recommended: {action_text(verdict['action'])})"
    r = row.iloc[0]
    action = r["action"] if isinstance(r["action"], str) else None
    node = r["culprit_node"]
    excluded = [node] if action == Action.RESTART_EXCLUDING_NODE.value and isinstance(node, str) else []
    return f"{action_text(action, excluded)} (supervisor, for {r['category']})"


def _result(view: JobView, attempt: int) -> str:
    """How things went after the incident: the next attempt's status, or the attempt's own
    outcome when none followed."""
    later = [a for a in view.analysis.attempts if a.attempt > attempt]
    if later:
        nxt = later[0]
        steps = "" if nxt.first_step is None else f", steps {nxt.first_step}-{nxt.last_step}"
        return f"attempt {nxt.attempt} {nxt.status}{steps}"
    mine = [a for a in view.analysis.attempts if a.attempt == attempt]
    out = view.data.attempt_outcomes
    reason = out.loc[out["attempt"] == attempt, "reason"].dropna()
    status = mine[0].status if mine else view.analysis.status
    why = f" ({reason.iloc[-1]})" if not reason.empty else ""
    return f"no later attempt; attempt {attempt} {status}{why}"


# -- fleet reliability --------------------------------------------------------------------------

LOST_BY_CATEGORY_COLUMNS = ["category", "layer", "gpu_h", "share"]
LOST_BY_NODE_COLUMNS = ["node", "gpu_h", "share"]
LEMON_COLUMNS = ["node", "failures", "expected", "rate_ratio", "p_value", "evidence"]
BY_SIZE_COLUMNS = ["size", "runs", "failures", "ettr", "mttf_h", "mttr_s"]


def lost_by_category_frame(report: FleetReport) -> pd.DataFrame:
    """Lost GPU-hours per cause category, largest first, with the taxonomy's layer of each
    (`overhead`, time no incident caused, is its own layer); the rows add up to
    `report.lost_gpu_h`."""
    rows = [
        {
            "category": r["category"],
            "layer": OVERHEAD if r["category"] == OVERHEAD else Category.parse(r["category"]).layer.value,
            "gpu_h": r["gpu_h"],
            "share": r["share"],
        }
        for r in report.lost_by.get("category", [])
    ]
    return pd.DataFrame(rows, columns=LOST_BY_CATEGORY_COLUMNS)


def lost_by_node_frame(report: FleetReport) -> pd.DataFrame:
    """Lost GPU-hours charged to each culprit node, the report's top N, largest first."""
    rows = [
        {"node": r["node"], "gpu_h": r["gpu_h"], "share": r["share"]} for r in report.lost_by.get("node", [])
    ]
    return pd.DataFrame(rows, columns=LOST_BY_NODE_COLUMNS)


def lemon_frame(report: FleetReport) -> pd.DataFrame:
    """The nodes the lemon test flags, surest first: their failures against what their share
    of node-hours predicts, and the evidence in words."""
    rows = [
        {
            "node": r.node,
            "failures": r.failures,
            "expected": r.expected,
            "rate_ratio": r.rate_ratio,
            "p_value": r.p_value,
            "evidence": r.evidence,
        }
        for r in report.lemons
    ]
    return pd.DataFrame(rows, columns=LEMON_COLUMNS)


def by_size_frame(report: FleetReport) -> pd.DataFrame:
    """ETTR, MTTF and MTTR per job size class (GPUs), smallest first."""
    return pd.DataFrame(
        [{c: r.get(c) for c in BY_SIZE_COLUMNS} for r in report.by_size], columns=BY_SIZE_COLUMNS
    )
