"""GPU health from the agent: Xids, lost GPUs, ECC and row remapping, NVLink, PCIe, throttling.

Each finding is tied to the job's ranks on that (node, gpu), so root cause can let the hardware
fault outrank the software error the same rank printed. Xids are grouped into bursts per GPU
(docs/field-facts.md: < 3 min of silence) and a burst is named after its most severe Xid, mapped with
the classifier's Xid table so both paths agree. Xid 74 can be sympathetic to the GPU at the other
end of the link: when several GPUs of a node report it together, the node is blamed, not one GPU.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, TypeAlias

import pandas as pd

from triage.analyzers.config import AnalyzerConfig
from triage.analyzers.findings import Finding, clock, gpu_culprit, where
from triage.analyzers.inherited import evidence_attempt, inherited_findings
from triage.analyzers.log_signatures import IMMEDIATE_XIDS as IMMEDIATE_XIDS
from triage.analyzers.log_signatures import NON_FATAL_XIDS as NON_FATAL_XIDS
from triage.analyzers.log_signatures import XID_TABLE
from triage.collectors.records import CLOCK_EVENT_BITS
from triage.store.job_data import JobData
from triage.taxonomy import Category
from triage.verdict import Evidence, Verdict

_NVLINK_XID = 74


def _xid_meaning(row: pd.Series) -> tuple[Category, float, str] | None:
    if row["kind"] == "gpu_lost":
        return Category.GPU_FALLEN_OFF_BUS, 0.9, "GPU is lost"
    if pd.isna(row["xid"]) or int(row["xid"]) not in XID_TABLE:
        return None
    category, strength, meaning = XID_TABLE[int(row["xid"])]
    return None if category is None else (category, strength, meaning)


def _bursts(events: pd.DataFrame, gap_s: float) -> list[pd.DataFrame]:
    out: list[pd.DataFrame] = []
    for _, g in events.groupby(["node", "gpu", "_attempt"], dropna=False, sort=True):
        g = g.sort_values("time")
        burst_id = (g["time"].diff() > gap_s).cumsum()
        out.extend(b for _, b in g.groupby(burst_id))
    return out


#: (category, strength, meaning, worst row, burst), as `_rated_bursts` returns them.
_RatedBurst: TypeAlias = tuple[Category, float, str, pd.Series, pd.DataFrame]


def _rated_bursts(events: pd.DataFrame, gap_s: float) -> list[_RatedBurst]:
    """(category, strength, meaning, worst row, burst) per burst that the Xid table rates."""
    bursts: list[_RatedBurst] = []
    for burst in _bursts(events, gap_s):
        rated = [(m, row) for _, row in burst.iterrows() if (m := _xid_meaning(row)) is not None]
        if rated:
            (category, strength, meaning), worst = max(rated, key=lambda mr: (mr[0][1], -mr[1]["time"]))
            bursts.append((category, strength, meaning, worst, burst))
    return bursts


def _run_start(job: JobData) -> float:
    span = job.span()
    return span[0] if span is not None else float("inf")


def _owned(job: JobData, frame: pd.DataFrame, cfg: AnalyzerConfig) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(rows inside an attempt's window, with its number in `_attempt`; rows from before the
    run). Rows after the run are another job's and dropped."""
    owner = frame["time"].map(lambda t: evidence_attempt(job, float(t), cfg))
    inside = frame[owner.notna()].assign(_attempt=owner[owner.notna()].astype(int))
    before = frame[owner.isna() & (frame["time"] < _run_start(job))].assign(_attempt=-1)
    return inside, before


def _kept_stepping(
    job: JobData, attempt: int, ranks: tuple[int, ...], t: float, cfg: AnalyzerConfig
) -> tuple[int, float] | None:
    """(rank, time of its last step end) where a rank on the GPU completed steps well after
    `t`: a GPU that was really lost at `t` ends every step of its ranks there."""
    rs = job.rank_steps
    rows = rs[
        (rs["attempt"] == attempt) & rs["rank"].isin(ranks) & (rs["last_end"] > t + cfg.lost_gpu_slack_s)
    ]
    if rows.empty:
        return None
    r = rows.sort_values("last_end").iloc[-1]
    return int(r["rank"]), float(r["last_end"])


def _not_lost_by(finding: Finding, job: JobData, cfg: AnalyzerConfig) -> Finding:
    """A lost-GPU finding whose ranks went on training did not end the attempt: keep it as an
    advisory incident that says why."""
    v = finding.verdict
    if v.category is not Category.GPU_FALLEN_OFF_BUS or not finding.fatal or v.first_seen is None:
        return finding
    kept = _kept_stepping(job, finding.attempt, finding.ranks, v.first_seen, cfg)
    if kept is None:
        return finding
    rank, end = kept
    v.summary += (
        f"; but rank {rank} on it kept completing steps until {clock(end)}, so it was "
        "not lost then and did not end the attempt"
    )
    v.confidence = min(v.confidence, 0.5)
    finding.fatal = False
    return finding


