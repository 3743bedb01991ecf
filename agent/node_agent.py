"""The per-node agent: samples collectors, writes the node's store partition, feeds the exporter.

One loop, on one thread, does everything on its own cadence: collectors every `interval`
(each on its own schedule, with backoff when one raises), spool ingest, record writes and a
look at the supervisor's conclusions (incidents, job scores, the node's share of the runs'
accounting, its health ledger row) every `store_interval` (batched,
so the store sees a few segments per batch instead of one per sample), retention and
compaction every `maintenance_interval`. The scrape thread only reads `ExporterState`.
`NodeAgent` holds the partition's writer lock from construction to `close()`, so a second
agent on the same partition fails at once with `PartitionBusy`.

The agent runs for months beside the training job on every node, so it holds no analytics
engine: no DuckDB, no pandas, no analyzers. Job-level analysis runs once per job, in the
supervisor, which records its results in the store for the agents to export.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

from triage.agent.config import AgentConfig
from triage.agent.exporter import ExporterState
from triage.agent.job_progress import PROGRESS_TABLES, aggregate_progress_segments
from triage.agent.scheduler import ScheduledCollector
from triage.collectors.gpu_backend import GpuCollector, make_gpu_collector
from triage.collectors.host import HostCollector, process_alive
from triage.collectors.kernel_log import KernelLogCollector
from triage.collectors.nic import NicCollector
from triage.collectors.protocol import Collector
from triage.collectors.records import GpuEvent, GpuSample, NicSample, Record
from triage.collectors.sim_disk import SimDiskCollector
from triage.collectors.sim_gpu import sim_kmsg_path
from triage.collectors.sim_nic import SimNicCollector
from triage.collectors.xid_dedup import XidDeduplicator
from triage.config import data_dir_from_env, node_name
from triage.store import StoreWriter, apply_retention, compact, ingest_partition, summarise_segments
from triage.store.job_results import JobResultsReader
from triage.store.layout import agent_flush_mark
from triage.store.node_health import QUARANTINED, SOURCE_LEMON
from triage.store.port_history import ports_seen_up

log = logging.getLogger(__name__)

#: Utilization a simulated GPU shows while a live local rank trains on it.
BUSY_UTILIZATION = 0.95


def resolve_gpu_backend(choice: str) -> str:
    """`auto` -> nvml when NVML initialises here, else none; other choices pass through."""
    if choice != "auto":
        return choice
    try:
        nvml = importlib.import_module("pynvml")
        nvml.nvmlInit()
        nvml.nvmlShutdown()
    except Exception as exc:  # noqa: BLE001 - ImportError or any NVMLError means "no NVML"
        log.info(
            "--gpu auto: NVML does not initialise here (%s); running without a GPU "
            "collector (pass --gpu sim for simulated GPUs)",
            exc,
        )
        return "none"
    log.info("--gpu auto: NVML initialised; sampling the GPUs through NVML")
    return "nvml"


class NodeAgent:
    def __init__(
        self,
        config: AgentConfig,
        *,
        clock: Callable[[], float] = time.time,
        extra_collectors: Sequence[Collector] = (),
    ) -> None:
        self.config = config
        self.clock = clock
        self.data_dir = data_dir_from_env(config.data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.node = config.node or node_name()
        # First, so a second agent on this partition stops before it touches anything.
        self.writer = StoreWriter(self.data_dir, self.node, config.store)
        self.results = JobResultsReader(self.data_dir)
        self.state = ExporterState(
            self.node,
            live_window_s=config.store.heartbeat_timeout_s,
            job_expiry_s=config.job_expiry,
            clock=clock,
        )
        self.dedup = XidDeduplicator()
        self._pending: deque[Record] = deque()
        self._dropped_records = 0
        self._ingest_error: str | None = None  # the last one logged, so it is logged once
        self._results_errors: dict[str, str] = {}  # likewise, per part of `read_results`
        self._seen_segments: set[str] = set()
        #: collectives segments `summarise_segments` could not summarise: not read again
        self._unsummarisable: set[str] = set()
        self._busy_gpus: set[int | None] | None = None
        #: set to end the wait between ticks early: a stop, or a flush asked for (`ask_flush`)
        self.wake = threading.Event()
        self._flush_asked = False
        self.gpu_backend = resolve_gpu_backend(config.gpu)
        collectors: list[Collector] = []
        try:
            gpu = make_gpu_collector(
                dataclasses.replace(config.gpus, gpu=self.gpu_backend),
                self.node,
                self.data_dir,
                load=self._gpu_load,
            )
            if gpu is not None:
                collectors.append(gpu)
            host_config = dataclasses.replace(
                config.host, disk_paths=list(dict.fromkeys([*config.host.disk_paths, str(self.data_dir)]))
            )
            collectors.append(HostCollector(host_config, self.node, pids=self._local_pids))
            collectors.append(
                NicCollector(
                    self.node,
                    gpu.identities() if gpu else (),
                    known_up=ports_seen_up(self.writer, time.time()),
                )
            )
            if self.gpu_backend == "sim":  # a simulated node: its disk and links fail only in the schedule
                collectors.append(SimDiskCollector(self.data_dir, self.node, host_config.disk_paths))
                collectors.append(SimNicCollector(self.data_dir, self.node))
            collectors.append(self._kernel_log_collector(gpu))
        except BaseException:
            for c in collectors:
                c.close()
            self.writer.close()
            raise
        collectors.extend(extra_collectors)
        self.collectors = [ScheduledCollector(c, config.interval, config.backoff_max) for c in collectors]
        for scheduled in self.collectors:
            self.state.register_collector(scheduled.name)
        start = clock()
        self._next_store = start + config.store_interval
        self._next_maintenance = start + config.maintenance_interval
        self.update_progress(start)  # jobs that ran before this agent started
        self.read_results()

    # -- construction helpers ---------------------------------------------------------------
    def _kernel_log_collector(self, gpu: GpuCollector | None) -> KernelLogCollector:
        kconfig = self.config.kernel
        simulated = self.gpu_backend == "sim"
        if simulated and kconfig.kernel_log == "auto":
            path = sim_kmsg_path(self.data_dir, self.node)
            log.info("simulated GPUs: reading their kernel log %s", path)
            kconfig = dataclasses.replace(kconfig, kernel_log=str(path))
        return KernelLogCollector(kconfig, self.node, gpu.identities() if gpu else (), simulated=simulated)

    def _gpu_load(self, gpu: int) -> float:
        """Load of simulated GPU `gpu`: busy while a live local rank with that LOCAL_RANK has
        shown progress or a heartbeat recently (a few store batches) and its process lives.
        Worked out once per collection round, not once per GPU."""
        if self._busy_gpus is None:
            window = 2 * self.config.store_interval + 5.0
            self._busy_gpus = {
                local_gpu
                for _, local_gpu, pid in self.state.live_local_ranks(self.clock(), window)
                if pid is None or process_alive(pid)
            }
        return BUSY_UTILIZATION if gpu in self._busy_gpus else 0.0

    def _local_pids(self) -> dict[int, int]:
        return {
            rank: pid
            for rank, _, pid in self.state.live_local_ranks(
                self.clock(), self.config.store.heartbeat_timeout_s
            )
            if pid is not None
        }

    # -- the loop -----------------------------------------------------------------------------
    def tick(self, now: float) -> None:
        """Do whatever is due at `now`."""
        self.collect(now)
        if now >= self._next_store:
            self._next_store = now + self.config.store_interval
            self.store_batch(now)
        if now >= self._next_maintenance:
            self._next_maintenance = now + self.config.maintenance_interval
            self.maintain(now)

    def collect(self, now: float, *, force: bool = False) -> None:
        self._busy_gpus = None
        for c in self.collectors:
            if not (force or c.due(now)):
                continue
            result = c.run(now, self.node)
            self.state.observe_collect(c.name, result.ok, now)
            for r in result.records:
                if isinstance(r, GpuSample):
                    self.state.observe_gpu_sample(r)
                elif isinstance(r, GpuEvent):
                    if not self.dedup.admit(r):
                        continue  # the other source's report of the same Xid is stored
                    self.state.observe_xid(r)
                elif isinstance(r, NicSample):
                    self.state.observe_nic_sample(r)
                self._pending.append(r)
        while len(self._pending) > self.config.max_pending_records:
            self._pending.popleft()
            self._dropped_records += 1

    def store_batch(self, now: float) -> None:
        """Ingest the spools, store the collectors' records, update the jobs' state: three
        steps that fail alone. A spool the agent cannot ingest (logged once per error, retried
        every batch) never holds back the GPU and host records, and `triage_agent_up` says
        whether the agent's own records reach the store."""
        try:
            report = ingest_partition(self.writer)
            for err in report.errors:
                log.error(
                    "spool entry %s unreadable (%s); quarantined to %s",
                    err.path,
                    err.error,
                    err.quarantined_to,
                )
            self._ingest_error = None
        except Exception as exc:
            if str(exc) != self._ingest_error:
                log.exception("ingesting the spools of %s failed; retried every batch", self.writer.node)
                self._ingest_error = str(exc)
        try:
            if self._pending:
                records = list(self._pending)
                self.writer.append_records(records)
                for _ in records:
                    self._pending.popleft()
            if self._dropped_records:
                log.error(
                    "dropped %d collector records while the store could not be written", self._dropped_records
                )
                self._dropped_records = 0
        except Exception:
            log.exception(
                "writing the store partition %s failed; records are kept in memory "
                "and written at the next batch",
                self.writer.dir,
            )
            self.state.set_agent_up(False)
            return
        self.state.set_agent_up(True)
        try:
            self.update_progress(now)
        except Exception:
            log.exception("reading job progress from %s failed; retried next batch", self.writer.dir)
        self.read_results()

    def update_progress(self, now: float) -> None:
        """Feed the exporter the progress rows of the segments it has not read yet."""
        files: dict[str, list[Path]] = {}
        current = set()
        for s in self.writer.manifest.segments:
            current.add(s.file)
            if s.table in PROGRESS_TABLES and s.file not in self._seen_segments:
                files.setdefault(s.table, []).append(self.writer.segment_path(s))
        self._seen_segments = current
        if files:
            self.state.apply_progress(aggregate_progress_segments(files), now)

    def read_results(self) -> None:
        """What the supervisors recorded: incident counts and newest job scores for the jobs
        known here; the node's GPU-seconds in the runs recorded since the last read; whether
        the lemon-node test quarantined the node. Each part fails alone, is logged once per
        distinct error and retried every batch; what it could not read keeps its value."""
        parts: list[tuple[str, Callable[[], None]]] = [
            ("the partition's manifest", self.results.refresh),
            ("incidents and job scores", self._read_job_results),
            ("the node's GPU-second counters and lemon flag", self._read_node_results),
        ]
        for i, (what, read) in enumerate(parts):
            try:
                read()
                self._results_errors.pop(what, None)
            except Exception as exc:
                if self._results_errors.get(what) != str(exc):
                    log.exception(
                        "reading %s from the supervisor's results in %s failed; not updated "
                        "this batch (retried every batch)",
                        what,
                        self.results.dir,
                    )
                    self._results_errors[what] = str(exc)
                if i == 0:
                    return  # nothing else can be read without the manifest

    def _read_job_results(self) -> None:
        jobs = self.state.known_jobs()
        if jobs:
            for job_id, counts in self.results.incident_counts(jobs).items():
                self.state.set_incidents(job_id, counts)
            self.state.apply_scores(self.results.new_scores(jobs))

    def _read_node_results(self) -> None:
        accounting = self.results.new_accounting(self.node)
        if accounting is not None:
            self.state.add_accounting(accounting)
        standing = self.results.node_standing(self.node)
        self.state.set_lemon(
            standing is not None and standing.state == QUARANTINED and standing.source == SOURCE_LEMON
        )
        self.state.set_quarantined(self.results.quarantined_parts(self.node))

    def maintain(self, now: float) -> None:
        try:
            dropped = apply_retention(self.writer, now)
            merged = compact(self.writer)
        except Exception:
            log.exception("retention/compaction of %s failed; retried later", self.writer.dir)
            return
        # Compaction rewrites rows already read: mark its output as seen.
        self._seen_segments = {s.file for s in self.writer.manifest.segments}
        try:
            summarised = summarise_segments(self.writer, limit=16, skip=self._unsummarisable)
        except Exception:
            log.exception("summarising collectives segments of %s failed; retried later", self.writer.dir)
            summarised = []
        if dropped or merged or summarised:
            log.info(
                "store maintenance: %d segment(s) past retention, %d merged segment(s), "
                "%d collectives segment(s) summarised",
                len(dropped),
                len(merged),
                len(summarised),
            )

    def run(self, stop: threading.Event) -> None:
        """Tick until `stop` is set, then do a final collect, ingest and flush. Whoever sets
        `stop` sets `wake` too, or the agent notices within one interval."""
        while not stop.is_set():
            started = self.clock()
            if self._flush_asked:
                self._flush_asked = False
                asked = time.time()
                self.flush()
                self.mark_flushed(asked)
            else:
                self.tick(started)
            self.wake.wait(max(0.0, started + self.config.interval - self.clock()))
            self.wake.clear()
        self.flush()

    def ask_flush(self) -> None:
        """Collect, ingest and store now instead of at the next interval (SIGUSR1: a
        supervisor diagnosing a failed attempt wants its last records and the GPUs' state
        after it without waiting out a cycle). Safe to call from a signal handler."""
        self._flush_asked = True
        self.wake.set()

    def mark_flushed(self, asked: float) -> None:
        """Say that what was there at `asked` is stored; written once at start-up too, once
        SIGUSR1 is handled: before that the signal's default action would end the agent."""
        mark = agent_flush_mark(self.data_dir, self.node)
        tmp = mark.with_name(f".{mark.name}.tmp")
        try:
            mark.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(f"{asked!r}\n", encoding="utf-8")
            tmp.replace(mark)
        except OSError:
            log.exception("could not write %s; a supervisor waiting for this flush waits longer", mark)

    def flush(self) -> None:
        """A last sample of every collector, then everything into the store (clean shutdown)."""
        now = self.clock()
        self.collect(now, force=True)
        self.store_batch(now)

    def close(self) -> None:
        for c in self.collectors:
            try:
                c.collector.close()
            except Exception:
                log.exception("closing collector %s failed", c.name)
        self.writer.close()
