"""The records every collector returns: flat, typed dataclasses in base units.

Flat so the store can map each field to a column and the exporter each numeric field to a
metric without knowing which collector produced it. Units are fixed here once (bytes, seconds,
watts, joules, hertz, celsius, ratios in [0, 1]). A reading that a device does not support is
`None` and named in `unsupported`, never 0: a zero would read as "healthy" ("a blind watcher must
not look healthy", docs/architecture.md).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TypedDict, cast

#: Clock-event ("throttle") reason bits as NVML defines them (docs/field-facts.md), in the order the
#: decoded flags appear on `GpuSample`.
CLOCK_EVENT_BITS: dict[str, int] = {
    "clock_event_idle": 0x1,
    "clock_event_sw_power_cap": 0x4,
    "clock_event_hw_slowdown": 0x8,
    "clock_event_sync_boost": 0x10,
    "clock_event_sw_thermal": 0x20,
    "clock_event_hw_thermal": 0x40,
    "clock_event_hw_power_brake": 0x80,
}

#: The reason of each bit, as the exporter's `reason` label and the dashboard name it.
CLOCK_EVENT_REASONS: dict[int, str] = {
    bit: field.removeprefix("clock_event_") for field, bit in CLOCK_EVENT_BITS.items()
}
#: Reasons that mean the GPU is being held back for its health, not by design (docs/field-facts.md):
#: HW slowdown, SW thermal, HW thermal, HW power brake. Idle and the SW power cap under load are
#: normal, sync boost is by design. The one definition the analyzers, dashboard and exporter use.
HEALTH_CLOCK_EVENT_MASK = 0x8 | 0x20 | 0x40 | 0x80

#: Xids after which the GPU no longer answers (fallen off the bus, GSP timeout/error, fatal timeout).
GPU_LOST_XIDS = frozenset({79, 119, 120, 158})


class ClockEventFlags(TypedDict):
    """The `GpuSample` fields that `decode_clock_events` fills: the keys of `CLOCK_EVENT_BITS`."""

    clock_event_idle: bool | None
    clock_event_sw_power_cap: bool | None
    clock_event_hw_slowdown: bool | None
    clock_event_sync_boost: bool | None
    clock_event_sw_thermal: bool | None
    clock_event_hw_thermal: bool | None
    clock_event_hw_power_brake: bool | None


def decode_clock_events(mask: int | None) -> ClockEventFlags:
    """The named flags of a clock-event bitmask; all None when the mask itself is unknown."""
    # Built from CLOCK_EVENT_BITS, whose keys are exactly ClockEventFlags' keys.
    return cast(
        ClockEventFlags,
        {name: (None if mask is None else bool(mask & bit)) for name, bit in CLOCK_EVENT_BITS.items()},
    )


class GpuSampleHead(TypedDict):
    """The identifying fields of a `GpuSample`, which a collector builds once per GPU and collect."""

    time: float
    node: str
    gpu: int
    uuid: str | None
    name: str | None
    serial: str | None
    pci_bus_id: str | None
    simulated: bool


@dataclass(frozen=True)
class GpuSample:
    """One GPU at one collect. `gpu_up` False means the GPU was lost: readings are all None."""

    time: float
    node: str
    gpu: int
    uuid: str | None
    name: str | None
    serial: str | None
    pci_bus_id: str | None  # normalised kernel form, e.g. "0000:3b:00" (collectors.pci)
    simulated: bool
    gpu_up: bool = True
    utilization_ratio: float | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    temperature_celsius: float | None = None
    temperature_slowdown_celsius: float | None = None
    temperature_shutdown_celsius: float | None = None
    power_watts: float | None = None
    power_limit_watts: float | None = None
    sm_clock_hz: float | None = None
    memory_clock_hz: float | None = None
    clock_event_reasons: int | None = None
    clock_event_idle: bool | None = None
    clock_event_sw_power_cap: bool | None = None
    clock_event_hw_slowdown: bool | None = None
    clock_event_sync_boost: bool | None = None
    clock_event_sw_thermal: bool | None = None
    clock_event_hw_thermal: bool | None = None
    clock_event_hw_power_brake: bool | None = None
    ecc_corrected_volatile: int | None = None
    ecc_uncorrected_volatile: int | None = None
    ecc_corrected_aggregate: int | None = None
    ecc_uncorrected_aggregate: int | None = None
    retired_pages_single_bit: int | None = None
    retired_pages_double_bit: int | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    pcie_link_gen: int | None = None
    pcie_link_gen_max: int | None = None
    pcie_link_width: int | None = None
    pcie_link_width_max: int | None = None
    pcie_replay_total: int | None = None
    nvlink_crc_errors_total: int | None = None
    nvlink_replay_errors_total: int | None = None
    nvlink_recovery_errors_total: int | None = None
    energy_joules: float | None = None
    #: Reading fields this GPU does not support (sorted names of fields above).
    unsupported: tuple[str, ...] = ()


#: Names of the per-interval readings on `GpuSample` (what `unsupported` may name).
GPU_READING_FIELDS: tuple[str, ...] = tuple(
    f.name
    for f in fields(GpuSample)
    if f.name
    not in {
        "time",
        "node",
        "gpu",
        "uuid",
        "name",
        "serial",
        "pci_bus_id",
        "simulated",
        "gpu_up",
        "unsupported",
    }
)

GPU_EVENT_KINDS = ("xid", "gpu_lost")
GPU_EVENT_SOURCES = ("nvml_event", "kernel_log", "simulator")


@dataclass(frozen=True)
class GpuEvent:
    """An Xid or a lost GPU. `gpu` is None when a kernel-log Xid names a PCI address that no
    known GPU has (the raw address is then in `pci_bus_id`)."""

    time: float
    node: str
    gpu: int | None
    uuid: str | None
    kind: str  # GPU_EVENT_KINDS
    xid: int | None
    text: str
    source: str  # GPU_EVENT_SOURCES
    simulated: bool = False
    pci_bus_id: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in GPU_EVENT_KINDS:
            raise ValueError(f"GPU event kind {self.kind!r} not in {GPU_EVENT_KINDS}")
        if self.source not in GPU_EVENT_SOURCES:
            raise ValueError(f"GPU event source {self.source!r} not in {GPU_EVENT_SOURCES}")


@dataclass(frozen=True)
class HostSample:
    """Node-wide host readings; a field the host could not give is None."""

    time: float
    node: str
    cpu_ratio: float | None = None
    load_1m: float | None = None
    load_5m: float | None = None
    load_15m: float | None = None
    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None
    memory_available_bytes: int | None = None
    swap_used_bytes: int | None = None
    net_rx_errors_total: int | None = None
    net_tx_errors_total: int | None = None
    net_rx_drops_total: int | None = None
    net_tx_drops_total: int | None = None


@dataclass(frozen=True)
class DiskSample:
    """Space on the filesystem holding `path` (the data and checkpoint directories)."""

    time: float
    node: str
    path: str
    free_bytes: int
    total_bytes: int


@dataclass(frozen=True)
class NicSample:
    """The link of one network port (an Ethernet interface or an InfiniBand port) as the node
    sees it. `link_downs_total` is the port's own count of link losses (IB `link_downed`, an
    interface's `carrier_down_count`, else half its `carrier_changes`), so a flap between two
    samples still shows; `gpu` is the GPU that shares the port's PCIe switch, where exactly
    one does (the rail a GPU's traffic leaves by), else None."""

    time: float
    node: str
    nic: str
    up: bool
    link_downs_total: int | None = None
    gpu: int | None = None


@dataclass(frozen=True)
class ProcessSample:
    """Whether a local rank's process is alive (a zombie counts as dead)."""

    time: float
    node: str
    pid: int
    rank: int | None
    alive: bool


KERNEL_LOG_KINDS = ("xid", "gpu_fallen_off_bus", "pcie_aer", "oom_kill")


@dataclass(frozen=True)
class KernelLogEvent:
    """One kernel-log line that matters, with what was parsed out of it; fields that the line's
    kind does not carry are None. `raw` is the line as read, for evidence."""

    time: float
    node: str
    kind: str  # KERNEL_LOG_KINDS
    raw: str
    message: str  # the line without its timestamp/syslog prefix
    xid: int | None = None
    pci_bus_id: str | None = None  # normalised; for AER the device that reported
    gpu: int | None = None  # mapped from pci_bus_id by the caller's bus-id map
    gpu_instance: int | None = None  # MIG GPU-I
    compute_instance: int | None = None  # MIG GPU-CI
    pid: int | None = None
    process_name: str | None = None
    severity: str | None = None  # AER: corrected | non_fatal | fatal
    simulated: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KERNEL_LOG_KINDS:
            raise ValueError(f"kernel-log kind {self.kind!r} not in {KERNEL_LOG_KINDS}")


@dataclass(frozen=True)
class Unavailable:
    """A source a collector could not read at this collect, and why. Emitted at every collect
    while it lasts (a state, so a dropped record cannot make the source look healthy)."""

    time: float
    node: str
    collector: str
    source: str  # e.g. "nvml", "nvml_events", "kernel_log", "disk:/data", "collector"
    reason: str
    gpu: int | None = None


Record = (
    GpuSample | GpuEvent | HostSample | DiskSample | NicSample | ProcessSample | KernelLogEvent | Unavailable
)


@dataclass(frozen=True)
class GpuIdentity:
    """How the kernel log's PCI addresses map to GPU indices and UUIDs on this node."""

    gpu: int
    uuid: str | None
    pci_bus_id: str | None  # normalised