def xid_findings(job: JobData, cfg: AnalyzerConfig) -> list[Finding]:
    if job.gpu_events.empty:
        return []
    inside, before = _owned(job, job.gpu_events, cfg)
    findings = _inherited_xids(job, _rated_bursts(before, cfg.xid_burst_gap_s), cfg)
    bursts = _rated_bursts(inside, cfg.xid_burst_gap_s)
    nvlink_nodes = _nvlink_shared_nodes(bursts, cfg.xid_burst_gap_s)
    node_level: dict[tuple[str, int], Finding] = {}
    for category, strength, meaning, worst, burst in sorted(bursts, key=lambda b: b[4]["time"].min()):
        node = str(worst["node"])
        gpu = None if pd.isna(worst["gpu"]) else int(worst["gpu"])
        xid = None if pd.isna(worst["xid"]) else int(worst["xid"])
        t = float(burst["time"].min())
        attempt = int(worst["_attempt"])
        if xid == _NVLINK_XID and node in nvlink_nodes:
            if (node, attempt) in node_level:  # one node-level incident, with every GPU's lines
                f = node_level[(node, attempt)]
                f.verdict.evidence.extend(
                    Evidence(str(r["text"]), str(r["source"]), float(r["time"]))
                    for _, r in burst.head(5).iterrows()
                )
                continue
            gpu, strength = None, min(strength, 0.7)
        uuid = worst["uuid"] if gpu is not None and isinstance(worst["uuid"], str) else None
        culprit, ranks = gpu_culprit(job, attempt, node, gpu, uuid)
        code = f"Xid {xid}" if xid is not None else "NVML"
        shared = " (several GPUs of the node report it)" if gpu is None and xid == _NVLINK_XID else ""
        summary = f"{where(culprit, ranks)} reported {code}: {meaning}{shared} at {clock(t)}"
        evidence = [
            Evidence(str(r["text"]), str(r["source"]), float(r["time"])) for _, r in burst.head(10).iterrows()
        ]
        verdict = Verdict(category, strength, summary, culprit, t, evidence)
        findings.append(
            _not_lost_by(Finding(attempt, verdict, fatal=xid not in NON_FATAL_XIDS, ranks=ranks), job, cfg)
        )
        if gpu is None and xid == _NVLINK_XID:
            node_level[(node, attempt)] = findings[-1]
    return findings


def _inherited_xids(job: JobData, bursts: list[_RatedBurst], cfg: AnalyzerConfig) -> list[Finding]:
    """Xid bursts from before the run on GPUs it was placed on: conditions, not causes."""
    found: list[Finding] = []
    for category, _, meaning, worst, burst in bursts:
        if not pd.isna(worst["xid"]) and int(worst["xid"]) in NON_FATAL_XIDS:
            continue
        gpu = None if pd.isna(worst["gpu"]) else int(worst["gpu"])
        code = f"Xid {int(worst['xid'])}" if not pd.isna(worst["xid"]) else "NVML"
        evidence = [
            Evidence(str(r["text"]), str(r["source"]), float(r["time"])) for _, r in burst.head(5).iterrows()
        ]
        found += inherited_findings(
            job,
            str(worst["node"]),
            gpu,
            category,
            float(burst["time"].min()),
            f"reported {code} ({meaning})",
            evidence,
            cfg,
        )
    return found


def _nvlink_shared_nodes(bursts: list[_RatedBurst], gap_s: float) -> set[str]:
    """Nodes where Xid 74 bursts on more than one GPU overlap in time."""
    by_node: dict[str, list[tuple[float, float, object]]] = defaultdict(list)
    for _, _, _, worst, burst in bursts:
        if not pd.isna(worst["xid"]) and int(worst["xid"]) == _NVLINK_XID:
            by_node[str(worst["node"])].append((burst["time"].min(), burst["time"].max(), worst["gpu"]))
    shared = set()
    for node, spans in by_node.items():
        for i, (s1, e1, g1) in enumerate(spans):
            if any(g1 != g2 and s2 <= e1 + gap_s and s1 <= e2 + gap_s for s2, e2, g2 in spans[i + 1 :]):
                shared.add(node)
    return shared


def _reasons(mask: int) -> str:
    names = [
        name.removeprefix("clock_event_").replace("_", " ")
        for name, bit in CLOCK_EVENT_BITS.items()
        if mask & bit
    ]
    return ", ".join(names) or "none"


def throttled_gpus(job: JobData, cfg: AnalyzerConfig) -> pd.DataFrame:
    """Rows of `job.gpu_health` whose health throttle reasons were sustained."""
    h = job.gpu_health
    if h.empty:
        return h
    share = h["throttled_samples"] / h["samples"].clip(lower=1)
    return h[(h["throttled_samples"] >= cfg.throttle_min_samples) & (share >= cfg.throttle_min_share)]


