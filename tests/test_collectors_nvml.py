"""The NVML collector against a fake `pynvml` (the real one needs a GPU and driver)."""

import threading
import types
from types import SimpleNamespace

import pytest

from triage.collectors.nvml_gpu import NvmlGpuCollector
from triage.collectors.records import GpuEvent, GpuSample, Unavailable


class FakeNvmlError(Exception):
    def __init__(self, value):
        super().__init__(value)
        self.value = value


NOT_SUPPORTED, TIMEOUT, GPU_IS_LOST = 3, 10, 15


def make_fake_nvml(gpus, *, init_error=None):
    """A module with pynvml's names; `gpus` is a list of dicts of per-GPU answers. A value that is
    an int error code in `raises` makes that call raise NVMLError(code)."""
    nv = types.ModuleType("pynvml")
    nv.NVMLError = FakeNvmlError
    for name, value in dict(
        NVML_ERROR_NOT_SUPPORTED=NOT_SUPPORTED,
        NVML_ERROR_TIMEOUT=TIMEOUT,
        NVML_ERROR_GPU_IS_LOST=GPU_IS_LOST,
        NVML_ERROR_FUNCTION_NOT_FOUND=13,
        NVML_TEMPERATURE_GPU=0,
        NVML_TEMPERATURE_THRESHOLD_SHUTDOWN=0,
        NVML_TEMPERATURE_THRESHOLD_SLOWDOWN=1,
        NVML_CLOCK_SM=1,
        NVML_CLOCK_MEM=2,
        NVML_MEMORY_ERROR_TYPE_CORRECTED=0,
        NVML_MEMORY_ERROR_TYPE_UNCORRECTED=1,
        NVML_VOLATILE_ECC=0,
        NVML_AGGREGATE_ECC=1,
        NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS=0,
        NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR=1,
        NVML_NVLINK_MAX_LINKS=18,
        NVML_NVLINK_ERROR_DL_REPLAY=0,
        NVML_NVLINK_ERROR_DL_RECOVERY=1,
        NVML_NVLINK_ERROR_DL_CRC_FLIT=2,
        NVML_NVLINK_ERROR_DL_CRC_DATA=3,
        nvmlEventTypeXidCriticalError=0x8,
    ).items():
        setattr(nv, name, value)
    handles = [SimpleNamespace(i=i) for i in range(len(gpus))]
    nv.calls = {}
    nv.events = []  # queue of (gpu_index, xid) the event thread will deliver
    nv.event_lock = threading.Lock()
    nv.shutdown = False

    def call(name, h, *args):
        g = gpus[h.i]
        nv.calls[(h.i, name)] = nv.calls.get((h.i, name), 0) + 1
        if "lost" in g and g["lost"]():
            raise FakeNvmlError(GPU_IS_LOST)
        if name in g.get("raises", {}):
            raise FakeNvmlError(g["raises"][name])
        value = g[name]
        return value(*args) if callable(value) else value

    def init():
        if init_error is not None:
            raise FakeNvmlError(init_error)

    nv.nvmlInit = init
    nv.nvmlShutdown = lambda: setattr(nv, "shutdown", True)
    nv.nvmlDeviceGetCount = lambda: len(gpus)
    nv.nvmlDeviceGetHandleByIndex = lambda i: handles[i]
    for name in (
        "UUID",
        "Name",
        "Serial",
        "PciInfo",
        "UtilizationRates",
        "MemoryInfo",
        "Temperature",
        "TemperatureThreshold",
        "PowerUsage",
        "EnforcedPowerLimit",
        "ClockInfo",
        "CurrentClocksEventReasons",
        "TotalEccErrors",
        "RetiredPages",
        "RemappedRows",
        "CurrPcieLinkGeneration",
        "MaxPcieLinkGeneration",
        "CurrPcieLinkWidth",
        "MaxPcieLinkWidth",
        "PcieReplayCounter",
        "TotalEnergyConsumption",
        "NvLinkState",
        "NvLinkErrorCounter",
    ):
        setattr(nv, f"nvmlDeviceGet{name}", lambda h, *a, _n=name: call(_n, h, *a))
    nv.nvmlEventSetCreate = lambda: "event-set"
    nv.nvmlEventSetFree = lambda es: None
    nv.nvmlDeviceRegisterEvents = lambda h, types_, es: None

    def wait(es, timeout_ms):
        with nv.event_lock:
            if nv.events:
                i, xid = nv.events.pop(0)
                return SimpleNamespace(device=handles[i], eventType=0x8, eventData=xid)
        threading.Event().wait(timeout_ms / 1000.0)
        raise FakeNvmlError(TIMEOUT)

    nv.nvmlEventSetWait_v2 = wait
    return nv


