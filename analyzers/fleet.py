"""Fleet reliability figures over every run in the store: what `triage report` and the
dashboard's Fleet page show.

Each run's accounting (`attempt_usage`, `lost_time`: written by `triage run` when the run ends)
is the only input, so the report over ten thousand jobs reads two small tables, not every
job's telemetry. The definitions, stated once here and in the README:

- **allocated GPU-time**: for each attempt, its GPUs (ranks) times its share of the run's wall
  time: from its first process start to the next attempt's (the GPUs stay held across the
  restart gap), the last attempt to the run's last record. Queueing before the run is not in it.
- **ETTR** (effective training time ratio): productive GPU-time / allocated GPU-time, where
  productive time is each kept step's compute time up to the job's ideal step time (goodput).
- **failure**: an attempt that ended on a root cause (preemptions included: they interrupt).
  **Failures per 1000 node-days**: failures of a category / node-days allocated x 1000.
- **MTTF** per job size: wall hours the runs of that size ran / their failures.
  **MTTR**: from a failed attempt's last step to the next attempt's first step (detection,
  restart, start-up and checkpoint load), averaged over failures that were restarted.
- **lost GPU-hours** by category, layer, culprit node and culprit GPU: the badput charged to
  each incident (`analyzers.lost_time`); `overhead` is the rest (start-up, saves, data wait).
- **avoidable restart**: a restart whose attempt failed again on the same cause, after a
  verdict that prescribed failing fast (the same bug again) or on the same culprit node (a
  restart loop); its cost is the GPU-time of the attempt that repeated the failure.
- **checkpoint advice**: Daly's interval for the run's checkpoint cost and the MTTF of its size
  class, against the interval it used; the cost is the difference in expected waste
  (C/tau + tau/2M of the time) over the run's GPU-hours.
An attempt is in the window when it started in it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import duckdb
import pandas as pd

from triage.analyzers.goodput import daly_interval
from triage.analyzers.lemons import IMPLICATING, LemonTest, NodeRisk, node_risks
from triage.config import ConfigError
from triage.taxonomy import Action

#: Job sizes (GPUs) the report groups by: upper bounds, the last open.
SIZE_CLASSES = (8, 64, 512, 4096)
_HOUR = 3600.0
_DAY = 86400.0


def size_class(gpus: int) -> str:
    lower = 1
    for upper in SIZE_CLASSES:
        if gpus <= upper:
            return f"{lower}-{upper}"
        lower = upper + 1
    return f"{lower}+"


def _size_order(label: str) -> int:
    return int(label.split("-")[0].rstrip("+"))


@dataclass(frozen=True)
class FleetConfig:
    """The report's window and knobs. `until` None: now."""

    since: float | None = None
    until: float | None = None
    top: int = 10
    lemon: LemonTest = field(default_factory=LemonTest)

    def __post_init__(self) -> None:
        if self.top < 1:
            raise ConfigError(f"--top must be >= 1, got {self.top}")
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise ConfigError("--since must be before --until")


@dataclass
class FleetReport:
    since: float | None
    until: float | None
    runs: int = 0
    jobs: int = 0
    attempts: int = 0
    failures: int = 0
    nodes: int = 0
    allocated_gpu_h: float = 0.0
    productive_gpu_h: float = 0.0
    lost_gpu_h: float = 0.0
    wall_h: float = 0.0  # wall hours the runs' attempts ran: the fleet MTTF's numerator
    node_days: float = 0.0
    by_size: list[dict[str, object]] = field(default_factory=list)
    failure_rates: list[dict[str, object]] = field(default_factory=list)
    lost_by: dict[str, list[dict[str, object]]] = field(default_factory=dict)
    avoidable_restarts: list[dict[str, object]] = field(default_factory=list)
    checkpoint_advice: list[dict[str, object]] = field(default_factory=list)
    node_risks: list[NodeRisk] = field(default_factory=list)
    unaccounted_runs: list[tuple[str, str]] = field(default_factory=list)

    @property
    def ettr(self) -> float | None:
        return self.productive_gpu_h / self.allocated_gpu_h if self.allocated_gpu_h > 0 else None

    @property
    def mttf_h(self) -> float | None:
        """Wall hours the runs ran per failure, every job size together."""
        return self.wall_h / self.failures if self.failures else None

    @property
    def failures_per_1000_node_days(self) -> float | None:
        return self.failures / self.node_days * 1000 if self.node_days > 0 else None

    @property
    def lemons(self) -> list[NodeRisk]:
        return [r for r in self.node_risks if r.lemon]

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["ettr"] = self.ettr
        d["mttf_h"] = self.mttf_h
        d["failures_per_1000_node_days"] = self.failures_per_1000_node_days
        d["node_risks"] = [r.to_dict() for r in self.node_risks]
        d["lemons"] = [r.node for r in self.lemons]
        d["unaccounted_runs"] = [{"job_id": j, "run_id": r} for j, r in self.unaccounted_runs]
        return d


