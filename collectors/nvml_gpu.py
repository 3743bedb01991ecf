"""GPU health from NVML (`pynvml`, package nvidia-ml-py): every `GpuSample` field, and Xid events.

Each reading is one NVML call (or a few) grouped under the fields it fills. A group the GPU
answers `NotSupported` (or `FunctionNotFound` on an older driver) is remembered per (GPU, group)
and never asked again: its fields stay None and are listed in `unsupported`, with one log line,
instead of an error every interval. `GpuIsLost` marks the GPU down for good (a `gpu_lost` event,
then `gpu_up=False` samples); other errors leave that field None for that interval only.
Xid events come from NVML's event API on a thread that waits with a timeout, so `close()` stops it
promptly; NVML delivers no event from before registration (docs/field-facts.md).
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from triage.collectors.pci import normalize_pci_bus_id
from triage.collectors.records import (
    GpuEvent,
    GpuIdentity,
    GpuSample,
    GpuSampleHead,
    Record,
    Unavailable,
    decode_clock_events,
)

log = logging.getLogger(__name__)

_NOT_SUPPORTED_CODES = ("NVML_ERROR_NOT_SUPPORTED", "NVML_ERROR_FUNCTION_NOT_FOUND")
_NVLINK_CRC = ("NVML_NVLINK_ERROR_DL_CRC_FLIT", "NVML_NVLINK_ERROR_DL_CRC_DATA")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _clock_reasons(nv: ModuleType, h: Any) -> dict[str, Any]:
    # Renamed from "throttle" to "clocks event" reasons in newer NVML; same bits.
    fn = (
        getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
        or nv.nvmlDeviceGetCurrentClocksThrottleReasons
    )
    mask = int(fn(h))
    return {"clock_event_reasons": mask, **decode_clock_events(mask)}


def _remapped_rows(nv: ModuleType, h: Any) -> dict[str, Any]:
    corr, unc, pending, failure = nv.nvmlDeviceGetRemappedRows(h)
    return {
        "remapped_rows_correctable": int(corr),
        "remapped_rows_uncorrectable": int(unc),
        "remapped_rows_pending": bool(pending),
        "remapped_rows_failure": bool(failure),
    }


def _ecc(error_type: str, counter: str) -> Callable[[ModuleType, Any], int]:
    def read(nv: ModuleType, h: Any) -> int:
        return int(nv.nvmlDeviceGetTotalEccErrors(h, getattr(nv, error_type), getattr(nv, counter)))

    return read


@dataclass(frozen=True)
class _Reading:
    """One NVML query and the sample fields it fills (one field: the value; several: a dict)."""

    group: str
    fields: tuple[str, ...]
    read: Callable[[ModuleType, Any], Any]


_READINGS: tuple[_Reading, ...] = (
    _Reading(
        "utilization", ("utilization_ratio",), lambda nv, h: nv.nvmlDeviceGetUtilizationRates(h).gpu / 100.0
    ),
    _Reading(
        "memory",
        ("memory_used_bytes", "memory_total_bytes"),
        lambda nv, h: (lambda m: {"memory_used_bytes": int(m.used), "memory_total_bytes": int(m.total)})(
            nv.nvmlDeviceGetMemoryInfo(h)
        ),
    ),
    _Reading(
        "temperature",
        ("temperature_celsius",),
        lambda nv, h: float(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
    ),
    _Reading(
        "temperature_slowdown",
        ("temperature_slowdown_celsius",),
        lambda nv, h: float(nv.nvmlDeviceGetTemperatureThreshold(h, nv.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN)),
    ),
    _Reading(
        "temperature_shutdown",
        ("temperature_shutdown_celsius",),
        lambda nv, h: float(nv.nvmlDeviceGetTemperatureThreshold(h, nv.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN)),
    ),
    _Reading("power", ("power_watts",), lambda nv, h: nv.nvmlDeviceGetPowerUsage(h) / 1000.0),
    _Reading(
        "power_limit", ("power_limit_watts",), lambda nv, h: nv.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0
    ),
    _Reading(
        "sm_clock", ("sm_clock_hz",), lambda nv, h: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM) * 1e6
    ),
    _Reading(
        "memory_clock",
        ("memory_clock_hz",),
        lambda nv, h: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM) * 1e6,
    ),
    _Reading("clock_event_reasons", ("clock_event_reasons", *decode_clock_events(0)), _clock_reasons),
    _Reading(
        "ecc_corrected_volatile",
        ("ecc_corrected_volatile",),
        _ecc("NVML_MEMORY_ERROR_TYPE_CORRECTED", "NVML_VOLATILE_ECC"),
    ),
    _Reading(
        "ecc_uncorrected_volatile",
        ("ecc_uncorrected_volatile",),
        _ecc("NVML_MEMORY_ERROR_TYPE_UNCORRECTED", "NVML_VOLATILE_ECC"),
    ),
    _Reading(
        "ecc_corrected_aggregate",
        ("ecc_corrected_aggregate",),
        _ecc("NVML_MEMORY_ERROR_TYPE_CORRECTED", "NVML_AGGREGATE_ECC"),
    ),
    _Reading(
        "ecc_uncorrected_aggregate",
        ("ecc_uncorrected_aggregate",),
        _ecc("NVML_MEMORY_ERROR_TYPE_UNCORRECTED", "NVML_AGGREGATE_ECC"),
    ),
    _Reading(
        "retired_pages_single_bit",
        ("retired_pages_single_bit",),
        lambda nv, h: len(
            nv.nvmlDeviceGetRetiredPages(h, nv.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)
        ),
    ),
    _Reading(
        "retired_pages_double_bit",
        ("retired_pages_double_bit",),
        lambda nv, h: len(
            nv.nvmlDeviceGetRetiredPages(h, nv.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
        ),
    ),
    _Reading(
        "remapped_rows",
        (
            "remapped_rows_correctable",
            "remapped_rows_uncorrectable",
            "remapped_rows_pending",
            "remapped_rows_failure",
        ),
        _remapped_rows,
    ),
    _Reading(
        "pcie_link_gen", ("pcie_link_gen",), lambda nv, h: int(nv.nvmlDeviceGetCurrPcieLinkGeneration(h))
    ),
    _Reading(
        "pcie_link_gen_max",
        ("pcie_link_gen_max",),
        lambda nv, h: int(nv.nvmlDeviceGetMaxPcieLinkGeneration(h)),
    ),
    _Reading(
        "pcie_link_width", ("pcie_link_width",), lambda nv, h: int(nv.nvmlDeviceGetCurrPcieLinkWidth(h))
    ),
    _Reading(
        "pcie_link_width_max",
        ("pcie_link_width_max",),
        lambda nv, h: int(nv.nvmlDeviceGetMaxPcieLinkWidth(h)),
    ),
    _Reading("pcie_replay", ("pcie_replay_total",), lambda nv, h: int(nv.nvmlDeviceGetPcieReplayCounter(h))),
    _Reading("energy", ("energy_joules",), lambda nv, h: nv.nvmlDeviceGetTotalEnergyConsumption(h) / 1000.0),
)
_NVLINK_FIELDS = ("nvlink_crc_errors_total", "nvlink_replay_errors_total", "nvlink_recovery_errors_total")


@dataclass
class _Gpu:
    index: int
    handle: Any
    identity: GpuIdentity
    name: str | None
    serial: str | None
    up: bool = True
    unsupported_groups: frozenset[str] = frozenset()
    unsupported_fields: frozenset[str] = frozenset()
    nvlinks: tuple[int, ...] | None = None  # links that answer; None until discovered


class NvmlGpuCollector:
    """Samples every GPU NVML sees. `nvml` is the pynvml module (tests inject a fake one).

    If NVML cannot start (no driver, no library, no permission) the collector does not raise:
    every collect returns an `Unavailable` record for source `nvml` saying why.
    """

    name = "nvml_gpu"

    def __init__(self, node: str, *, event_timeout_ms: int = 500, nvml: ModuleType | None = None) -> None:
        self.node = node
        self.event_timeout_ms = event_timeout_ms
        self._gpus: list[_Gpu] = []
        self._events: deque[GpuEvent] = deque()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._event_set: Any = None
        self._events_unavailable: str | None = None
        self._unavailable: str | None = None
        try:
            self.nv = nvml or importlib.import_module("pynvml")
            self.nv.nvmlInit()
        except Exception as exc:  # noqa: BLE001 - an ImportError or any NVMLError means "no NVML"
            self._unavailable = f"NVML not available: {exc}"
            log.warning("%s; GPU health will be reported as unavailable", self._unavailable)
            return
        for i in range(self.nv.nvmlDeviceGetCount()):
            self._gpus.append(self._open_gpu(i))
        self._start_events()

    # -- helpers ----------------------------------------------------------------------------------

    def _code(self, name: str) -> int | None:
        return getattr(self.nv, name, None)

    def _is(self, exc: Exception, *names: str) -> bool:
        value = getattr(exc, "value", None)
        return value is not None and value in {self._code(n) for n in names}

    def _open_gpu(self, i: int) -> _Gpu:
        nv = self.nv
        h = nv.nvmlDeviceGetHandleByIndex(i)
        unsupported: set[str] = set()

        def ident(fn: Callable[[Any], Any], field: str) -> str | None:
            try:
                return _text(fn(h))
            except nv.NVMLError as exc:
                if self._is(exc, *_NOT_SUPPORTED_CODES):
                    unsupported.add(field)
                else:
                    log.warning("GPU %d: reading %s failed: %s", i, field, exc)
                return None

        uuid = ident(nv.nvmlDeviceGetUUID, "uuid")
        name = ident(nv.nvmlDeviceGetName, "name")
        serial = ident(nv.nvmlDeviceGetSerial, "serial")
        bus = ident(lambda hh: nv.nvmlDeviceGetPciInfo(hh).busId, "pci_bus_id")
        gpu = _Gpu(
            index=i,
            handle=h,
            name=name,
            serial=serial,
            identity=GpuIdentity(gpu=i, uuid=uuid, pci_bus_id=normalize_pci_bus_id(bus) if bus else None),
        )
        if unsupported:
            log.info("GPU %d does not report %s", i, ", ".join(sorted(unsupported)))
        return gpu

    def identities(self) -> list[GpuIdentity]:
        return [g.identity for g in self._gpus]

    def _mark_lost(self, gpu: _Gpu, now: float, detail: str) -> GpuEvent:
        gpu.up = False
        log.error("GPU %d (%s) is lost: %s", gpu.index, gpu.identity.uuid, detail)
        return GpuEvent(
            time=now,
            node=self.node,
            gpu=gpu.index,
            uuid=gpu.identity.uuid,
            kind="gpu_lost",
            xid=None,
            text=f"NVML: GPU is lost ({detail})",
            source="nvml_event",
            pci_bus_id=gpu.identity.pci_bus_id,
        )

    def _mark_unsupported(self, gpu: _Gpu, reading: _Reading, exc: Exception) -> None:
        gpu.unsupported_groups |= {reading.group}
        gpu.unsupported_fields |= set(reading.fields)
        log.info(
            "GPU %d does not support %s (%s); reported as unsupported from now on",
            gpu.index,
            reading.group,
            exc,
        )

    # -- sampling ---------------------------------------------------------------------------------

    def collect(self, now: float) -> list[Record]:
        if self._unavailable is not None:
            return [
                Unavailable(
                    time=now, node=self.node, collector=self.name, source="nvml", reason=self._unavailable
                )
            ]
        records: list[Record] = []
        with self._lock:
            records.extend(self._events)
            self._events.clear()
        if self._events_unavailable is not None:
            records.append(
                Unavailable(
                    time=now,
                    node=self.node,
                    collector=self.name,
                    source="nvml_events",
                    reason=self._events_unavailable,
                )
            )
        for gpu in self._gpus:
            records.extend(self._sample(gpu, now))
        return records

    def _sample(self, gpu: _Gpu, now: float) -> list[Record]:
        head = GpuSampleHead(
            time=now,
            node=self.node,
            gpu=gpu.index,
            uuid=gpu.identity.uuid,
            name=gpu.name,
            serial=gpu.serial,
            pci_bus_id=gpu.identity.pci_bus_id,
            simulated=False,
        )
        if not gpu.up:
            return [GpuSample(gpu_up=False, **head)]
        values: dict[str, Any] = {}
        for reading in _READINGS:
            if reading.group in gpu.unsupported_groups:
                continue
            try:
                value = reading.read(self.nv, gpu.handle)
            except self.nv.NVMLError as exc:
                if self._is(exc, "NVML_ERROR_GPU_IS_LOST"):
                    return [
                        self._mark_lost(gpu, now, f"while reading {reading.group}"),
                        GpuSample(gpu_up=False, **head),
                    ]
                if self._is(exc, *_NOT_SUPPORTED_CODES):
                    self._mark_unsupported(gpu, reading, exc)
                else:
                    log.debug("GPU %d: %s failed this interval: %s", gpu.index, reading.group, exc)
                continue
            values.update(value if isinstance(value, dict) else {reading.fields[0]: value})
        try:
            values.update(self._nvlink(gpu))
        except self.nv.NVMLError as exc:
            if self._is(exc, "NVML_ERROR_GPU_IS_LOST"):
                return [self._mark_lost(gpu, now, "while reading NVLink"), GpuSample(gpu_up=False, **head)]
            log.debug("GPU %d: NVLink counters failed this interval: %s", gpu.index, exc)
        return [GpuSample(**head, **values, unsupported=tuple(sorted(gpu.unsupported_fields)))]

    def _nvlink(self, gpu: _Gpu) -> dict[str, int]:
        """NVLink error counters summed over the GPU's links; the links are found once."""
        nv = self.nv
        if gpu.nvlinks is None:
            links = []
            for link in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)):
                try:
                    nv.nvmlDeviceGetNvLinkState(gpu.handle, link)
                except nv.NVMLError as exc:
                    if self._is(exc, "NVML_ERROR_GPU_IS_LOST"):
                        raise
                    break
                links.append(link)
            gpu.nvlinks = tuple(links)
            if not links:
                gpu.unsupported_fields |= set(_NVLINK_FIELDS)
                log.info("GPU %d has no NVLink; NVLink counters reported as unsupported", gpu.index)
        nvlinks = gpu.nvlinks
        if not nvlinks:
            return {}

        def total(*counters: str) -> int:
            return sum(
                int(nv.nvmlDeviceGetNvLinkErrorCounter(gpu.handle, link, getattr(nv, c)))
                for link in nvlinks
                for c in counters
            )

        return {
            "nvlink_crc_errors_total": total(*_NVLINK_CRC),
            "nvlink_replay_errors_total": total("NVML_NVLINK_ERROR_DL_REPLAY"),
            "nvlink_recovery_errors_total": total("NVML_NVLINK_ERROR_DL_RECOVERY"),
        }

    # -- Xid events -------------------------------------------------------------------------------

    def _start_events(self) -> None:
        nv = self.nv
        try:
            self._event_set = nv.nvmlEventSetCreate()
        except nv.NVMLError as exc:
            self._events_unavailable = f"NVML event set: {exc}"
            log.warning("NVML Xid events unavailable (%s); the kernel log still reports Xids", exc)
            return
        registered = 0
        for gpu in self._gpus:
            try:
                nv.nvmlDeviceRegisterEvents(gpu.handle, nv.nvmlEventTypeXidCriticalError, self._event_set)
                registered += 1
            except nv.NVMLError as exc:
                log.warning("GPU %d: Xid events not available (%s)", gpu.index, exc)
        if not registered:
            self._events_unavailable = "no GPU accepted Xid event registration"
            return
        self._thread = threading.Thread(target=self._wait_events, name="nvml-xid-events", daemon=True)
        self._thread.start()

    def _gpu_of(self, device: Any) -> _Gpu | None:
        for gpu in self._gpus:
            if gpu.handle is device:
                return gpu
        try:
            uuid = _text(self.nv.nvmlDeviceGetUUID(device))
        except self.nv.NVMLError:
            return None
        return next((g for g in self._gpus if g.identity.uuid == uuid), None)

    def _wait_events(self) -> None:
        nv = self.nv
        while not self._stop.is_set():
            try:
                data = nv.nvmlEventSetWait_v2(self._event_set, self.event_timeout_ms)
            except nv.NVMLError as exc:
                if not self._is(exc, "NVML_ERROR_TIMEOUT"):
                    log.warning("waiting for NVML events failed: %s", exc)
                    self._stop.wait(1.0)
                continue
            if not data.eventType & nv.nvmlEventTypeXidCriticalError:
                continue
            gpu = self._gpu_of(data.device)
            xid = int(data.eventData)
            ev = GpuEvent(
                time=time.time(),
                node=self.node,
                gpu=gpu.index if gpu else None,
                uuid=gpu.identity.uuid if gpu else None,
                kind="xid",
                xid=xid,
                text=f"NVML Xid critical error event: Xid {xid}",
                source="nvml_event",
                pci_bus_id=gpu.identity.pci_bus_id if gpu else None,
            )
            with self._lock:
                self._events.append(ev)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.event_timeout_ms / 1000.0 + 2.0)
        if self._unavailable is not None:
            return
        try:
            if self._event_set is not None:
                self.nv.nvmlEventSetFree(self._event_set)
            self.nv.nvmlShutdown()
        except self.nv.NVMLError as exc:
            log.warning("NVML shutdown: %s", exc)
