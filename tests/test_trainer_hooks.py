"""TrainingMonitor, collective timing and the spool writer, on real processes and files."""

import gc
import json
import os
import signal
import subprocess
import sys
import time
import warnings
import weakref
from pathlib import Path

import pyarrow as pa
import pytest
import torch
import torch.distributed as dist

from triage.ports import free_port
from triage.trainer_hooks import MonitorConfig, TrainingMonitor
from triage.trainer_hooks.buffer import RecordBuffer
from triage.trainer_hooks.collective_timing import WRAPPED, busbw_factor
from triage.trainer_hooks.spool_schema import SPOOL_TABLES, parse_segment_name, read_segment
from triage.trainer_hooks.spool_writer import SpoolWriter

CHILD = Path(__file__).with_name("hook_child.py")


def read_spool(data_dir: Path, table: str) -> pa.Table:
    files = sorted(p for p in Path(data_dir, "spool").rglob("*") if parse_segment_name(p.name) is not None)
    parts = [t for t in (read_segment(f).get(table) for f in files) if t is not None]
    return pa.concat_tables(parts) if parts else SPOOL_TABLES[table].empty_table()


@pytest.fixture
def world1(monkeypatch):
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    dist.init_process_group("gloo", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_steps_collectives_events_and_heartbeats_reach_the_spool(tmp_path, world1):
    model = torch.nn.Linear(8, 8)
    mon = TrainingMonitor(
        MonitorConfig(data_dir=tmp_path, job_id="j", canary_every=2, rank=0, world_size=1, node="n0"),
        model=model,
    ).start()
    for step in range(6):
        with mon.step(step, tokens=64, samples=8) as s:
            with s.data():
                x = torch.randn(8, 8)
            with s.compute():
                loss = model(x).pow(2).mean()
                loss.backward()
                dist.all_reduce(model.weight.grad)
                dist.all_reduce(torch.ones(4), async_op=True).wait()
                dist.barrier()
            s.record(loss=loss, grad_norm=float("nan") if step == 5 else 1.0)
    mon.close()

    steps = read_spool(tmp_path, "steps").to_pandas()
    assert sorted(steps["step"]) == list(range(6))
    assert (steps["job_id"] == "j").all() and (steps["node"] == "n0").all()
    assert steps.loc[steps.step == 5, "nonfinite"].item() is True
    assert steps.loc[steps.step == 4, "nonfinite"].item() is False
    assert (steps["end_time"] >= steps["start_time"]).all()
    assert steps["mfu"].isna().all()  # no peak FLOP/s known on CPU

    coll = read_spool(tmp_path, "collectives").to_pandas()
    assert len(coll) == 18
    assert list(coll["seq"]) == list(range(1, 19))  # one group, counted in issue order
    assert set(coll["op"]) == {"all_reduce", "barrier"}
    assert coll["end_time"].notna().all()
    weight = coll[(coll.op == "all_reduce") & (coll.bytes == 8 * 8 * 4)]
    assert len(weight) == 6 and (weight.dtype == "float32").all()

    events = read_spool(tmp_path, "events").to_pandas()
    kinds = list(events["kind"])
    assert kinds.count("process_start") == 1 and kinds.count("exit") == 1
    assert kinds.count("first_step") == 1
    assert events.loc[events.kind == "nonfinite", "step"].tolist() == [5]
    canaries = events[events.kind == "canary"]
    assert canaries["step"].tolist() == [0, 2, 4]
    assert canaries["message"].nunique() == 1  # the same known answer every time
    assert len(read_spool(tmp_path, "heartbeats")) >= 1
    ranks = read_spool(tmp_path, "ranks").to_pandas()
    assert ranks["pid"].tolist() == [os.getpid()]
    # a CPU-only rank drives no GPU: its records say none (a verdict must not name "GPU 0")
    assert ranks["gpu"].isna().all() and steps["gpu"].isna().all() and events["gpu"].isna().all()


@pytest.mark.parametrize(
    ("device", "visible", "gpu"),
    [
        ("cuda:1", None, 1),
        ("cuda:1", "4,5", 5),  # Slurm's or a container's binding: the process's cuda:1 is GPU 5
        ("cuda:0", "6", 6),
        ("cuda:1", "GPU-aa,GPU-bb", 1),  # UUIDs: left to the store, which matches the UUID
        ("cpu", "3", None),
    ],
)
def test_a_rank_names_its_gpu_as_the_node_numbers_it(monkeypatch, device, visible, gpu):
    from triage.trainer_hooks.monitor import node_gpu_index

    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert node_gpu_index(torch.device(device)) == gpu


def test_a_simulated_gpu_is_named_and_the_device_learnt_later_is_written_on(tmp_path, monkeypatch):
    # this CPU build of torch has no device properties to read: the UUID is stood in for
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: type("P", (), {"uuid": "x"})())
    cfg = MonitorConfig(data_dir=tmp_path, job_id="j", rank=0, world_size=1, node="n0", gpu=3)
    mon = TrainingMonitor(cfg, device="cpu").start()
    mon.event("note", "before")
    assert mon.identity[-1] == 3
    mon.close()
    plain = TrainingMonitor(MonitorConfig(data_dir=tmp_path, job_id="k", node="n0"), device="cpu").start()
    plain.set_device("cuda:2")  # what the automatic monitor learns at the first optimizer step
    plain.event("note", "after")
    plain.close()
    events = read_spool(tmp_path, "events").to_pandas()
    assert set(events.loc[events.job_id == "j", "gpu"]) == {3}
    assert events.loc[(events.job_id == "k") & (events.message == "after"), "gpu"].tolist() == [2]


