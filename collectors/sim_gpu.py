"""Simulated GPUs for machines without any: same interface and records as the NVML collector.

N H100-class GPUs per node (80 GB HBM3, 700 W limit, slowdown 89 C / shutdown 92 C as read on
Hopper SXM, docs/field-facts.md) whose readings follow the load the agent reports per GPU, and which
act out the hardware faults the trainer's `--inject` writes to the fault schedule
(`triage.fault_schedule`). Every record says `simulated=True`, the UUIDs start `GPU-SIM-` and the
name says "triage simulator": nothing here may pass for hardware. Each Xid is also written as the
line the driver would print to `<data_dir>/sim-kmsg/<node>.log`, so the kernel-log collector runs
the same parser on simulated nodes as on real ones. Deterministic for a given seed, fault
schedule, load and sequence of `now` values.

Like real hardware, a GPU remembers: one that fell off the bus stays lost until a `reset` in
the schedule (`triage nodes clear`) brings it back, whichever agent reads it. A collector that
starts (a restarted agent) therefore replays the schedule's older faults into its GPUs' state
but reports none of them again, neither as events nor as kernel-log lines: a driver does not
print an old Xid again to a new reader, and an old Xid must not reappear under a later job.
"""

from __future__ import annotations

import logging
import math
import os
import random
import uuid as uuidlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from triage.collectors.records import (
    GPU_LOST_XIDS,
    GpuEvent,
    GpuIdentity,
    GpuSample,
    GpuSampleHead,
    Record,
    decode_clock_events,
)
from triage.fault_schedule import GPU_FAULT_KINDS, RESET, GpuFault, read_faults

log = logging.getLogger(__name__)

#: Per GPU index, the utilization in [0, 1] of the work on it (the agent passes one).
LoadProvider = Callable[[int], float]

SIM_GPU_NAME = "Simulated H100 80GB HBM3 (triage simulator)"
MAX_SIM_GPUS = 16
MEMORY_TOTAL_BYTES = 81559 * 2**20  # what an H100 80GB HBM3 reports
POWER_LIMIT_W = 700.0
POWER_IDLE_W, POWER_FULL_W = 72.0, 640.0
TEMP_IDLE_C, TEMP_FULL_C = 32.0, 68.0
TEMP_SLOWDOWN_C, TEMP_SHUTDOWN_C = 89.0, 92.0
TEMP_MAX_OPERATING_C = 87.0  # SW thermal slowdown starts here
TEMP_TAU_S = 30.0
SM_CLOCK_IDLE_HZ, SM_CLOCK_BOOST_HZ = 345e6, 1980e6
MEMORY_CLOCK_HZ = 2619e6
MEMORY_IDLE_BYTES = 529 * 2**20
MEMORY_JOB_BYTES = 70 * 2**30
PCIE_GEN_MAX, PCIE_WIDTH_MAX = 5, 16
IDLE_UTILIZATION = 0.05
#: HGX H100 board layout: the PCI buses its eight GPUs sit on (a second set for 9-16).
_PCI_BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB, 0x19, 0x2B, 0x3B, 0x5E, 0x9B, 0xAC, 0xBB, 0xDC)
#: Hopper does not report retired pages (it remaps rows instead).
_UNSUPPORTED = ("retired_pages_double_bit", "retired_pages_single_bit")
_UUID_NAMESPACE = uuidlib.UUID("5f0c52a8-3f4e-4c55-9d55-7b1c1a7e9a11")

#: Message text the driver prints after `pid=..., name=...` for the Xids the simulator raises.
XID_TEXT = {
    13: "Graphics Exception: ESR 0x405840=0x0",
    31: "Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f12_00000000. "
    "Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
    43: "Ch 00000008",
    48: "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at "
    "partition 0, subpartition 0.",
    63: "Row Remapper: New row marked for remapping, reset gpu to activate.",
    64: "Row Remapper: Failed to remap row",
    74: "NVLink: fatal error detected on link 4(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
    79: "GPU has fallen off the bus.",
    92: "High single-bit ECC error rate",
    94: "Contained: SM (0x1). RST: No, D-RST: No",
    95: "Uncontained: LTC TAG (0x2,0x1). RST: Yes, D-RST: No",
    119: "Timeout after 6s of waiting for RPC response from GPU0 GSP! Expected function 76 "
    "(GSP_RM_CONTROL) (0x20800a4c 0x4).",
    120: "GSP task exception",
}
#: The Xid an injected fault raises when the schedule names none.
DEFAULT_XID = {"xid": 79, "ecc": 94, "nvlink": 74}
#: The Xids of the GPU's memory: double-bit and contained/uncontained ECC errors, row remapping.
_MEMORY_XIDS = frozenset({48, 63, 64, 92, 94, 95})


