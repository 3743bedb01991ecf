"""The trainer side of the supervisor's environment contract: TRIAGE_EXCLUDE_NODES,
TRIAGE_RESUME_BEFORE_STEP and TRIAGE_SKIP_STEPS, read and acted on by the reference trainer."""

from __future__ import annotations

import json

import pytest

from triage.config import ConfigError
from triage.reference_trainer.checkpoint import (
    MARKER,
    complete_checkpoints,
    resume_before_step_from_env,
    roll_back,
    step_dir,
)
from triage.reference_trainer.data import skip_steps_from_env, training_steps
from triage.reference_trainer.launcher import local_nodes, torchrun_command
from triage.reference_trainer.train_config import TrainConfig


def _cfg(tmp_path, nnodes=3):
    return TrainConfig(nnodes=nnodes, nproc_per_node=2, data_dir=str(tmp_path), job_id="j")


def test_excluded_nodes_are_left_out_and_keep_their_names(tmp_path, monkeypatch):
    cfg = _cfg(tmp_path)
    assert local_nodes(cfg) == [0, 1, 2]
    monkeypatch.setenv("TRIAGE_EXCLUDE_NODES", "node1, node7")
    assert local_nodes(cfg) == [0, 2]
    cmd = torchrun_command(cfg, 1, "127.0.0.1:1234", local=True, nnodes=2)
    assert cmd[cmd.index("--nnodes") + 1] == "2"


def test_excluding_every_node_is_bad_input(tmp_path, monkeypatch):
    monkeypatch.setenv("TRIAGE_EXCLUDE_NODES", "node0,node1")
    with pytest.raises(ConfigError, match="leaves none"):
        local_nodes(_cfg(tmp_path, nnodes=2))


def _fake_checkpoint(run_dir, step):
    path = step_dir(run_dir, step)
    path.mkdir(parents=True)
    (path / MARKER).write_text(json.dumps({"step": step, "files": {}}))


def test_roll_back_sets_aside_checkpoints_at_and_after_the_step(tmp_path):
    for step in (4, 8, 12):
        _fake_checkpoint(tmp_path, step)
    moved = roll_back(tmp_path, 8)
    assert [s for s, _ in complete_checkpoints(tmp_path)] == [4]
    assert sorted(p.name.split(".")[0] for p in moved) == ["step_00000008", "step_00000012"]
    assert all(p.exists() and ".rolled-back-" in p.name for p in moved)


def test_rollback_and_skip_env_parsing(monkeypatch):
    assert resume_before_step_from_env() is None and skip_steps_from_env() == frozenset()
    monkeypatch.setenv("TRIAGE_RESUME_BEFORE_STEP", "12")
    monkeypatch.setenv("TRIAGE_SKIP_STEPS", "12, 30")
    assert resume_before_step_from_env() == 12 and skip_steps_from_env() == {12, 30}
    monkeypatch.setenv("TRIAGE_SKIP_STEPS", "twelve")
    with pytest.raises(ConfigError, match="TRIAGE_SKIP_STEPS"):
        skip_steps_from_env()
    monkeypatch.setenv("TRIAGE_RESUME_BEFORE_STEP", "-3")
    with pytest.raises(ConfigError, match="TRIAGE_RESUME_BEFORE_STEP"):
        resume_before_step_from_env()


def test_skipped_steps_fetch_no_batch():
    assert training_steps(5, 10, frozenset({7, 9, 42})) == [5, 6, 8, 10]
