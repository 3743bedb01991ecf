"""What the dashboard reads from one store snapshot, as plain frames a page can draw.

Verdicts, statuses and goodput come from the analyzers (`load_job` + `analyze_job`), never from
here; this module only fetches raw telemetry for charts (per-step throughput, the rank x step
grid, bus bandwidth, GPU samples) and bounds its size in SQL, so a 1024-rank job still yields a
few thousand rows per chart. Each `read_*` opens its own snapshot: the dashboard never holds a
store open between refreshes and never takes a lock, so agents keep writing while it reads.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from triage.analyzers.config import AnalyzerConfig
from triage.analyzers.fleet import FleetConfig, FleetReport, fleet_report
from triage.analyzers.job_analysis import JobAnalysis, analyze_job
from triage.collectors.records import CLOCK_EVENT_REASONS, HEALTH_CLOCK_EVENT_MASK
from triage.config import ConfigError
from triage.display import Status, culprit_text
from triage.store import StoreError, check_data_dir, open_snapshot
from triage.store.job_data import JobData, load_job
from triage.store.layout import spool_nodes
from triage.store.node_health import CLEARED, HealthEntry, current_state, quarantines
from triage.taxonomy import Action

#: Cells one heatmap may hold (ranks x step bins); steps are binned to stay under it.
MAX_HEATMAP_CELLS = 20_000
#: Points per GPU time-series chart; samples are thinned evenly beyond it.
MAX_GPU_POINTS = 6_000
#: How far back the fleet page counts a GPU's Xids.
XID_LOOKBACK_S = 24 * 3600.0


class StoreUnreadable(Exception):
    """The data directory or the store in it cannot be read; the message says what to do."""


@dataclass
class FleetView:
    data_dir: str
    jobs: pd.DataFrame  # one row per job, analysed ones with goodput and open incidents
    incidents: pd.DataFrame  # every incident of the analysed jobs
    gpus: pd.DataFrame  # latest state of every (node, gpu) the agents sample
    nodes: pd.DataFrame  # every node seen, with its GPU count and whether it was excluded
    pending_spool_nodes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # what the store read left out, and why

    @property
    def empty(self) -> bool:
        return bool(self.jobs.empty)


@dataclass
class JobView:
    job_id: str
    analysis: JobAnalysis
    data: JobData
    steps: pd.DataFrame  # per (attempt, step) over ranks
    checkpoints: pd.DataFrame
    supervisor_incidents: pd.DataFrame  # what the supervisor recorded (the actions it took)


@contextmanager
def _reading(what: str, data_dir: str) -> Iterator[None]:
    """Turn every way a store can fail to read into one `StoreUnreadable` with advice."""
    try:
        yield
    except ConfigError as exc:  # no such directory, or not a Triage one
        raise StoreUnreadable(str(exc)) from exc
    except (OSError, ValueError, StoreError, duckdb.Error) as exc:
        raise StoreUnreadable(
            f"could not read {what} from the store in {data_dir}: {type(exc).__name__}: {exc}. "
            "A manifest or segment may be damaged or unreadable: check the files and their "
            "permissions (`triage jobs --data-dir ...` reports the same problem), then reload."
        ) from exc


def _tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}


def _df(
    con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any] | list[Any] | None = None
) -> pd.DataFrame:
    return con.execute(sql, params or []).df()


# -- fleet ------------------------------------------------------------------------------------


def read_fleet(data_dir: str, now: float, max_jobs: int) -> FleetView:
    """Jobs (the newest `max_jobs` analysed), their incidents, and every node's GPUs."""
    with _reading("the fleet", data_dir):
        path = check_data_dir(Path(data_dir))
        cfg = AnalyzerConfig(now=now)
        job_rows, incident_rows = [], []
        with open_snapshot(path, now=now) as snap:
            jobs = snap.jobs()
            for i, j in enumerate(jobs):
                row = {
                    "job_id": j.job_id,
                    "status": j.status,
                    "attempts": j.attempts,
                    "ranks": j.ranks,
                    "max_step": j.max_step,
                    "last_progress": j.last_progress,
                    "start_time": j.start_time,
                    "goodput_ratio": None,
                    "open_incidents": None,
                }
                if i < max_jobs:
                    analysis = analyze_job(load_job(snap.con, j.job_id), cfg)
                    row["status"] = analysis.status
                    row["goodput_ratio"] = analysis.goodput.ratio
                    row["open_incidents"] = len(open_incidents(analysis))
                    incident_rows += incident_table(analysis).to_dict("records")
                job_rows.append(row)
            gpus = latest_gpu_state(snap.con, now)
            nodes = node_table(snap.con, gpus)
            problems = list(snap.problems)
        return FleetView(
            str(path),
            pd.DataFrame(job_rows, columns=_JOB_COLUMNS),
            pd.DataFrame(incident_rows, columns=INCIDENT_COLUMNS),
            gpus,
            nodes,
            pending_spool_nodes=spool_nodes(path) if not jobs else [],
            problems=problems,
        )


