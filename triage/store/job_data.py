"""One job's telemetry, shaped for the analyzers: the store's rows boiled down in DuckDB.

A 1024-rank job of 2000 steps holds 2M step rows and 20M collective rows; the analyzers never see
those rows. The per-rank, per-step and per-collective aggregates they reason about are computed
here in SQL (window functions over (group, seq) for who arrived last, per-window medians for
stragglers, last rows per rank for heartbeats), so pandas only ever holds thousands of rows.

A table a store does not have yet (no agent ran, so no GPU samples) yields an empty frame with
the expected columns: the analyzers then simply find nothing there.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import duckdb
import pandas as pd

from triage.collectors.records import HEALTH_CLOCK_EVENT_MASK
from triage.store.collective_summary import ARRIVALS_SQL, SUMMARISED_TABLE, SUMMARY_SQL

#: Steps per window of the per-rank compute-time medians (stragglers must persist over windows).
DEFAULT_WINDOW_STEPS = 50
#: GPU/kernel events this long before a run's first record are read with it: not to blame them
#: on the run (the analyzers attribute evidence only within an attempt's window), but to
#: recognise a condition it inherited (a GPU already lost when the run was placed on it).
DEFAULT_MARGIN_S = 300.0
#: The nodes' clocks may disagree by this much: a GPU sample this early is still the run's.
START_SKEW_S = 5.0
#: ... and this long after its last record: a fault's own records (an Xid, a lost GPU sample)
#: can trail the last telemetry its ranks wrote; anything later belongs to whatever ran next.
TAIL_S = 30.0
#: Rows kept of the few tables that can grow without bound in a broken job.
MAX_DETAIL_ROWS = 5000


@dataclass
class JobData:
    """Everything the analyzers read about one job, one frame per concern.

    Frames, keyed by `attempt` (and `rank`) where they concern ranks:
    - `ranks`: attempt, rank, node, gpu, gpu_uuid, pid, world_size, start_time (process start)
    - `rank_steps`: per (attempt, rank): steps, first_step, last_step, first_start, last_end,
      median_step_s, median_compute_s, data_wait_s
    - `step_timeline`: per (attempt, step) over ranks: ranks, start, end, data_wait_s (median),
      loss (median), grad_norm (median)
    - `rank_windows`: per (attempt, rank, window of `window_steps` steps): steps, first_step,
      start, median_compute_s
    - `nonfinite_steps`: the earliest step rows with a NaN/Inf loss or grad-norm: attempt, rank,
      step, time, loss, grad_norm
    - `loss_outliers`: step rows whose loss differs from the value most ranks agree on exactly
      (where a majority agrees, i.e. the loss is replicated): attempt, rank, step, time, loss,
      agreed_loss, agreeing, ranks
    - `arrivals`: per (attempt, rank): collectives, last_arrivals (times it entered a collective
      last), wait_caused_s (how long the others waited for it in those collectives)
    - `last_collectives`: per (attempt, rank, group), for the groups some rank's last heartbeat
      shows it blocked in (the one question the hang analysis asks of them; none for a job no
      rank was left waiting in, which spares a pass over every collective row):
      last_entered_seq, last_completed_seq, last_op, last_enter_time
    - `heartbeats`: per (attempt, rank) the last heartbeat: first_time, time, step, inflight_op,
      inflight_group, inflight_seq, inflight_since
    - `events`: every event but canaries: attempt, rank, node, gpu, time, kind, step, message,
      detail
    - `canary_mismatches`: canary rows of the (attempt, step)s where ranks' digests differ:
      attempt, rank, node, gpu, step, time, digest
    - `gpu_health`: per (node, gpu) over the job's span, from the agent's GPU samples (see
      `_GPU_HEALTH_SQL` for the columns)
    - `gpu_events`, `kernel_events`: the agent's rows for the job's nodes within its span
    - `attempt_outcomes`: the supervisor's conclusion per attempt where it wrote one, with the
      action it took on the attempt's root cause (`action`; null where it recorded no verdict)
    - `node_health`: the fleet ledger's rows for the job's nodes written before the run ended
      (quarantines and clears, any job's)
    - `full_disks`: the agent's disk samples of the job's nodes that found a filesystem full
      (`DISK_FULL_SHARE`, `DISK_FULL_BYTES`), one row per node, path and minute: node, path,
      first_time, last_time, free_bytes (the least seen), total_bytes
    - `down_nics`: the agent's network-port samples of the job's nodes that found a link down or
      a link loss since the previous sample, one row per node, port and minute: node, nic, gpu
      (the GPU beside the port, where known), first_time, last_time

    Everything is of one run (`run_id`) of the job: a job id launched again is a new run, and
    no run reads another's telemetry. The node-level tables (GPU samples and events, kernel
    log) come from the run's nodes over its span plus a lead of `margin_s`, so evidence from
    before the run is there to be recognised as older, never to be blamed on it.
    """

    job_id: str
    run_id: str | None
    window_steps: int
    ranks: pd.DataFrame
    rank_steps: pd.DataFrame
    step_timeline: pd.DataFrame
    rank_windows: pd.DataFrame
    nonfinite_steps: pd.DataFrame
    loss_outliers: pd.DataFrame
    arrivals: pd.DataFrame
    last_collectives: pd.DataFrame
    heartbeats: pd.DataFrame
    events: pd.DataFrame
    canary_mismatches: pd.DataFrame
    gpu_health: pd.DataFrame
    gpu_events: pd.DataFrame
    kernel_events: pd.DataFrame
    attempt_outcomes: pd.DataFrame
    node_health: pd.DataFrame
    full_disks: pd.DataFrame
    down_nics: pd.DataFrame
    #: how long after its last record node evidence is still the run's (`run_tail_s`)
    tail_s: float = TAIL_S

    @property
    def attempts(self) -> list[int]:
        return sorted(int(a) for a in self.ranks["attempt"].unique())

    def span(self) -> tuple[float, float] | None:
        """(first process start, last record) over all attempts; None for a job with no rows."""
        starts = pd.concat([self.ranks["start_time"], self.events["time"]]).dropna()
        ends = pd.concat([self.heartbeats["time"], self.events["time"], self.rank_steps["last_end"]]).dropna()
        if starts.empty or ends.empty:
            return None
        return float(starts.min()), float(max(ends.max(), starts.min()))

    def attempt_span(self, attempt: int) -> tuple[float, float] | None:
        r = self.ranks[self.ranks["attempt"] == attempt]["start_time"].dropna()
        ends = pd.concat(
            [
                self.heartbeats.loc[self.heartbeats["attempt"] == attempt, "time"],
                self.events.loc[self.events["attempt"] == attempt, "time"],
                self.rank_steps.loc[self.rank_steps["attempt"] == attempt, "last_end"],
            ]
        ).dropna()
        if r.empty:
            return None
        start = float(r.min())
        return start, (max(float(ends.max()), start) if not ends.empty else start)

    def attempt_of(self, t: float, lead_s: float, tail_s: float) -> int | None:
        """The attempt evidence at time `t` belongs to: the one running at `t`, else the latest
        one started by `t + lead_s` (a hardware signal may precede the rank's own start records
        by a little), while `t` is no later than `tail_s` after the run's last record. None for
        evidence from before the run or after it: another job's, or a condition the run
        inherited."""
        best = None
        last_end = None
        running = None  # the attempt whose ranks were alive at `t`
        for a in self.attempts:
            s = self.attempt_span(a)
            if s is None:
                continue
            last_end = s[1] if last_end is None else max(last_end, s[1])
            if s[0] - lead_s <= t:
                best = a
            if s[0] <= t <= s[1]:
                running = a
        if best is None or last_end is None or t > last_end + tail_s:
            return None
        # A fast restart can begin the next attempt within `lead_s` of a fault that ended the
        # one before: evidence from while an attempt ran is that attempt's.
        return running if running is not None else best

    def ranks_on(self, attempt: int, node: str, gpu: int | None) -> list[int]:
        r = self.ranks[(self.ranks["attempt"] == attempt) & (self.ranks["node"] == node)]
        if gpu is not None:
            r = r[r["gpu"] == gpu]
        return sorted(int(x) for x in r["rank"].unique())

    def rank_row(self, attempt: int, rank: int) -> pd.Series | None:
        r = self.ranks[(self.ranks["attempt"] == attempt) & (self.ranks["rank"] == rank)]
        return None if r.empty else r.iloc[-1]


def _arrivals_sql(have: set[str]) -> str:
    """Arrivals from the segments' summaries (a store snapshot), or where the connection has
    only the rows (views over other data), from the rows summarised here."""
    if "collective_summaries" in have:
        return ARRIVALS_SQL.format(summaries="collective_summaries")
    return ARRIVALS_SQL.format(summaries=f"({SUMMARY_SQL.format(source=SUMMARISED_TABLE)})")


def _tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}


#: Where a run id is NULL (telemetry of a job started without `triage run` or torchrun's
#: rendezvous id, or written before runs existed), it is shown and chosen as this.
NO_RUN = "-"


@dataclass(frozen=True)
class RunInfo:
    job_id: str
    run_id: str | None
    start_time: float | None
    last_time: float | None
    attempts: int

    @property
    def label(self) -> str:
        return NO_RUN if self.run_id is None else self.run_id


_RUNS_SQL = """
WITH t AS (
  {parts}
)
SELECT run_id, min(t0) AS start_time, max(t1) AS last_time,
       count(DISTINCT attempt) FILTER (WHERE attempt IS NOT NULL) AS attempts
