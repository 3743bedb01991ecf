"""The store's tables and its schema version: one registry every writer and reader uses.

Spool-fed tables take their columns from `trainer_hooks.spool_schema` and collector-fed tables
from the `collectors.records` dataclasses (one line each in `TABLES`), so a column added there
reaches the store without a second definition. Every store column is nullable: the supervisor
writes job-level rows with no rank, and readers show a column missing from an older segment
as NULL. Adding a column therefore needs no migration; renaming one, changing its type or
back-filling a default does: bump `SCHEMA_VERSION` and add a step to `migrations.MIGRATIONS`.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field

import pyarrow as pa

from triage.collectors.records import (
    DiskSample,
    GpuEvent,
    GpuSample,
    HostSample,
    KernelLogEvent,
    NicSample,
    ProcessSample,
    Unavailable,
)
from triage.display import Status
from triage.trainer_hooks.spool_schema import SPOOL_TABLES

#: v1: the spool tables as ranks write them. v2: `events.source` says who wrote an event.
SCHEMA_VERSION = 2

#: `events.source` of the rows ranks write through the spool; the store writes `store`
#: (e.g. a corrupt spool segment), the supervisor `supervisor`.
EVENT_SOURCE_RANK = "rank"
EVENT_SOURCE_STORE = "store"
EVENT_SOURCE_SUPERVISOR = "supervisor"
#: Events the supervisor writes from an attempt's captured output: a line the log classifier
#: matched (`message` the line, `detail` its stream and signature) and a rank's exit as the
#: launcher reported it (`detail`: exit code, signal, whether the launcher saw it first).
EVENT_LOG_LINE = "log_line"
EVENT_RANK_EXIT = "rank_exit"
#: A rank's Flight Recorder dump (`detail`: per process group its newest collectives and the
#: recorder's counters, the threads' Python stacks), and the supervisor's request for dumps.
EVENT_FR_DUMP = "fr_dump"
EVENT_FR_REQUEST = "fr_request"
#: The supervisor stopping an attempt it judged failed or hung, just before it sends SIGTERM: the
#: ranks' SIGTERMs after it are its own, not a preemption.
EVENT_SUPERVISOR_STOP = "supervisor_stop"


@dataclass(frozen=True)
class TableSpec:
    """A table: its columns, the column retention ages rows by, and defaults for columns that
    a source may lack (applied when rows are written; otherwise a missing column is NULL)."""

    name: str
    schema: pa.Schema
    time_column: str
    defaults: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.time_column not in self.schema.names:
            raise ValueError(f"table {self.name}: time column {self.time_column!r} not in schema")


def _nullable(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f.with_nullable(True) for f in schema])


_PY_TO_ARROW: dict[type, pa.DataType] = {
    int: pa.int64(),
    float: pa.float64(),
    str: pa.string(),
    bool: pa.bool_(),
}


def _arrow_type(tp: typing.Any) -> pa.DataType:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        (inner,) = [a for a in typing.get_args(tp) if a is not type(None)]
        return _arrow_type(inner)
    if origin is tuple:
        return pa.list_(_arrow_type(typing.get_args(tp)[0]))
    if tp in _PY_TO_ARROW:
        return _PY_TO_ARROW[tp]
    raise TypeError(f"no store column type for {tp!r}; extend _PY_TO_ARROW")


def schema_from_dataclass(cls: type) -> pa.Schema:
    """Columns named and typed after a record dataclass's fields, so the table follows the
    record when a collector adds a reading."""
    hints = typing.get_type_hints(cls)
    return pa.schema([pa.field(f.name, _arrow_type(hints[f.name])) for f in dataclasses.fields(cls)])


_EVENTS = _nullable(SPOOL_TABLES["events"]).append(pa.field("source", pa.string()))

INCIDENTS = pa.schema(
    [
        pa.field("job_id", pa.string()),
        pa.field("run_id", pa.string()),
        pa.field("attempt", pa.int32()),
        pa.field("time", pa.float64()),  # when the verdict was recorded
        pa.field("category", pa.string()),
        pa.field("layer", pa.string()),
        pa.field("action", pa.string()),
        pa.field("confidence", pa.float64()),
        pa.field("summary", pa.string()),
        pa.field("culprit_rank", pa.int32()),
        pa.field("culprit_node", pa.string()),
        pa.field("culprit_gpu", pa.int32()),
        pa.field("culprit_uuid", pa.string()),
        pa.field("first_seen", pa.float64()),
        pa.field("verdict", pa.string()),  # the whole Verdict.to_dict() as JSON
    ]
)

#: What the supervisor concluded about an attempt; when present it decides the attempt's status.
ATTEMPT_OUTCOMES = pa.schema(
    [
        pa.field("job_id", pa.string()),
        pa.field("run_id", pa.string()),
        pa.field("attempt", pa.int32()),
        pa.field("time", pa.float64()),
        pa.field("status", pa.string()),  # one of ATTEMPT_STATUSES
        pa.field("exit_code", pa.int32()),
        pa.field("reason", pa.string()),
    ]
)

ATTEMPT_STATUSES = (Status.RUNNING, Status.COMPLETED, Status.FAILED, Status.PREEMPTED, Status.INTERRUPTED)

#: The job-level figures the supervisor computes while a job runs (one analysis per job, not
#: one per node), for the node agents to export: a long table, one row per figure.
JOB_SCORES = pa.schema(
    [
        pa.field("job_id", pa.string()),
        pa.field("run_id", pa.string()),
        pa.field("attempt", pa.int32()),
        pa.field("time", pa.float64()),  # when the analysis ran
        pa.field("name", pa.string()),  # one of JOB_SCORE_NAMES
        pa.field("rank", pa.int32()),  # NULL for a figure of the whole job
        pa.field("node", pa.string()),  # the rank's node
        pa.field("value", pa.float64()),
    ]
)
GOODPUT_RATIO, STRAGGLER_SCORE = "goodput_ratio", "straggler_score"
JOB_SCORE_NAMES = (GOODPUT_RATIO, STRAGGLER_SCORE)

#: One row when `triage run` starts a run and one when it ends (the newest row per run wins):
#: a run is known even when none of its ranks wrote telemetry (a script without the hooks).
RUNS = pa.schema(
    [
        pa.field("job_id", pa.string()),
        pa.field("run_id", pa.string()),
        pa.field("time", pa.float64()),  # when this row was written
        pa.field("start_time", pa.float64()),
        pa.field("end_time", pa.float64()),  # NULL while it runs
        pa.field("status", pa.string()),  # one of RUN_STATUSES
        pa.field("reason", pa.string()),
        pa.field("command", pa.string()),
        pa.field("host", pa.string()),
        pa.field("pid", pa.int32()),  # the supervisor's
        pa.field("user", pa.string()),
    ]
)
RUN_STATUSES = (
    Status.RUNNING,
    Status.COMPLETED,
    Status.FAILED,
    Status.GAVE_UP,
    Status.INTERRUPTED,
    Status.REQUEUED,
)

#: The fleet's memory of bad hardware: append-only, the newest row per (node, gpu) wins.
#: `gpu` NULL is the whole node. A quarantine names its cause and where it was seen; a clear
#: names who returned the node to service.
NODE_HEALTH = pa.schema(
    [
        pa.field("time", pa.float64()),
        pa.field("node", pa.string()),
        pa.field("gpu", pa.int32()),  # local GPU index; NULL: the node as a whole
        pa.field("state", pa.string()),  # one of NODE_HEALTH_STATES
        pa.field("category", pa.string()),  # taxonomy category behind a quarantine
        pa.field("xid", pa.int32()),
        pa.field("reason", pa.string()),  # one line a person reads
        pa.field("evidence", pa.string()),  # JSON list of the verdict's evidence
        pa.field("source", pa.string()),  # verdict, repeat_offender, manual
        pa.field("job_id", pa.string()),
        pa.field("run_id", pa.string()),
        pa.field("attempt", pa.int32()),
        pa.field("by", pa.string()),  # who wrote it: "triage run" or user@host for a clear
    ]
)
NODE_HEALTH_STATES = ("quarantined", "cleared")

#: What each attempt of a run held and made, per node (`triage run` writes it when the run ends,
#: `triage report --backfill` for runs that lack it): the denominator of every fleet figure.
ATTEMPT_USAGE = pa.schema(
    [
        pa.field("job_id", pa.string()),
        pa.field("run_id", pa.string()),
        pa.field("attempt", pa.int32()),
        pa.field("time", pa.float64()),  # when it was recorded
        pa.field("node", pa.string()),
        pa.field("gpus", pa.int32()),  # ranks of the attempt on this node
        pa.field("start_time", pa.float64()),  # the attempt's share of the run's wall time
        pa.field("end_time", pa.float64()),
        pa.field("productive_s", pa.float64()),  # the attempt's productive wall seconds
        pa.field("status", pa.string()),
        pa.field("job_gpus", pa.int32()),  # the run's size: ranks of its first attempt
        pa.field("checkpoint_cost_s", pa.float64()),  # the run's median save time
        pa.field("checkpoint_interval_s", pa.float64()),  # the run's median time between saves
        pa.field("cause_category", pa.string()),  # the attempt's root cause; NULL: none
        pa.field("cause_layer", pa.string()),
        pa.field("culprit_node", pa.string()),
        pa.field("culprit_gpu", pa.int32()),
        pa.field("prescribed_action", pa.string()),  # what the taxonomy says to do about it
    ]
)

#: The run's badput, each (attempt, bucket, node) charged to the incident that caused it
#: (`analyzers.lost_time`); `category` "overhead" where none did.
LOST_TIME = pa.schema(
    [
        pa.field("job_id", pa.string()),
        pa.field("run_id", pa.string()),
        pa.field("attempt", pa.int32()),
        pa.field("time", pa.float64()),
        pa.field("bucket", pa.string()),
        pa.field("node", pa.string()),  # whose GPUs sat idle
        pa.field("seconds", pa.float64()),
        pa.field("gpu_seconds", pa.float64()),
        pa.field("cause_attempt", pa.int32()),
        pa.field("category", pa.string()),
        pa.field("layer", pa.string()),
        pa.field("culprit_rank", pa.int32()),
        pa.field("culprit_node", pa.string()),
        pa.field("culprit_gpu", pa.int32()),
    ]
)

_SPOOL_TIME = {
    "ranks": "start_time",
    "steps": "end_time",
    "collectives": "enter_time",
    "events": "time",
    "heartbeats": "time",
}

#: Collector record type -> table, so the agent stores any record with `append_records`.
RECORD_TABLES: dict[type, str] = {
    GpuSample: "gpu_samples",
    GpuEvent: "gpu_events",
    HostSample: "host_samples",
    DiskSample: "disk_samples",
    NicSample: "nic_samples",
    ProcessSample: "process_samples",
    KernelLogEvent: "kernel_events",
    Unavailable: "unavailable",
}

TABLES: dict[str, TableSpec] = {
    **{
        name: TableSpec(name, _nullable(s), _SPOOL_TIME[name])
        for name, s in SPOOL_TABLES.items()
        if name != "events"
    },
    "events": TableSpec("events", _EVENTS, "time", {"source": EVENT_SOURCE_RANK}),
    "incidents": TableSpec("incidents", INCIDENTS, "time"),
    "attempt_outcomes": TableSpec("attempt_outcomes", ATTEMPT_OUTCOMES, "time"),
    "job_scores": TableSpec("job_scores", JOB_SCORES, "time"),
    "runs": TableSpec("runs", RUNS, "time"),
    "node_health": TableSpec("node_health", NODE_HEALTH, "time"),
    "attempt_usage": TableSpec("attempt_usage", ATTEMPT_USAGE, "time"),
    "lost_time": TableSpec("lost_time", LOST_TIME, "time"),
    **{name: TableSpec(name, schema_from_dataclass(cls), "time") for cls, name in RECORD_TABLES.items()},
}

_DUCKDB_TYPES: dict[pa.DataType, str] = {
    pa.string(): "VARCHAR",
    pa.int64(): "BIGINT",
    pa.int32(): "INTEGER",
    pa.int16(): "SMALLINT",
    pa.float64(): "DOUBLE",
    pa.float32(): "FLOAT",
    pa.bool_(): "BOOLEAN",
}


def duckdb_type(tp: pa.DataType) -> str:
    if pa.types.is_list(tp):
        return duckdb_type(tp.value_type) + "[]"
    return _DUCKDB_TYPES[tp]


def table_spec(name: str) -> TableSpec:
    try:
        return TABLES[name]
    except KeyError:
        raise KeyError(f"unknown store table {name!r}; known: {', '.join(sorted(TABLES))}") from None