def sim_kmsg_path(data_dir: str | os.PathLike[str], node: str) -> Path:
    return Path(data_dir) / "sim-kmsg" / f"{node}.log"


def idle_load(gpu: int) -> float:
    """The default load: nothing runs."""
    return 0.0


@dataclass
class _GpuState:
    rng: random.Random
    temperature: float | None = None
    last_time: float | None = None
    energy_j: float = 0.0
    ecc_corrected: int = 0  # volatile: since the last reset
    ecc_uncorrected: int = 0
    ecc_corrected_total: int = 0  # aggregate: the GPU's lifetime
    ecc_uncorrected_total: int = 0
    remapped_correctable: int = 0
    remapped_uncorrectable: int = 0
    remap_pending: bool = False
    remap_failure: bool = False
    pcie_replay: float = 0.0
    nvlink_crc: float = 0.0
    nvlink_replay: float = 0.0
    nvlink_recovery: float = 0.0
    lost: bool = False
    ongoing: list[GpuFault] = field(default_factory=list)  # thermal / pcie / nvlink

    def reset(self) -> None:
        """What a GPU reset does: the GPU answers again, volatile ECC counts start from zero,
        a pending row remap takes effect, ongoing faults end; lifetime counters stay."""
        self.lost = False
        self.ecc_corrected = self.ecc_uncorrected = 0
        self.remap_pending = False
        self.ongoing.clear()
        self.temperature = self.last_time = None


def _active(fault: GpuFault, now: float) -> bool:
    duration = fault.params.get("duration_s")
    return fault.time <= now and (duration is None or now < fault.time + float(duration))


