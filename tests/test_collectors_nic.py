"""Network ports from sysfs (a fake tree laid out as the kernel lays it out) and the simulated ports."""

import os
from pathlib import Path

from triage.collectors.nic import NicCollector
from triage.collectors.records import GpuIdentity, NicSample
from triage.collectors.sim_nic import SimNicCollector
from triage.fault_schedule import NIC_DOWN, GpuFault, append_fault
from triage.store.port_history import ports_seen_up
from triage.store.writer import StoreWriter

# root port 00:01.0 -> switch 01:00.0 -> GPU 0 (03:00.0), NIC eth0 (04:00.0), HCA mlx5_0 (05:00.0)
# root port 00:02.0 -> switch 11:00.0 -> GPU 1 (13:00.0), GPU 2 (14:00.0), NIC eth1 (15:00.0)
SWITCH_A = "devices/pci0000:00/0000:00:01.0/0000:01:00.0"
SWITCH_B = "devices/pci0000:00/0000:00:02.0/0000:11:00.0"
DEVICES = {
    "gpu0": f"{SWITCH_A}/0000:02:00.0/0000:03:00.0",
    "eth0": f"{SWITCH_A}/0000:02:01.0/0000:04:00.0",
    "mlx5_0": f"{SWITCH_A}/0000:02:02.0/0000:05:00.0",
    "gpu1": f"{SWITCH_B}/0000:12:00.0/0000:13:00.0",
    "gpu2": f"{SWITCH_B}/0000:12:01.0/0000:14:00.0",
    "eth1": f"{SWITCH_B}/0000:12:02.0/0000:15:00.0",
}
GPUS = [
    GpuIdentity(0, "GPU-a", "0000:03:00"),
    GpuIdentity(1, "GPU-b", "0000:13:00"),
    GpuIdentity(2, "GPU-c", "0000:14:00"),
]


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def link(at: Path, target: Path) -> None:
    at.parent.mkdir(parents=True, exist_ok=True)
    target.mkdir(parents=True, exist_ok=True)
    if at.is_symlink():
        at.unlink()
    at.symlink_to(os.path.relpath(target, at.parent))


def iface(
    sysfs: Path, name: str, state: str, *, device: str | None, changes: int = 2, downs: int | None = None
):
    d = sysfs / "class" / "net" / name
    write(d / "operstate", state)
    write(d / "carrier_changes", str(changes))
    if downs is not None:
        write(d / "carrier_down_count", str(downs))
    if device is not None:
        link(d / "device", sysfs / DEVICES[device])


def hca_port(sysfs: Path, state: str, downed: int) -> None:
    d = sysfs / "class" / "infiniband" / "mlx5_0"
    link(d / "device", sysfs / DEVICES["mlx5_0"])
    write(d / "ports" / "1" / "state", state)
    write(d / "ports" / "1" / "counters" / "link_downed", str(downed))


def fake_sysfs(tmp_path: Path) -> Path:
    sysfs = tmp_path / "sys"
    for i, g in enumerate(("gpu0", "gpu1", "gpu2")):
        link(sysfs / "bus" / "pci" / "devices" / f"{GPUS[i].pci_bus_id}.0", sysfs / DEVICES[g])
    iface(sysfs, "lo", "unknown", device=None)
    iface(sysfs, "docker0", "up", device=None)  # a bridge: no device, not a port
    iface(sysfs, "eth0", "up", device="eth0", changes=4)
    iface(sysfs, "eth1", "up", device="eth1", downs=0)
    iface(sysfs, "eth2", "down", device="eth1")  # never up: an unused port
    hca_port(sysfs, "4: ACTIVE", 0)
    return sysfs


def by_nic(records) -> dict[str, NicSample]:
    return {r.nic: r for r in records}


