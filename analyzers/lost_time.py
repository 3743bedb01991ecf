"""Lost time by cause: every second of a job's badput charged to the incident that caused it.

Goodput says how much time a job lost and to what kind of overhead; a cluster operator also
needs to know *why*: which failure, which layer, which node and GPU. An attempt that ended on a
root cause costs the job (a) the progress it made since its last checkpoint, which the next
attempt computes again (`lost_progress`), (b) the time from its last step to the next attempt's
start (`detection_and_restart`), and (c) the next attempt's start-up and checkpoint load
(`initialization`, `checkpoint_load`): all of it is that incident's. A straggler or throttled
GPU found in an attempt is charged that attempt's `straggler_slowdown`. The rest (the first
start-up, checkpoint saves, data wait, unexplained time) has no incident behind it: it is the
overhead of running at all, `cause` None.

Every row names the node whose GPUs sat idle and how many, so lost GPU-seconds add up per node,
and the culprit, so they add up per cause.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

from triage.analyzers.goodput import AttemptGoodput, Goodput
from triage.analyzers.root_cause import Incident
from triage.taxonomy import Category

#: The badput of a failed attempt that its root cause is charged with, and the next attempt's.
CHARGED_TO_OWN_ROOT = ("lost_progress", "detection_and_restart")
CHARGED_TO_PREVIOUS_ROOT = ("initialization", "checkpoint_load")
#: Non-fatal findings that explain an attempt's slow steps.
_SLOWDOWN_CAUSES = (Category.STRAGGLER, Category.GPU_THROTTLING)

#: `category` of time no incident caused: start-up, saves, data wait, the unexplained rest.
OVERHEAD = "overhead"


@dataclass(frozen=True)
class LostTime:
    """Wall seconds of one badput bucket of one attempt on one node, and their cause."""

    attempt: int  # the attempt whose allocation the time was spent in
    bucket: str
    node: str  # whose GPUs sat idle
    seconds: float
    gpu_seconds: float
    cause_attempt: int | None  # the attempt of the incident charged; None: overhead
    category: str  # the incident's category, or OVERHEAD
    layer: str | None
    culprit_rank: int | None
    culprit_node: str | None
    culprit_gpu: int | None

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["seconds"] = round(self.seconds, 3)
        d["gpu_seconds"] = round(self.gpu_seconds, 3)
        return d


def _cause(
    attempt: AttemptGoodput, bucket: str, previous: int | None, incidents: list[Incident]
) -> Incident | None:
    def root(a: int | None) -> Incident | None:
        return next((i for i in incidents if i.root and i.attempt == a), None)

    if bucket in CHARGED_TO_OWN_ROOT:
        return root(attempt.attempt)
    if bucket in CHARGED_TO_PREVIOUS_ROOT:
        return root(previous)
    if bucket == "straggler_slowdown":
        return next(
            (i for i in incidents if i.attempt == attempt.attempt and i.verdict.category in _SLOWDOWN_CAUSES),
            None,
        )
    return None


def lost_time(goodput: Goodput, incidents: list[Incident]) -> list[LostTime]:
    """One row per (attempt, bucket, node) with time in it."""
    rows = []
    previous: int | None = None
    for a in goodput.attempts:
        for bucket, seconds in a.badput.items():
            if seconds <= 0:
                continue
            cause = _cause(a, bucket, previous, incidents)
            v = None if cause is None else cause.verdict
            for node, ranks in a.ranks_per_node.items():
                rows.append(
                    LostTime(
                        a.attempt,
                        bucket,
                        node,
                        seconds,
                        seconds * ranks,
                        None if cause is None else cause.attempt,
                        OVERHEAD if v is None else v.category.value,
                        None if v is None else v.layer.value,
                        None if v is None else v.culprit.rank,
                        None if v is None else v.culprit.node,
                        None if v is None else v.culprit.gpu,
                    )
                )
        previous = a.attempt
    return rows


@dataclass(frozen=True)
class IncidentCost:
    """What one incident cost the job: wall seconds, GPU-seconds, and by bucket."""

    seconds: float
    gpu_seconds: float
    buckets: dict[str, float]

    def to_dict(self) -> dict[str, object]:
        return {
            "seconds": round(self.seconds, 3),
            "gpu_seconds": round(self.gpu_seconds, 3),
            "buckets": {k: round(v, 3) for k, v in self.buckets.items()},
        }


def incident_costs(rows: Iterable[LostTime]) -> dict[tuple[int, str], IncidentCost]:
    """(incident attempt, category) -> what that incident cost. Wall seconds count once per
    (attempt, bucket), however many nodes held the GPUs; GPU-seconds add up over the nodes."""
    wall: dict[tuple[int, str], dict[tuple[int, str], float]] = {}
    gpu: dict[tuple[int, str], float] = {}
    for r in rows:
        if r.cause_attempt is None:
            continue
        key = (r.cause_attempt, r.category)
        wall.setdefault(key, {})[(r.attempt, r.bucket)] = r.seconds
        gpu[key] = gpu.get(key, 0.0) + r.gpu_seconds
    out = {}
    for key, spent in wall.items():
        buckets: dict[str, float] = {}
        for (_, bucket), seconds in spent.items():
            buckets[bucket] = buckets.get(bucket, 0.0) + seconds
        out[key] = IncidentCost(sum(spent.values()), gpu[key], buckets)
    return out