def sample_findings(job: JobData, cfg: AnalyzerConfig) -> list[Finding]:
    """What the periodic NVML samples show: lost GPU, ECC, remaps, NVLink, PCIe, throttling."""
    findings: list[Finding] = []
    throttled = set(map(tuple, throttled_gpus(job, cfg)[["node", "gpu"]].values.tolist()))
    for _, g in job.gpu_health.iterrows():
        node, gpu = str(g["node"]), int(g["gpu"])
        uuid = g["uuid"] if isinstance(g["uuid"], str) else None

        def add(
            category: Category,
            confidence: float,
            t: float,
            what: str,
            text: str,
            fatal: bool,
            node: str = node,
            gpu: int = gpu,
            uuid: str | None = uuid,
        ) -> None:
            attempt = evidence_attempt(job, t, cfg)
            if attempt is None:
                if t < _run_start(job) and (fatal or category is Category.GPU_MEMORY_ERROR):
                    findings.extend(
                        inherited_findings(
                            job, node, gpu, category, t, what, [Evidence(text, "nvml", t)], cfg
                        )
                    )
                return
            culprit, ranks = gpu_culprit(job, attempt, node, gpu, uuid)
            findings.append(
                _not_lost_by(
                    Finding(
                        attempt,
                        Verdict(
                            category,
                            confidence,
                            f"{where(culprit, ranks)} {what} at {clock(t)}",
                            culprit,
                            t,
                            [Evidence(text, "nvml", t)],
                        ),
                        fatal=fatal,
                        ranks=ranks,
                    ),
                    job,
                    cfg,
                )
            )

        up0 = g["up_at_first_sample"]
        if pd.notna(g["lost_time"]) and pd.notna(up0) and not bool(up0):
            findings.extend(
                inherited_findings(
                    job,
                    node,
                    gpu,
                    Category.GPU_FALLEN_OFF_BUS,
                    float(g["lost_time"]),
                    "was already lost when the agent first sampled it",
                    [Evidence("NVML: GPU is lost (from the first sample)", "nvml", float(g["lost_time"]))],
                    cfg,
                    applies_from=-math.inf,
                )
            )
        elif pd.notna(g["lost_time"]):
            add(
                Category.GPU_FALLEN_OFF_BUS,
                0.9,
                g["lost_time"],
                "stopped answering NVML",
                "NVML: GPU is lost",
                True,
            )
        if pd.notna(g["ecc_first"]):
            grew = _n(g["ecc_uncorrected"]) > _n(g["ecc_uncorrected_at_start"])
            add(
                Category.GPU_MEMORY_ERROR,
                0.85 if grew else 0.6,
                g["ecc_first"],
                f"had {int(g['ecc_uncorrected'])} uncorrectable ECC error(s)",
                f"ecc_uncorrected_volatile={int(g['ecc_uncorrected'])}",
                bool(grew),
            )
        if pd.notna(g["remap_failure_first"]):
            add(
                Category.GPU_MEMORY_ERROR,
                0.9,
                g["remap_failure_first"],
                "failed to remap a memory row (RMA candidate)",
                "remapped_rows_failure=true",
                True,
            )
        if pd.notna(g["nvlink_first"]):
            add(
                Category.NVLINK_ERROR,
                0.7 if _n(g["nvlink_recovery_growth"]) > 0 else 0.6,
                g["nvlink_first"],
                "saw NVLink error counters rise",
                f"nvlink crc +{_n(g['nvlink_crc_growth'])}, replay +{_n(g['nvlink_replay_growth'])},"
                f" recovery +{_n(g['nvlink_recovery_growth'])}",
                False,
            )
        if pd.notna(g["pcie_width_first"]):
            add(
                Category.PCIE_ERROR,
                0.7,
                g["pcie_width_first"],
                f"ran its PCIe link at x{_n(g['pcie_link_width'])} of x{_n(g['pcie_link_width_max'])}",
                f"pcie_link_width={_n(g['pcie_link_width'])} max={_n(g['pcie_link_width_max'])}",
                False,
            )
        if pd.notna(g["pcie_replay_first"]):
            add(
                Category.PCIE_ERROR,
                0.6,
                g["pcie_replay_first"],
                f"saw {_n(g['pcie_replay_growth'])} PCIe replays",
                f"pcie_replay_total +{_n(g['pcie_replay_growth'])}",
                False,
            )
        if (node, gpu) in throttled:
            share = g["throttled_samples"] / max(1, g["samples"])
            temp = (
                f", up to {g['max_temperature_celsius']:.0f} C"
                if pd.notna(g["max_temperature_celsius"])
                else ""
            )
            add(
                Category.GPU_THROTTLING,
                min(0.95, 0.6 + 0.4 * share),
                g["throttle_first"],
                f"was throttled ({_reasons(int(g['throttle_reasons']))}) in {share:.0%} of "
                f"samples{temp}, from",
                f"clock_event_reasons={int(g['throttle_reasons']):#x} in "
                f"{int(g['throttled_samples'])}/{int(g['samples'])} samples",
                False,
            )
    return findings


def _n(v: Any) -> int:
    """A pandas cell (a number, None or NaN) as an int, 0 when missing."""
    return 0 if v is None or pd.isna(v) else int(v)


def gpu_health_findings(job: JobData, cfg: AnalyzerConfig) -> list[Finding]:
    return xid_findings(job, cfg) + sample_findings(job, cfg)
