"""The simulated disk: full while the schedule's disk_full fault of its node is on, and only then."""

import pytest

from triage.collectors.records import DiskSample, GpuEvent
from triage.collectors.sim_disk import SimDiskCollector
from triage.collectors.sim_gpu import SimGpuCollector
from triage.fault_schedule import DISK_FULL, GpuFault, append_fault

T0 = 1_700_000_000.0


def disk_full(data_dir, node, at, seconds=15.0):
    append_fault(
        data_dir, GpuFault(time=T0 + at, node=node, gpu=None, kind=DISK_FULL, params={"seconds": seconds})
    )


def test_full_only_while_the_fault_of_its_node_is_on(tmp_path):
    sim = SimDiskCollector(tmp_path, "node1", [str(tmp_path), "/nonexistent/ckpt"])
    disk_full(tmp_path, "node0", 5)  # another node's
    disk_full(tmp_path, "node1", 10, seconds=15)
    assert sim.collect(T0 + 9) == []
    during = sim.collect(T0 + 12)
    assert all(isinstance(r, DiskSample) for r in during)
    assert [r.path for r in during] == [f"sim:{tmp_path}", "sim:/nonexistent/ckpt"]
    assert all(r.free_bytes == 0 and r.total_bytes > 0 and r.node == "node1" for r in during)
    assert sim.collect(T0 + 26) == []  # space freed


def test_a_node_without_a_schedule_reports_nothing(tmp_path):
    assert SimDiskCollector(tmp_path, "node0", [str(tmp_path)]).collect(T0) == []


def test_the_simulated_gpus_pass_a_disk_fault_by(tmp_path):
    gpus = SimGpuCollector("node0", tmp_path, num_gpus=2)
    gpus.collect(T0)
    disk_full(tmp_path, "node0", 1)
    records = gpus.collect(T0 + 2)
    assert not [r for r in records if isinstance(r, GpuEvent)]


def test_a_gpu_fault_still_names_its_gpu():
    with pytest.raises(ValueError, match="names its GPU"):
        GpuFault(time=T0, node="node0", gpu=None, kind="xid", xid=79)
