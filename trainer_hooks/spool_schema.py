"""The per-rank spool: the on-disk contract between a training rank and the store.

Each rank process appends to its own directory
`<data_dir>/spool/<node>/<job_id>@<run_id>/<attempt>/rank<R>-<pid>-<incarnation>/` one immutable
segment per flush, `<seq:08d>.arrow`, written under a dot-prefixed temporary name and renamed into place, so a
reader sees a segment whole or not at all and a SIGKILL loses at most the rows not yet
flushed. `seq` grows by one per segment of a writer, so an ingester can resume from the
highest sequence number it has consumed for a writer directory.

A segment holds every table the flush had rows for: an uncompressed Arrow IPC file of one row
whose column `<table>` is the list of that table's rows as structs of the table's fields. A rank
flushes every second and an agent reads thousands of segments a minute, so per-file costs
decide ingest speed: one file per flush instead of one per table, and IPC, which is written at
a third of Parquet's cost and read by memory-mapping without a copy. Compression (LZ4 would
shrink the spool 2.5x) halved ingest speed in `triage bench ingest` by decompression and
allocation alone, and the spool lives only seconds when an agent or supervisor ingests it.
The store, read for months, is compressed Parquet. Segments written by Triage before this
layout, one Parquet file per table named `<seq:08d>.<table>.parquet`, are still read.

Every row carries the identity columns (docs/architecture.md "Identity"); times are unix seconds
(float64) from `time.time()`, durations seconds, sizes bytes.
"""

from __future__ import annotations

import os
import re
import secrets
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

IDENTITY_FIELDS = [
    pa.field("job_id", pa.string(), nullable=False),
    pa.field("run_id", pa.string()),  # the `triage run` launch; null for a job started without it
    pa.field("attempt", pa.int32(), nullable=False),
    pa.field("rank", pa.int32(), nullable=False),
    pa.field("node", pa.string(), nullable=False),
    pa.field("gpu", pa.int32()),  # local GPU index; null on a CPU-only rank
]


def _schema(*fields: pa.Field) -> pa.Schema:
    return pa.schema(IDENTITY_FIELDS + list(fields))


#: One row per rank process start: who ran where (rank -> node, gpu, uuid, pid).
RANKS = _schema(
    pa.field("pid", pa.int32()),
    pa.field("local_rank", pa.int32()),
    pa.field("world_size", pa.int32()),
    pa.field("hostname", pa.string()),
    pa.field("device", pa.string()),  # "cpu", "cuda:0", ...
    pa.field("gpu_uuid", pa.string()),
    pa.field("start_time", pa.float64()),
)

#: One row per completed training step of a rank.
STEPS = _schema(
    pa.field("step", pa.int64()),
    pa.field("start_time", pa.float64()),
    pa.field("end_time", pa.float64()),
    pa.field("data_wait_s", pa.float64()),
    pa.field("compute_s", pa.float64()),  # forward + backward
    pa.field("optimizer_s", pa.float64()),
    pa.field("collective_wait_s", pa.float64()),  # time blocked in collectives within the step
    pa.field("tokens", pa.int64()),
    pa.field("samples", pa.int64()),
    pa.field("loss", pa.float64()),
    pa.field("grad_norm", pa.float64()),
    pa.field("nonfinite", pa.bool_()),  # loss or grad-norm NaN/Inf
    pa.field("peak_memory_bytes", pa.int64()),
    pa.field("mfu", pa.float64()),  # null where the model's FLOPs or the peak are unknown
)

#: One row per collective a rank issued. `seq` counts per process group, so rows of different
#: ranks with the same (group, seq) are the same collective: their enter times show who arrived
#: last. busbw follows nccl-tests (algbw x the op's factor).
COLLECTIVES = _schema(
    pa.field("seq", pa.int64()),
    pa.field("op", pa.string()),
    pa.field("group", pa.string()),
    pa.field("group_size", pa.int32()),
    pa.field("bytes", pa.int64()),
    pa.field("dtype", pa.string()),
    pa.field("step", pa.int64()),
    pa.field("enter_time", pa.float64()),
    pa.field("end_time", pa.float64()),  # null while it never completed
    pa.field("algbw_bytes_per_s", pa.float64()),
    pa.field("busbw_bytes_per_s", pa.float64()),
)

#: Lifecycle and error events; `detail` is a JSON object (bytes of a checkpoint, a traceback...).
EVENTS = _schema(
    pa.field("time", pa.float64()),
    pa.field("kind", pa.string()),
    pa.field("step", pa.int64()),
    pa.field("message", pa.string()),
    pa.field("detail", pa.string()),
)

#: Liveness from a background thread, at least once a second, with the last completed step and
#: the oldest collective this rank has entered but not finished (null when none): a hang shows
#: as ranks waiting in (group, seq) while the culprit never entered it.
HEARTBEATS = _schema(
    pa.field("time", pa.float64()),
    pa.field("step", pa.int64()),
    pa.field("pid", pa.int32()),
    pa.field("inflight_op", pa.string()),
    pa.field("inflight_group", pa.string()),
    pa.field("inflight_seq", pa.int64()),
    pa.field("inflight_since", pa.float64()),
    # seconds the rank's main thread ran or waited for a CPU (its CPU seconds where Linux keeps
    # no run-queue account): whether a rank outside a collective is working (a slow step, an
    # evaluation on rank 0, a rank starved of CPU on a loaded host) or stuck (a deadlock, a
    # sleep), for the hang rule
    pa.field("main_cpu_s", pa.float64()),
    # ... of its child processes (data prepared in a pool, DataLoader workers), and the bytes it
    # has read (a download): working too, with an idle main thread (`trainer_hooks/activity.py`)
    pa.field("children_cpu_s", pa.float64()),
    pa.field("read_bytes", pa.int64()),
    # ... and how many looks found the main thread's Python stack changed: Python code running
    # (an evaluation, data tokenized in place), not a spin on a GPU that never answers
    pa.field("main_moves", pa.int64()),
)