def h100(i=0, **over):
    g = {
        "UUID": f"GPU-1111-{i}",
        "Name": "NVIDIA H100 80GB HBM3",
        "Serial": f"165{i}",
        "PciInfo": SimpleNamespace(busId=b"00000000:%02X:00.0" % (0x18 + i)),
        "UtilizationRates": SimpleNamespace(gpu=87, memory=40),
        "MemoryInfo": SimpleNamespace(used=40 * 2**30, total=80 * 2**30, free=40 * 2**30),
        "Temperature": 71,
        "TemperatureThreshold": lambda kind: {0: 92, 1: 89}[kind],
        "PowerUsage": 612_500,
        "EnforcedPowerLimit": 700_000,
        "ClockInfo": lambda kind: {1: 1980, 2: 2619}[kind],
        "CurrentClocksEventReasons": 0x40 | 0x20 | 0x4,
        "TotalEccErrors": lambda etype, counter: {(0, 0): 3, (1, 0): 1, (0, 1): 30, (1, 1): 2}[
            (etype, counter)
        ],
        "RetiredPages": lambda cause: [0x1000] * (cause + 1),
        "RemappedRows": (0, 2, 1, 0),
        "CurrPcieLinkGeneration": 5,
        "MaxPcieLinkGeneration": 5,
        "CurrPcieLinkWidth": 8,
        "MaxPcieLinkWidth": 16,
        "PcieReplayCounter": 42,
        "TotalEnergyConsumption": 123_456_789,
        "NvLinkState": lambda link: 1 if link < 2 else (_ for _ in ()).throw(FakeNvmlError(2)),
        "NvLinkErrorCounter": lambda link, counter: {0: 1, 1: 2, 2: 10, 3: 5}[counter],
    }
    g.update(over)
    return g


def _samples(records):
    return [r for r in records if isinstance(r, GpuSample)]


@pytest.fixture
def collectors():
    made = []
    yield made
    for c in made:
        c.close()


def test_every_field_in_base_units(collectors):
    nv = make_fake_nvml([h100()])
    c = NvmlGpuCollector("n0", nvml=nv, event_timeout_ms=20)
    collectors.append(c)
    (s,) = _samples(c.collect(100.0))
    assert (s.uuid, s.name, s.serial, s.pci_bus_id, s.simulated) == (
        "GPU-1111-0",
        "NVIDIA H100 80GB HBM3",
        "1650",
        "0000:18:00",
        False,
    )
    assert s.utilization_ratio == pytest.approx(0.87)
    assert s.power_watts == pytest.approx(612.5) and s.power_limit_watts == 700.0  # mW -> W
    assert s.energy_joules == pytest.approx(123_456.789)  # mJ -> J
    assert s.sm_clock_hz == 1980e6 and s.memory_clock_hz == 2619e6  # MHz -> Hz
    assert (s.temperature_celsius, s.temperature_slowdown_celsius, s.temperature_shutdown_celsius) == (
        71,
        89,
        92,
    )
    assert s.memory_total_bytes == 80 * 2**30
    assert s.clock_event_reasons == 0x64
    assert s.clock_event_hw_thermal and s.clock_event_sw_thermal and s.clock_event_sw_power_cap
    assert not s.clock_event_hw_slowdown and not s.clock_event_idle
    assert (
        s.ecc_corrected_volatile,
        s.ecc_uncorrected_volatile,
        s.ecc_corrected_aggregate,
        s.ecc_uncorrected_aggregate,
    ) == (3, 1, 30, 2)
    assert (s.retired_pages_single_bit, s.retired_pages_double_bit) == (1, 2)
    assert (s.remapped_rows_uncorrectable, s.remapped_rows_pending, s.remapped_rows_failure) == (
        2,
        True,
        False,
    )
    assert (s.pcie_link_width, s.pcie_link_width_max, s.pcie_replay_total) == (8, 16, 42)
    # two links: CRC = flit + data per link, replay and recovery summed
    assert (s.nvlink_crc_errors_total, s.nvlink_replay_errors_total, s.nvlink_recovery_errors_total) == (
        30,
        2,
        4,
    )
    assert s.unsupported == ()


