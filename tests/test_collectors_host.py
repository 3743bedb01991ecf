"""Host collector sanity, Xid de-duplication and collector isolation."""

import os
import subprocess
import sys
import time
from pathlib import Path

from triage.collectors.host import HostCollector, HostConfig, _cpu_times, process_alive
from triage.collectors.protocol import Collector, collect_isolated
from triage.collectors.records import DiskSample, GpuEvent, HostSample, ProcessSample, Unavailable
from triage.collectors.xid_dedup import XidDeduplicator


def by_type(records, cls):
    return [r for r in records if isinstance(r, cls)]


def test_host_values_are_in_range(tmp_path):
    c = HostCollector(HostConfig(disk_paths=[str(tmp_path)]), "n0")
    assert isinstance(c, Collector)
    start = _cpu_times(Path("/proc"))[1]
    deadline = time.monotonic() + 10
    while _cpu_times(Path("/proc"))[1] == start and time.monotonic() < deadline:
        sum(i * i for i in range(20_000))  # the ratio needs a clock tick between the two reads
    recs = c.collect(1.0)
    (h,) = by_type(recs, HostSample)
    assert 0.0 <= h.cpu_ratio <= 1.0
    assert h.load_1m >= 0 and h.load_15m >= 0
    assert 0 < h.memory_available_bytes <= h.memory_total_bytes
    assert h.memory_used_bytes == h.memory_total_bytes - h.memory_available_bytes
    assert h.swap_used_bytes >= 0 and h.net_rx_errors_total >= 0 and h.net_tx_drops_total >= 0
    (d,) = by_type(recs, DiskSample)
    assert d.path == str(tmp_path) and 0 < d.free_bytes <= d.total_bytes
    assert not by_type(recs, Unavailable)


def test_missing_disk_path_is_unavailable_not_a_crash(tmp_path):
    missing = str(tmp_path / "gone")
    c = HostCollector(HostConfig(disk_paths=[missing, str(tmp_path)]), "n0")
    recs = c.collect(1.0)
    (u,) = by_type(recs, Unavailable)
    assert u.source == f"disk:{missing}" and "FileNotFoundError" in u.reason
    assert [d.path for d in by_type(recs, DiskSample)] == [str(tmp_path)]


def test_unreadable_proc_files_leave_fields_none(tmp_path):
    fake_proc = tmp_path / "proc"
    fake_proc.mkdir()
    (fake_proc / "loadavg").write_text("0.50 0.40 0.30 1/93 5580\n")
    recs = HostCollector(HostConfig(), "n0", proc=fake_proc).collect(1.0)
    (h,) = by_type(recs, HostSample)
    assert h.load_1m == 0.5 and h.memory_total_bytes is None and h.cpu_ratio is None
    assert {u.source for u in by_type(recs, Unavailable)} == {"proc:stat", "proc:meminfo", "proc:net/dev"}


def test_cpu_ratio_is_busy_jiffies_over_total_and_none_without_a_tick(tmp_path):
    fake_proc = tmp_path / "proc"
    fake_proc.mkdir()
    stat = fake_proc / "stat"
    stat.write_text("cpu  100 0 50 800 50 0 0 0 0 0\n")
    c = HostCollector(HostConfig(), "n0", proc=fake_proc)
    (h,) = by_type(c.collect(1.0), HostSample)
    assert h.cpu_ratio is None  # no tick elapsed since the first read
    stat.write_text("cpu  160 0 70 900 70 0 0 0 0 0\n")  # +80 busy, +120 idle+iowait
    (h,) = by_type(c.collect(2.0), HostSample)
    assert h.cpu_ratio == 80 / 200


def test_rank_liveness_sees_a_dead_and_a_zombie_process():
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        zombie_pid = zombie.pid
        os.waitid(os.P_PID, zombie_pid, os.WEXITED | os.WNOWAIT)  # exited, not yet reaped
        pids = {0: alive.pid, 1: zombie_pid}
        recs = HostCollector(HostConfig(), "n0", pids=lambda: pids).collect(1.0)
        assert {(p.rank, p.alive) for p in by_type(recs, ProcessSample)} == {(0, True), (1, False)}
    finally:
        alive.kill()
        alive.wait()
        zombie.wait()
    assert not process_alive(alive.pid)


def _ev(source, t, xid=79, gpu=0):
    return GpuEvent(time=t, node="n", gpu=gpu, uuid=None, kind="xid", xid=xid, text="", source=source)


def test_xid_reported_by_nvml_and_kernel_log_counts_once_but_bursts_stay():
    d = XidDeduplicator(window_s=5)
    assert d.admit(_ev("nvml_event", 100.0))
    assert not d.admit(_ev("kernel_log", 101.0))  # the same Xid, second source
    assert d.admit(_ev("kernel_log", 101.5))  # a second Xid in a burst is kept
    assert d.admit(_ev("kernel_log", 130.0))  # outside the window
    assert d.admit(_ev("nvml_event", 101.0, xid=48))  # another Xid number
    assert d.admit(_ev("nvml_event", 101.0, gpu=1))  # another GPU


def test_a_collector_that_raises_becomes_unavailable_and_others_run():
    class Broken:
        name = "broken"

        def collect(self, now):
            raise RuntimeError("sensor exploded")

        def close(self):
            pass

    (u,) = collect_isolated(Broken(), 5.0, "n0")
    assert isinstance(u, Unavailable) and u.collector == "broken" and "sensor exploded" in u.reason
    assert by_type(collect_isolated(HostCollector(HostConfig(), "n0"), 5.0, "n0"), HostSample)
