"""Where things live in a data directory.

```
<data_dir>/spool/<node>/<job>@<run>/<attempt>/rank<R>-<pid>-<incarnation>/<seq>.<table>.parquet
                                                    ranks write (`<job>` alone: no run id)
<data_dir>/store/<node>/MANIFEST.json              live segments, schema version, watermarks
<data_dir>/store/<node>/<table>/<gen>-<id>.parquet immutable store segments
<data_dir>/store/<node>/collectives/<gen>-<id>.parquet.summary
                                                    a collectives segment's summary (derived;
                                                    `collective_summary`)
<data_dir>/store/<node>/quarantine/...             corrupt spool segments, kept for a human
<data_dir>/store/<node>/.writer.lock               held by the one ingester of the partition
<data_dir>/store/supervisor/...                    runs, incidents, outcomes, scores, the
                                                    node health ledger: every `triage run`
<data_dir>/locks/<job>.lock                        held by the job's one supervisor
<data_dir>/logs/<job>/<run>/attempt-<N>.log        an attempt's captured output (`triage run`),
                                                    rotated to attempt-<N>.log.1 past a bound
<data_dir>/faults/<node>.jsonl                     the simulated GPUs' fault schedule
```
One partition per node, written only by that node's agent (or a CLI where no agent runs), so
nodes never contend and the store grows by adding nodes. The `supervisor` partition is shared
by the supervisors on the data dir; their writes are short and wait for each other.
"""

from __future__ import annotations

import os
from pathlib import Path

from triage.config import ConfigError
from triage.names import check_name, is_valid_name

SPOOL_DIR = "spool"
STORE_DIR = "store"
MANIFEST_NAME = "MANIFEST.json"
LOCK_NAME = ".writer.lock"
QUARANTINE_DIR = "quarantine"
#: The partition `triage run` writes its conclusions to (incidents, attempt outcomes, job
#: scores), apart from the node agents' partitions so it never contends with them.
SUPERVISOR_PARTITION = "supervisor"


def partition_dir(data_dir: str | os.PathLike[str], node: str) -> Path:
    """`store/<node>`; a `ConfigError` for a node name that is no safe directory name (`..`
    would make the data dir itself a partition)."""
    return Path(data_dir) / STORE_DIR / check_name("node name", node)


LOGS_DIR = "logs"


def agent_flush_mark(data_dir: str | os.PathLike[str], node: str) -> Path:
    """`logs/agent-<node>.flushed`: the wall time at which the node's agent began its newest
    flush on request (SIGUSR1), so a supervisor knows when what it waits for is stored."""
    return Path(data_dir) / LOGS_DIR / f"agent-{check_name('node name', node)}.flushed"


def scrape_targets_file(data_dir: str | os.PathLike[str], owner: int) -> Path:
    """`prometheus/agents-<pid>.json`: the agents one supervisor (`owner`, its pid) started, in
    Prometheus' file_sd format, so a scrape config with `files: [DATA_DIR/prometheus/*.json]`
    finds agents started on ports of their own; removed when they stop."""
    return Path(data_dir) / "prometheus" / f"agents-{owner}.json"


def run_log_dir(data_dir: str | os.PathLike[str], job_id: str, run_id: str) -> Path:
    """Where `triage run` keeps a run's captured output."""
    return Path(data_dir) / LOGS_DIR / check_name("job id", job_id) / check_name("run id", run_id)


def attempt_log_paths(data_dir: str | os.PathLike[str], job_id: str, run_id: str, attempt: int) -> list[Path]:
    """An attempt's captured output, oldest part first (the rotated file, then the current)."""
    current = run_log_dir(data_dir, job_id, run_id) / f"attempt-{attempt}.log"
    return [p for p in (current.with_name(current.name + ".1"), current) if p.exists()]


def spool_node_dir(data_dir: str | os.PathLike[str], node: str) -> Path:
    return Path(data_dir) / SPOOL_DIR / check_name("node name", node)


def _subdirs(path: Path) -> list[str]:
    """Names of the folders in `path` (an entry that cannot be looked at, e.g. a symlink
    loop, is none)."""
    try:
        entries = list(os.scandir(path))
    except FileNotFoundError:
        return []
    names = []
    for e in entries:
        try:
            if e.is_dir() and not e.name.startswith("."):
                names.append(e.name)
        except OSError:
            continue
    return sorted(names)


def unlisted_partitions(data_dir: str | os.PathLike[str]) -> list[str]:
    """Folders of the store that hold table folders but no manifest: a partition whose
    manifest was lost. Readers cannot read them and say so; writers refuse them."""
    root = Path(data_dir) / STORE_DIR
    return [
        n
        for n in _subdirs(root)
        if is_valid_name(n)
        and not (root / n / MANIFEST_NAME).exists()
        and any(d != QUARANTINE_DIR for d in _subdirs(root / n))
    ]


def partitions(data_dir: str | os.PathLike[str]) -> list[str]:
    """Nodes with a store partition (a manifest). Folders whose names no node can have are
    not partitions (nothing of Triage's made them)."""
    root = Path(data_dir) / STORE_DIR
    return [n for n in _subdirs(root) if is_valid_name(n) and (root / n / MANIFEST_NAME).exists()]


def spool_nodes(data_dir: str | os.PathLike[str]) -> list[str]:
    """Nodes with a spool folder (validly named: see `partitions`)."""
    return [n for n in _subdirs(Path(data_dir) / SPOOL_DIR) if is_valid_name(n)]


def check_data_dir(data_dir: str | os.PathLike[str]) -> Path:
    """The data dir, or a `ConfigError` saying why it is not one (an empty folder is an empty
    store; a folder holding other things is probably a wrong --data-dir)."""
    path = Path(data_dir)
    if path.exists() and not path.is_dir():
        raise ConfigError(
            f"data directory {path} is a file, not a directory; pass --data-dir (or set "
            "TRIAGE_DATA_DIR) to the folder `triage agent`/`triage demo` write"
        )
    if not path.is_dir():
        raise ConfigError(
            f"data directory {path} does not exist; pass --data-dir (or set "
            "TRIAGE_DATA_DIR) to where `triage agent`/`triage demo` write, or run `triage demo`"
        )
    if not (path / STORE_DIR).is_dir() and not (path / SPOOL_DIR).is_dir() and any(path.iterdir()):
        raise ConfigError(
            f"{path} is not a Triage data directory (it has neither {SPOOL_DIR}/ nor "
            f"{STORE_DIR}/); pass the --data-dir that `triage agent`/`triage demo` used"
        )
    return path


def parquet_unreadable(path: Path) -> str | None:
    """Why a segment file cannot be a whole Parquet file (missing, too short, no footer
    magic, a footer longer than the file), or None: a check of a few bytes, so one damaged file costs a warning, not every
    query of its table."""
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size < 12:
                return f"{size} bytes, too short for Parquet"
            fh.seek(-8, os.SEEK_END)
            tail = fh.read(8)
            if tail[4:] != b"PAR1":
                return "no Parquet footer (truncated or overwritten)"
            if int.from_bytes(tail[:4], "little") + 12 > size:
                return "its Parquet footer claims more bytes than the file has"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    return None