FROM t WHERE job_id = $job GROUP BY run_id ORDER BY start_time NULLS FIRST, run_id NULLS FIRST
"""
_RUN_SOURCES = {
    "ranks": "SELECT job_id, run_id, attempt, start_time AS t0, start_time AS t1 FROM ranks",
    "events": "SELECT job_id, run_id, attempt, time AS t0, time AS t1 FROM events",
    "attempt_outcomes": "SELECT job_id, run_id, attempt, time AS t0, time AS t1 FROM attempt_outcomes",
    "runs": "SELECT job_id, run_id, NULL::INTEGER AS attempt, start_time AS t0, "
    "coalesce(end_time, time) AS t1 FROM runs",
}


def list_runs(con: duckdb.DuckDBPyConnection, job_id: str) -> list[RunInfo]:
    """The job's runs, oldest first."""
    have = _tables(con)
    parts = [sql for t, sql in _RUN_SOURCES.items() if t in have]
    if not parts:
        return []
    rows = con.execute(_RUNS_SQL.format(parts="\n  UNION ALL ".join(parts)), {"job": job_id}).fetchall()
    return [RunInfo(job_id, r, t0, t1, int(n)) for r, t0, t1, n in rows]


def resolve_run(con: duckdb.DuckDBPyConnection, job_id: str, run: str | None = None) -> RunInfo:
    """The run `run` names (its id, or `NO_RUN`), else the newest run of the job.

    Raises KeyError when the store has no record of the job or of that run of it."""
    runs = list_runs(con, job_id)
    if not runs:
        raise KeyError(job_id)
    if run is None:
        return runs[-1]
    for r in runs:
        if r.label == run:
            return r
    raise KeyError(f"{job_id} run {run}")


