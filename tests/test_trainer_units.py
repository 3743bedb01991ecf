"""Reference trainer pieces that need no torchrun: the inject-spec language, checkpoint
integrity, fault mechanics, and `triage train`'s refusal of bad input (exit 2)."""

from __future__ import annotations

import json
import time

import pytest
import torch

from triage.cli import main
from triage.config import ConfigError
from triage.reference_trainer import checkpoint as ckpt
from triage.reference_trainer import faults
from triage.reference_trainer.inject_spec import INJECT_KINDS, parse_inject_spec
from triage.reference_trainer.model import GPT
from triage.reference_trainer.model_sizes import MODEL_SIZES
from triage.reference_trainer.summary import build_summary


def test_inject_spec_defaults_and_values():
    s = parse_inject_spec("slow@step=5,rank=3,factor=2.5")
    assert (s.kind, s.step, s.rank, s.attempt, s.gpu, s.factor) == ("slow", 5, 3, 0, None, 2.5)
    assert parse_inject_spec("thermal@step=1").factor == 2.0
    assert parse_inject_spec("pcie@step=1").factor == 1.2
    x = parse_inject_spec("xid@step=2,xid=79,gpu=1,attempt=1")
    assert (x.xid, x.gpu, x.attempt) == (79, 1, 1)
    assert x.applies(rank=0, attempt=1) and not x.applies(rank=0, attempt=0)
    assert not x.applies(rank=1, attempt=1)
    assert parse_inject_spec("sigterm@step=3").applies(rank=7, attempt=0)  # every rank


@pytest.mark.parametrize(
    "text, says",
    [
        ("boom@step=1", "unknown kind"),
        ("kill", "say when"),
        ("kill@rank=1", "say when"),
        ("kill@step=x", "not a number"),
        ("kill@step=1,factor=2", "bad item"),
        ("hang@step=1,bogus", "bad item"),
        ("xid@step=1", "xid=N"),
        ("xid@step=1,xid=999", "xid=N"),
        ("slow@step=1,factor=0.5", "factor must be >= 1"),
        ("kill@step=-1", "negative"),
    ],
)
def test_inject_spec_rejects_with_a_clear_message(text, says):
    with pytest.raises(ConfigError, match=says):
        parse_inject_spec(text)


def _fake_checkpoint(root, step, payload=b"x" * 1000):
    tmp = ckpt.step_dir(root, step).with_name(f"step_{step:08d}.tmp")
    tmp.mkdir(parents=True)
    (tmp / ".metadata").write_bytes(b"meta")
    (tmp / "__0_0.distcp").write_bytes(payload)
    (tmp / "__1_0.distcp").write_bytes(payload)
    ckpt.finalize(tmp, ckpt.step_dir(root, step), step)
    return ckpt.step_dir(root, step)


def test_checkpoint_integrity_check_and_quarantine(tmp_path):
    good = _fake_checkpoint(tmp_path, 2)
    bad = _fake_checkpoint(tmp_path, 4)
    ckpt.verify(good)
    assert json.loads((good / ckpt.MARKER).read_text())["files"]["__1_0.distcp"]["size"] == 1000
    shard = ckpt.truncate_shard(bad, rank=1)
    assert shard.name == "__1_0.distcp" and shard.stat().st_size == 500
    with pytest.raises(
        ckpt.CheckpointError,
        match=r"checkpoint_error: .*step_00000004.*"
        r"__1_0.distcp is 500 bytes, expected 1000",
    ):
        ckpt.verify(bad)
    (good / "__0_0.distcp").write_bytes(b"y" * 1000)  # same size, other bytes
    with pytest.raises(ckpt.CheckpointError, match="SHA-256"):
        ckpt.verify(good)
    aside = ckpt.quarantine(bad)
    assert aside.name.startswith("step_00000004.corrupt-")
    assert [s for s, _ in ckpt.complete_checkpoints(tmp_path)] == [2]