def test_a_save_is_begun_in_the_buffer_as_it_starts_and_ended_once(tmp_path):
    """The begin is buffered before the write ends (so the store shows the save in progress
    while it lasts); the end does not repeat it; a failed save is over without a checkpoint."""
    mon = TrainingMonitor(MonitorConfig(data_dir=tmp_path, canary_every=0))
    started = mon.checkpoint_save_started(4, "/ckpt/step4")
    assert [(e[1], e[2]) for e in mon.buffer.drain("events")] == [("checkpoint_save_begin", 4)]
    mon.checkpoint_saved(4, started, 1024, "/ckpt/step4")
    assert [e[1] for e in mon.buffer.drain("events")] == ["checkpoint_save_end"]
    mon.checkpoint_save_started(6, "/ckpt/step6")
    mon.checkpoint_save_failed(6, "/ckpt/step6", OSError(28, "No space left on device"))
    kinds = [(e[1], e[2]) for e in mon.buffer.drain("events")]
    assert kinds == [("checkpoint_save_begin", 6), ("checkpoint_save_failed", 6)]
    mon.checkpoint_saved(8, started, None, "/ckpt/step8")  # no begin recorded: both, as before
    assert [e[1] for e in mon.buffer.drain("events")] == ["checkpoint_save_begin", "checkpoint_save_end"]
    # a file the zero-code hooks saw written: begun at once too, ended even when it fails
    t = mon.file_save_started("/tmp/dump.pt")
    assert [e[1] for e in mon.buffer.drain("events")] == ["file_save_begin"]
    mon.file_save_ended("/tmp/dump.pt", t, OSError(28, "No space left on device"))
    (end,) = mon.buffer.drain("events")
    assert end[1] == "file_save_end" and '"failed": true' in end[4]