def list_jobs(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Job ids the store knows, for telling a user which ones exist."""
    have = _tables(con) & {"ranks", "events"}
    if not have:
        return []
    union = " UNION ".join(f"SELECT DISTINCT job_id FROM {t}" for t in sorted(have))
    return [
        r[0]
        for r in con.execute(
            f"SELECT job_id FROM ({union}) WHERE job_id IS NOT NULL ORDER BY job_id"
        ).fetchall()
    ]


_RANKS_SQL = """
SELECT attempt, rank, arg_max(node, start_time) AS node, arg_max(gpu, start_time) AS gpu,
       arg_max(gpu_uuid, start_time) AS gpu_uuid, arg_max(pid, start_time) AS pid,
       max(world_size) AS world_size, min(start_time) AS start_time
FROM ranks WHERE job_id = $job AND run_id IS NOT DISTINCT FROM $run GROUP BY attempt, rank ORDER BY attempt, rank
"""

_RANK_STEPS_SQL = """
SELECT attempt, rank, count(*) AS steps, min(step) AS first_step, max(step) AS last_step,
       min(start_time) AS first_start, max(end_time) AS last_end,
       median(end_time - start_time) AS median_step_s, median(compute_s) AS median_compute_s,
       sum(data_wait_s) AS data_wait_s
FROM steps WHERE job_id = $job AND run_id IS NOT DISTINCT FROM $run GROUP BY attempt, rank ORDER BY attempt, rank
"""

_STEP_TIMELINE_SQL = """
SELECT attempt, step, count(*) AS ranks, min(start_time) AS start, max(end_time) AS "end",
       median(data_wait_s) AS data_wait_s,
       median(loss) FILTER (WHERE isfinite(loss)) AS loss,
       median(grad_norm) FILTER (WHERE isfinite(grad_norm)) AS grad_norm
FROM steps WHERE job_id = $job AND run_id IS NOT DISTINCT FROM $run GROUP BY attempt, step ORDER BY attempt, step
"""

_RANK_WINDOWS_SQL = """
SELECT attempt, rank, step // $window AS "window", count(*) AS steps, min(step) AS first_step,
       min(start_time) AS start, median(compute_s) AS median_compute_s
FROM steps WHERE job_id = $job AND run_id IS NOT DISTINCT FROM $run AND compute_s IS NOT NULL
GROUP BY ALL ORDER BY attempt, rank, "window"
"""

_NONFINITE_SQL = f"""
SELECT attempt, rank, step, end_time AS time, loss, grad_norm
FROM steps WHERE job_id = $job AND run_id IS NOT DISTINCT FROM $run
  AND (nonfinite OR NOT isfinite(loss) OR NOT isfinite(grad_norm))
ORDER BY end_time, rank LIMIT {MAX_DETAIL_ROWS}
"""

# Where a strict majority of ranks report bit-identical losses at a step, the loss is
# replicated (e.g. all-reduced) and a rank that disagrees computed something else.
_LOSS_OUTLIERS_SQL = f"""
WITH per_value AS (
  SELECT attempt, step, loss, count(*) AS n
  FROM steps WHERE job_id = $job AND run_id IS NOT DISTINCT FROM $run AND isfinite(loss) GROUP BY ALL),
per_step AS (
  SELECT attempt, step, arg_max(loss, n) AS agreed_loss, max(n) AS agreeing, sum(n) AS ranks
  FROM per_value GROUP BY ALL HAVING count(*) > 1 AND max(n) * 2 > sum(n) AND sum(n) >= 3)
SELECT s.attempt, s.rank, s.step, s.end_time AS time, s.loss, p.agreed_loss, p.agreeing, p.ranks
FROM steps s JOIN per_step p USING (attempt, step)
WHERE s.job_id = $job AND s.run_id IS NOT DISTINCT FROM $run AND isfinite(s.loss) AND s.loss <> p.agreed_loss
ORDER BY s.end_time, s.rank LIMIT {MAX_DETAIL_ROWS}
"""

_LAST_COLLECTIVES_SQL = """
SELECT attempt, rank, "group", max(seq) AS last_entered_seq,
       max(seq) FILTER (WHERE end_time IS NOT NULL) AS last_completed_seq,
       arg_max(op, seq) AS last_op, max(enter_time) AS last_enter_time
FROM collectives WHERE job_id = $job AND run_id IS NOT DISTINCT FROM $run AND list_contains($waited, "group")
GROUP BY ALL ORDER BY attempt, rank, "group"
"""

_HEARTBEATS_SQL = """
SELECT attempt, rank, min(time) AS first_time, max(time) AS time, arg_max(step, time) AS step,
       arg_max(inflight_op, time) AS inflight_op, arg_max(inflight_group, time) AS inflight_group,
       arg_max(inflight_seq, time) AS inflight_seq,
       arg_max(inflight_since, time) AS inflight_since
FROM heartbeats WHERE job_id = $job AND run_id IS NOT DISTINCT FROM $run GROUP BY attempt, rank ORDER BY attempt, rank
"""

_EVENTS_SQL = """
SELECT attempt, rank, node, gpu, time, kind, step, message, detail
FROM events WHERE job_id = $job AND run_id IS NOT DISTINCT FROM $run AND kind <> 'canary' ORDER BY time, rank
"""

_CANARY_SQL = f"""
WITH c AS (SELECT attempt, rank, node, gpu, step, time, message AS digest
           FROM events WHERE job_id = $job AND run_id IS NOT DISTINCT FROM $run AND kind = 'canary'),
split AS (SELECT attempt, step FROM c GROUP BY ALL HAVING count(DISTINCT digest) > 1)
SELECT c.* FROM c JOIN split USING (attempt, step) ORDER BY c.step, c.rank
LIMIT {MAX_DETAIL_ROWS}
"""

THROTTLE_MASK = HEALTH_CLOCK_EVENT_MASK

# Counters are compared with their first reading in the span, so a count from before the job
# (an old ECC error, replays since boot) is not blamed on it.
_GPU_HEALTH_SQL = f"""
WITH s AS (
  SELECT * FROM gpu_samples
  WHERE node IN (SELECT DISTINCT node FROM ranks WHERE job_id = $job AND run_id IS NOT DISTINCT FROM $run)
    AND time BETWEEN $t0 AND $t1),
firsts AS (
  SELECT node, gpu, arg_min(pcie_replay_total, time) AS replay0,
         arg_min(ecc_uncorrected_volatile, time) AS ecc0,
         arg_min(remapped_rows_uncorrectable, time) AS remap0,
         arg_min(nvlink_crc_errors_total, time) AS crc0,
         arg_min(nvlink_replay_errors_total, time) AS nvreplay0,
         arg_min(nvlink_recovery_errors_total, time) AS recovery0
  FROM s GROUP BY ALL)
SELECT node, gpu, any_value(uuid) AS uuid, count(*) FILTER (WHERE time >= $start) AS samples,
       min(time) AS first_sample_time, arg_min(gpu_up, time) AS up_at_first_sample,
       min(time) FILTER (WHERE NOT gpu_up) AS lost_time,
       max(time) FILTER (WHERE NOT gpu_up) AS last_lost_time,
       count(*) FILTER (WHERE time >= $start AND (clock_event_reasons & {THROTTLE_MASK}) <> 0)
         AS throttled_samples,
       bit_or(clock_event_reasons & {THROTTLE_MASK}) FILTER (WHERE time >= $start) AS throttle_reasons,
       min(time) FILTER (WHERE time >= $start AND (clock_event_reasons & {THROTTLE_MASK}) <> 0)
         AS throttle_first,
       max(time) FILTER (WHERE time >= $start AND (clock_event_reasons & {THROTTLE_MASK}) <> 0)
         AS throttle_last,
       max(temperature_celsius) FILTER (WHERE time >= $start) AS max_temperature_celsius,
       any_value(temperature_slowdown_celsius) AS slowdown_celsius,
       max(ecc_uncorrected_volatile) AS ecc_uncorrected,
       min(time) FILTER (WHERE ecc_uncorrected_volatile > 0) AS ecc_first,
       any_value(ecc0) AS ecc_uncorrected_at_start,
       bool_or(remapped_rows_failure) AS remap_failure,
       min(time) FILTER (WHERE remapped_rows_failure) AS remap_failure_first,
       max(remapped_rows_uncorrectable) - any_value(remap0) AS remap_uncorrectable_growth,
       max(pcie_replay_total) - any_value(replay0) AS pcie_replay_growth,
       min(time) FILTER (WHERE pcie_replay_total > replay0) AS pcie_replay_first,
       min(pcie_link_width) AS pcie_link_width, max(pcie_link_width_max) AS pcie_link_width_max,
       min(time) FILTER (WHERE pcie_link_width < pcie_link_width_max) AS pcie_width_first,
       max(nvlink_crc_errors_total) - any_value(crc0) AS nvlink_crc_growth,
       max(nvlink_replay_errors_total) - any_value(nvreplay0) AS nvlink_replay_growth,
       max(nvlink_recovery_errors_total) - any_value(recovery0) AS nvlink_recovery_growth,
       min(time) FILTER (WHERE nvlink_crc_errors_total > crc0
                            OR nvlink_recovery_errors_total > recovery0) AS nvlink_first
FROM s JOIN firsts USING (node, gpu) GROUP BY node, gpu ORDER BY node, gpu
"""

_GPU_HEALTH_COLUMNS = [
    "node",
    "gpu",
    "uuid",
    "samples",
    "first_sample_time",
    "up_at_first_sample",
    "lost_time",
    "last_lost_time",
    "throttled_samples",
    "throttle_reasons",
    "throttle_first",
    "throttle_last",
    "max_temperature_celsius",
    "slowdown_celsius",
    "ecc_uncorrected",
    "ecc_first",
    "ecc_uncorrected_at_start",
    "remap_failure",
    "remap_failure_first",
    "remap_uncorrectable_growth",
    "pcie_replay_growth",
    "pcie_replay_first",
    "pcie_link_width",
    "pcie_link_width_max",
    "pcie_width_first",
    "nvlink_crc_growth",
    "nvlink_replay_growth",
    "nvlink_recovery_growth",
    "nvlink_first",
]

_NODE_EVENTS_SQL = """
SELECT * FROM {table}
WHERE node IN (SELECT DISTINCT node FROM ranks WHERE job_id = $job AND run_id IS NOT DISTINCT FROM $run)
  AND time BETWEEN $t0 AND $t1 ORDER BY time
"""

_NODE_HEALTH_SQL = """
SELECT * FROM node_health
WHERE node IN (SELECT DISTINCT node FROM ranks WHERE job_id = $job AND run_id IS NOT DISTINCT FROM $run)
  AND time <= $t1 ORDER BY time
"""

#: A filesystem with less free than this share of its size, or than this many bytes, whichever
#: is more, is full for a job: a checkpoint shard is often gigabytes.
DISK_FULL_SHARE = 0.01
DISK_FULL_BYTES = 1 << 30

_FULL_DISKS_SQL = f"""
SELECT node, path, min(time) AS first_time, max(time) AS last_time, min(free_bytes) AS free_bytes,
       max(total_bytes) AS total_bytes
FROM disk_samples
WHERE node IN (SELECT DISTINCT node FROM ranks WHERE job_id = $job AND run_id IS NOT DISTINCT FROM $run)
  AND time BETWEEN $t0 AND $t1
  AND free_bytes < greatest({DISK_FULL_BYTES}, {DISK_FULL_SHARE} * total_bytes)
GROUP BY node, path, floor(time / 60) ORDER BY first_time LIMIT {MAX_DETAIL_ROWS}
"""

_DOWN_NICS_SQL = f"""
SELECT node, nic, gpu, min(time) AS first_time, max(time) AS last_time
FROM (
    SELECT *, link_downs_total - lag(link_downs_total) OVER (PARTITION BY node, nic ORDER BY time) AS lost
    FROM nic_samples
    WHERE node IN (SELECT DISTINCT node FROM ranks WHERE job_id = $job AND run_id IS NOT DISTINCT FROM $run)
      AND time BETWEEN $t0 AND $t1
)
WHERE NOT up OR lost > 0
GROUP BY node, nic, gpu, floor(time / 60) ORDER BY first_time LIMIT {MAX_DETAIL_ROWS}
"""

_OUTCOMES_SQL = """
SELECT attempt, arg_max(status, time) AS status, arg_max(exit_code, time) AS exit_code,
       arg_max(reason, time) AS reason
FROM attempt_outcomes WHERE job_id = $job AND run_id IS NOT DISTINCT FROM $run GROUP BY attempt ORDER BY attempt
"""

#: The action the supervisor took on each attempt's root cause (its `incidents` rows).
_ACTIONS_SQL = """
SELECT attempt, arg_max(action, time) AS action
FROM incidents WHERE job_id = $job AND run_id IS NOT DISTINCT FROM $run GROUP BY attempt ORDER BY attempt
"""

#: Columns of each frame when its table is absent, so analyzers can filter an empty frame.
_EMPTY_COLUMNS: dict[str, list[str]] = {
    "ranks": ["attempt", "rank", "node", "gpu", "gpu_uuid", "pid", "world_size", "start_time"],
    "rank_steps": [
        "attempt",
        "rank",
        "steps",
        "first_step",
        "last_step",
        "first_start",
        "last_end",
        "median_step_s",
        "median_compute_s",
        "data_wait_s",
    ],
    "step_timeline": ["attempt", "step", "ranks", "start", "end", "data_wait_s", "loss", "grad_norm"],
    "rank_windows": ["attempt", "rank", "window", "steps", "first_step", "start", "median_compute_s"],
    "nonfinite_steps": ["attempt", "rank", "step", "time", "loss", "grad_norm"],
    "loss_outliers": ["attempt", "rank", "step", "time", "loss", "agreed_loss", "agreeing", "ranks"],
    "arrivals": ["attempt", "rank", "collectives", "last_arrivals", "wait_caused_s"],
    "last_collectives": [
        "attempt",
        "rank",
        "group",
        "last_entered_seq",
        "last_completed_seq",
        "last_op",
        "last_enter_time",
    ],
    "heartbeats": [
        "attempt",
        "rank",
        "first_time",
        "time",
        "step",
        "inflight_op",
        "inflight_group",
        "inflight_seq",
        "inflight_since",
    ],
    "events": ["attempt", "rank", "node", "gpu", "time", "kind", "step", "message", "detail"],
    "canary_mismatches": ["attempt", "rank", "node", "gpu", "step", "time", "digest"],
    "gpu_health": _GPU_HEALTH_COLUMNS,
    "gpu_events": ["time", "node", "gpu", "uuid", "kind", "xid", "text", "source", "simulated", "pci_bus_id"],
    "kernel_events": [
        "time",
        "node",
        "kind",
        "raw",
        "message",
        "xid",
        "pci_bus_id",
        "gpu",
        "gpu_instance",
        "compute_instance",
        "pid",
        "process_name",
        "severity",
        "simulated",
    ],
    "attempt_outcomes": ["attempt", "status", "exit_code", "reason"],
    "attempt_actions": ["attempt", "action"],
    "full_disks": ["node", "path", "first_time", "last_time", "free_bytes", "total_bytes"],
    "down_nics": ["node", "nic", "gpu", "first_time", "last_time"],
    "node_health": [
        "time",
        "node",
        "gpu",
        "state",
        "category",
        "xid",
        "reason",
        "evidence",
        "source",
        "job_id",
        "run_id",
        "attempt",
        "by",
    ],
}


def _empty(frame: str) -> pd.DataFrame:
    return pd.DataFrame(columns=_EMPTY_COLUMNS[frame])


def _query(
    con: duckdb.DuckDBPyConnection,
    have: set[str],
    needs: tuple[str, ...],
    frame: str,
    sql: str,
    params: dict[str, object],
    timings: dict[str, float] | None,
) -> pd.DataFrame:
    if not set(needs) <= have:
        return _empty(frame)
    used = {k: v for k, v in params.items() if f"${k}" in sql}
    start = time.perf_counter()
    out = con.execute(sql, used).df()
    if timings is not None:
        timings[frame] = time.perf_counter() - start
    return out


def _in_node_numbering(ranks: pd.DataFrame, gpu_health: pd.DataFrame) -> pd.DataFrame:
    """Each rank's GPU as its node's agent numbers it, matched by UUID where the agent sampled
    that GPU. A rank knows its GPU by the CUDA index it sees, and where CUDA_VISIBLE_DEVICES
    lists UUIDs or a launcher's order differs from NVML's (PCI bus order), that is another
    GPU's number: a verdict about the GPU would then name the wrong device."""
    if ranks.empty or gpu_health.empty:
        return ranks
    by_uuid = {
        (str(r.node), str(r.uuid)): int(r.gpu)
        for r in gpu_health.itertuples()
        if isinstance(r.uuid, str) and pd.notna(r.gpu)
    }
    ranks = ranks.copy()
    ranks["gpu"] = [
        by_uuid.get((str(node), uuid), gpu) if isinstance(uuid, str) else gpu
        for node, uuid, gpu in zip(ranks["node"], ranks["gpu_uuid"], ranks["gpu"], strict=True)
    ]
    return ranks


def _gpus_of_ranks(frame: pd.DataFrame, ranks: pd.DataFrame) -> pd.DataFrame:
    """A rank's records carry the GPU it knew itself by; they take the one its `ranks` row
    resolved to (`_in_node_numbering`)."""
    if frame.empty or ranks.empty:
        return frame
    gpu = {(int(a), int(r)): g for a, r, g in zip(ranks["attempt"], ranks["rank"], ranks["gpu"], strict=True)}
    frame = frame.copy()
    frame["gpu"] = [
        gpu.get((int(a), int(r)), g) if pd.notna(a) and pd.notna(r) else g
        for a, r, g in zip(frame["attempt"], frame["rank"], frame["gpu"], strict=True)
    ]
    return frame


def load_job(
    con: duckdb.DuckDBPyConnection,
    job_id: str,
    *,
    run: str | None = None,
    window_steps: int = DEFAULT_WINDOW_STEPS,
    margin_s: float = DEFAULT_MARGIN_S,
    timings: dict[str, float] | None = None,
) -> JobData:
    """Read one run of a job from a store snapshot (views named after the tables): the one
    `run` names (a run id, or `NO_RUN`), by default the newest. Where `timings` is given, each
    frame's query seconds are put in it under the frame's name (where the time of a large job
    goes: `triage bench analyze-scale`).

    Raises KeyError when the store has no record of `job_id` (`list_jobs` names the known ones)
    or of that run (`list_runs`).
    """
    have = _tables(con)
    chosen = resolve_run(con, job_id, run)
    params: dict[str, object] = {"job": job_id, "run": chosen.run_id, "window": window_steps}

    def q(frame: str, needs: tuple[str, ...], sql: str) -> pd.DataFrame:
        return _query(con, have, needs, frame, sql, params, timings)

    ranks = q("ranks", ("ranks",), _RANKS_SQL)
    events = q("events", ("events",), _EVENTS_SQL)
    if ranks.empty and events.empty:
        raise KeyError(job_id)
    heartbeats = q("heartbeats", ("heartbeats",), _HEARTBEATS_SQL)
    rank_steps = q("rank_steps", ("steps",), _RANK_STEPS_SQL)
    times = pd.concat(
        [ranks["start_time"], events["time"], heartbeats["time"], rank_steps["last_end"]]
    ).dropna()
    params["t0"] = float(times.min()) - margin_s if not times.empty else 0.0
    # how much of its time a GPU ran throttled is the run's own share: samples from before it
    # (another job's heat on the node) would dilute or inflate it
    params["start"] = float(times.min()) - START_SKEW_S if not times.empty else 0.0
    outcomes = q("attempt_outcomes", ("attempt_outcomes",), _OUTCOMES_SQL)
    tail = run_tail_s(outcomes)
    params["t1"] = float(times.max()) + tail if not times.empty else 0.0
    params["waited"] = sorted(str(g) for g in heartbeats["inflight_group"].dropna().unique())
    gpu_health = q("gpu_health", ("gpu_samples", "ranks"), _GPU_HEALTH_SQL)
    ranks = _in_node_numbering(ranks, gpu_health)
    return JobData(
        job_id=job_id,
        run_id=chosen.run_id,
        window_steps=window_steps,
        ranks=ranks,
        rank_steps=rank_steps,
        step_timeline=q("step_timeline", ("steps",), _STEP_TIMELINE_SQL),
        rank_windows=q("rank_windows", ("steps",), _RANK_WINDOWS_SQL),
        nonfinite_steps=q("nonfinite_steps", ("steps",), _NONFINITE_SQL),
        loss_outliers=q("loss_outliers", ("steps",), _LOSS_OUTLIERS_SQL),
        arrivals=q("arrivals", ("collectives",), _arrivals_sql(have)),
        last_collectives=(
            q("last_collectives", ("collectives",), _LAST_COLLECTIVES_SQL)
            if params["waited"]
            else _empty("last_collectives")
        ),
        heartbeats=heartbeats,
        events=_gpus_of_ranks(events, ranks),
        canary_mismatches=_gpus_of_ranks(q("canary_mismatches", ("events",), _CANARY_SQL), ranks),
        gpu_health=gpu_health,
        gpu_events=q("gpu_events", ("gpu_events", "ranks"), _NODE_EVENTS_SQL.format(table="gpu_events")),
        kernel_events=q(
            "kernel_events", ("kernel_events", "ranks"), _NODE_EVENTS_SQL.format(table="kernel_events")
        ),
        attempt_outcomes=outcomes.merge(
            q("attempt_actions", ("incidents",), _ACTIONS_SQL), on="attempt", how="left"
        ),
        node_health=q("node_health", ("node_health", "ranks"), _NODE_HEALTH_SQL),
        full_disks=q("full_disks", ("disk_samples", "ranks"), _FULL_DISKS_SQL),
        down_nics=q("down_nics", ("nic_samples", "ranks"), _DOWN_NICS_SQL),
        tail_s=tail,
    )


def run_tail_s(outcomes: pd.DataFrame) -> float:
    """How long after a run's last record its nodes' evidence is still its own: `TAIL_S`,
    or the clock skew only where the supervisor recorded its last attempt completed: such a run
    ended on no fault, and what its nodes record later is the next job's (a NIC lost 9 s after
    one job ended was listed as its incident)."""
    if outcomes.empty:
        return TAIL_S
    last = outcomes.sort_values("attempt").iloc[-1]
    return START_SKEW_S if last["status"] == "completed" else TAIL_S
