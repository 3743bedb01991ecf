"""`Finding`: a verdict one analyzer proposes about one attempt, before cross-rank root cause.

Each analyzer sees one kind of evidence (GPU health, steps, heartbeats, exceptions) and cannot
tell a cause from a consequence on its own; `root_cause` merges their findings per attempt. The
helpers here name ranks and GPUs the same way in every summary.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from triage import display
from triage.store.job_data import JobData
from triage.taxonomy import Category
from triage.verdict import Culprit, Verdict

#: Categories that describe a degraded but running job: never the cause an attempt ended on.
ADVISORY_CATEGORIES = frozenset({Category.GPU_THROTTLING, Category.PCIE_ERROR, Category.STRAGGLER})


@dataclass
class Finding:
    """`fatal`: this can end an attempt (the attempt's root-cause incident is chosen among the
    fatal findings). `symptom`: what ranks report once something else failed (a watchdog
    timeout, a peer reset); it decides only when no causal finding exists. `ranks`: every rank
    the finding concerns, the culprit's first."""

    attempt: int
    verdict: Verdict
    fatal: bool
    symptom: bool = False
    ranks: tuple[int, ...] = ()

    @property
    def time(self) -> float:
        t = self.verdict.first_seen
        return math.inf if t is None else t


def clock(t: float | None) -> str:
    """A time of day inside a sentence, UTC like every time Triage shows (triage/display.py)."""
    return display.clock(t, unknown="an unknown time")


def rank_ranges(ranks: Iterable[int]) -> str:
    """[0, 1, 2, 4] -> '0-2, 4', so a 1024-rank cascade stays one readable sentence."""
    parts: list[str] = []
    run: list[int] = []
    for r in sorted(set(ranks)):
        if run and r != run[-1] + 1:
            parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
            run = []
        run.append(r)
    if run:
        parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ", ".join(parts)


def ranks_phrase(ranks: Iterable[int]) -> str:
    rs = sorted(set(ranks))
    return f"rank {rs[0]}" if len(rs) == 1 else f"ranks {rank_ranges(rs)}"


def rank_culprit(job: JobData, attempt: int, rank: int | None) -> Culprit:
    """The rank with its node, GPU and UUID as the rank itself recorded them at start."""
    if rank is None:
        return Culprit()
    row = job.rank_row(attempt, rank)
    if row is None:
        return Culprit(rank=rank)
    return Culprit(rank=rank, node=_str(row["node"]), gpu=_int(row["gpu"]), uuid=_str(row["gpu_uuid"]))


def common_node(job: JobData, attempt: int, ranks: Iterable[int]) -> Culprit:
    """Several culprit ranks on one node blame that node; spread over nodes, nobody."""
    nodes = {rank_culprit(job, attempt, r).node for r in ranks}
    return Culprit(node=nodes.pop()) if len(nodes) == 1 else Culprit()


def ranks_culprit(job: JobData, attempt: int, ranks: list[int]) -> Culprit:
    """One rank names itself; several, the node they share, if one."""
    return rank_culprit(job, attempt, ranks[0]) if len(ranks) == 1 else common_node(job, attempt, ranks)


def gpu_culprit(
    job: JobData, attempt: int, node: str, gpu: int | None, uuid: str | None = None
) -> tuple[Culprit, tuple[int, ...]]:
    """The culprit for a fault on (node, gpu) and the job's ranks that ran on it."""
    ranks = tuple(job.ranks_on(attempt, node, gpu))
    if uuid is None and ranks:
        uuid = rank_culprit(job, attempt, ranks[0]).uuid
    return Culprit(rank=ranks[0] if len(ranks) == 1 else None, node=node, gpu=gpu, uuid=uuid), ranks


def where(culprit: Culprit, ranks: Iterable[int] = ()) -> str:
    """'GPU 1 on node1 (rank 3)', 'node1 (ranks 4-7)', 'rank 3 (node0, GPU 3)'."""
    rs = sorted(set(ranks)) or ([culprit.rank] if culprit.rank is not None else [])
    who = f" ({ranks_phrase(rs)})" if rs else ""
    if culprit.gpu is not None and culprit.node is not None:
        return f"GPU {culprit.gpu} on {culprit.node}{who}"
    if culprit.node is not None:
        return f"{culprit.node}{who}"
    return ranks_phrase(rs) if rs else "an unknown rank"


def _str(v: object) -> str | None:
    return None if v is None or pd.isna(v) else str(v)


def _int(v: Any) -> int | None:
    """A pandas cell (a number, None or NaN) as an int, None when missing."""
    return None if v is None or pd.isna(v) else int(v)
