"""The agent's Prometheus exporter: the latest state of the node, rendered on each scrape.

The agent's loop feeds `ExporterState` with collector records and job progress; a custom
collector turns that state into the families of `metric_catalog` when Prometheus scrapes. One
process owns it (prometheus_client's multiprocess mode has no custom collectors, FIELD-NOTES.md).
Counters the alert rules watch with `increase()` are created at 0 as soon as their GPU, job or
collector is known, since a series born at 1 never shows an increase.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                    HistogramMetricFamily, Metric)
from prometheus_client.registry import Collector

from triage.agent.metric_catalog import (ALERTED_XIDS, BY_NAME, CLOCK_EVENT_REASONS, ECC_TYPES,
                                         NVLINK_ERROR_KINDS)
from triage.collectors.records import GpuEvent, GpuSample
from triage.taxonomy import Category

#: Step-time histogram buckets (seconds): from sub-second steps of small models to minutes.
STEP_TIME_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
#: An Xid seen by both NVML's event API and the kernel log within this window counts once.
XID_DEDUP_WINDOW_S = 10.0


@dataclass
class _RankState:
    node: str
    step: int = -1
    last_progress: float = 0.0


@dataclass
class _JobState:
    ranks: dict[int, _RankState] = field(default_factory=dict)
    bucket_counts: list[int] = field(default_factory=lambda: [0] * (len(STEP_TIME_BUCKETS) + 1))
    step_time_sum: float = 0.0
    tokens_per_s: float | None = None
    goodput_ratio: float | None = None
    restarts: int = 0
    incidents: dict[tuple[str, str], int] = field(default_factory=dict)
    straggler_scores: dict[int, float] = field(default_factory=dict)
    last_checkpoint: float | None = None
    checkpoint_interval_s: float | None = None


class ExporterState:
    """What the agent knows now. Updated by the agent's loop, read by scrapes (under a lock)."""

    def __init__(self, node: str) -> None:
        self.node = node
        self.lock = threading.Lock()
        self.gpus: dict[int, GpuSample] = {}
        self.xid_counts: dict[int, dict[str, int]] = {}
        self._recent_xids: dict[tuple[int, int], float] = {}
        self.jobs: dict[str, _JobState] = {}
        self.collector_ok: dict[str, float] = {}
        self.collector_errors: dict[str, int] = defaultdict(int)
        self.agent_up = True

    # -- updates -------------------------------------------------------------------------------
    def observe_gpu_sample(self, s: GpuSample) -> None:
        with self.lock:
            previous = self.gpus.get(s.gpu)
            if not s.gpu_up and previous is not None:
                # keep the identity of a lost GPU so its series stay (at gpu_up 0), not vanish
                s = GpuSample(time=s.time, node=s.node, gpu=s.gpu, uuid=s.uuid or previous.uuid,
                              name=s.name or previous.name, serial=s.serial or previous.serial,
                              pci_bus_id=s.pci_bus_id or previous.pci_bus_id,
                              simulated=s.simulated, gpu_up=False)
            self.gpus[s.gpu] = s
            self.xid_counts.setdefault(s.gpu, {x: 0 for x in ALERTED_XIDS})

    def observe_gpu_event(self, e: GpuEvent) -> bool:
        """Count an Xid once even when NVML and the kernel log both report it."""
        if e.kind != "xid" or e.xid is None or e.gpu is None:
            return False
        with self.lock:
            key = (e.gpu, e.xid)
            last = self._recent_xids.get(key)
            self._recent_xids[key] = e.time
            if last is not None and abs(e.time - last) < XID_DEDUP_WINDOW_S:
                return False
            counts = self.xid_counts.setdefault(e.gpu, {x: 0 for x in ALERTED_XIDS})
            counts[str(e.xid)] = counts.get(str(e.xid), 0) + 1
            return True

    def observe_collect(self, collector: str, ok: bool, now: float) -> None:
        with self.lock:
            self.collector_errors.setdefault(collector, 0)
            if ok:
                self.collector_ok[collector] = now
            else:
                self.collector_errors[collector] += 1

    def job(self, job_id: str) -> _JobState:
        """The job's state, created with its zero counters the first time it is seen."""
        with self.lock:
            state = self.jobs.get(job_id)
            if state is None:
                state = self.jobs[job_id] = _JobState()
                state.incidents = {(c.value, c.layer.value): 0 for c in Category}
            return state

    def observe_step(self, job_id: str, rank: int, node: str, step: int, end_time: float,
                     duration_s: float) -> None:
        state = self.job(job_id)
        with self.lock:
            r = state.ranks.setdefault(rank, _RankState(node))
            if step >= r.step:
                r.step, r.last_progress = step, end_time
            i = next((k for k, b in enumerate(STEP_TIME_BUCKETS) if duration_s <= b),
                     len(STEP_TIME_BUCKETS))
            state.bucket_counts[i] += 1
            state.step_time_sum += duration_s

    def observe_rank_start(self, job_id: str, rank: int, node: str, start_time: float) -> None:
        state = self.job(job_id)
        with self.lock:
            r = state.ranks.setdefault(rank, _RankState(node))
            r.node = node
            r.last_progress = max(r.last_progress, start_time)

    # -- rendering -----------------------------------------------------------------------------
    def families(self) -> Iterator[Metric]:
        with self.lock:
            yield from self._gpu_families()
            yield from self._job_families()
            yield from self._agent_families()

    def _gpu_families(self) -> Iterator[Metric]:
        fams = {name: _family(name, extra) for name, extra in [
            ("triage_gpu_up", ()), ("triage_gpu_temperature_celsius", ()),
            ("triage_gpu_slowdown_temperature_celsius", ()), ("triage_gpu_power_watts", ()),
            ("triage_gpu_utilization_ratio", ()), ("triage_gpu_memory_used_bytes", ()),
            ("triage_gpu_sm_clock_hertz", ()), ("triage_gpu_clock_event_active", ("reason",)),
            ("triage_gpu_ecc_errors_total", ("type",)), ("triage_gpu_remapped_rows", ("kind",)),
            ("triage_gpu_pcie_replay_total", ()), ("triage_gpu_nvlink_errors_total", ("kind",)),
            ("triage_gpu_xid_errors_total", ("xid",)),
        ]}
        for gpu, s in sorted(self.gpus.items()):
            ident = [s.node, str(gpu), s.uuid or "", "true" if s.simulated else "false"]
            fams["triage_gpu_up"].add_metric(ident, 1.0 if s.gpu_up else 0.0)
            for name, value in [
                ("triage_gpu_temperature_celsius", s.temperature_celsius),
                ("triage_gpu_slowdown_temperature_celsius", s.temperature_slowdown_celsius),
                ("triage_gpu_power_watts", s.power_watts),
                ("triage_gpu_utilization_ratio", s.utilization_ratio),
                ("triage_gpu_memory_used_bytes", s.memory_used_bytes),
                ("triage_gpu_sm_clock_hertz", s.sm_clock_hz),
            ]:
                if value is not None:  # unsupported or lost: no series rather than a fake 0
                    fams[name].add_metric(ident, float(value))
            if s.clock_event_reasons is not None:
                for reason in CLOCK_EVENT_REASONS:
                    flag = getattr(s, f"clock_event_{reason}", None)
                    if flag is not None:
                        fams["triage_gpu_clock_event_active"].add_metric(ident + [reason], float(flag))
            for etype, value in zip(ECC_TYPES, (s.ecc_corrected_volatile, s.ecc_uncorrected_volatile)):
                fams["triage_gpu_ecc_errors_total"].add_metric(ident + [etype], float(value or 0))
            for kind, value in [("correctable", s.remapped_rows_correctable),
                                ("uncorrectable", s.remapped_rows_uncorrectable),
                                ("pending", s.remapped_rows_pending),
                                ("failure", s.remapped_rows_failure)]:
                if value is not None:
                    fams["triage_gpu_remapped_rows"].add_metric(ident + [kind], float(value))
            fams["triage_gpu_pcie_replay_total"].add_metric(ident, float(s.pcie_replay_total or 0))
            nvlink = {"crc": s.nvlink_crc_errors_total, "replay": s.nvlink_replay_errors_total,
                      "recovery": s.nvlink_recovery_errors_total}
            for kind in NVLINK_ERROR_KINDS:
                fams["triage_gpu_nvlink_errors_total"].add_metric(
                    ident + [kind], float(nvlink.get(kind) or 0))
            for xid, count in sorted(self.xid_counts.get(gpu, {}).items(), key=lambda kv: int(kv[0])):
                fams["triage_gpu_xid_errors_total"].add_metric(ident + [xid], float(count))
        yield from fams.values()

    def _job_families(self) -> Iterator[Metric]:
        step = _family("triage_job_step")
        progress = _family("triage_job_last_progress_timestamp_seconds")
        straggler = _family("triage_straggler_score")
        tokens = _family("triage_job_tokens_per_second")
        goodput = _family("triage_job_goodput_ratio")
        restarts = _family("triage_job_restarts_total")
        ckpt = _family("triage_job_last_checkpoint_timestamp_seconds")
        ckpt_interval = _family("triage_job_checkpoint_interval_seconds")
        incidents = _family("triage_incidents_total", ("category", "layer"))
        fam = BY_NAME["triage_job_step_time_seconds"]
        hist = HistogramMetricFamily(fam.name, fam.help, labels=list(fam.labels), unit="")
        for job_id, j in sorted(self.jobs.items()):
            for rank, r in sorted(j.ranks.items()):
                ident = [job_id, str(rank), r.node]
                if r.step >= 0:
                    step.add_metric(ident, float(r.step))
                progress.add_metric(ident, r.last_progress)
                if rank in j.straggler_scores:
                    straggler.add_metric(ident, j.straggler_scores[rank])
            buckets, acc = [], 0
            for bound, n in zip(list(STEP_TIME_BUCKETS) + [float("inf")], j.bucket_counts):
                acc += n
                buckets.append(("+Inf" if bound == float("inf") else repr(bound), float(acc)))
            hist.add_metric([job_id], buckets, j.step_time_sum)
            if j.tokens_per_s is not None:
                tokens.add_metric([job_id], j.tokens_per_s)
            if j.goodput_ratio is not None:
                goodput.add_metric([job_id], j.goodput_ratio)
            restarts.add_metric([job_id], float(j.restarts))
            if j.last_checkpoint is not None:
                ckpt.add_metric([job_id], j.last_checkpoint)
            if j.checkpoint_interval_s is not None:
                ckpt_interval.add_metric([job_id], j.checkpoint_interval_s)
            for (category, layer), n in sorted(j.incidents.items()):
                incidents.add_metric([job_id, category, layer], float(n))
        yield from (step, progress, straggler, hist, tokens, goodput, restarts, ckpt,
                    ckpt_interval, incidents)

    def _agent_families(self) -> Iterator[Metric]:
        up = _family("triage_agent_up")
        up.add_metric([self.node], 1.0 if self.agent_up else 0.0)
        last = _family("triage_agent_last_scrape_timestamp_seconds", ("collector",))
        errors = _family("triage_collector_errors_total", ("collector",))
        for name in sorted(set(self.collector_errors) | set(self.collector_ok)):
            if name in self.collector_ok:
                last.add_metric([self.node, name], self.collector_ok[name])
            errors.add_metric([self.node, name], float(self.collector_errors.get(name, 0)))
        yield from (up, last, errors)


def _family(name: str, extra: Iterable[str] = ()) -> GaugeMetricFamily | CounterMetricFamily:
    """An empty family from the catalog; `extra` only documents the trailing label names."""
    fam = BY_NAME[name]
    labels = list(fam.labels)
    assert list(extra) == labels[len(labels) - len(tuple(extra)):], (name, extra)
    if fam.type.value == "counter":
        return CounterMetricFamily(fam.name.removesuffix("_total"), fam.help, labels=labels)
    return GaugeMetricFamily(fam.name, fam.help, labels=labels)


class StateCollector(Collector):
    """Adapter registering `ExporterState` with a prometheus_client registry."""

    def __init__(self, state: ExporterState) -> None:
        self.state = state

    def collect(self) -> Iterator[Metric]:
        return self.state.families()