_JOB_COLUMNS = [
    "job_id",
    "status",
    "attempts",
    "ranks",
    "max_step",
    "last_progress",
    "start_time",
    "goodput_ratio",
    "open_incidents",
]

INCIDENT_COLUMNS = [
    "job_id",
    "attempt",
    "index",
    "time",
    "category",
    "layer",
    "action",
    "confidence",
    "root_cause",
    "culprit",
    "summary",
]


def incident_table(analysis: JobAnalysis) -> pd.DataFrame:
    """One row per incident of a job; `index` is its position in `analysis.incidents`, which
    is how the incident page addresses it."""
    rows = []
    for index, inc in enumerate(analysis.incidents):
        d = inc.verdict.to_dict()
        rows.append(
            {
                "job_id": analysis.job_id,
                "attempt": inc.attempt,
                "index": index,
                "time": d["first_seen"],
                "category": d["category"],
                "layer": d["layer"],
                "action": d["action"],
                "confidence": d["confidence"],
                "root_cause": inc.root,
                "culprit": culprit_text(d["culprit"]),
                "summary": d["summary"],
            }
        )
    return pd.DataFrame(rows, columns=INCIDENT_COLUMNS)


def open_incidents(analysis: JobAnalysis) -> list[int]:
    """Indexes of the incidents still open: those of the newest attempt of a job that has not
    completed (a restart that succeeded, or a finished job, closes them)."""
    if not analysis.attempts or analysis.status == Status.COMPLETED:
        return []
    newest = analysis.attempts[-1].attempt
    return [i for i, inc in enumerate(analysis.incidents) if inc.attempt == newest]


_LATEST_GPU_SQL = """
SELECT node, gpu, uuid, time AS last_sample, gpu_up, temperature_celsius, power_watts,
       sm_clock_hz / 1e6 AS sm_clock_mhz, clock_event_reasons, ecc_uncorrected_volatile,
       remapped_rows_uncorrectable, remapped_rows_failure
FROM gpu_samples
QUALIFY row_number() OVER (PARTITION BY node, gpu ORDER BY time DESC) = 1
ORDER BY node, gpu
"""

_XID_EVENTS_SQL = """
SELECT node, gpu, time, xid FROM gpu_events WHERE time >= $1 AND gpu IS NOT NULL
"""

GPU_STATE_COLUMNS = [
    "node",
    "gpu",
    "uuid",
    "health",
    "temperature_celsius",
    "power_watts",
    "sm_clock_mhz",
    "clock_events",
    "ecc_uncorrected_volatile",
    "remapped_rows_uncorrectable",
    "xids",
    "xid_codes",
    "last_sample",
]


def ledger(con: duckdb.DuckDBPyConnection) -> list[HealthEntry]:
    """The node health ledger's rows (`triage nodes`), oldest first; none without the table."""
    if "node_health" not in _tables(con):
        return []
    rows = _df(con, "SELECT * FROM node_health ORDER BY time")
    return [HealthEntry.from_row(r) for r in rows.to_dict("records")]


def _cleared_at(entries: list[HealthEntry]) -> dict[tuple[str, int | None], float]:
    """(node, gpu) -> when the ledger last returned it to service (gpu None: the whole node)."""
    return {k: e.time for k, e in current_state(entries).items() if e.state == CLEARED}