def test_incomplete_checkpoints_are_never_listed_and_old_ones_pruned(tmp_path):
    for step in (1, 2, 3):
        _fake_checkpoint(tmp_path, step)
    unsealed = ckpt.checkpoints_root(tmp_path) / "step_00000004.tmp"
    unsealed.mkdir()
    no_marker = ckpt.checkpoints_root(tmp_path) / "step_00000005"
    no_marker.mkdir()
    assert [s for s, _ in ckpt.complete_checkpoints(tmp_path)] == [1, 2, 3]
    ckpt.prune(tmp_path, keep=2)
    ckpt.remove_incomplete(tmp_path)
    assert [s for s, _ in ckpt.complete_checkpoints(tmp_path)] == [2, 3]
    assert not unsealed.exists()


def test_disk_full_writer_fails_with_enospc(tmp_path):
    fs = ckpt._DiskFullFileSystem()
    with pytest.raises(OSError, match="No space left on device") as info:
        with fs.create_stream(tmp_path / "f", "wb") as stream:
            stream.write(b"z" * 10_000)
    assert info.value.errno == 28
    assert 0 < (tmp_path / "f").stat().st_size < 10_000  # a partial file, as on a full disk


def test_sdc_mode_perturbs_matmuls_silently():
    a, b = torch.randn(8, 8), torch.randn(8, 8)
    clean = a @ b
    mode = faults.PerturbMatmuls(1e-3)
    with mode:
        dirty = [torch.mm(a, b), a @ b, torch.nn.functional.linear(a, b)]
        added = a + b
    for got, want in zip(dirty, [clean, clean, a @ b.T]):
        assert not torch.equal(got, want) and torch.allclose(got, want, rtol=2e-3)
    assert torch.equal(added, a + b)  # only the matmul family is wrong


def _injector(specs, tmp_path, rank=0):
    return faults.FaultInjector(
        [parse_inject_spec(s) for s in specs],
        rank=rank,
        local_rank=1,
        attempt=0,
        job_id="j",
        data_dir=str(tmp_path),
        model=GPT(MODEL_SIZES["tiny"]),
    )


def test_slowdowns_stretch_compute_by_their_factor(tmp_path, monkeypatch):
    slept = []
    monkeypatch.setattr(faults, "busy_wait", slept.append)
    inj = _injector(["slow@step=3,factor=3", "pcie@step=4", "thermal@step=2,rank=1"], tmp_path)
    for step in (1, 2, 3):
        inj.before_compute(step)
        inj.after_compute(0.5)
    inj.before_compute(4)
    inj.after_compute(1.0)
    assert slept == [pytest.approx(1.0), pytest.approx(2.0 + 0.2)]
    recorded = next(iter((tmp_path / "faults").glob("*.jsonl"))).read_text()
    assert '"pcie"' in recorded and '"thermal"' not in recorded  # the thermal fault was rank 1's


def test_gpu_faults_are_recorded_before_acting(tmp_path, monkeypatch):
    monkeypatch.setenv("TRIAGE_NODE", "node7")
    inj = _injector(["ecc@step=2", "xid@step=3,xid=63,gpu=3"], tmp_path)
    with pytest.raises(RuntimeError, match="CUDA error: uncorrectable ECC error encountered"):
        inj.before_compute(2)
    inj.before_compute(3)  # Xid 63: no effect on the process
    records = [json.loads(line) for line in (tmp_path / "faults" / "node7.jsonl").read_text().splitlines()]
    assert [(r["kind"], r["xid"], r["gpu"], r["rank"], r["job_id"]) for r in records] == [
        ("ecc", 48, 1, 0, "j"),
        ("xid", 63, 3, 0, "j"),
    ]


def test_exception_fault_is_a_real_keyerror_in_the_batch_transform(tmp_path):
    inj = _injector(["exception@step=2"], tmp_path)
    batch = {"input_ids": torch.zeros(1), "labels": torch.zeros(1)}
    assert inj.transform_batch(1, batch) is batch
    with pytest.raises(KeyError, match="labels"):
        inj.transform_batch(2, batch)["labels"]