SPOOL_TABLES: dict[str, pa.Schema] = {
    "ranks": RANKS,
    "steps": STEPS,
    "collectives": COLLECTIVES,
    "events": EVENTS,
    "heartbeats": HEARTBEATS,
}

#: Event kinds the hooks emit (the `kind` column of `events`).
EVENT_KINDS = (
    "process_start",
    "init_done",
    "first_step",
    "checkpoint_save_begin",
    "checkpoint_save_end",
    "checkpoint_save_failed",
    "file_save_begin",
    "file_save_end",
    "checkpoint_load_begin",
    "checkpoint_load_end",
    "exception",
    "sigterm",
    "nonfinite",
    "canary",
    "telemetry_dropped",
    "telemetry_error",
    "exit",
)

SEGMENT_RE = re.compile(r"^(?P<seq>\d{8})(?:\.arrow|\.(?P<table>[a-z_]+)\.parquet)$")
_IPC_OPTIONS = ipc.IpcWriteOptions(use_threads=False)


#: Between job id and run id in a spool job directory (`<job>@<run>`); names never hold it.
RUN_SEPARATOR = "@"


def job_dir_name(job_id: str, run_id: str | None) -> str:
    return job_id if run_id is None else f"{job_id}{RUN_SEPARATOR}{run_id}"


def parse_job_dir_name(name: str) -> tuple[str, str | None]:
    """(job id, run id or None) of a spool job directory."""
    job, sep, run = name.partition(RUN_SEPARATOR)
    return job, (run if sep else None)


def writer_dir(
    data_dir: str | os.PathLike[str],
    node: str,
    job_id: str,
    attempt: int,
    rank: int,
    pid: int,
    incarnation: str | None = None,
    run_id: str | None = None,
) -> Path:
    """The directory of one rank process's segments,
    `spool/<node>/<job>[@<run>]/<attempt>/rank<R>-<pid>[-<incarnation>]`. `incarnation` tells
    apart processes that share job, attempt, rank and pid (a restarted container's rank gets
    the same pid, a reused job id the same attempt numbers): the ingester keeps its watermark
    per directory, so two processes writing one directory would have the second's segments
    taken as already stored. The run in the path lets the store name the run of a segment
    it cannot read."""
    name = f"rank{rank}-{pid}" + (f"-{incarnation}" if incarnation else "")
    return Path(data_dir) / "spool" / node / job_dir_name(job_id, run_id) / str(attempt) / name


def new_incarnation() -> str:
    """Start time in microseconds and 16 random bits, hex: unique per process on a node."""
    return f"{time.time_ns() // 1000:x}{secrets.randbits(16):04x}"


def segment_name(seq: int) -> str:
    return f"{seq:08d}.arrow"


def parse_segment_name(name: str) -> int | None:
    """The sequence number of a finished segment; None for temporaries and foreign files."""
    m = SEGMENT_RE.match(name)
    if not m or (m["table"] is not None and m["table"] not in SPOOL_TABLES):
        return None
    return int(m["seq"])


def write_segment(directory: Path, seq: int, tables: dict[str, pa.Table]) -> Path:
    """Write one flush's rows (table name -> rows in that table's spool schema) as segment
    `seq`, whole or not at all."""
    columns, fields = [], []
    for name, data in tables.items():
        rows = pa.StructArray.from_arrays(
            [c.combine_chunks() for c in data.columns], fields=list(data.schema)
        )
        columns.append(pa.ListArray.from_arrays(pa.array([0, len(rows)], pa.int32()), rows))
        fields.append(pa.field(name, columns[-1].type))
    flush = pa.Table.from_arrays(columns, schema=pa.schema(fields))
    path = directory / segment_name(seq)
    tmp = directory / f".{path.name}.tmp"
    with pa.OSFile(str(tmp), "wb") as sink, ipc.new_file(sink, flush.schema, options=_IPC_OPTIONS) as w:
        w.write_table(flush)
    os.rename(tmp, path)
    return path


def read_segment(path: Path) -> dict[str, pa.Table]:
    """A segment's rows per table; raises `pyarrow.ArrowException` or OSError for a damaged
    file."""
    m = SEGMENT_RE.match(path.name)
    if m and m["table"]:
        return {m["table"]: pq.read_table(path)}
    with pa.memory_map(str(path)) as source:  # read() copies buffer by buffer: 5x slower
        flush = ipc.open_file(source).read_all()
    flush.validate()  # buffer bounds: a damaged file must raise here, not crash a reader later
    if flush.num_rows != 1:
        raise pa.ArrowInvalid(f"a spool segment holds one row, {path.name} has {flush.num_rows}")
    return {
        name: pa.Table.from_struct_array(column.chunk(0).flatten())
        for name, column in zip(flush.column_names, flush.columns)
    }
