"""Durability on a POSIX filesystem: what a rename-into-place needs to survive a crash."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_path(path: str | os.PathLike[str]) -> None:
    """fsync a file or a directory; a directory's fsync makes the renames inside it durable."""
    fd = os.open(Path(path), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