def test_summary_from_progress_records():
    events = [
        {"event": "start", "world_size": 4, "resumed_from_step": 10},
        {"event": "step", "step": 11, "loss": 2.0, "tokens": 100, "step_time_s": 0.1},
        {"event": "step", "step": 12, "loss": 1.5, "tokens": 100, "step_time_s": 0.3},
        {"event": "error", "message": "KeyError: 'labels'"},
    ]
    s = build_summary(events, job_id="j", world_size=4, completed=False)
    assert s["steps_completed"] == 12 and s["resumed_from_step"] == 10
    assert s["losses"] == [[11, 2.0], [12, 1.5]] and s["final_loss"] == 1.5
    assert s["step_time_p50_s"] == pytest.approx(0.2) and s["tokens_per_s"] == pytest.approx(500)
    assert s["exit"] == "failed" and s["error"] == "KeyError: 'labels'"
    empty = build_summary([], job_id="j", world_size=2, completed=False)
    assert empty["steps_completed"] == 0 and empty["losses"] == [] and empty["final_loss"] is None


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--steps", "0"], "--steps must be >= 1"),
        (["--inject", "meltdown@step=1"], "unknown kind"),
        (["--inject", "data_error@step=1", "--num-workers", "0"], "num-workers"),
        # faults that could never fire: a drill that passes for a clean run
        (["--nnodes", "1", "--inject", "ecc@step=4,rank=9"], "rank 9 is outside the job's 2 ranks"),
        (["--steps", "3", "--inject", "ecc@step=99"], "step 99 comes after --steps 3"),
        (["--inject", "ecc@step=4,gpu=12"], "no rank uses GPU 12"),
        (["--node-rank", "1"], "--rdzv-endpoint"),
        (["--rdzv-endpoint", "nohost"], "HOST:PORT"),
    ],
)
def test_train_rejects_bad_flags_with_exit_2(argv, says, tmp_path, capsys):
    assert main(["train", "--run-dir", str(tmp_path / "r"), *argv]) == 2
    assert says in capsys.readouterr().err


def test_train_rejects_a_run_dir_that_is_a_file_or_unwritable(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("")
    assert main(["train", "--run-dir", str(f)]) == 2
    assert "is a file" in capsys.readouterr().err
    assert main(["train", "--run-dir", str(f / "sub")]) == 2  # cannot create it
    assert "cannot write there" in capsys.readouterr().err


def test_every_inject_kind_is_in_help(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = capsys.readouterr().out
    assert all(f"  {kind} " in out for kind in INJECT_KINDS)


def test_launcher_kills_a_node_that_ignores_sigterm_after_another_failed():
    """A torchrun stuck in C++ never runs its SIGTERM handler: the launcher must still end."""
    import subprocess
    import sys

    from triage.reference_trainer.launcher import _Nodes

    stuck = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('ready', flush=True); time.sleep(120)"
    )
    nodes = object.__new__(_Nodes)
    nodes.procs = [
        subprocess.Popen([sys.executable, "-c", "raise SystemExit(1)"], start_new_session=True),
        subprocess.Popen([sys.executable, "-c", stuck], stdout=subprocess.PIPE, start_new_session=True),
    ]
    nodes.procs[1].stdout.readline()  # its SIG_IGN is in place
    nodes.forwarded = set()
    nodes.straggle_s, nodes.kill_after_s = 0.3, 0.3
    assert nodes.wait() == [1, -9]  # without the SIGKILL: [1, 0] two minutes later


def test_a_simulated_slowdown_keeps_its_thread_busy():
    """What the stall rule relies on: a slow rank's main thread is on the CPU, not asleep. The
    share of the CPU it gets depends on the machine's load (tests run on two workers), so it is
    compared with a sleep of the same length, which takes next to none."""
    cpu = time.thread_time()
    time.sleep(0.2)
    asleep = time.thread_time() - cpu
    cpu = time.thread_time()
    faults.busy_wait(0.2)
    busy = time.thread_time() - cpu
    assert busy > 0.02 and busy > 10 * asleep, (busy, asleep)