def test_physical_ports_are_read_with_the_gpu_that_shares_their_switch(tmp_path):
    c = NicCollector("node0", GPUS, sysfs=fake_sysfs(tmp_path))
    got = by_nic(c.collect(100.0))
    assert set(got) == {"eth0", "eth1", "mlx5_0/1"}  # no loopback, bridge or never-up port
    assert (got["eth0"].up, got["eth0"].gpu, got["eth0"].link_downs_total) == (True, 0, 2)
    assert got["mlx5_0/1"].gpu == 0 and got["mlx5_0/1"].up
    assert got["eth1"].gpu is None  # two GPUs under its switch: no single neighbour
    assert got["eth1"].link_downs_total == 0  # carrier_down_count, where the kernel has it


def test_a_port_that_loses_its_link_is_reported_down_with_its_count(tmp_path):
    sysfs = fake_sysfs(tmp_path)
    c = NicCollector("node0", GPUS, sysfs=sysfs)
    c.collect(100.0)
    iface(sysfs, "eth0", "down", device="eth0", changes=5)
    hca_port(sysfs, "1: DOWN", 1)
    got = by_nic(c.collect(101.0))
    assert (got["eth0"].up, got["eth0"].link_downs_total, got["eth0"].gpu) == (False, 2, 0)
    assert (got["mlx5_0/1"].up, got["mlx5_0/1"].link_downs_total) == (False, 1)
    assert "eth2" not in got


def test_an_interface_on_an_infiniband_adapter_is_its_port_not_a_second_link(tmp_path):
    """IPoIB's ib0 (or a RoCE port's Ethernet interface) runs on mlx5_0's port: when that link
    goes, one port is down, not two."""
    sysfs = fake_sysfs(tmp_path)
    iface(sysfs, "ib0", "up", device="mlx5_0")
    c = NicCollector("node0", GPUS, sysfs=sysfs)
    assert set(by_nic(c.collect(100.0))) == {"eth0", "eth1", "mlx5_0/1"}
    iface(sysfs, "ib0", "down", device="mlx5_0", changes=3)
    hca_port(sysfs, "1: DOWN", 1)
    down = [r.nic for r in c.collect(101.0) if not r.up]
    assert down == ["mlx5_0/1"]


def test_without_the_gpus_bus_ids_no_port_names_a_gpu(tmp_path):
    c = NicCollector("node0", [GpuIdentity(0, None, None)], sysfs=fake_sysfs(tmp_path))
    assert {r.gpu for r in c.collect(1.0)} == {None}


def test_a_machine_without_sysfs_reports_nothing(tmp_path):
    assert NicCollector("node0", GPUS, sysfs=tmp_path / "absent").collect(1.0) == []


def test_the_simulated_port_beside_the_faulty_rank_is_down_while_the_fault_lasts(tmp_path):
    c = SimNicCollector(tmp_path, "node1")
    assert c.collect(100.0) == []
    append_fault(tmp_path, GpuFault(time=100.5, node="node1", gpu=1, kind=NIC_DOWN, params={"seconds": 15}))
    append_fault(tmp_path, GpuFault(time=100.5, node="node0", gpu=0, kind=NIC_DOWN, params={"seconds": 15}))
    assert c.collect(101.0) == [NicSample(101.0, "node1", "sim:nic1", False, None, 1)]
    assert c.collect(115.0)[0].up is False
    assert c.collect(116.0) == []


def test_a_port_that_died_while_the_agent_was_down_is_reported_by_the_next_agent(tmp_path):
    now = 200_000.0
    with StoreWriter(tmp_path / "data", "node0") as w:
        w.append_records(
            [
                NicSample(now - 600, "node0", "eth0", True, 2, 0),  # the last agent saw it up
                NicSample(now - 600, "node0", "eth1", False, 0, None),  # never up: not counted
                NicSample(now - 3 * 86400, "node0", "mlx5_0/1", True, 0, 0),  # up days ago only
            ]
        )
        known = ports_seen_up(w, now)
    assert known == {"eth0"}
    sysfs = fake_sysfs(tmp_path)
    iface(sysfs, "eth0", "down", device="eth0", changes=5)  # went down between the agents
    assert "eth0" not in by_nic(NicCollector("node0", GPUS, sysfs=sysfs).collect(now))
    got = by_nic(NicCollector("node0", GPUS, sysfs=sysfs, known_up=known).collect(now))
    assert (got["eth0"].up, got["eth0"].gpu) == (False, 0)
