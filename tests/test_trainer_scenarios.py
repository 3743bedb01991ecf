"""The reference trainer end to end: real torchrun, FSDP2 on gloo, DCP checkpoints, on CPU.

One 4-rank, 2-node reference run is shared: resume at the same world size must reproduce its
losses exactly, and resume at 3 ranks must continue from its checkpoint. Faults whose handling
is the trainer's own (NaN guard, preemption, checkpoint damage, non-crashing faults) get short
2-rank runs here; the crashing kinds run on 2 nodes in tests/test_scenario_matrix.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TRIAGE_CLI

from triage.reference_trainer.checkpoint import complete_checkpoints, step_dir

pytestmark = pytest.mark.slow
RANK_TIMEOUT = 4  # --collective-timeout of the fault runs: how long a hang blocks the others


def train(run_dir: Path, *args: str, timeout: float = 90, attempt: int = 0) -> tuple[int, dict, str]:
    """`triage train` in a subprocess as attempt `attempt`; (exit status, summary, stdout+stderr)."""
    summary = run_dir.parent / f"{run_dir.name}-summary.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "triage.cli",
            "train",
            "--run-dir",
            str(run_dir),
            "--summary",
            str(summary),
            "--data-dir",
            str(run_dir.parent / "data"),
            "--job-id",
            run_dir.name,
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, TRIAGE_ATTEMPT=str(attempt)),
    )
    return proc.returncode, json.loads(summary.read_text()), proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """8 uninterrupted steps on 2 nodes x 2 ranks, checkpoints at steps 4 and 8."""
    run_dir = tmp_path_factory.mktemp("ref") / "ref"
    rc, summary, out = train(
        run_dir,
        "--nnodes",
        "2",
        "--nproc-per-node",
        "2",
        "--steps",
        "8",
        "--checkpoint-every",
        "4",
        "--keep",
        "2",
    )
    assert rc == 0, out
    return run_dir, summary


def test_torchruns_own_restart_comes_back_from_the_checkpoint(tmp_path):
    """`--max-restarts` alone, no supervisor: torchrun hands the restarted ranks the same store,
    and the restarted process group must not dial the killed round's addresses."""
    run_dir = tmp_path / "restarted"
    rc, s, out = train(
        run_dir,
        *("--nproc-per-node", "3", "--steps", "6", "--checkpoint-every", "2", "--max-restarts", "1"),
        *("--inject", "kill@step=4,rank=1", "--collective-timeout", str(RANK_TIMEOUT)),
        timeout=120,
    )
    assert rc == 0, out
    assert "connectFullMesh" not in out
    start = json.loads((run_dir / "progress-attempt1.jsonl").read_text().splitlines()[0])
    assert (start["attempt"], start["resumed_from_step"]) == (1, 2)
    assert s["exit"] == "completed" and s["steps_completed"] == 6


def _resume_from_step4(reference, tmp_path, name):
    run_dir, _ = reference
    resumed = tmp_path / name
    shutil.copytree(step_dir(run_dir, 4), step_dir(resumed, 4))
    return resumed


def test_training_runs_on_two_nodes(reference):
    run_dir, s = reference
    assert s["exit"] == "completed" and s["world_size"] == 4 and s["steps_completed"] == 8
    assert s["resumed_from_step"] is None and [st for st, _ in s["losses"]] == list(range(1, 9))
    assert s["losses"][-1][1] < s["losses"][0][1]  # it learns
    assert s["step_time_p50_s"] > 0 and s["tokens_per_s"] > 0
    assert [st for st, _ in complete_checkpoints(run_dir)] == [4, 8]
    assert not list((run_dir / "checkpoints").glob("*.tmp"))


def test_resume_reproduces_the_uninterrupted_losses_exactly(reference, tmp_path):
    resumed = _resume_from_step4(reference, tmp_path, "same")
    rc, s, out = train(resumed, "--nproc-per-node", "4", "--steps", "8", "--checkpoint-every", "0")
    assert rc == 0, out
    assert s["resumed_from_step"] == 4
    assert s["losses"] == reference[1]["losses"][4:]  # bit for bit


def test_resume_at_a_smaller_world_size_reshards(reference, tmp_path):
    resumed = _resume_from_step4(reference, tmp_path, "smaller")
    rc, s, out = train(resumed, "--nproc-per-node", "3", "--steps", "6", "--checkpoint-every", "0")
    assert rc == 0, out
    assert (s["world_size"], s["resumed_from_step"], s["steps_completed"]) == (3, 4, 6)
    # Same weights as the reference at step 4: the first loss lands close to the reference's.
    assert abs(s["losses"][0][1] - reference[1]["losses"][4][1]) < 0.2