def latest_gpu_state(con: duckdb.DuckDBPyConnection, now: float) -> pd.DataFrame:
    """Per (node, gpu): its newest sample, Xids in the last day (since its return to service,
    where `triage nodes clear` returned it since: a repaired GPU is no longer flagged for the
    Xid that took it out) and a one-word health."""
    have = _tables(con)
    if "gpu_samples" not in have:
        return pd.DataFrame(columns=GPU_STATE_COLUMNS)
    latest = _df(con, _LATEST_GPU_SQL)
    xids = None
    if "gpu_events" in have:
        events = _df(con, _XID_EVENTS_SQL, [now - XID_LOOKBACK_S])
        cleared = _cleared_at(ledger(con))
        if not events.empty and cleared:
            since = [
                max(cleared.get((n, int(g)), -math.inf), cleared.get((n, None), -math.inf))
                for n, g in zip(events["node"], events["gpu"], strict=True)
            ]
            events = events[events["time"] > pd.Series(since, index=events.index)]
        xids = (
            events.groupby(["node", "gpu"])
            .agg(
                xids=("xid", "size"),
                xid_codes=("xid", lambda x: ", ".join(sorted({str(int(v)) for v in x.dropna()}))),
            )
            .reset_index()
        )
    if xids is not None and not xids.empty:
        latest = latest.merge(xids, on=["node", "gpu"], how="left")
    else:
        latest["xids"], latest["xid_codes"] = 0, None
    latest["xids"] = latest["xids"].fillna(0).astype(int)
    latest["clock_events"] = latest["clock_event_reasons"].map(clock_event_names).map(", ".join)
    latest["health"] = [gpu_health_word(r) for r in latest.to_dict("records")]
    return latest[GPU_STATE_COLUMNS]


def gpu_health_word(sample: dict[str, Any]) -> str:
    """The worst thing the newest sample shows, in one word, for the fleet table."""
    if sample.get("gpu_up") is False:
        return "lost"
    if sample.get("remapped_rows_failure") or (sample.get("ecc_uncorrected_volatile") or 0) > 0:
        return "ecc errors"
    if sample.get("xids"):
        return "xid"
    if any(HEALTH_REASON_BITS[n] for n in clock_event_names(sample.get("clock_event_reasons"))):
        return "throttled"
    return "ok"


#: Reason name -> whether it is a health signal (collectors/records.py holds the one definition).
HEALTH_REASON_BITS: dict[str, bool] = {
    name: bool(bit & HEALTH_CLOCK_EVENT_MASK) for bit, name in CLOCK_EVENT_REASONS.items()
}


def clock_event_names(mask: float | int | None) -> list[str]:
    if mask is None or pd.isna(mask):
        return []
    return [name for bit, name in CLOCK_EVENT_REASONS.items() if int(mask) & bit]


_NODES_SQL = """
SELECT node, max(t) AS last_seen FROM (
    {parts}) WHERE node IS NOT NULL GROUP BY node ORDER BY node
"""

_EXCLUDED_SQL = """
SELECT culprit_node AS node, max(time) AS excluded_at, arg_max(job_id, time) AS excluded_by_job
FROM incidents WHERE action = $1 AND culprit_node IS NOT NULL GROUP BY culprit_node
"""


def node_table(con: duckdb.DuckDBPyConnection, gpus: pd.DataFrame) -> pd.DataFrame:
    """Every node any table names, its GPUs' worst health, whether the node health ledger
    holds it quarantined now (`quarantined`: what stands, as `triage nodes` says it; a node
    returned to service is no longer marked), and the last job whose supervisor left it out
    (`excluded_by_job`, history: an incident it recorded with `restart_excluding_node`)."""
    have = _tables(con)
    sources = {"ranks": "start_time", "heartbeats": "time", "gpu_samples": "time", "host_samples": "time"}
    parts = [f"SELECT node, {col} AS t FROM {t}" for t, col in sources.items() if t in have]
    columns = ["node", "last_seen", "gpus", "unhealthy_gpus", "quarantined", "excluded_by_job"]
    if not parts:
        return pd.DataFrame(columns=columns)
    nodes = _df(con, _NODES_SQL.format(parts="\n    UNION ALL ".join(parts)))
    excluded = (
        _df(con, _EXCLUDED_SQL, [Action.RESTART_EXCLUDING_NODE.value])
        if "incidents" in have
        else pd.DataFrame(columns=["node", "excluded_by_job"])
    )
    nodes = nodes.merge(excluded[["node", "excluded_by_job"]], on="node", how="left")
    held = quarantines(ledger(con))
    nodes["quarantined"] = [
        "; ".join(("node" if e.gpu is None else f"GPU {e.gpu}") + f": {e.reason}" for e in held.get(n, []))
        for n in nodes["node"]
    ]
    counts = gpus.groupby("node").agg(
        gpus=("gpu", "count"), unhealthy_gpus=("health", lambda h: int((h != "ok").sum()))
    )
    nodes = nodes.merge(counts, left_on="node", right_index=True, how="left")
    nodes[["gpus", "unhealthy_gpus"]] = nodes[["gpus", "unhealthy_gpus"]].fillna(0).astype(int)
    return nodes[columns]