class SimGpuCollector:
    """`collect(now)` reads new faults from the schedule, starts those that are due, moves each
    GPU's readings from its previous collect to `now`, and returns samples and events.

    `started`: when the collector began reading (default: the `now` of its first collect);
    faults dated before it change the GPUs' state and report nothing."""

    name = "sim_gpu"

    def __init__(
        self,
        node: str,
        data_dir: str | os.PathLike[str],
        num_gpus: int = 8,
        seed: int = 0,
        load: LoadProvider = idle_load,
        started: float | None = None,
    ) -> None:
        if not 1 <= num_gpus <= MAX_SIM_GPUS:
            raise ValueError(f"num_gpus must be in 1..{MAX_SIM_GPUS}, got {num_gpus}")
        self.node = node
        self.data_dir = Path(data_dir)
        self.num_gpus = num_gpus
        self.load = load
        self.started = started
        self._offset = 0
        self._pending: list[GpuFault] = []
        self._gpus = [_GpuState(rng=random.Random(f"{seed}:{node}:{i}")) for i in range(num_gpus)]
        self._ids = [self._identity(i) for i in range(num_gpus)]
        self.kmsg_path = sim_kmsg_path(self.data_dir, node)
        self.kmsg_path.parent.mkdir(parents=True, exist_ok=True)
        self.kmsg_path.touch()

    def _identity(self, i: int) -> GpuIdentity:
        u = uuidlib.uuid5(_UUID_NAMESPACE, f"{self.node}/{i}")
        return GpuIdentity(gpu=i, uuid=f"GPU-SIM-{str(u)[9:]}", pci_bus_id=f"0000:{_PCI_BUSES[i]:02x}:00")

    def identities(self) -> list[GpuIdentity]:
        return list(self._ids)

    def collect(self, now: float) -> list[Record]:
        if self.started is None:
            self.started = now
        new, self._offset = read_faults(self.data_dir, self.node, self._offset)
        self._pending.extend(f for f in new if f.kind in GPU_FAULT_KINDS or f.kind == RESET)
        self._pending.sort(key=lambda f: f.time)
        records: list[Record] = []
        while self._pending and self._pending[0].time <= now:
            fault = self._pending.pop(0)
            records.extend(self._start(fault, replay=fault.time < self.started))
        for i in range(self.num_gpus):
            records.append(self._sample(i, now))
        return records

    # -- faults ---------------------------------------------------------------------------------

    def _start(self, fault: GpuFault, *, replay: bool) -> list[Record]:
        """Act `fault` out on its GPU; `replay` (it predates this collector): state only."""
        if fault.gpu is not None and not 0 <= fault.gpu < self.num_gpus:
            log.warning(
                "fault schedule names GPU %d on %s, which has %d simulated GPUs; ignored",
                fault.gpu,
                self.node,
                self.num_gpus,
            )
            return []
        if fault.kind == RESET:
            for i in range(self.num_gpus) if fault.gpu is None else [fault.gpu]:
                self._gpus[i].reset()
            return []
        assert fault.gpu is not None  # a GPU fault names its GPU
        st = self._gpus[fault.gpu]
        if st.lost:
            return []
        xid = fault.xid if fault.xid is not None else DEFAULT_XID.get(fault.kind)
        events: list[Record] = []
        if fault.kind == "ecc" or xid in _MEMORY_XIDS:
            # the memory's counters move with the Xid, however it was injected (`xid@xid=48`
            # is a double-bit error too: NVML's uncorrected count grows with it)
            count = int(fault.params.get("errors", 1))
            if xid == 63:
                st.remapped_uncorrectable += count
                st.remap_pending = True
            elif xid == 64:
                st.remap_failure = True
            elif xid == 92:
                st.ecc_corrected += 100 * count
                st.ecc_corrected_total += 100 * count
            else:
                st.ecc_uncorrected += count
                st.ecc_uncorrected_total += count
        elif fault.kind in ("thermal", "pcie", "nvlink"):
            st.ongoing.append(fault)
        if xid is not None:
            st.lost = xid in GPU_LOST_XIDS
            if replay:
                return []
            events.append(self._xid_event(fault, xid))
            if st.lost:
                ident = self._ids[fault.gpu]
                events.append(
                    GpuEvent(
                        time=fault.time,
                        node=self.node,
                        gpu=fault.gpu,
                        uuid=ident.uuid,
                        kind="gpu_lost",
                        xid=xid,
                        text="GPU is lost (simulated)",
                        source="simulator",
                        simulated=True,
                        pci_bus_id=ident.pci_bus_id,
                    )
                )
        return events

    def _xid_event(self, fault: GpuFault, xid: int) -> GpuEvent:
        assert fault.gpu is not None  # GpuFault allows None only for a reset, which raises no Xid
        ident = self._ids[fault.gpu]
        pid = fault.params.get("pid")
        name = fault.params.get("name")
        who = (
            f"pid={int(pid)}, name={name or 'python'}"
            if pid is not None
            else "pid='<unknown>', name=<unknown>"
        )
        message = (
            f"NVRM: Xid (PCI:{ident.pci_bus_id}): {xid}, {who}, {XID_TEXT.get(xid, f'Xid {xid} (simulated)')}"
        )
        stamp = datetime.fromtimestamp(fault.time, UTC).isoformat(timespec="microseconds")
        with open(self.kmsg_path, "a", encoding="utf-8") as fh:
            fh.write(f"{stamp} {self.node} kernel: {message}\n")
        return GpuEvent(
            time=fault.time,
            node=self.node,
            gpu=fault.gpu,
            uuid=ident.uuid,
            kind="xid",
            xid=xid,
            text=message,
            source="simulator",
            simulated=True,
            pci_bus_id=ident.pci_bus_id,
        )

    # -- readings -------------------------------------------------------------------------------

    def _sample(self, i: int, now: float) -> GpuSample:
        st, ident = self._gpus[i], self._ids[i]
        head = GpuSampleHead(
            time=now,
            node=self.node,
            gpu=i,
            uuid=ident.uuid,
            name=SIM_GPU_NAME,
            serial=f"SIM-{self.node}-{i:02d}",
            pci_bus_id=ident.pci_bus_id,
            simulated=True,
        )
        if st.lost:
            return GpuSample(gpu_up=False, **head)
        reported = float(self.load(i))
        util = 0.0 if math.isnan(reported) else min(1.0, max(0.0, reported))
        dt = 0.0 if st.last_time is None else max(0.0, now - st.last_time)
        st.last_time = now
        steady = TEMP_IDLE_C + (TEMP_FULL_C - TEMP_IDLE_C) * util
        if st.temperature is None:
            st.temperature = steady
        else:
            st.temperature += (steady - st.temperature) * (1 - math.exp(-dt / TEMP_TAU_S))
        temperature = st.temperature
        busy = util >= IDLE_UTILIZATION
        sm_clock = SM_CLOCK_BOOST_HZ if busy else SM_CLOCK_IDLE_HZ
        reasons = 0 if busy else 0x1
        power = POWER_IDLE_W + (POWER_FULL_W - POWER_IDLE_W) * util
        pcie_width = PCIE_WIDTH_MAX
        for f in st.ongoing:
            if not _active(f, now):
                continue
            elapsed = now - f.time
            if f.kind == "thermal":
                peak = TEMP_SLOWDOWN_C + float(f.params.get("overshoot_c", 1.5))
                # The rank slows down from the fault's step on, so the GPU must be at its
                # slowdown temperature by then: a short ramp (a few samples), not minutes.
                ramp = float(f.params.get("ramp_s", 2.0))
                temperature = max(temperature, steady + (peak - steady) * min(1.0, elapsed / ramp))
                if temperature >= TEMP_SLOWDOWN_C:
                    reasons |= 0x40 | 0x20
                    sm_clock /= float(f.params.get("factor", 2.0))
                elif temperature >= TEMP_MAX_OPERATING_C:
                    reasons |= 0x20
                    sm_clock *= 0.85
            elif f.kind == "pcie":
                st.pcie_replay += float(f.params.get("replays_per_s", 20.0)) * dt
                pcie_width = int(f.params.get("width", 8))
            elif f.kind == "nvlink":
                rate = float(f.params.get("crc_per_s", 50.0))
                st.nvlink_crc += rate * dt
                st.nvlink_replay += rate / 10 * dt
                st.nvlink_recovery += dt / 30.0
        power *= 1 + st.rng.gauss(0, 0.01)
        power = min(power, POWER_LIMIT_W)
        st.energy_j += power * dt
        return GpuSample(
            **head,
            utilization_ratio=util,
            memory_used_bytes=MEMORY_IDLE_BYTES + (MEMORY_JOB_BYTES if busy else 0),
            memory_total_bytes=MEMORY_TOTAL_BYTES,
            temperature_celsius=round(temperature, 1),
            temperature_slowdown_celsius=TEMP_SLOWDOWN_C,
            temperature_shutdown_celsius=TEMP_SHUTDOWN_C,
            power_watts=round(power, 2),
            power_limit_watts=POWER_LIMIT_W,
            sm_clock_hz=sm_clock,
            memory_clock_hz=MEMORY_CLOCK_HZ,
            clock_event_reasons=reasons,
            **decode_clock_events(reasons),
            ecc_corrected_volatile=st.ecc_corrected,
            ecc_uncorrected_volatile=st.ecc_uncorrected,
            ecc_corrected_aggregate=st.ecc_corrected_total,
            ecc_uncorrected_aggregate=st.ecc_uncorrected_total,
            remapped_rows_correctable=st.remapped_correctable,
            remapped_rows_uncorrectable=st.remapped_uncorrectable,
            remapped_rows_pending=st.remap_pending,
            remapped_rows_failure=st.remap_failure,
            pcie_link_gen=PCIE_GEN_MAX,
            pcie_link_gen_max=PCIE_GEN_MAX,
            pcie_link_width=pcie_width,
            pcie_link_width_max=PCIE_WIDTH_MAX,
            pcie_replay_total=int(st.pcie_replay),
            nvlink_crc_errors_total=int(st.nvlink_crc),
            nvlink_replay_errors_total=int(st.nvlink_replay),
            nvlink_recovery_errors_total=int(st.nvlink_recovery),
            energy_joules=round(st.energy_j, 3),
            unsupported=_UNSUPPORTED,
        )

    def close(self) -> None:
        """Nothing held between collects: the schedule and the kernel-log file are opened per use."""
