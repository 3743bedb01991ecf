"""The kernel-log parser on real lines (tests/data/kmsg/real_lines.json, sources noted there)."""

import json
from datetime import datetime
from pathlib import Path

import pytest

from triage.collectors.kernel_log_parser import gpu_event_from, parse_line
from triage.collectors.pci import normalize_pci_bus_id
from triage.collectors.records import GpuIdentity

CASES = json.loads((Path(__file__).parent / "data/kmsg/real_lines.json").read_text())
BOOT, NOW = 1_700_000_000.0, 1_800_000_000.0


def _parse(line, gpu_by_pci=None):
    return parse_line(line, node="n0", now=NOW, boot_time=BOOT, gpu_by_pci=gpu_by_pci)


@pytest.mark.parametrize("case", CASES, ids=[c["line"][:60] for c in CASES])
def test_real_line(case):
    ev = _parse(case["line"])
    if case["expect"] is None:
        assert ev is None
        return
    assert ev is not None, case["line"]
    for key, want in case["expect"].items():
        assert getattr(ev, key) == want, (key, case["line"])
    assert ev.raw == case["line"]
    if "time" in case:
        assert ev.time == pytest.approx(case["time"], abs=1e-3)
    if "local_time" in case:
        assert ev.time == datetime.fromisoformat(case["local_time"]).timestamp()
    if "local_time_no_year" in case:
        year = datetime.fromtimestamp(NOW).year
        assert ev.time == datetime.fromisoformat(f"{year}-{case['local_time_no_year']}").timestamp()


def test_every_kind_and_variant_is_covered_by_real_lines():
    kinds = {c["expect"]["kind"] for c in CASES if c["expect"]}
    assert kinds == {"xid", "gpu_fallen_off_bus", "pcie_aer", "oom_kill"}
    lines = [c["line"] for c in CASES if c["expect"] and c["expect"]["kind"] == "xid"]
    assert any("Xid (0000:" in l for l in lines)  # no PCI: prefix
    assert any("GPU-I:" in l for l in lines) and any("GPU-CI:" in l for l in lines)
    assert any("pid='<unknown>'" in l for l in lines)
    assert any("(PCI:0019:" in l for l in lines)  # domain other than 0000
    assert any(l[:1].isdigit() and ";" in l for l in lines)  # raw /dev/kmsg record


def test_xid_maps_to_gpu_index_through_the_normalised_nvml_bus_id():
    gpu_by_pci = {normalize_pci_bus_id(b"00000000:9B:00.0"): 4}
    ev = _parse("NVRM: Xid (PCI:0000:9b:00): 119, pid=1, name=python, Timeout after 45s", gpu_by_pci)
    assert ev.gpu == 4
    assert _parse("NVRM: Xid (PCI:0000:9c:00): 119, pid=1, name=python, x", gpu_by_pci).gpu is None


def test_gpu_event_from_kernel_log_carries_uuid_and_kind():
    ident = {4: GpuIdentity(gpu=4, uuid="GPU-abc", pci_bus_id="0000:9b:00")}
    xid = _parse("NVRM: Xid (PCI:0000:9b:00): 79, GPU has fallen off the bus.", {"0000:9b:00": 4})
    ge = gpu_event_from(xid, ident)
    assert (ge.kind, ge.xid, ge.gpu, ge.uuid, ge.source) == ("xid", 79, 4, "GPU-abc", "kernel_log")
    lost = _parse("[  228.414765] NVRM: GPU 0000:9b:00.0: GPU has fallen off the bus.", {"0000:9b:00": 4})
    assert gpu_event_from(lost, ident).kind == "gpu_lost"
    oom = _parse("Out of memory: Killed process 1 (python)")
    assert gpu_event_from(oom, ident) is None


@pytest.mark.parametrize(
    "raw,want",
    [
        ("00000000:3B:00.0", "0000:3b:00"),
        (b"00000000:3B:00.0\x00", "0000:3b:00"),
        ("PCI:0000:3b:00", "0000:3b:00"),
        ("3b:00.0", "0000:3b:00"),
        ("00010003:00:00.0", "10003:00:00"),
    ],
)
def test_pci_bus_ids_normalise_to_the_kernel_form(raw, want):
    assert normalize_pci_bus_id(raw) == want


def test_garbled_pci_bus_id_is_an_error_not_a_silent_miss():
    with pytest.raises(ValueError):
        normalize_pci_bus_id("GPU-1234")
