"""Each rank process spools into a directory of its own, so nothing is deleted before it is
stored: not when a restarted container's rank gets the same pid, not when a job id is reused.

The ingester keeps a watermark per writer directory and deletes segments at or below it as
already stored. Two processes writing one directory (same job, attempt, rank and pid: a pid
namespace per container makes that the normal case) would have the second one's segments
deleted unread; the writer's incarnation in the directory name keeps them apart.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from triage.store import ingest_spools, open_snapshot
from triage.trainer_hooks.spool_schema import parse_job_dir_name, writer_dir

CHILD = Path(__file__).with_name("hook_child.py")


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True)
    return probe.returncode == 0


def _rank_in_own_pid_namespace(data_dir: Path, steps: int, env: dict[str, str]) -> None:
    """hook_child.py as pid 1 of a fresh pid namespace, like a rank in a new container."""
    subprocess.run(
        [
            "unshare",
            "--pid",
            "--fork",
            "--mount-proc",
            sys.executable,
            str(CHILD),
            str(data_dir),
            "clean",
            str(steps),
        ],
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )


@pytest.mark.skipif(not _unshare_works(), reason="needs `unshare --pid` (root, util-linux)")
def test_a_reused_pid_loses_nothing(tmp_path):
    env = {**os.environ, "TRIAGE_NODE": "node0", "TRIAGE_ATTEMPT": "0", "RANK": "0"}
    env.pop("TRIAGE_RUN_ID", None)
    _rank_in_own_pid_namespace(tmp_path, 5, env)
    assert ingest_spools(tmp_path, "node0").rows["steps"] == 5  # watermark set for pid 1
    _rank_in_own_pid_namespace(tmp_path, 7, env)
    assert ingest_spools(tmp_path, "node0").rows["steps"] == 7
    with open_snapshot(tmp_path) as snap:
        pids = snap.sql("SELECT DISTINCT pid FROM ranks WHERE job_id = 'child'")
        steps = snap.count("steps")
    assert [r["pid"] for r in pids] == [1]  # really the same pid, twice
    assert steps == 12


def test_writer_dirs_differ_by_incarnation_and_name_the_run(tmp_path):
    a = writer_dir(tmp_path, "n0", "nightly", 0, 3, 1, "aa01", "run1")
    b = writer_dir(tmp_path, "n0", "nightly", 0, 3, 1, "aa02", "run2")
    assert a != b and a.parent.parent.name == "nightly@run1"
    assert parse_job_dir_name(a.parent.parent.name) == ("nightly", "run1")
    assert parse_job_dir_name("nightly") == ("nightly", None)
