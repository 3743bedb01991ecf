"""The agent's Prometheus exporter: the latest state of the node, rendered on each scrape.

The agent's loop feeds `ExporterState` with collector records and job progress; a custom
collector turns that state into the families of `metric_catalog` when Prometheus scrapes. One
process owns it (prometheus_client's multiprocess mode has no custom collectors, docs/field-facts.md).
Counters the alert rules watch with `increase()` are created at 0 as soon as their GPU, job or
collector is known, since a series born at 1 never shows an increase. The node's GPU-second
counters are born at the supervisor partition's totals when the agent first reads it, and grow
as runs end.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from triage.agent.job_progress import STEP_TIME_BUCKETS, ProgressBatch
from triage.agent.job_state import JobState, apply_batch
from triage.agent.metric_catalog import ALERTED_XIDS, BY_NAME, CLOCK_EVENT_REASONS, LOST_TIME_CATEGORIES
from triage.collectors.records import GpuEvent, GpuSample, NicSample
from triage.collectors.sim_nic import SIM_NIC_PREFIX
from triage.store.job_results import JobScore, NodeAccounting
from triage.store.schema import GOODPUT_RATIO, STRAGGLER_SCORE
from triage.taxonomy import Category


class ExporterState:
    """What the agent knows now. Updated by the agent's loop, read by scrapes (under a lock).

    `live_window_s`: a rank whose last heartbeat or step is older than this is no longer
    exported (the store's heartbeat timeout); `job_expiry_s`: a job with no sign of life for
    this long is forgotten, so series of finished jobs do not pile up.
    """

    def __init__(
        self,
        node: str,
        *,
        live_window_s: float = 60.0,
        job_expiry_s: float = 3600.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.node = node
        self.live_window_s = live_window_s
        self.job_expiry_s = job_expiry_s
        self.clock = clock
        self.lock = threading.Lock()
        self.gpus: dict[int, GpuSample] = {}
        self.xid_counts: dict[int, dict[str, int]] = {}
        self.nics: dict[str, NicSample] = {}
        self.jobs: dict[str, JobState] = {}
        self.collector_ok: dict[str, float] = {}
        self.collector_errors: dict[str, int] = defaultdict(int)
        self.agent_up = True
        #: the node's GPU-seconds in the runs' accounting; None until the first read of it
        self.accounting: NodeAccounting | None = None
        #: whether the lemon-node test quarantined the node; None until the ledger is read
        self.lemon: bool | None = None
        self.quarantined: int | None = None  # standing quarantines on the node, once read

    # -- updates -------------------------------------------------------------------------------
    def observe_gpu_sample(self, s: GpuSample) -> None:
        with self.lock:
            previous = self.gpus.get(s.gpu)
            if not s.gpu_up and previous is not None:
                # keep the identity of a lost GPU so its series stay (at gpu_up 0), not vanish
                s = GpuSample(
                    time=s.time,
                    node=s.node,
                    gpu=s.gpu,
                    uuid=s.uuid or previous.uuid,
                    name=s.name or previous.name,
                    serial=s.serial or previous.serial,
                    pci_bus_id=s.pci_bus_id or previous.pci_bus_id,
                    simulated=s.simulated,
                    gpu_up=False,
                )
            self.gpus[s.gpu] = s
            self.xid_counts.setdefault(s.gpu, dict.fromkeys(ALERTED_XIDS, 0))

    def observe_xid(self, e: GpuEvent) -> None:
        """Count one Xid; the agent passes each Xid once (`XidDeduplicator` merges the NVML and
        kernel-log reports of the same one)."""
        if e.kind != "xid" or e.xid is None or e.gpu is None:
            return
        with self.lock:
            counts = self.xid_counts.setdefault(e.gpu, dict.fromkeys(ALERTED_XIDS, 0))
            counts[str(e.xid)] = counts.get(str(e.xid), 0) + 1

    def observe_nic_sample(self, s: NicSample) -> None:
        with self.lock:
            self.nics[s.nic] = s

    def register_collector(self, collector: str) -> None:
        """Create the collector's error counter at 0 before its first collect."""
        with self.lock:
            self.collector_errors.setdefault(collector, 0)

    def observe_collect(self, collector: str, ok: bool, now: float) -> None:
        with self.lock:
            self.collector_errors.setdefault(collector, 0)
            if ok:
                self.collector_ok[collector] = now
            else:
                self.collector_errors[collector] += 1

    def set_agent_up(self, up: bool) -> None:
        with self.lock:
            self.agent_up = up

    def apply_progress(self, batch: ProgressBatch, now: float) -> None:
        """Fold newly ingested rows in, and forget jobs silent for longer than `job_expiry_s`."""
        with self.lock:
            apply_batch(self.jobs, batch)
            for job_id in [j for j, st in self.jobs.items() if now - st.last_activity() > self.job_expiry_s]:
                del self.jobs[job_id]

    def set_incidents(self, job_id: str, counts: dict[str, int]) -> None:
        """Incident rows per category in the store (a count that only grows while stored)."""
        with self.lock:
            if job_id in self.jobs:
                self.jobs[job_id].incidents.update(
                    {c: n for c, n in counts.items() if c in self.jobs[job_id].incidents}
                )

    def apply_scores(self, scores: Iterable[JobScore]) -> None:
        """Take the supervisor's job scores, oldest first: the goodput ratio of each known job,
        and the straggler scores of this node's ranks in the job's newest attempt."""
        with self.lock:
            for s in scores:
                job = self.jobs.get(s.job_id)
                if job is None:
                    continue
                if s.run_id != job.run_id:
                    continue  # another run of this job id (an older one, or one not seen yet)
                if s.name == GOODPUT_RATIO:
                    job.goodput_ratio = s.value
                elif (
                    s.name == STRAGGLER_SCORE
                    and s.node == self.node
                    and s.rank is not None
                    and s.attempt == job.attempt
                ):
                    job.straggler_scores[s.rank] = s.value

    def add_accounting(self, delta: NodeAccounting) -> None:
        """Add the node's GPU-seconds of newly recorded runs (the first call: every run the
        store holds). A category outside the catalog's closed set is counted as "unknown"."""
        folded = NodeAccounting(delta.allocated, delta.productive)
        for mine, theirs in ((folded.lost, delta.lost), (folded.caused, delta.caused)):
            for category, seconds in theirs.items():
                label = category if category in LOST_TIME_CATEGORIES else Category.UNKNOWN.value
                mine[label] = mine.get(label, 0.0) + seconds
        with self.lock:
            if self.accounting is None:
                self.accounting = NodeAccounting()
            self.accounting.add(folded)

    def set_lemon(self, lemon: bool) -> None:
        with self.lock:
            self.lemon = lemon

    def set_quarantined(self, parts: int) -> None:
        with self.lock:
            self.quarantined = parts

    # -- queries for the agent -----------------------------------------------------------------
    def known_jobs(self) -> list[str]:
        with self.lock:
            return sorted(self.jobs)

    def live_local_ranks(self, now: float, window_s: float) -> list[tuple[int, int | None, int | None]]:
        """(rank, local GPU, pid) of the live ranks of every job's newest attempt."""
        with self.lock:
            return [
                (r, st.local_gpu, st.pid)
                for job in self.jobs.values()
                for r, st in sorted(job.live_ranks(now, window_s).items())
            ]

    # -- rendering -----------------------------------------------------------------------------
    def families(self) -> Iterator[Metric]:
        now = self.clock()
        with self.lock:
            yield from self._gpu_families()
            yield from self._job_families(now)
            yield from self._node_families()
            yield from self._nic_families(now)
            yield from self._agent_families()

    def _gpu_families(self) -> Iterator[Metric]:
        fams = {
            name: _family(name, extra)
            for name, extra in [
                ("triage_gpu_up", ()),
                ("triage_gpu_temperature_celsius", ()),
                ("triage_gpu_slowdown_temperature_celsius", ()),
                ("triage_gpu_power_watts", ()),
                ("triage_gpu_utilization_ratio", ()),
                ("triage_gpu_memory_used_bytes", ()),
                ("triage_gpu_sm_clock_hertz", ()),
                ("triage_gpu_clock_event_active", ("reason",)),
                ("triage_gpu_ecc_errors_total", ("type",)),
                ("triage_gpu_remapped_rows", ("kind",)),
                ("triage_gpu_pcie_replay_total", ()),
                ("triage_gpu_nvlink_errors_total", ("kind",)),
                ("triage_gpu_xid_errors_total", ("xid",)),
            ]
        }
        for gpu, s in sorted(self.gpus.items()):
            ident = [s.node, str(gpu), s.uuid or "", "true" if s.simulated else "false"]
            fams["triage_gpu_up"].add_metric(ident, 1.0 if s.gpu_up else 0.0)
            # A reading the GPU does not give (unsupported, or the GPU is lost) has no series:
            # a fake 0 would make a blind watcher look healthy. A counter the GPU does report
            # starts at its first reading, 0 on a healthy GPU, so increase() sees the first error.
            readings: list[tuple[str, list[str], float | int | bool | None]] = [
                ("triage_gpu_temperature_celsius", [], s.temperature_celsius),
                ("triage_gpu_slowdown_temperature_celsius", [], s.temperature_slowdown_celsius),
                ("triage_gpu_power_watts", [], s.power_watts),
                ("triage_gpu_utilization_ratio", [], s.utilization_ratio),
                ("triage_gpu_memory_used_bytes", [], s.memory_used_bytes),
                ("triage_gpu_sm_clock_hertz", [], s.sm_clock_hz),
                *[
                    ("triage_gpu_clock_event_active", [reason], getattr(s, f"clock_event_{reason}", None))
                    for reason in CLOCK_EVENT_REASONS
                ],
                ("triage_gpu_ecc_errors_total", ["corrected"], s.ecc_corrected_volatile),
                ("triage_gpu_ecc_errors_total", ["uncorrected"], s.ecc_uncorrected_volatile),
                ("triage_gpu_remapped_rows", ["correctable"], s.remapped_rows_correctable),
                ("triage_gpu_remapped_rows", ["uncorrectable"], s.remapped_rows_uncorrectable),
                ("triage_gpu_remapped_rows", ["pending"], s.remapped_rows_pending),
                ("triage_gpu_remapped_rows", ["failure"], s.remapped_rows_failure),
                ("triage_gpu_pcie_replay_total", [], s.pcie_replay_total),
                ("triage_gpu_nvlink_errors_total", ["crc"], s.nvlink_crc_errors_total),
                ("triage_gpu_nvlink_errors_total", ["replay"], s.nvlink_replay_errors_total),
                ("triage_gpu_nvlink_errors_total", ["recovery"], s.nvlink_recovery_errors_total),
            ]
            for name, extra, value in readings:
                if value is not None:
                    fams[name].add_metric(ident + extra, float(value))
            for xid, count in sorted(self.xid_counts.get(gpu, {}).items(), key=lambda kv: int(kv[0])):
                fams["triage_gpu_xid_errors_total"].add_metric(ident + [xid], float(count))
        yield from fams.values()

    def _job_families(self, now: float) -> Iterator[Metric]:
        step = _family("triage_job_step")
        progress = _family("triage_job_last_progress_timestamp_seconds")
        straggler = _family("triage_straggler_score")
        tokens = _family("triage_job_tokens_per_second")
        goodput = _family("triage_job_goodput_ratio")
        restarts = _family("triage_job_restarts_total")
        ckpt = _family("triage_job_last_checkpoint_timestamp_seconds")
        incidents = _family("triage_incidents_total", ("category", "layer"))
        fam = BY_NAME["triage_job_step_time_seconds"]
        hist = HistogramMetricFamily(fam.name, fam.help, labels=list(fam.labels), unit="")
        for job_id, j in sorted(self.jobs.items()):
            live = j.live_ranks(now, self.live_window_s)
            for rank, r in sorted(live.items()):
                ident = [job_id, str(rank), r.node]
                if r.step >= 0:
                    step.add_metric(ident, float(r.step))
                if r.last_progress is not None:
                    progress.add_metric(ident, r.last_progress)
                if rank in j.straggler_scores:
                    straggler.add_metric(ident, j.straggler_scores[rank])
            buckets, acc = [], 0
            for bound, n in zip(list(STEP_TIME_BUCKETS) + [float("inf")], j.bucket_counts):
                acc += n
                buckets.append(("+Inf" if bound == float("inf") else repr(bound), float(acc)))
            hist.add_metric([job_id], buckets, j.step_time_sum)
            if live:
                rate = j.tokens_per_s(now, self.live_window_s)
                if rate is not None:
                    tokens.add_metric([job_id], rate)
                checkpoint = j.last_checkpoint if j.last_checkpoint is not None else j.start_time
                if checkpoint is not None:
                    ckpt.add_metric([job_id], checkpoint)
            if j.goodput_ratio is not None:
                goodput.add_metric([job_id], j.goodput_ratio)
            restarts.add_metric([job_id], float(j.restarts))
            for category, n in sorted(j.incidents.items()):
                incidents.add_metric([job_id, category, Category(category).layer.value], float(n))
        # triage_job_checkpoint_interval_seconds stays empty: no rank reports its configured
        # interval yet, and the alert then allows its documented 1 h default.
        yield from (step, progress, straggler, hist, tokens, goodput, restarts, ckpt, incidents)

    def _node_families(self) -> Iterator[Metric]:
        allocated = _family("triage_allocated_gpu_seconds_total")
        productive = _family("triage_productive_gpu_seconds_total")
        lost = _family("triage_lost_gpu_seconds_total", ("category",))
        caused = _family("triage_caused_lost_gpu_seconds_total", ("category",))
        lemon = _family("triage_node_lemon")
        quarantined = _family("triage_node_quarantined")
        if self.accounting is not None:
            allocated.add_metric([self.node], self.accounting.allocated)
            productive.add_metric([self.node], self.accounting.productive)
            for category in LOST_TIME_CATEGORIES:
                lost.add_metric([self.node, category], self.accounting.lost.get(category, 0.0))
                caused.add_metric([self.node, category], self.accounting.caused.get(category, 0.0))
        if self.lemon is not None:
            lemon.add_metric([self.node], 1.0 if self.lemon else 0.0)
        if self.quarantined is not None:
            quarantined.add_metric([self.node], float(self.quarantined))
        yield from (allocated, productive, lost, caused, lemon, quarantined)

    def _nic_families(self, now: float) -> Iterator[Metric]:
        """Ports read within the live window: a simulated port reports only while its fault
        lasts, and a port that vanished (a reset adapter) must not hold its last value."""
        up = _family("triage_nic_link_up")
        downs = _family("triage_nic_link_downs_total")
        for nic, s in sorted(self.nics.items()):
            if now - s.time > self.live_window_s:
                continue
            simulated = nic.startswith(SIM_NIC_PREFIX)
            ident = [s.node, nic, "" if s.gpu is None else str(s.gpu), "true" if simulated else "false"]
            up.add_metric(ident, 1.0 if s.up else 0.0)
            if s.link_downs_total is not None:
                downs.add_metric(ident, float(s.link_downs_total))
        yield from (up, downs)

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
    assert list(extra) == labels[len(labels) - len(tuple(extra)) :], (name, extra)
    if fam.type.value == "counter":
        return CounterMetricFamily(fam.name.removesuffix("_total"), fam.help, labels=labels)
    return GaugeMetricFamily(fam.name, fam.help, labels=labels)


class StateCollector(Collector):
    """Adapter registering `ExporterState` with a prometheus_client registry."""

    def __init__(self, state: ExporterState) -> None:
        self.state = state

    def collect(self) -> Iterator[Metric]:
        return self.state.families()
