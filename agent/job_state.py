"""What the agent knows about each job with ranks on its node, built from `ProgressBatch`es.

Per-rank series describe the newest attempt only (a restart replaces them) and only while a rank
is live: it has not exited and its last heartbeat or step is recent. A hung rank keeps its
heartbeats and so stays exported with a progress time that no longer moves, which is what the
hang alert watches; a rank that died silently stops being exported once its heartbeats go stale.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from triage.agent.job_progress import RECENT_STEPS, STEP_TIME_BUCKETS, ProgressBatch, RankUpdate, RecentStep
from triage.taxonomy import Category


@dataclass
class RankState:
    node: str
    local_gpu: int | None = None
    pid: int | None = None
    start_time: float | None = None
    step: int = -1
    last_step_end: float | None = None
    last_heartbeat: float | None = None
    exited: bool = False
    recent: deque[tuple[int, float]] = field(default_factory=lambda: deque(maxlen=RECENT_STEPS))

    @property
    def last_progress(self) -> float | None:
        """End of the last step, or the process start before the first one (metric catalog)."""
        return self.last_step_end if self.last_step_end is not None else self.start_time

    def last_sign_of_life(self) -> float:
        return max(
            (t for t in (self.last_heartbeat, self.last_step_end, self.start_time) if t is not None),
            default=float("-inf"),
        )

    def live(self, now: float, window_s: float) -> bool:
        return not self.exited and now - self.last_sign_of_life() <= window_s

    def apply(self, u: RankUpdate) -> None:
        self.node = u.node or self.node
        self.local_gpu = u.local_gpu if u.local_gpu is not None else self.local_gpu
        self.pid = u.pid if u.pid is not None else self.pid
        if u.start_time is not None:
            self.start_time = min(u.start_time, self.start_time or u.start_time)
        if u.max_step is not None and u.max_step >= self.step:
            self.step = u.max_step
        if u.last_step_end is not None:
            self.last_step_end = max(u.last_step_end, self.last_step_end or u.last_step_end)
        if u.last_heartbeat is not None:
            self.last_heartbeat = max(u.last_heartbeat, self.last_heartbeat or u.last_heartbeat)
        self.exited = self.exited or u.exited


@dataclass
class JobState:
    """A job id as its newest run shows it: a reused job id's new run replaces the old one."""

    run_id: str | None = None  # newest run seen ("" for rows without a run id)
    attempt: int = -1  # newest attempt seen; restarts = attempt (attempts are numbered from 0)
    ranks: dict[int, RankState] = field(default_factory=dict)  # of `attempt`
    world_size: int | None = None
    start_time: float | None = None
    bucket_counts: list[int] = field(default_factory=lambda: [0] * (len(STEP_TIME_BUCKETS) + 1))
    step_time_sum: float = 0.0
    last_checkpoint: float | None = None
    goodput_ratio: float | None = None
    straggler_scores: dict[int, float] = field(default_factory=dict)
    #: incident rows in the store per taxonomy category; every category starts at 0
    incidents: dict[str, int] = field(default_factory=lambda: {c.value: 0 for c in Category})

    @property
    def restarts(self) -> int:
        return max(self.attempt, 0)

    def apply_rank(self, u: RankUpdate) -> None:
        if u.run_id != self.run_id:
            seen = _first_time(u)
            if self.run_id is not None and (seen is None or seen < (self.start_time or 0.0)):
                return  # a late row of an older run of this job id
            self.run_id, self.attempt, self.ranks = u.run_id, u.attempt, {}
            self.start_time, self.straggler_scores = None, {}
        if u.attempt < self.attempt:
            return  # a late row of an attempt already replaced
        if u.attempt > self.attempt:
            self.attempt, self.ranks = u.attempt, {}
            self.straggler_scores = {}
        rank = self.ranks.get(u.rank)
        if rank is None:
            rank = self.ranks[u.rank] = RankState(node=u.node or "")
        rank.apply(u)
        if u.world_size is not None:
            self.world_size = u.world_size
        if u.start_time is not None:
            self.start_time = min(u.start_time, self.start_time or u.start_time)

    def apply_recent(self, s: RecentStep) -> None:
        rank = self.ranks.get(s.rank)
        if s.run_id == self.run_id and s.attempt == self.attempt and rank is not None:
            rank.recent.append((s.tokens, s.duration_s))

    def live_ranks(self, now: float, window_s: float) -> dict[int, RankState]:
        return {r: st for r, st in self.ranks.items() if st.live(now, window_s)}

    def tokens_per_s(self, now: float, window_s: float) -> float | None:
        """The job's throughput estimated from its live local ranks: their mean rate over their
        recent steps, times the world size (every rank of a data-parallel job does as much)."""
        rates = []
        for st in self.live_ranks(now, window_s).values():
            tokens = sum(t for t, _ in st.recent)
            seconds = sum(d for _, d in st.recent)
            if seconds > 0:
                rates.append(tokens / seconds)
        if not rates:
            return None
        return sum(rates) / len(rates) * (self.world_size or len(rates))

    def last_activity(self) -> float:
        return max((r.last_sign_of_life() for r in self.ranks.values()), default=float("-inf"))


def _first_time(u: RankUpdate) -> float | None:
    times = [t for t in (u.start_time, u.last_heartbeat, u.last_step_end) if t is not None]
    return min(times) if times else None


def apply_batch(jobs: dict[str, JobState], batch: ProgressBatch) -> None:
    """Fold a batch of newly ingested rows into the jobs' states (new jobs are created)."""
    for u in batch.ranks:
        jobs.setdefault(u.job_id, JobState()).apply_rank(u)
    for job_id, counts in batch.step_buckets.items():
        j = jobs.setdefault(job_id, JobState())
        j.bucket_counts = [a + b for a, b in zip(j.bucket_counts, counts)]
        j.step_time_sum += batch.step_time_sum.get(job_id, 0.0)
    for s in batch.recent_steps:
        if s.job_id in jobs:
            jobs[s.job_id].apply_recent(s)
    for job_id, t in batch.last_checkpoint.items():
        j = jobs.setdefault(job_id, JobState())
        j.last_checkpoint = max(t, j.last_checkpoint or t)
