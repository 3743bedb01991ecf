"""Sharded DCP checkpoints that are atomic, verified on load and pruned.

Layout under `<run_dir>/checkpoints/`: every rank writes into `step_NNNNNNNN.tmp`; when the save
is complete, rank 0 records every file's size and SHA-256 in `COMPLETE.json` and renames the
folder to `step_NNNNNNNN`. Only renamed folders with a marker are ever loaded, so a save cut
short (kill, disk full) is invisible. A checkpoint whose files no longer match the marker fails
the run with `checkpoint_error` and is renamed aside (`*.corrupt-<time>`) so the next attempt
resumes from the previous good one. A rollback (env TRIAGE_RESUME_BEFORE_STEP=N, set by the
supervisor) renames every checkpoint at or after step N aside (`*.rolled-back-<time>`) before
choosing, so neither this attempt nor a later one resumes from state past the anomaly.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import torch.distributed as dist
from torch.distributed.checkpoint import state_dict_loader, state_dict_saver
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.filesystem import FileSystem, FileSystemWriter

from triage.config import ENV_RESUME_BEFORE_STEP, ConfigError
from triage.durable import fsync_path

MARKER = "COMPLETE.json"
_STEP_DIR = re.compile(r"^step_(\d{8})$")


class CheckpointError(RuntimeError):
    """A checkpoint could not be written or read back (taxonomy: checkpoint_error)."""

    def __init__(self, message: str) -> None:
        super().__init__(f"checkpoint_error: {message}")


def _describe(exc: BaseException) -> str:
    """One line per failing rank instead of DCP's tracebacks (they stay in the chain)."""
    if isinstance(exc, CheckpointException):
        return "; ".join(
            f"rank {rank}: {type(err).__name__}: {err}" for rank, (err, _) in sorted(exc.failures.items())
        )
    return f"{type(exc).__name__}: {exc}"


def checkpoints_root(run_dir: str | os.PathLike[str]) -> Path:
    return Path(run_dir) / "checkpoints"


def step_dir(run_dir: str | os.PathLike[str], step: int) -> Path:
    return checkpoints_root(run_dir) / f"step_{step:08d}"