# -- fleet reliability --------------------------------------------------------------------------

#: The windows the Fleet page's reliability section offers: URL value -> (label, seconds back;
#: None: all time). An attempt is in the window when it started in it (`analyzers.fleet`).
RELIABILITY_WINDOWS: dict[str, tuple[str, float | None]] = {
    "24h": ("last 24 hours", 86400.0),
    "7d": ("last 7 days", 7 * 86400.0),
    "30d": ("last 30 days", 30 * 86400.0),
    "all": ("all time", None),
}
DEFAULT_RELIABILITY_WINDOW = "7d"
#: Rows of the culprit-node table (and of the report's other top-N lists).
RELIABILITY_TOP = 10


@dataclass
class ReliabilityView:
    window: str  # a key of RELIABILITY_WINDOWS
    report: FleetReport
    accounted_runs: int  # runs with accounting in the whole store, whatever the window


def read_reliability(data_dir: str, now: float, window: str) -> ReliabilityView:
    """The fleet report (`analyzers.fleet`) over the attempts that started in `window`, from
    the two accounting tables `triage run` writes when a run ends. KeyError: no such window."""
    seconds = RELIABILITY_WINDOWS[window][1]
    cfg = FleetConfig(since=None if seconds is None else now - seconds, top=RELIABILITY_TOP)
    with _reading("the fleet's accounting", data_dir):
        with open_snapshot(check_data_dir(Path(data_dir)), now=now) as snap:
            report = fleet_report(snap.con, cfg)
            if "attempt_usage" not in _tables(snap.con):
                return ReliabilityView(window, report, 0)
            row = snap.con.execute(
                "SELECT count(*) FROM (SELECT DISTINCT job_id, run_id FROM attempt_usage)"
            ).fetchone()
        assert row is not None  # an aggregate without GROUP BY returns one row
        return ReliabilityView(window, report, int(row[0]))


# -- one job ----------------------------------------------------------------------------------

_STEPS_SQL = """
SELECT attempt, step, count(*) AS ranks, min(start_time) AS start, max(end_time) AS "end",
       sum(tokens) AS tokens, median(end_time - start_time) AS step_time_s,
       median(loss) FILTER (WHERE isfinite(loss)) AS loss,
       median(grad_norm) FILTER (WHERE isfinite(grad_norm)) AS grad_norm
FROM steps WHERE job_id = $1 AND run_id IS NOT DISTINCT FROM $2
GROUP BY attempt, step ORDER BY attempt, step
"""


def read_job(data_dir: str, job_id: str, now: float) -> JobView:
    """One job as its newest run shows it: the analysis and the raw series its charts need.
    KeyError: no such job."""
    with _reading(f"job {job_id}", data_dir):
        path = check_data_dir(Path(data_dir))
        with open_snapshot(path, now=now) as snap:
            data = load_job(snap.con, job_id)
            analysis = analyze_job(data, AnalyzerConfig(now=now))
            run = [job_id, data.run_id]
            steps = _df(snap.con, _STEPS_SQL, run)
            steps["tokens_per_s"] = steps["tokens"] / (steps["end"] - steps["start"]).where(lambda d: d > 0)
            checkpoints = _df(
                snap.con,
                "SELECT * FROM checkpoints WHERE job_id = $1 "
                "AND run_id IS NOT DISTINCT FROM $2 ORDER BY end_time",
                run,
            )
            supervisor = _df(
                snap.con,
                "SELECT * FROM incidents WHERE job_id = $1 AND run_id IS NOT DISTINCT FROM $2 ORDER BY time",
                run,
            )
        return JobView(job_id, analysis, data, steps, checkpoints, supervisor)


def list_job_ids(data_dir: str, now: float) -> list[str]:
    with _reading("the job list", data_dir):
        path = check_data_dir(Path(data_dir))
        with open_snapshot(path, now=now) as snap:
            return [j.job_id for j in snap.jobs()]