def test_unsupported_field_is_none_listed_and_not_asked_again(collectors):
    nv = make_fake_nvml(
        [h100(raises={"RetiredPages": NOT_SUPPORTED, "Serial": NOT_SUPPORTED, "NvLinkState": NOT_SUPPORTED})]
    )
    c = NvmlGpuCollector("n0", nvml=nv, event_timeout_ms=20)
    collectors.append(c)
    first = _samples(c.collect(1.0))[0]
    second = _samples(c.collect(2.0))[0]
    for s in (first, second):
        assert s.retired_pages_single_bit is None and s.retired_pages_double_bit is None
        assert {"retired_pages_single_bit", "retired_pages_double_bit", "nvlink_crc_errors_total"} <= set(
            s.unsupported
        )
        assert s.nvlink_crc_errors_total is None
        assert s.serial is None
        assert s.temperature_celsius == 71  # the rest still read
    assert nv.calls[(0, "RetiredPages")] == 2  # both causes once, never again
    assert nv.calls[(0, "NvLinkState")] == 1


def test_transient_error_is_none_for_that_interval_but_not_unsupported(collectors):
    flaky = {"n": 0}

    def power():
        flaky["n"] += 1
        if flaky["n"] == 1:
            raise FakeNvmlError(999)
        return 500_000

    nv = make_fake_nvml([h100(PowerUsage=power)])
    c = NvmlGpuCollector("n0", nvml=nv, event_timeout_ms=20)
    collectors.append(c)
    first = _samples(c.collect(1.0))[0]
    assert first.power_watts is None and "power_watts" not in first.unsupported
    assert _samples(c.collect(2.0))[0].power_watts == 500.0


def test_gpu_lost_becomes_an_event_and_the_gpu_stays_down(collectors):
    lost = {"now": False}
    nv = make_fake_nvml([h100(0), h100(1, lost=lambda: lost["now"])])
    c = NvmlGpuCollector("n0", nvml=nv, event_timeout_ms=20)
    collectors.append(c)
    assert all(s.gpu_up for s in _samples(c.collect(1.0)))
    lost["now"] = True
    records = c.collect(2.0)
    events = [r for r in records if isinstance(r, GpuEvent)]
    assert [(e.kind, e.gpu, e.uuid) for e in events] == [("gpu_lost", 1, "GPU-1111-1")]
    down = _samples(records)[1]
    assert down.gpu_up is False and down.temperature_celsius is None and down.power_watts is None
    assert _samples(records)[0].gpu_up
    lost["now"] = False  # a lost GPU is not asked again, nor reported again
    later = c.collect(3.0)
    assert not [r for r in later if isinstance(r, GpuEvent)]
    assert _samples(later)[1].gpu_up is False


def test_xid_events_arrive_through_the_event_thread_and_close_stops_it(collectors):
    nv = make_fake_nvml([h100(0), h100(1)])
    c = NvmlGpuCollector("n0", nvml=nv, event_timeout_ms=20)
    with nv.event_lock:
        nv.events.append((1, 79))
    events = []
    for _ in range(200):
        events += [r for r in c.collect(1.0) if isinstance(r, GpuEvent)]
        if events:
            break
        threading.Event().wait(0.01)
    assert [(e.kind, e.xid, e.gpu, e.uuid, e.source) for e in events] == [
        ("xid", 79, 1, "GPU-1111-1", "nvml_event")
    ]
    c.close()
    assert not c._thread.is_alive() and nv.shutdown


def test_nvml_missing_is_reported_unavailable_not_as_zeros():
    nv = make_fake_nvml([], init_error=9)  # NVML_ERROR_DRIVER_NOT_LOADED
    c = NvmlGpuCollector("n0", nvml=nv)
    records = c.collect(5.0)
    assert len(records) == 1 and isinstance(records[0], Unavailable)
    assert records[0].source == "nvml" and "NVML not available" in records[0].reason
    c.close()