def complete_checkpoints(run_dir: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """(step, path) of every completed checkpoint, oldest first."""
    root = checkpoints_root(run_dir)
    if not root.is_dir():
        return []
    found = [
        (int(m.group(1)), p)
        for p in root.iterdir()
        if (m := _STEP_DIR.match(p.name)) and (p / MARKER).is_file()
    ]
    return sorted(found)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def finalize(tmp: Path, final: Path, step: int) -> None:
    """Seal a fully written checkpoint: marker with sizes and checksums, then the rename."""
    files = {
        p.name: {"size": p.stat().st_size, "sha256": _sha256(p)} for p in sorted(tmp.iterdir()) if p.is_file()
    }
    marker_tmp = tmp / (MARKER + ".tmp")
    with open(marker_tmp, "w") as fh:
        json.dump({"step": step, "time": time.time(), "files": files}, fh, indent=1)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(marker_tmp, tmp / MARKER)
    fsync_path(tmp)
    os.replace(tmp, final)
    fsync_path(final.parent)


def verify(path: Path) -> None:
    """Raise CheckpointError naming the checkpoint and the file unless every file matches."""
    try:
        files: dict[str, dict[str, Any]] = json.loads((path / MARKER).read_text())["files"]
    except (OSError, ValueError, KeyError) as exc:
        raise CheckpointError(f"checkpoint {path}: unreadable {MARKER}: {exc}") from exc
    if ".metadata" not in files:
        raise CheckpointError(f"checkpoint {path}: {MARKER} lists no .metadata file")
    for name, want in files.items():
        f = path / name
        if not f.is_file():
            raise CheckpointError(f"checkpoint {path}: file {name} is missing")
        size = f.stat().st_size
        if size != want["size"]:
            raise CheckpointError(
                f"checkpoint {path}: file {name} is {size} bytes, expected "
                f"{want['size']} (truncated or overwritten)"
            )
        if _sha256(f) != want["sha256"]:
            raise CheckpointError(f"checkpoint {path}: file {name} fails its SHA-256 check")


def resume_before_step_from_env() -> int | None:
    raw = os.environ.get(ENV_RESUME_BEFORE_STEP, "").strip()
    if not raw:
        return None
    if not raw.isdigit():
        raise ConfigError(f"env {ENV_RESUME_BEFORE_STEP}={raw!r}: expected a step number")
    return int(raw)


def roll_back(run_dir: str | os.PathLike[str], before_step: int) -> list[Path]:
    """Set aside every complete checkpoint at or after `before_step`; the paths they moved to."""
    moved = []
    for step, path in complete_checkpoints(run_dir):
        if step >= before_step:
            aside = path.with_name(f"{path.name}.rolled-back-{int(time.time())}")
            os.replace(path, aside)
            moved.append(aside)
    return moved


def quarantine(path: Path) -> Path:
    """Rename a bad checkpoint aside (kept for forensics, never loaded again)."""
    aside = path.with_name(f"{path.name}.corrupt-{int(time.time())}")
    os.replace(path, aside)
    return aside


def prune(run_dir: str | os.PathLike[str], keep: int) -> None:
    for _, path in complete_checkpoints(run_dir)[:-keep]:
        shutil.rmtree(path, ignore_errors=True)


def remove_incomplete(run_dir: str | os.PathLike[str]) -> None:
    """Drop `*.tmp` folders that a previous attempt left behind mid-save."""
    root = checkpoints_root(run_dir)
    if root.is_dir():
        for p in root.glob("step_*.tmp"):
            shutil.rmtree(p, ignore_errors=True)


def truncate_shard(path: Path, rank: int) -> Path:
    """The ckpt_corrupt fault: cut one of `rank`'s shard files to half its length."""
    shard = min(path.glob(f"__{rank}_*.distcp"))
    os.truncate(shard, shard.stat().st_size // 2)
    return shard


class _DiskFullFileSystem(FileSystem):
    """Streams that accept a first chunk and then fail the way a full disk does."""

    @contextmanager  # `path` typed as FileSystem.create_stream types it
    def create_stream(self, path: str | os.PathLike[Any], mode: str) -> Iterator[Any]:
        with super().create_stream(path, mode) as stream:
            yield _FillingStream(stream)


class _FillingStream:
    def __init__(self, stream: Any, room: int = 4096) -> None:
        self._stream, self._room = stream, room

    def write(self, data: bytes) -> int:
        if len(data) > self._room:
            self._stream.write(bytes(data[: self._room]))
            self._stream.flush()
            raise OSError(errno.ENOSPC, "No space left on device")
        self._room -= len(data)
        written: int = self._stream.write(data)
        return written

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class DiskFullWriter(FileSystemWriter):
    """The disk_full fault: a real DCP save whose file writes run out of space."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(path)
        self.fs = _DiskFullFileSystem()


class Checkpointer:
    """Save and load one job's checkpoints; every method is collective over all ranks."""

    def __init__(self, run_dir: str | os.PathLike[str], *, keep: int, async_save: bool) -> None:
        self.run_dir = Path(run_dir)
        self.keep = keep
        self.rank = dist.get_rank()
        # Background saves run their own collectives; a separate group keeps them from
        # interleaving with the training collectives on the default group.
        self._async_group = dist.new_group(backend="gloo") if async_save else None
        self._pending: tuple[Future[Any], Path, Path, int] | None = None
        self._sealed: list[tuple[int, Path]] = []

    def newest(self) -> tuple[int, Path] | None:
        """Agree on the checkpoint to resume from: rank 0 verifies it, everyone gets the answer.

        A corrupt newest checkpoint is quarantined and fails the run on every rank.
        """
        answer: list[Any] = [None]
        if self.rank == 0:
            remove_incomplete(self.run_dir)
            limit = resume_before_step_from_env()
            if limit is not None:
                roll_back(self.run_dir, limit)
            found = complete_checkpoints(self.run_dir)
            if found:
                step, path = found[-1]
                try:
                    verify(path)
                    answer[0] = ("ok", step, str(path))
                except CheckpointError as exc:
                    aside = quarantine(path)
                    previous = found[-2][1].name if len(found) > 1 else "none (a fresh start)"
                    answer[0] = (
                        "corrupt",
                        str(exc) + f"; quarantined to {aside.name}; the next "
                        f"attempt resumes from the previous good checkpoint: {previous}",
                    )
        dist.broadcast_object_list(answer, src=0)
        if answer[0] is None:
            return None
        if answer[0][0] == "corrupt":
            raise CheckpointError(answer[0][1].removeprefix("checkpoint_error: "))
        return answer[0][1], Path(answer[0][2])

    def load(self, path: Path, state: dict[str, Any]) -> None:
        try:
            state_dict_loader.load(state, checkpoint_id=str(path))
        except (Exception, CheckpointException) as exc:
            raise CheckpointError(f"loading checkpoint {path} failed: {_describe(exc)}") from exc

    def save(self, step: int, state: dict[str, Any], *, disk_full: bool = False) -> None:
        """Write `state` as the checkpoint of `step` (in the background with async_save)."""
        self.wait()
        final = step_dir(self.run_dir, step)
        tmp = final.with_name(final.name + ".tmp")
        writer = DiskFullWriter(tmp) if disk_full else FileSystemWriter(tmp)
        if self._async_group is None:
            try:
                state_dict_saver.save(state, storage_writer=writer)
            except (Exception, CheckpointException) as exc:
                raise CheckpointError(f"saving {tmp} at step {step} failed: {_describe(exc)}") from exc
            self._seal(tmp, final, step)
        else:
            response = state_dict_saver.async_save(
                state, storage_writer=writer, process_group=self._async_group
            )
            # A plain Future: the writer (a BlockingAsyncStager) stages before async_save returns;
            # only a non-blocking stager makes it an AsyncSaveResponse.
            self._pending = (cast(Future[Any], response), tmp, final, step)

    def wait(self) -> None:
        """Block until a background save is written and sealed."""
        if self._pending is None:
            return
        future, tmp, final, step = self._pending
        self._pending = None
        try:
            future.result()
        except (Exception, CheckpointException) as exc:
            raise CheckpointError(f"saving {tmp} at step {step} failed: {_describe(exc)}") from exc
        self._seal(tmp, final, step)

    def _seal(self, tmp: Path, final: Path, step: int) -> None:
        if self.rank == 0:
            finalize(tmp, final, step)
            prune(self.run_dir, self.keep)
        dist.barrier()  # nobody moves on (or exits) before the checkpoint is durable
        self._sealed.append((step, final))

    def drain_sealed(self) -> list[tuple[int, Path]]:
        """Checkpoints sealed since the last call (the ckpt_corrupt fault acts on them)."""
        sealed, self._sealed = self._sealed, []
        return sealed
