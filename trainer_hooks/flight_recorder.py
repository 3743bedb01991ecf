"""PyTorch's Flight Recorder, dumped where Triage's analyzers and PyTorch's own tools read it.

`triage run` turns the recorder on in every rank (`TORCH_FR_BUFFER_SIZE`, a ring of the last
N collectives per process: sequence number, op, sizes, state). A rank dumps it:
- when the supervisor asks, through a request file in the attempt's dump folder that the
  monitor's background thread looks for at every tick: on a hang the main thread may sit
  inside a collective in C++, where no Python signal handler ever runs;
- when it records an uncaught exception or a SIGTERM (a collective timeout ends that way).
Each dump is two files in `<data_dir>/fr/<job>/<run>/attempt-<N>/`:
- `fr-rank<R>`: PyTorch's own pickle, for `python -m torch.distributed.flight_recorder.fr_trace
  DIR --prefix fr-rank`. On gloo, torch 2.13 files the default group under the name '' in
  `pg_config` while its entries name it '0', and fr_trace then stops with a KeyError; the
  dump carries the name the entries use;
- `rank<R>.json`: what Triage ingests: per process group the last collectives the rank
  entered, with the recorder's own enqueued/completed counters, and every thread's Python stack
  (where a hung rank's main thread is).
Both are written under a temporary name and renamed, so a reader never sees half a dump.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

#: Entries each rank's recorder keeps when `triage run` turns it on (a few hundred bytes each).
DEFAULT_BUFFER_ENTRIES = 2000
ENV_BUFFER = "TORCH_FR_BUFFER_SIZE"
REQUEST_NAME = "REQUEST"
FR_PREFIX = "fr-rank"
#: Collectives per process group that `rank<R>.json` keeps (the newest).
_KEPT_PER_GROUP = 8
_STACK_FRAMES = 12
_OWN_FILES = ("trainer_hooks/flight_recorder.py", "trainer_hooks/monitor.py")


def dump_dir(data_dir: str | os.PathLike[str], job_id: str, run_id: str | None, attempt: int) -> Path:
    """Where an attempt's Flight Recorder dumps go (the names are checked by whoever made
    them: the supervisor and the monitor's config)."""
    return Path(data_dir) / "fr" / job_id / (run_id or "no-run") / f"attempt-{attempt}"


def enabled() -> bool:
    try:
        return int(os.environ.get(ENV_BUFFER, "0")) > 0
    except ValueError:
        return False


def _python_stacks() -> dict[str, list[str]]:
    names = {t.ident: t.name for t in threading.enumerate()}
    out = {}
    for ident, frame in sys._current_frames().items():
        # the dump's own frames (a SIGTERM handler runs on top of the main thread) are noise
        frames = [f for f in traceback.extract_stack(frame) if not f.filename.endswith(_OWN_FILES)][
            -_STACK_FRAMES:
        ]
        out[names.get(ident, str(ident))] = [
            f"{f.filename}:{f.lineno} in {f.name}: {(f.line or '').strip()}" for f in frames
        ]
    return out


def _repair_group_names(trace: dict[str, Any]) -> None:
    """Name the default group in `pg_config` as the entries do (see the module doc)."""
    config = trace.get("pg_config")
    if not isinstance(config, dict) or "" not in config:
        return
    used = {
        str(e["process_group"][0])
        for e in trace.get("entries", [])
        if isinstance(e, dict) and e.get("process_group")
    }
    missing = sorted(used - set(config))
    if len(missing) == 1:
        config[missing[0]] = config.pop("")