def _tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}


def _newest_accounting(table: str) -> str:
    """The rows of `table` from each run's newest accounting (a backfill may write it again)."""
    return f"""
        SELECT * FROM {table} t
        WHERE t.time = (SELECT max(u.time) FROM attempt_usage u
                        WHERE u.job_id = t.job_id AND u.run_id IS NOT DISTINCT FROM t.run_id)
    """


def _window(cfg: FleetConfig, first: str) -> tuple[list[str], list[float]]:
    """WHERE terms (after `first`) and their parameters: started in [since, until)."""
    where, params = [first], []
    if cfg.since is not None:
        where.append("start_time >= ?")
        params.append(cfg.since)
    if cfg.until is not None:
        where.append("start_time < ?")
        params.append(cfg.until)
    return where, params


def load_usage(con: duckdb.DuckDBPyConnection, cfg: FleetConfig) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(attempt_usage rows, lost_time rows) of the attempts that started in the window."""
    tables = _tables(con)
    if "attempt_usage" not in tables:
        return pd.DataFrame(), pd.DataFrame()
    where, params = _window(cfg, "TRUE")
    usage = con.execute(
        f"SELECT * FROM ({_newest_accounting('attempt_usage')}) WHERE {' AND '.join(where)}", params
    ).df()
    if usage.empty or "lost_time" not in tables:
        return usage, pd.DataFrame()
    con.register("_window_attempts", usage[["job_id", "run_id", "attempt", "time"]].drop_duplicates())
    try:
        lost = con.execute(
            """SELECT l.* FROM lost_time l JOIN _window_attempts w
               ON l.job_id = w.job_id AND l.run_id IS NOT DISTINCT FROM w.run_id
              AND l.attempt = w.attempt AND l.time = w.time"""
        ).df()
    finally:
        con.unregister("_window_attempts")
    return usage, lost


def _unaccounted(con: duckdb.DuckDBPyConnection, cfg: FleetConfig) -> list[tuple[str, str]]:
    """Ended runs in the window with no accounting: the supervisor died before writing it, or
    the run predates it (`triage report --backfill` analyses and records them)."""
    tables = _tables(con)
    if "runs" not in tables:
        return []
    accounted = "SELECT DISTINCT job_id, run_id FROM attempt_usage" if "attempt_usage" in tables else None
    where, params = _window(cfg, "end_time IS NOT NULL")
    sql = f"SELECT DISTINCT job_id, run_id FROM runs WHERE {' AND '.join(where)}"
    if accounted:
        sql = f"SELECT * FROM ({sql}) r WHERE NOT EXISTS (SELECT 1 FROM ({accounted}) a WHERE a.job_id = r.job_id AND a.run_id = r.run_id)"
    return [(str(j), str(r)) for j, r in con.execute(sql + " ORDER BY 1, 2", params).fetchall()]


def _attempt_table(usage: pd.DataFrame) -> pd.DataFrame:
    """One row per attempt: its GPUs, span, productive time and cause."""
    usage = usage.assign(
        span_s=(usage["end_time"] - usage["start_time"]).clip(lower=0),
    )
    usage["gpu_s"] = usage["span_s"] * usage["gpus"]
    usage["node_s"] = usage["span_s"]
    keys = ["job_id", "run_id", "attempt"]
    first = usage.groupby(keys, dropna=False).first()
    att = pd.DataFrame(
        {
            "gpus": usage.groupby(keys, dropna=False)["gpus"].sum(),
            "gpu_s": usage.groupby(keys, dropna=False)["gpu_s"].sum(),
            "node_s": usage.groupby(keys, dropna=False)["node_s"].sum(),
        }
    )
    for c in (
        "span_s",
        "start_time",
        "productive_s",
        "job_gpus",
        "cause_category",
        "cause_layer",
        "culprit_node",
        "culprit_gpu",
        "prescribed_action",
        "checkpoint_cost_s",
        "checkpoint_interval_s",
    ):
        att[c] = first[c]
    att["productive_gpu_s"] = att["productive_s"] * att["gpus"]
    att["size"] = att["job_gpus"].fillna(att["gpus"]).astype(int).map(size_class)
    return att.reset_index().sort_values(keys)


def _mttr(lost: pd.DataFrame) -> pd.DataFrame:
    """Per restarted failure: the wall seconds from its last step to the next first step."""
    if lost.empty:
        return pd.DataFrame(columns=["job_id", "run_id", "cause_attempt", "mttr_s"])
    charged = lost[lost["cause_attempt"].notna() & (lost["bucket"] != "lost_progress")]
    # wall seconds are repeated on each node's row: once per (attempt, bucket)
    once = charged.groupby(["job_id", "run_id", "cause_attempt", "attempt", "bucket"], dropna=False)[
        "seconds"
    ].max()
    restarted = charged[charged["attempt"] > charged["cause_attempt"]][["job_id", "run_id", "cause_attempt"]]
    total = (
        once.groupby(["job_id", "run_id", "cause_attempt"], dropna=False).sum().rename("mttr_s").reset_index()
    )
    return total.merge(restarted.drop_duplicates(), on=["job_id", "run_id", "cause_attempt"])


def _by_size(att: pd.DataFrame, mttr: pd.DataFrame) -> list[dict[str, object]]:
    runs = att.groupby(["job_id", "run_id"], dropna=False).agg(
        size=("size", "first"),
        wall_s=("span_s", "sum"),
        gpu_s=("gpu_s", "sum"),
        productive_gpu_s=("productive_gpu_s", "sum"),
        failures=("cause_category", "count"),
    )
    sizes = att.drop_duplicates(["job_id", "run_id"]).set_index(["job_id", "run_id"])["size"]
    mttr = mttr.join(sizes, on=["job_id", "run_id"]) if not mttr.empty else mttr.assign(size=[])
    out = []
    for size, g in runs.groupby("size"):
        failures = int(g["failures"].sum())
        repairs = mttr.loc[mttr["size"] == size, "mttr_s"] if not mttr.empty else pd.Series(dtype=float)
        out.append(
            {
                "size": size,
                "runs": len(g),
                "allocated_gpu_h": float(g["gpu_s"].sum()) / _HOUR,
                "ettr": float(g["productive_gpu_s"].sum() / g["gpu_s"].sum())
                if g["gpu_s"].sum() > 0
                else None,
                "failures": failures,
                "mttf_h": float(g["wall_s"].sum()) / _HOUR / failures if failures else None,
                "mttr_s": float(repairs.mean()) if not repairs.empty else None,
            }
        )
    return sorted(out, key=lambda r: _size_order(str(r["size"])))


def _lost_by(lost: pd.DataFrame, total_lost_s: float, top: int) -> dict[str, list[dict[str, object]]]:
    if lost.empty:
        return {"category": [], "layer": [], "node": [], "gpu": []}
    lost = lost.assign(gpu_name=None)
    has_gpu = lost["culprit_gpu"].notna() & lost["culprit_node"].notna()
    lost.loc[has_gpu, "gpu_name"] = (
        lost.loc[has_gpu, "culprit_node"] + " GPU " + lost.loc[has_gpu, "culprit_gpu"].astype(int).astype(str)
    )
    out: dict[str, list[dict[str, object]]] = {}
    for name, column in (
        ("category", "category"),
        ("layer", "layer"),
        ("node", "culprit_node"),
        ("gpu", "gpu_name"),
    ):
        g = lost.dropna(subset=[column]).groupby(column)["gpu_seconds"].sum().sort_values(ascending=False)
        rows: list[dict[str, object]] = [
            {
                name: str(k),
                "gpu_h": float(v) / _HOUR,
                "share": float(v) / total_lost_s if total_lost_s else None,
            }
            for k, v in g.items()
        ]
        out[name] = rows if name in ("category", "layer") else rows[:top]
    return out


def _avoidable(att: pd.DataFrame, top: int) -> list[dict[str, object]]:
    """Restarts that failed again on the same cause: after a fail-fast verdict (the same bug
    again), or on the same culprit node (a restart loop). `att` is sorted by run, attempt."""
    prev = att.groupby(["job_id", "run_id"], dropna=False, sort=False).shift(1)
    again = prev["cause_category"].notna() & (prev["cause_category"] == att["cause_category"])
    fail_fast = again & (prev["prescribed_action"] == Action.FAIL_FAST.value)
    same_node = prev["culprit_node"].fillna("") == att["culprit_node"].fillna("")
    loop = again & ~fail_fast & same_node
    out: list[dict[str, object]] = []
    for i in att.index[fail_fast | loop]:
        cat, node = prev.at[i, "cause_category"], prev.at[i, "culprit_node"]
        if fail_fast[i]:
            reason = f"{cat} calls for failing fast; the restart failed the same way"
        else:
            reason = f"restart loop: {cat}{f' on {node}' if isinstance(node, str) else ''} again"
        out.append(
            {
                "job_id": att.at[i, "job_id"],
                "run_id": att.at[i, "run_id"],
                "attempt": int(att.at[i, "attempt"]),
                "reason": reason,
                "gpu_h": float(att.at[i, "gpu_s"]) / _HOUR,
            }
        )
    return sorted(out, key=lambda r: -float(r["gpu_h"]))[:top]  # type: ignore[arg-type]


def _waste(tau: pd.Series, cost: pd.Series, mttf: pd.Series) -> pd.Series:
    """Young's first-order expected waste per unit time: saves plus half an interval redone
    per failure."""
    return cost / tau + tau / (2.0 * mttf)


def _checkpoint_advice(
    att: pd.DataFrame, by_size: list[dict[str, object]], top: int
) -> list[dict[str, object]]:
    mttf_h = {r["size"]: r["mttf_h"] for r in by_size if r["mttf_h"]}
    runs = att.groupby(["job_id", "run_id"], dropna=False).agg(
        size=("size", "first"),
        cost=("checkpoint_cost_s", "first"),
        tau=("checkpoint_interval_s", "first"),
        gpu_s=("gpu_s", "sum"),
    )
    runs["mttf_s"] = runs["size"].map(mttf_h).astype(float) * _HOUR
    runs = runs.dropna(subset=["cost", "tau", "mttf_s"])
    runs = runs[runs["tau"] > 0]
    if runs.empty:
        return []
    best = [daly_interval(c, m) for c, m in zip(runs["cost"], runs["mttf_s"], strict=True)]
    runs["advised"] = best
    runs["excess"] = (
        (
            _waste(runs["tau"], runs["cost"], runs["mttf_s"])
            - _waste(runs["advised"], runs["cost"], runs["mttf_s"])
        ).clip(lower=0.0)
        * runs["gpu_s"]
        / _HOUR
    )
    worst = runs.sort_values("excess", ascending=False).head(top)
    return [
        {
            "job_id": job,
            "run_id": run,
            "size": r["size"],
            "checkpoint_cost_s": float(r["cost"]),
            "interval_used_s": float(r["tau"]),
            "interval_advised_s": float(r["advised"]),
            "mttf_h": float(r["mttf_s"]) / _HOUR,
            "excess_gpu_h": float(r["excess"]),
        }
        for (job, run), r in worst.iterrows()
    ]


def node_clears(con: duckdb.DuckDBPyConnection) -> dict[str, float]:
    """node -> when a person last returned it to service (`triage nodes clear`)."""
    if "node_health" not in _tables(con):
        return {}
    rows = con.execute(
        "SELECT node, max(time) FROM node_health WHERE gpu IS NULL AND state = 'cleared' GROUP BY node"
    ).fetchall()
    return {str(n): float(t) for n, t in rows}


def _node_risks(
    usage: pd.DataFrame, att: pd.DataFrame, clears: dict[str, float], test: LemonTest
) -> list[NodeRisk]:
    def after_clear(frame: pd.DataFrame, node_column: str) -> pd.DataFrame:
        cleared = [clears.get(n, -math.inf) for n in frame[node_column]]
        return frame[frame["start_time"].to_numpy(dtype=float) >= cleared]

    usage = after_clear(usage, "node")
    span = (usage["end_time"] - usage["start_time"]).clip(lower=0)
    hours = (span.groupby(usage["node"]).sum() / _HOUR).to_dict()
    implicated = att[att["cause_category"].isin(IMPLICATING) & att["culprit_node"].notna()]
    implicated = after_clear(implicated, "culprit_node")
    failures = implicated.groupby("culprit_node").size().to_dict()
    return node_risks(
        {str(k): int(v) for k, v in failures.items()}, {str(k): float(v) for k, v in hours.items()}, test
    )


def fleet_node_risks(con: duckdb.DuckDBPyConnection, cfg: FleetConfig) -> list[NodeRisk]:
    """The lemon test alone, for the supervisor's end-of-run check."""
    usage, _ = load_usage(con, cfg)
    if usage.empty:
        return []
    return _node_risks(usage, _attempt_table(usage), node_clears(con), cfg.lemon)


