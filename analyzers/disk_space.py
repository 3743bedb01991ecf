"""A checkpoint that could not be written on a node whose disk was full is a storage_error.

torch's zip writer loses the errno of a failed write: a full disk under `torch.save` or a DCP
save reaches the log as `unexpected pos N vs M` or `PytorchStreamWriter failed writing file`,
which by itself says only that the checkpoint failed (checkpoint_error). The taxonomy names the
cause, the filesystem, where there is evidence for it: the node agent's disk samples
(`JobData.full_disks`, every path the agent watches: its data dir and each `--disk-path`, so
watch the checkpoint directory's filesystem too). A checkpoint failure on a node with a full
disk within the correlation window becomes a storage_error with that reading as evidence; the
culprit stays the rank that failed, so the action (`restart` after the space is checked) goes
with the right node.
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from triage.analyzers.config import AnalyzerConfig
from triage.analyzers.findings import Finding, clock
from triage.store.job_data import JobData
from triage.taxonomy import Category
from triage.verdict import Evidence


def full_disk_causes(job: JobData, findings: list[Finding], cfg: AnalyzerConfig) -> list[Finding]:
    """`findings`, with each fatal checkpoint failure on a node whose disk was full then
    named a storage_error."""
    if job.full_disks.empty:
        return findings
    return [_with_full_disk(job, f, cfg) for f in findings]


def _with_full_disk(job: JobData, f: Finding, cfg: AnalyzerConfig) -> Finding:
    if not f.fatal or f.verdict.category is not Category.CHECKPOINT_ERROR or f.verdict.first_seen is None:
        return f
    disk = _full_disk_near(job, _nodes(job, f), f.verdict.first_seen, cfg.correlation_window_s)
    if disk is None:
        return f
    v = f.verdict
    path, node = str(disk["path"]), str(disk["node"])
    reading = (
        f"{path} on {node}: {_size(int(disk['free_bytes']))} free of {_size(int(disk['total_bytes']))} "
        f"at {clock(float(disk['first_time']))}"
    )
    verdict = dataclasses.replace(
        v,
        category=Category.STORAGE_ERROR,
        confidence=max(v.confidence, 0.9),
        summary=f"the disk was full ({reading}) when the checkpoint failed: {v.summary}",
        evidence=[Evidence(reading, "disk", float(disk["first_time"])), *v.evidence],
    )
    return dataclasses.replace(f, verdict=verdict)


def _nodes(job: JobData, f: Finding) -> set[str]:
    """The finding's node, else those of its ranks in its attempt."""
    if f.verdict.culprit.node is not None:
        return {f.verdict.culprit.node}
    nodes = set()
    for rank in f.ranks:
        row = job.rank_row(f.attempt, rank)
        if row is not None and isinstance(row["node"], str):
            nodes.add(row["node"])
    return nodes


def _full_disk_near(job: JobData, nodes: set[str], t: float, window_s: float) -> pd.Series | None:
    """The full-disk reading on one of `nodes` closest to `t`, within `window_s` of it."""
    d = job.full_disks
    d = d[d["node"].isin(nodes) & (d["first_time"] <= t + window_s) & (d["last_time"] >= t - window_s)]
    if d.empty:
        return None
    gap = (d["first_time"] - t).clip(lower=0) + (t - d["last_time"]).clip(lower=0)
    return d.loc[gap.idxmin()]


def _size(n: int) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"
