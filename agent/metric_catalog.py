"""The Prometheus metric catalog: every `triage_*` family the per-node agent exports.

One table serves three readers, so they cannot drift apart: the exporter builds its families
from it, `alerts/triage-rules.yml` may only reference what it lists (checked by
`tests/test_alert_rules.py`), and the README's metric table is generated from it
(`python -m triage.agent.metric_catalog`).

Exporter obligations the alert rules depend on:
- `increase()` cannot see a counter's first increment when the series is born at 1
  (docs/field-facts.md), so every counter in `PRECREATED` gets one series per listed label value,
  at 0, as soon as its GPU, job or collector is known. The node's GPU-second counters are born
  at the supervisor partition's totals for the node when the agent first reads it (0 in a new
  store), so their later growth is what `increase()` sees, and a restarted agent continues
  where it left off (runs that ended while it was down included).
- A source the agent cannot read is reported as unavailable (`triage_gpu_up 0`,
  `triage_collector_errors_total` rising), never as zeros: a blind watcher must not look healthy.
- The training job's id travels in the `job` label, which Prometheus also uses for the scrape
  job; scrape the agents with `honor_labels: true` (README) so it is kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from triage.collectors.records import CLOCK_EVENT_REASONS as RECORD_CLOCK_EVENT_REASONS
from triage.taxonomy import Category, Layer


class MetricType(str, Enum):
    GAUGE = "gauge"
    COUNTER = "counter"
    HISTOGRAM = "histogram"
    SUMMARY = "summary"


@dataclass(frozen=True)
class MetricFamily:
    """One exported family. `unit` is the base unit the name ends in ("" for counts and 0/1)."""

    name: str
    type: MetricType
    labels: tuple[str, ...]
    help: str
    unit: str = ""

    def sample_names(self) -> tuple[str, ...]:
        """Names of the samples as Prometheus stores them (a histogram is three series)."""
        if self.type is MetricType.HISTOGRAM:
            return tuple(self.name + s for s in ("_bucket", "_sum", "_count"))
        if self.type is MetricType.SUMMARY:
            return (self.name, self.name + "_sum", self.name + "_count")
        return (self.name,)

    def label_values(self, label: str) -> tuple[str, ...] | None:
        """The closed set of values `label` takes on this family; None for identity labels."""
        if label == "kind":
            return _KIND_VALUES[self.name]
        if label == "category" and self.name in LOST_TIME_FAMILIES:
            return LOST_TIME_CATEGORIES
        return LABEL_VALUES.get(label)

    def sample_labels(self, sample_name: str) -> tuple[str, ...]:
        """Labels a sample may carry: a bucket adds `le`, a summary quantile adds `quantile`."""
        if sample_name == self.name + "_bucket":
            return self.labels + ("le",)
        if self.type is MetricType.SUMMARY and sample_name == self.name:
            return self.labels + ("quantile",)
        return self.labels


#: Base units a name may end in (docs/architecture.md), before a counter's `_total`.
BASE_UNITS = ("seconds", "bytes", "celsius", "watts", "joules", "hertz", "ratio")

#: Identity of a GPU series. `simulated` is "true" for the simulated backend, so Alertmanager
#: can route demo alerts away from the pager without a join in every rule.
GPU_LABELS = ("node", "gpu", "uuid", "simulated")
#: Identity of a per-rank series; `node` is where the rank runs, so alerts name the culprit node.
RANK_LABELS = ("job", "rank", "node")
JOB_LABELS = ("job",)
AGENT_LABELS = ("node",)
#: Identity of a network-port series: `gpu` is the GPU under the same PCIe switch ("" where no
#: single one is), so an alert names the rank's rail.
NIC_LABELS = ("node", "nic", "gpu", "simulated")

#: Xids the alert rules act on (docs/field-facts.md, docs/failure-taxonomy.md). The exporter creates a
#: zero `triage_gpu_xid_errors_total` series for each of them on every GPU at start.
ALERTED_XIDS = ("48", "62", "63", "64", "74", "79", "92", "94", "95", "119", "120", "140", "143", "154")

#: NVML clock-event reasons (collectors/records.py, docs/field-facts.md), the `reason` label's
#: values. The rules alert on the health reasons of `HEALTH_CLOCK_EVENT_MASK`.
CLOCK_EVENT_REASONS = tuple(RECORD_CLOCK_EVENT_REASONS.values())
#: `nvmlDeviceGetRemappedRows`: rows remapped for correctable / uncorrectable errors, and the
#: pending (applied at the next GPU reset) and failure (RMA) flags.
REMAP_KINDS = ("correctable", "uncorrectable", "pending", "failure")
ECC_TYPES = ("corrected", "uncorrected")
#: NVLink counters summed over the GPU's links (`crc` adds flit and data CRC errors): CRC errors
#: matter only at high rates (DCGM), replays and recoveries at any sustained rate.
NVLINK_ERROR_KINDS = ("crc", "replay", "recovery")

#: The closed set of values each bounded label takes (docs/architecture.md: no unbounded labels).
#: `node`, `gpu`, `uuid`, `job`, `rank`, `collector` and `xid` are bounded by the cluster and
#: the driver; `kind` depends on the family (`MetricFamily.label_values`).
LABEL_VALUES: dict[str, tuple[str, ...]] = {
    "simulated": ("true", "false"),
    "reason": CLOCK_EVENT_REASONS,
    "type": ECC_TYPES,
    "category": tuple(c.value for c in Category),
    "layer": tuple(layer.value for layer in Layer),
}

#: `category` of lost time no incident caused (start-up, checkpoint saves, data waits): the
#: `lost_time` table's (analyzers.lost_time.OVERHEAD). The lost-time families take it besides
#: the taxonomy's categories.
OVERHEAD = "overhead"
LOST_TIME_CATEGORIES = LABEL_VALUES["category"] + (OVERHEAD,)
LOST_TIME_FAMILIES = ("triage_lost_gpu_seconds_total", "triage_caused_lost_gpu_seconds_total")

_G, _C, _H = MetricType.GAUGE, MetricType.COUNTER, MetricType.HISTOGRAM

CATALOG: tuple[MetricFamily, ...] = (
    # GPU health, one series per GPU (NVML or the simulated backend).
    MetricFamily(
        "triage_gpu_up",
        _G,
        GPU_LABELS,
        "1 while the GPU answers NVML; 0 once it is lost (NVML GPU_IS_LOST, expect "
        "Xid 79) or cannot be read.",
    ),
    MetricFamily("triage_gpu_temperature_celsius", _G, GPU_LABELS, "GPU core temperature.", "celsius"),
    MetricFamily(
        "triage_gpu_slowdown_temperature_celsius",
        _G,
        GPU_LABELS,
        "Temperature at which the GPU starts slowing down, read from NVML's "
        "thresholds (never hard-coded: it differs per board and driver).",
        "celsius",
    ),
    MetricFamily(
        "triage_gpu_power_watts",
        _G,
        GPU_LABELS,
        "Board power draw (NVML reports mW; exported in watts).",
        "watts",
    ),
    MetricFamily(
        "triage_gpu_utilization_ratio",
        _G,
        GPU_LABELS,
        "Fraction of the last sample period a kernel was running (0..1).",
        "ratio",
    ),
    MetricFamily("triage_gpu_memory_used_bytes", _G, GPU_LABELS, "Device memory in use.", "bytes"),
    MetricFamily("triage_gpu_sm_clock_hertz", _G, GPU_LABELS, "Current SM clock.", "hertz"),
    MetricFamily(
        "triage_gpu_clock_event_active",
        _G,
        GPU_LABELS + ("reason",),
        "1 while NVML reports this clock-event (throttle) reason, else 0; one series per reason.",
    ),
    MetricFamily(
        "triage_gpu_ecc_errors_total",
        _C,
        GPU_LABELS + ("type",),
        "Volatile ECC errors by type; both types are created at 0 at start.",
    ),
    MetricFamily(
        "triage_gpu_remapped_rows",
        _G,
        GPU_LABELS + ("kind",),
        "Row remapper state: rows remapped (correctable, uncorrectable) and the "
        "pending and failure flags (0/1).",
    ),
    MetricFamily(
        "triage_gpu_pcie_replay_total", _C, GPU_LABELS, "PCIe replay counter; created at 0 at start."
    ),
    MetricFamily(
        "triage_gpu_nvlink_errors_total",
        _C,
        GPU_LABELS + ("kind",),
        "NVLink error counters summed over the GPU's links; every kind is created at 0 at start.",
    ),
    MetricFamily(
        "triage_gpu_xid_errors_total",
        _C,
        GPU_LABELS + ("xid",),
        "Xid events from the kernel log and NVML events, de-duplicated; every alerted "
        "Xid is created at 0 at start.",
    ),
    # Training jobs, from the per-rank spools of the ranks on this node.
    MetricFamily("triage_job_step", _G, RANK_LABELS, "Last completed training step."),
    MetricFamily(
        "triage_job_last_progress_timestamp_seconds",
        _G,
        RANK_LABELS,
        "Unix time the rank last completed a step (or its start time before the "
        "first step); exported while the job runs.",
        "seconds",
    ),
    MetricFamily(
        "triage_straggler_score",
        _G,
        RANK_LABELS,
        "The rank's step compute time over the job's median rank (1.0 = typical, "
        "2.0 = twice as slow), in the newest attempt; from the job's supervisor "
        "(`triage run`), which analyses the job every --score-interval.",
    ),
    MetricFamily("triage_job_step_time_seconds", _H, JOB_LABELS, "Wall time of training steps.", "seconds"),
    MetricFamily("triage_job_tokens_per_second", _G, JOB_LABELS, "Job throughput over the last steps."),
    MetricFamily(
        "triage_job_goodput_ratio",
        _G,
        JOB_LABELS,
        "Productive step time over time since the job's first start (Google's "
        "goodput definition); from the job's supervisor (`triage run`), which "
        "analyses the job every --score-interval.",
        "ratio",
    ),
    MetricFamily(
        "triage_job_restarts_total",
        _C,
        JOB_LABELS,
        "Restarts of the job (attempts after the first); created at 0 when the job is first seen.",
    ),
    MetricFamily(
        "triage_job_last_checkpoint_timestamp_seconds",
        _G,
        JOB_LABELS,
        "Unix time of the last checkpoint written completely (the job's start time "
        "before the first one, so a job that never checkpoints is noticed).",
        "seconds",
    ),
    MetricFamily(
        "triage_job_checkpoint_interval_seconds",
        _G,
        JOB_LABELS,
        "The job's configured checkpoint interval; the checkpoint-age alert allows "
        "twice this (1 h when absent).",
        "seconds",
    ),
    MetricFamily(
        "triage_incidents_total",
        _C,
        JOB_LABELS + ("category", "layer"),
        "Failure verdicts by taxonomy category, as the job's supervisor recorded them; "
        "every category is created at 0 when the job is first seen.",
    ),
    # The node's share of the fleet's accounting, from the supervisors' `attempt_usage` and
    # `lost_time` rows of this node (recorded when a run ends), and its health ledger row: summed
    # over the fleet's agents every GPU-second counts once. No job label: these add up runs.
    MetricFamily(
        "triage_allocated_gpu_seconds_total",
        _C,
        AGENT_LABELS,
        "GPU-seconds the node's GPUs were held by supervised runs (ranks on the node x each "
        "attempt's wall time), added when a run ends.",
        "seconds",
    ),
    MetricFamily(
        "triage_productive_gpu_seconds_total",
        _C,
        AGENT_LABELS,
        "GPU-seconds of those spent in productive training steps, added when a run ends; over "
        "triage_allocated_gpu_seconds_total it is the fleet's effective training time ratio.",
        "seconds",
    ),
    MetricFamily(
        "triage_lost_gpu_seconds_total",
        _C,
        AGENT_LABELS + ("category",),
        "GPU-seconds the node's GPUs lost, by the taxonomy category of the incident charged "
        '("overhead" where none: start-up, checkpoint saves, data waits), added when a run '
        "ends; every category exists from the agent's first read.",
        "seconds",
    ),
    MetricFamily(
        "triage_caused_lost_gpu_seconds_total",
        _C,
        AGENT_LABELS + ("category",),
        "GPU-seconds lost anywhere in the fleet to incidents whose culprit is this node, by "
        "category, added when a run ends; every category exists from the agent's first read.",
        "seconds",
    ),
    MetricFamily(
        "triage_nic_link_up",
        _G,
        NIC_LABELS,
        "1 while the network port (Ethernet interface, or InfiniBand/RoCE port) has its link, "
        "0 once it lost it; a port no agent of the node has seen up in the last day is not exported.",
    ),
    MetricFamily(
        "triage_nic_link_downs_total",
        _C,
        NIC_LABELS,
        "Link losses the port counted (IB link_downed, carrier_down_count), so a flap between "
        "two scrapes still shows.",
    ),
    MetricFamily(
        "triage_node_quarantined",
        _G,
        AGENT_LABELS,
        "Quarantines the node health ledger holds on the node now (the node as a whole, and each "
        "of its GPUs: a lost GPU, ECC, NVLink, a repeat offender, a lemon), else 0.",
    ),
    MetricFamily(
        "triage_node_lemon",
        _G,
        AGENT_LABELS,
        "1 while the node health ledger holds the node quarantined by the lemon-node test "
        "(it fails jobs significantly more often than the fleet), else 0.",
    ),
    # The agent itself.
    MetricFamily(
        "triage_agent_up",
        _G,
        AGENT_LABELS,
        "1 while the agent's collection loop and store writer run; 0 when either has "
        "stopped while the process still serves /metrics.",
    ),
    MetricFamily(
        "triage_agent_last_scrape_timestamp_seconds",
        _G,
        AGENT_LABELS + ("collector",),
        "Unix time of the collector's last successful sample.",
        "seconds",
    ),
    MetricFamily(
        "triage_collector_errors_total",
        _C,
        AGENT_LABELS + ("collector",),
        "Failed collection attempts per collector; created at 0 at start.",
    ),
)

BY_NAME: dict[str, MetricFamily] = {f.name: f for f in CATALOG}

_KIND_VALUES: dict[str, tuple[str, ...]] = {
    "triage_gpu_remapped_rows": REMAP_KINDS,
    "triage_gpu_nvlink_errors_total": NVLINK_ERROR_KINDS,
}

#: Counter label values the exporter creates at 0 (see the module docstring); the remaining
#: labels of each family are the GPU's, job's or collector's identity.
PRECREATED: dict[str, dict[str, tuple[str, ...]]] = {
    "triage_gpu_xid_errors_total": {"xid": ALERTED_XIDS},
    "triage_gpu_ecc_errors_total": {"type": ECC_TYPES},
    "triage_gpu_nvlink_errors_total": {"kind": NVLINK_ERROR_KINDS},
    "triage_gpu_pcie_replay_total": {},
    "triage_job_restarts_total": {},
    "triage_incidents_total": {"category": LABEL_VALUES["category"]},
    "triage_allocated_gpu_seconds_total": {},
    "triage_productive_gpu_seconds_total": {},
    "triage_lost_gpu_seconds_total": {"category": LOST_TIME_CATEGORIES},
    "triage_caused_lost_gpu_seconds_total": {"category": LOST_TIME_CATEGORIES},
    "triage_collector_errors_total": {},
}


def family_of_sample(sample_name: str) -> MetricFamily | None:
    """The family a stored sample name belongs to (`..._bucket` -> its histogram)."""
    for fam in CATALOG:
        if sample_name in fam.sample_names():
            return fam
    return None


def markdown_table() -> str:
    """The README's metric table."""
    rows = ["| metric | type | labels | unit | meaning |", "|---|---|---|---|---|"]
    for fam in CATALOG:
        labels = ", ".join(f"`{label}`" for label in fam.labels)
        rows.append(f"| `{fam.name}` | {fam.type.value} | {labels} | {fam.unit or '-'} | {fam.help} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