_SAVERS_SCRIPT = """
import importlib.util, io, json, sys, threading
import torch
import safetensors.torch as st
from triage.trainer_hooks.auto import AutoInstrument
from triage.trainer_hooks.config import MonitorConfig
from triage.trainer_hooks.monitor import TrainingMonitor

d = sys.argv[1]
originals = (torch.save, st.save_file)
assert "torch.distributed.checkpoint" not in sys.modules  # wrapped when the script imports it
zero_code = AutoInstrument(TrainingMonitor(MonitorConfig(data_dir=d, canary_every=0))).install()
torch.save({"w": torch.ones(2)}, io.BytesIO())  # into a buffer: no file written, not timed
torch.save({"w": torch.ones(2)}, d + "/state.pt")
st.save_model(torch.nn.Linear(2, 2), d + "/model.safetensors")  # one save (it calls save_file)
from safetensors.torch import save_file  # bound after the hooks: as Transformers binds it
try:
    save_file({"w": torch.ones(2)}, d + "/missing/x.safetensors")
except Exception:
    pass
worker = threading.Thread(target=torch.save, args=({"w": 1}, d + "/background.pt"))
worker.start(); worker.join()  # off the main thread: no wait of the rank's, not timed
assert importlib.util.find_spec("torch.distributed.checkpoint") is not None  # a probe loads nothing
import torch.distributed.checkpoint as dcp
dcp.save({"w": torch.ones(2)}, checkpoint_id=d + "/dcp-4")
# a framework callback's monitor takes over: the names bound earlier report to it
callback = AutoInstrument(TrainingMonitor(MonitorConfig(data_dir=d, canary_every=0))).install()
save_file({"w": torch.ones(2)}, d + "/by-callback.safetensors")
callback.uninstall()
events = [(e[1], e[3], e[4]) for e in zero_code.monitor.buffer.drain("events")]
taken_over = [(e[1], e[3], e[4]) for e in callback.monitor.buffer.drain("events")]
zero_code.uninstall()
save_file({"w": torch.ones(2)}, d + "/after.safetensors")  # no one watches: passes through
assert not zero_code.monitor.buffer.drain("events") and not callback.monitor.buffer.drain("events")
restored = (torch.save, st.save_file) == originals and dcp.save.__code__.co_filename != __import__("triage.trainer_hooks.saves").trainer_hooks.saves.__file__
print(json.dumps({"events": events, "taken_over": taken_over, "restored": restored}))
"""


def _saves(events: list) -> list:
    """(kind, path, failed) of file_save_* events as the buffer holds them."""
    return [
        (
            kind,
            path if kind == "file_save_begin" else json.loads(data)["path"],
            data and json.loads(data)["failed"],
        )
        for kind, path, data in events
    ]