def fault_run(tmp_path, spec, *extra):
    return train(
        tmp_path / "run",
        "--steps",
        "3",
        "--checkpoint-every",
        "0",
        "--collective-timeout",
        str(RANK_TIMEOUT),
        "--inject",
        spec,
        *extra,
    )


# Each crashing fault kind is run on 2 nodes x 2 ranks, its output and its analysis checked, in
# tests/test_scenario_matrix.py; the runs here cover what only the trainer decides.


def test_nan_stops_every_rank_at_the_same_step(tmp_path):
    rc, s, out = fault_run(tmp_path, "nan@step=2,rank=1")
    assert rc == 1 and s["steps_completed"] == 1
    assert out.count("FloatingPointError: Loss is nan at step 2") >= 2  # both ranks' tracebacks
    assert s["error"] == "FloatingPointError: Loss is nan at step 2"


def test_faults_fire_only_in_their_attempt(tmp_path):
    rc, s, out = fault_run(tmp_path, "kill@step=2,attempt=1")
    assert rc == 0 and s["exit"] == "completed", out


def test_disk_full_fails_the_save_and_leaves_no_checkpoint(tmp_path):
    rc, s, out = train(
        tmp_path / "run", "--steps", "4", "--checkpoint-every", "2", "--inject", "disk_full@step=3,rank=1"
    )
    assert rc == 1
    assert "checkpoint_error: saving" in out and "rank 1: OSError: [Errno 28] No space left on device" in out
    assert [st for st, _ in complete_checkpoints(tmp_path / "run")] == [2]
    assert s["steps_completed"] == 4 and s["exit"] == "failed"


def test_sigterm_saves_a_checkpoint_and_exits_143(tmp_path):
    run_dir = tmp_path / "run"
    rc, s, out = train(run_dir, "--steps", "6", "--checkpoint-every", "0", "--inject", "sigterm@step=3")
    assert rc == 143, out
    assert "preempted (SIGTERM): checkpoint saved at step 3" in out
    assert [st for st, _ in complete_checkpoints(run_dir)] == [3]
    assert s["preempted_checkpoint_step"] == 3 and s["steps_completed"] == 3


def test_corrupt_checkpoint_fails_resume_then_previous_one_is_used(tmp_path):
    run_dir = tmp_path / "run"
    rc, _, out = train(
        run_dir,
        "--steps",
        "4",
        "--checkpoint-every",
        "2",
        "--async-checkpoint",
        "--inject",
        "ckpt_corrupt@step=4,rank=1",
    )
    assert rc == 0, out  # the run goes on past the damage
    assert [st for st, _ in complete_checkpoints(run_dir)] == [2, 4]  # async saves got sealed
    rc, s, out = train(run_dir, "--steps", "5", "--checkpoint-every", "0", attempt=1)
    assert rc == 1
    assert "checkpoint_error: checkpoint" in out and "step_00000004" in out
    assert "__1_0.distcp is" in out and "quarantined to step_00000004.corrupt-" in out
    assert list((run_dir / "checkpoints").glob("step_00000004.corrupt-*"))
    # the analysis names it on the attempt that found it, not the one that wrote it
    analysis = subprocess.run(
        [*TRIAGE_CLI, "analyze", "run", "--json", "--data-dir", str(tmp_path / "data")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    (root,) = [i for i in json.loads(analysis.stdout)["incidents"] if i["root_cause"]]
    assert (root["attempt"], root["category"], root["action"]) == (1, "checkpoint_error", "restart")
    assert root["evidence"]
    rc, s, out = train(run_dir, "--steps", "5", "--checkpoint-every", "0", attempt=2)
    assert rc == 0 and s["resumed_from_step"] == 2, out


def test_non_crashing_faults_keep_training_and_record_gpu_faults(tmp_path):
    rc, s, out = train(
        tmp_path / "run",
        "--steps",
        "3",
        "--checkpoint-every",
        "0",
        "--inject",
        "slow@step=2,factor=2",
        "--inject",
        "sdc@step=1,rank=1",
        "--inject",
        "thermal@step=2,rank=1",
        "--inject",
        "pcie@step=2",
        "--inject",
        "xid@step=2,xid=63,rank=1",
    )
    assert rc == 0 and s["exit"] == "completed", out
    faults_dir = tmp_path / "data" / "faults"
    lines = [json.loads(line) for f in faults_dir.glob("*.jsonl") for line in f.read_text().splitlines()]
    assert sorted((r["kind"], r["rank"], r["xid"]) for r in lines) == [
        ("pcie", 0, None),
        ("thermal", 1, None),
        ("xid", 1, 63),
    ]
    assert all(r["job_id"] == "run" and r["attempt"] == 0 for r in lines)