def fleet_report(con: duckdb.DuckDBPyConnection, cfg: FleetConfig) -> FleetReport:
    usage, lost = load_usage(con, cfg)
    report = FleetReport(cfg.since, cfg.until, unaccounted_runs=_unaccounted(con, cfg))
    if usage.empty:
        return report
    att = _attempt_table(usage)
    mttr = _mttr(lost)
    report.runs = int(att[["job_id", "run_id"]].drop_duplicates().shape[0])
    report.jobs = int(att["job_id"].nunique())
    report.attempts = len(att)
    report.failures = int(att["cause_category"].notna().sum())
    report.nodes = int(usage["node"].nunique())
    report.allocated_gpu_h = float(att["gpu_s"].sum()) / _HOUR
    report.productive_gpu_h = float(att["productive_gpu_s"].sum()) / _HOUR
    report.node_days = float(att["node_s"].sum()) / _DAY
    report.wall_h = float(att["span_s"].sum()) / _HOUR
    report.lost_gpu_h = float(lost["gpu_seconds"].sum()) / _HOUR if not lost.empty else 0.0
    report.by_size = _by_size(att, mttr)
    failed = att.dropna(subset=["cause_category"])
    rates = (
        failed.groupby(["cause_category", "cause_layer"], dropna=False).size().sort_values(ascending=False)
    )
    report.failure_rates = [
        {
            "category": str(cat),
            "layer": None if pd.isna(layer) else str(layer),
            "failures": int(n),
            "per_1000_node_days": int(n) / report.node_days * 1000 if report.node_days > 0 else None,
        }
        for (cat, layer), n in rates.items()
    ]
    report.lost_by = _lost_by(lost, float(lost["gpu_seconds"].sum()) if not lost.empty else 0.0, cfg.top)
    report.avoidable_restarts = _avoidable(att, cfg.top)
    report.checkpoint_advice = _checkpoint_advice(att, report.by_size, cfg.top)
    report.node_risks = _node_risks(usage, att, node_clears(con), cfg.lemon)
    return report