def test_the_zero_code_hooks_time_torch_safetensors_and_dcp_saves_to_files(tmp_path):
    """A rank writing through any of the common savers is seen saving while it lasts (a
    model's safetensors save to slow shared storage takes minutes, off the CPU); a failed write
    ends its save; a write to a buffer, one inside another and one off the main thread are no
    waits of the rank's; the newest monitor hears; uninstalling restores each saver."""
    out = subprocess.run(
        [sys.executable, "-c", _SAVERS_SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["restored"]
    assert _saves(result["events"]) == [
        (kind, str(tmp_path / name), None if kind == "file_save_begin" else name.startswith("missing"))
        for name in ("state.pt", "model.safetensors", "missing/x.safetensors", "dcp-4")
        for kind in ("file_save_begin", "file_save_end")
    ]
    path = str(tmp_path / "by-callback.safetensors")
    assert _saves(result["taken_over"]) == [("file_save_begin", path, None), ("file_save_end", path, False)]


def test_collective_wrappers_are_removed_on_close(tmp_path, world1):
    original, destroy = dist.all_reduce, dist.destroy_process_group
    mon = TrainingMonitor(MonitorConfig(data_dir=tmp_path, canary_every=0)).start()
    assert dist.all_reduce is not original and dist.destroy_process_group is not destroy
    mon.close()
    assert dist.all_reduce is original and dist.destroy_process_group is destroy


def test_every_wrapped_collective_records_one_row_with_its_size_and_bandwidth(tmp_path, world1):
    """One row per call, also for the ops torch implements through others: the wrapper keeps
    no "already inside a collective" state, so a wrapped op that called another would count
    twice here."""

    def t():
        return torch.ones(4)

    calls = {
        "all_reduce": lambda: dist.all_reduce(t()),
        "all_reduce_coalesced": lambda: dist.all_reduce_coalesced([t(), t()]),
        "broadcast": lambda: dist.broadcast(t(), 0),
        "reduce": lambda: dist.reduce(t(), 0),
        "all_gather": lambda: dist.all_gather([t()], t()),
        "all_gather_single": lambda: dist.all_gather_single(t(), t()),
        "reduce_scatter": lambda: dist.reduce_scatter(t(), [t()]),
        "reduce_scatter_single": lambda: dist.reduce_scatter_single(t(), t()),
        "all_to_all_single": lambda: dist.all_to_all_single(t(), t()),
        "all_to_all": lambda: dist.all_to_all([t()], [t()]),
        "barrier": lambda: dist.barrier(),  # noqa: PLW0108 (looked up at the call, once wrapped)
    }
    assert set(calls) == set(WRAPPED)
    mon = TrainingMonitor(MonitorConfig(data_dir=tmp_path, canary_every=0)).start()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # all_reduce_coalesced is deprecated
        for call in calls.values():
            call()
    mon.close()

    coll = read_spool(tmp_path, "collectives").to_pandas()
    assert list(coll["op"]) == [WRAPPED[name].op for name in calls]
    assert list(coll["seq"]) == list(range(1, len(calls) + 1))
    assert list(coll["bytes"]) == [16, 32, 16, 16, 16, 16, 16, 16, 16, 16, 0]
    assert list(coll["dtype"]) == ["float32"] * 10 + [""]
    assert (coll["group"] == "0").all() and (coll["group_size"] == 1).all()
    timed = coll[(coll.end_time > coll.enter_time) & (coll.bytes > 0)]
    algbw = timed["bytes"] / (timed["end_time"] - timed["enter_time"])
    assert timed["algbw_bytes_per_s"].tolist() == pytest.approx(algbw.tolist())
    assert timed["busbw_bytes_per_s"].tolist() == pytest.approx(algbw.tolist())  # one rank: factor 1


def test_collectives_are_recorded_across_a_new_default_group(tmp_path, monkeypatch):
    """A monitor started before the process group (the zero-code hooks are): a collective
    before `init_process_group` fails as torch makes it fail, and one after a destroy and a new
    init is named from the new group."""
    mon = TrainingMonitor(MonitorConfig(data_dir=tmp_path, canary_every=0)).start()
    with pytest.raises((RuntimeError, ValueError)):
        dist.all_reduce(torch.ones(1))
    for _ in range(2):
        monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
        monkeypatch.setenv("MASTER_PORT", str(free_port()))
        dist.init_process_group("gloo", rank=0, world_size=1)
        dist.all_reduce(torch.ones(1))
        dist.destroy_process_group()
    mon.close()
    coll = read_spool(tmp_path, "collectives").to_pandas()
    assert list(coll["seq"]) == [1, 2] and (coll["group_size"] == 1).all()


def test_close_restores_every_process_hook_it_installed(tmp_path, world1):
    def script_handler(signum, frame):
        pass

    previous = signal.signal(signal.SIGTERM, script_handler)
    try:
        hook = sys.excepthook
        mon = TrainingMonitor(MonitorConfig(data_dir=tmp_path, canary_every=0)).start()
        assert sys.excepthook is not hook and signal.getsignal(signal.SIGTERM) is not script_handler
        mon.close()
        assert sys.excepthook is hook
        assert signal.getsignal(signal.SIGTERM) is script_handler
        # nothing (no atexit hook) keeps a closed monitor alive until the process exits
        gone = weakref.ref(mon)
        del mon
        gc.collect()
        assert gone() is None
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_bus_bandwidth_factors_follow_nccl_tests():
    assert busbw_factor("all_reduce", 4) == pytest.approx(1.5)
    assert busbw_factor("all_gather", 4) == pytest.approx(0.75)
    assert busbw_factor("reduce_scatter", 8) == pytest.approx(7 / 8)
    assert busbw_factor("broadcast", 8) == 1.0


def test_full_buffer_drops_and_counts_instead_of_blocking():
    buf = RecordBuffer(["steps"], capacity=100)
    accepted = sum(buf.put("steps", (i,)) for i in range(150))
    assert accepted == 100 and buf.dropped["steps"] == 50
    assert [r[0] for r in buf.drain("steps", 3)] == [0, 1, 2]


def test_unwritable_spool_is_reported_once_and_rows_survive_until_it_recovers(tmp_path, capsys):
    blocker = tmp_path / "spool"
    blocker.write_text("a file where the spool directory should be")
    buf = RecordBuffer(SPOOL_TABLES, 1000)
    writer = SpoolWriter(blocker / "rank0", ("j", None, 0, 0, "n", 0), buf, 3600)
    for i in range(3):
        buf.put("heartbeats", (float(i), i, 1, None, None, None, None, None, None, None, None))
        writer.flush()
    err = capsys.readouterr().err
    assert err.count("cannot write telemetry") == 1
    assert buf.pending() == 3  # nothing lost while the disk was unusable
    blocker.unlink()
    writer.flush()
    assert buf.pending() == 0 and writer.rows_written == 3
    assert "writable again" in capsys.readouterr().err


def _run_child(data_dir, mode, steps, pause="0", every="0.2"):
    return subprocess.Popen(
        [sys.executable, str(CHILD), str(data_dir), mode, str(steps), pause, every],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_uncaught_exception_is_recorded_with_traceback(tmp_path):
    proc = _run_child(tmp_path, "raise", 3)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0 and "KeyError" in err
    events = read_spool(tmp_path, "events").to_pandas()
    exc = events[events.kind == "exception"]
    assert len(exc) == 1
    detail = json.loads(exc["detail"].item())
    assert detail["type"] == "KeyError" and "missing_field" in detail["traceback"]
    assert exc["step"].item() == 2
    assert len(read_spool(tmp_path, "steps")) == 3


def _child_past(tmp_path, step: int, every: str = "0.2") -> tuple[subprocess.Popen, int]:
    """A child stepping every 20 ms, once it has printed `step` (the last it printed)."""
    proc = _run_child(tmp_path, "forever", 0, "0.02", every)
    last = -1
    for line in proc.stdout:
        last = int(line)
        if last >= step:
            break
    return proc, last


def test_sigkill_loses_at_most_the_last_flush_interval(tmp_path):
    proc, last = _child_past(tmp_path, 60)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    steps = read_spool(tmp_path, "steps").to_pandas()
    assert steps["step"].is_unique
    # flush every 0.2 s at ~50 steps/s: at most a few flush intervals' worth may be missing
    assert steps["step"].max() >= last - 40
    assert sorted(steps["step"]) == list(range(steps["step"].max() + 1))


def test_sigterm_writes_what_is_buffered_before_the_process_dies(tmp_path):
    """torchrun stops a rank with SIGTERM once its peer died; the default action ends the
    process past every exit path, so the handler writes the buffer first. The writer thread
    flushes only once a minute here: every step the rank finished must still be spooled."""
    proc, last = _child_past(tmp_path, 20, every="60")
    proc.send_signal(signal.SIGTERM)
    proc.send_signal(signal.SIGTERM)  # the supervisor's and the launcher's, passed on
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGTERM  # still dies by the signal, as its launcher expects
    steps = read_spool(tmp_path, "steps").to_pandas()
    assert sorted(steps["step"])[: last + 1] == list(range(last + 1))
    events = read_spool(tmp_path, "events").to_pandas()
    assert (events.kind == "sigterm").sum() == 1


def test_a_flush_interrupted_on_its_own_thread_is_not_waited_for(tmp_path):
    """A SIGTERM handler that flushes while the signal interrupted this thread's own flush
    would wait on itself: it gives up at once, and the flush it interrupted completes."""
    buf = RecordBuffer(SPOOL_TABLES, 1000)
    nested: list[tuple[bool, float]] = []

    def finish(values):
        started = time.monotonic()
        nested.append((writer.flush(lock_timeout=5.0), time.monotonic() - started))
        return values

    writer = SpoolWriter(
        tmp_path / "rank0", ("j", None, 0, 0, "n", 0), buf, 3600, finish={"heartbeats": finish}
    )
    buf.put("heartbeats", (1.0, 1, 1, None, None, None, None, None, None, None, None))
    assert writer.flush() is True and writer.rows_written == 1
    [(done, waited)] = nested
    assert done is False and waited < 1.0