_RANK_GRID_SQL = """
SELECT rank, (step // $bin) * $bin AS step, median(end_time - start_time) AS step_time_s,
       median(collective_wait_s) AS collective_wait_s, count(*) AS steps
FROM steps WHERE job_id = $job AND run_id IS NOT DISTINCT FROM $run AND attempt = $attempt
GROUP BY ALL ORDER BY rank, step
"""

_BANDWIDTH_SQL = """
SELECT op, "group", bytes, count(*) AS calls,
       median(busbw_bytes_per_s) / 1e9 AS busbw_gb_per_s,
       median(end_time - enter_time) * 1e3 AS median_ms
FROM collectives
WHERE job_id = $1 AND attempt = $2 AND run_id IS NOT DISTINCT FROM $3
  AND busbw_bytes_per_s IS NOT NULL
GROUP BY ALL ORDER BY op, bytes
"""


def read_rank_grid(
    data_dir: str, job_id: str, attempt: int, run_id: str | None = None
) -> tuple[pd.DataFrame, int]:
    """Rank x step medians of step time and collective wait, steps binned so the grid stays
    under `MAX_HEATMAP_CELLS`; returns the frame and the bin width in steps."""
    with _reading(f"the ranks of job {job_id}", data_dir):
        with open_snapshot(check_data_dir(Path(data_dir))) as snap:
            row = snap.con.execute(
                "SELECT min(step), max(step), count(DISTINCT rank) FROM steps "
                "WHERE job_id = $1 AND attempt = $2 AND run_id IS NOT DISTINCT FROM $3",
                [job_id, attempt, run_id],
            ).fetchone()
            assert row is not None  # an aggregate without GROUP BY returns one row
            lo, hi, ranks = row
            if lo is None:
                return pd.DataFrame(columns=["rank", "step", "step_time_s", "collective_wait_s", "steps"]), 1
            bin_steps = step_bin(int(hi) - int(lo) + 1, int(ranks))
            grid = _df(
                snap.con, _RANK_GRID_SQL, {"job": job_id, "run": run_id, "attempt": attempt, "bin": bin_steps}
            )
            return grid, bin_steps


def step_bin(steps: int, ranks: int, max_cells: int = MAX_HEATMAP_CELLS) -> int:
    """Steps per heatmap column so that ranks x columns <= max_cells."""
    columns = max(1, max_cells // max(1, ranks))
    return max(1, math.ceil(steps / columns))


def read_bandwidth(data_dir: str, job_id: str, attempt: int, run_id: str | None = None) -> pd.DataFrame:
    """Median bus bandwidth per collective (op, group, size), as the hooks measured it."""
    with _reading(f"the collectives of job {job_id}", data_dir):
        with open_snapshot(check_data_dir(Path(data_dir))) as snap:
            return _df(snap.con, _BANDWIDTH_SQL, [job_id, attempt, run_id])


_GPU_SERIES_SQL = """
SELECT time, node, gpu, gpu_up, temperature_celsius, power_watts,
       sm_clock_hz / 1e6 AS sm_clock_mhz, memory_clock_hz / 1e6 AS memory_clock_mhz,
       clock_event_reasons, ecc_corrected_volatile, ecc_uncorrected_volatile,
       remapped_rows_correctable, remapped_rows_uncorrectable, remapped_rows_failure
FROM gpu_samples WHERE node = $node AND time BETWEEN $t0 AND $t1
QUALIFY (row_number() OVER (PARTITION BY gpu ORDER BY time)) % $every = 0
ORDER BY time, gpu
"""


def read_gpu_series(data_dir: str, node: str, t0: float, t1: float) -> pd.DataFrame:
    """One node's GPU samples in [t0, t1], thinned evenly to about `MAX_GPU_POINTS` rows."""
    with _reading(f"the GPU samples of {node}", data_dir):
        with open_snapshot(check_data_dir(Path(data_dir))) as snap:
            if "gpu_samples" not in _tables(snap.con):
                return pd.DataFrame()
            row = snap.con.execute(
                "SELECT count(*) FROM gpu_samples WHERE node = $1 AND time BETWEEN $2 AND $3", [node, t0, t1]
            ).fetchone()
            assert row is not None  # count(*) returns one row
            n = row[0]
            every = max(1, math.ceil(n / MAX_GPU_POINTS))
            return _df(snap.con, _GPU_SERIES_SQL, {"node": node, "t0": t0, "t1": t1, "every": every})