def summarize(trace: dict[str, Any]) -> dict[str, Any]:
    """Per process group: its name and description, the recorder's counters and the newest
    collectives (sequence number, op, state, sizes, when created)."""
    groups: dict[str, dict[str, Any]] = {}
    for e in trace.get("entries", []):
        pg = e.get("process_group") or ["?", "?"]
        g = groups.setdefault(str(pg[0]), {"name": str(pg[0]), "desc": str(pg[1]), "collectives": []})
        if e.get("is_p2p"):
            continue
        g["collectives"].append(
            {
                "seq": int(e.get("collective_seq_id", -1)),
                "op": str(e.get("profiling_name", "")),
                "state": str(e.get("state", "")),
                "sizes": e.get("input_sizes"),
                "created": (e.get("time_created_ns") or 0) / 1e9,
            }
        )
    for g in groups.values():
        g["collectives"] = sorted(g["collectives"], key=lambda c: c["seq"])[-_KEPT_PER_GROUP:]
    for name, status in (trace.get("pg_status") or {}).items():
        g = groups.setdefault(str(name), {"name": str(name), "desc": "", "collectives": []})
        g.update({k: int(v) for k, v in status.items() if isinstance(v, int)})
    ranks_of = {
        str(k): v.get("ranks") for k, v in (trace.get("pg_config") or {}).items() if isinstance(v, dict)
    }
    for name, g in groups.items():
        g["ranks"] = ranks_of.get(name)
    return {"groups": list(groups.values())}


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


class FlightRecorderDumper:
    """Dumps this rank's recorder on request (`poll`, from the writer thread) or on the way out
    (`dump`). Costs one `stat` per tick until a request comes."""

    def __init__(self, folder: Path, rank: int) -> None:
        self.folder = folder
        self.rank = rank
        self._lock = threading.Lock()
        self._answered: float | None = None  # mtime of the request last answered
        # Once a hang's dump is written, the stop that follows (SIGTERM) must not replace it:
        # aborting the collectives changes what the recorder shows.
        self._frozen = False

    def poll(self) -> None:
        try:
            requested = (self.folder / REQUEST_NAME).stat().st_mtime
        except OSError:
            return
        if self._answered != requested:
            self._answered = requested
            self.dump("the supervisor asked (hang)")
            self._frozen = True

    def dump(self, reason: str) -> bool:
        """Write both files; False where there is nothing to dump (the recorder is off, or
        torch.distributed was never initialised) or the disk refused."""
        if not enabled() or self._frozen:
            return False
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return False
        # never wait on ourselves: a SIGTERM may arrive while this thread is dumping already
        if not self._lock.acquire(timeout=5.0):
            return False
        try:
            try:
                # torch's stub for _distributed_c10d does not declare _dump_fr_trace
                from torch._C._distributed_c10d import _dump_fr_trace  # type: ignore[attr-defined]

                trace = pickle.loads(
                    _dump_fr_trace(includeCollectives=True, includeStackTraces=False, onlyActive=False)
                )
                _repair_group_names(trace)
                self.folder.mkdir(parents=True, exist_ok=True)
                _write_atomically(self.folder / f"{FR_PREFIX}{self.rank}", pickle.dumps(trace))
                body = {
                    "rank": self.rank,
                    "pid": os.getpid(),
                    "time": time.time(),
                    "reason": reason,
                    **summarize(trace),
                    "stacks": _python_stacks(),
                }
                _write_atomically(
                    self.folder / f"rank{self.rank}.json", json.dumps(body, default=str).encode()
                )
            except (OSError, RuntimeError, ImportError, pickle.UnpicklingError) as exc:
                print(
                    f"triage: rank {self.rank}: Flight Recorder dump failed ({exc})",
                    file=sys.stderr,
                    flush=True,
                )
                return False
        finally:
            self._lock.release()
        return True


def request_dumps(folder: Path) -> float:
    """Ask every rank of the attempt to dump; returns when the request was made."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / REQUEST_NAME
    path.write_text(f"{time.time()}\n")
    return path.stat().st_mtime


def read_dumps(folder: Path) -> list[dict[str, Any]]:
    """The `rank<R>.json` dumps in `folder` (a damaged one is skipped)."""
    out = []
    for path in sorted(folder.glob("rank*.json")):
        try:
            body = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(body, dict) and isinstance(body.get("rank"), int):
            out.append(body)
    return out
