"""When a verdict takes hardware out of service: the quarantine rules, and where they act.

Three rules: two on the culprit node of an attempt's root cause, one over the fleet's history:
- **Hardware fault**: a GPU that fell off the bus, HBM ECC, NVLink, a node that vanished, or
  silent data corruption (the taxonomy's gpu/host faults whose action is
  `restart_excluding_node`) quarantines at once: the GPU where the verdict names one (the
  whole node for `node_failure`, which has no single GPU to blame), else the node. The node is
  left out of every later job until `triage nodes clear` returns it.
- **Repeat offender**: a node implicated as the culprit of `repeat_count` incidents (attempts)
  within `repeat_window_days`, of any jobs, is quarantined as a whole even when each incident
  alone would only restart (two collective timeouts blamed on it, a timeout then a network
  error). Causes that say nothing about the node's hardware (`taxonomy.NOT_IMPLICATING_NODE`: a bug, an
  OOM, NaN, data, a bad checkpoint, shared storage, preemption, no confident verdict) do not
  count; nor do incidents before the node was last cleared (a person looked at it since).

- **Lemon node**: when a run ends, a node implicated in far more failures within
  `repeat_window_days` than its share of the fleet's node-hours predicts (`analyzers.lemons`:
  a one-sided binomial test at `lemon_alpha`, Bonferroni over the nodes, at least
  `lemon_min_failures`) is quarantined as a whole, the test's figures as its evidence.

`decide` is a pure function of the verdict and what the store holds; `quarantine_for_verdict`
reads the store, applies it and writes the entry: the one call the supervisor makes after a
failed attempt's verdict.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from triage import display
from triage.analyzers.fleet import FleetConfig, fleet_node_risks
from triage.analyzers.lemons import LemonTest
from triage.config import ConfigError
from triage.store import open_snapshot
from triage.store.node_health import (
    CLEARED,
    QUARANTINED,
    SOURCE_LEMON,
    SOURCE_REPEAT_OFFENDER,
    SOURCE_VERDICT,
    HealthEntry,
    Implication,
    current_state,
    read_implications,
    read_ledger,
    record_health,
    standing,
)
from triage.taxonomy import Action, Category, Layer, implicates_node
from triage.verdict import Verdict

#: `by` of the entries the supervisor writes.
BY = "triage run"
_DAY_S = 86400.0
_XID_RE = re.compile(r"Xid \([^)]*\): (\d+)|\bXid (\d+)\b")
_EVIDENCE_KEPT = 5

#: Faults in the hardware layers whose own action takes the node out of the job.
HARDWARE = frozenset(
    c for c in Category if c.layer in (Layer.GPU, Layer.HOST) and c.action is Action.RESTART_EXCLUDING_NODE
)
#: Whole-node faults: no single GPU to blame.
NODE_LEVEL = frozenset({Category.NODE_FAILURE})


@dataclass(frozen=True)
class QuarantineConfig:
    """The repeat-offender rule's knobs (the hardware rule has none)."""

    repeat_window_days: float = field(
        default=14.0,
        metadata={
            "help": "a node implicated in --repeat-count incidents within this many days is quarantined",
            "metavar": "DAYS",
        },
    )
    repeat_count: int = field(
        default=2,
        metadata={"help": "incidents (attempts) within --repeat-window-days that quarantine a node"},
    )
    lemon_alpha: float = field(
        default=0.01,
        metadata={
            "help": "significance of the lemon-node test (Bonferroni-corrected over the fleet's nodes)"
        },
    )
    lemon_min_failures: int = field(
        default=3,
        metadata={"help": "fewest failures within --repeat-window-days that can make a node a lemon"},
    )

    def __post_init__(self) -> None:
        LemonTest(self.lemon_alpha, self.lemon_min_failures)  # raises ConfigError on bad knobs
        if self.repeat_window_days <= 0:
            raise ConfigError(f"--repeat-window-days must be > 0, got {self.repeat_window_days}")
        if self.repeat_count < 2:
            raise ConfigError(
                f"--repeat-count must be >= 2 (one incident is the hardware "
                f"rule's or a restart's business), got {self.repeat_count}"
            )

    @property
    def window_s(self) -> float:
        return self.repeat_window_days * _DAY_S

    @property
    def lemon_test(self) -> LemonTest:
        return LemonTest(self.lemon_alpha, self.lemon_min_failures)


def decide(
    verdict: Verdict,
    *,
    now: float,
    job_id: str,
    run_id: str,
    attempt: int,
    ledger: Sequence[HealthEntry],
    implications: Sequence[Implication],
    config: QuarantineConfig = QuarantineConfig(),
) -> HealthEntry | None:
    """The quarantine this verdict calls for, or None (none due, or it already stands).

    `ledger`: the node health rows so far; `implications`: recent incidents with a culprit
    node (this verdict's own may be among them or not: an attempt counts once)."""
    node = verdict.culprit.node
    if node is None:
        return None
    state = current_state(ledger)
    common: dict[str, Any] = dict(
        time=now,
        node=node,
        state=QUARANTINED,
        by=BY,
        category=verdict.category.value,
        xid=_xid(verdict),
        evidence=_evidence(verdict),
        job_id=job_id,
        run_id=run_id,
        attempt=attempt,
    )
    if verdict.category in HARDWARE:
        gpu = None if verdict.category in NODE_LEVEL else verdict.culprit.gpu
        if standing(state, node, gpu) is not None:
            return None
        return HealthEntry(
            gpu=gpu,
            source=SOURCE_VERDICT,
            reason=f"{verdict.category.value}: {verdict.summary}"[:500],
            **common,
        )
    if not implicates_node(verdict.category) or standing(state, node) is not None:
        return None
    own = Implication(now, node, verdict.culprit.gpu, verdict.category.value, job_id, run_id, attempt)
    recent = offences(node, now=now, ledger=ledger, implications=[*implications, own], config=config)
    if len(recent) < config.repeat_count:
        return None
    listed = "; ".join(
        f"{i.category} in job {i.job_id} attempt {i.attempt} at {display.when(i.time)}"
        for i in recent[-_EVIDENCE_KEPT:]
    )
    return HealthEntry(
        gpu=None,
        source=SOURCE_REPEAT_OFFENDER,
        reason=f"repeat offender: implicated in {len(recent)} incidents within "
        f"{config.repeat_window_days:g} days: {listed}"[:1000],
        **common,
    )


def offences(
    node: str,
    *,
    now: float,
    ledger: Sequence[HealthEntry],
    implications: Sequence[Implication],
    config: QuarantineConfig = QuarantineConfig(),
) -> list[Implication]:
    """The incidents that count against `node` at `now`, oldest first: within the window,
    after its last node-level clear, of causes that implicate hardware, one per attempt. An
    incident on a GPU a person cleared since (`triage nodes clear NODE --gpu G`: repaired) no
    longer counts either."""
    state = current_state(ledger)
    cleared = state.get((node, None))
    since = max(
        now - config.window_s, cleared.time if cleared and cleared.state == CLEARED else float("-inf")
    )

    def gpu_cleared_since(i: Implication) -> bool:
        entry = None if i.gpu is None else state.get((node, int(i.gpu)))
        return entry is not None and entry.state == CLEARED and entry.time >= i.time

    return _per_attempt(
        [
            i
            for i in implications
            if i.node == node
            and since <= i.time <= now
            and implicates_node(Category.parse(i.category))
            and not gpu_cleared_since(i)
        ]
    )


def quarantine_for_verdict(
    data_dir: str | os.PathLike[str],
    verdict: Verdict,
    *,
    job_id: str,
    run_id: str,
    attempt: int,
    now: float,
    config: QuarantineConfig = QuarantineConfig(),
) -> HealthEntry | None:
    """Apply `decide` to the store's ledger and recent incidents; write and return the entry
    (None: nothing due). Call it after a failed attempt's root-cause verdict."""
    entry = decide(
        verdict,
        now=now,
        job_id=job_id,
        run_id=run_id,
        attempt=attempt,
        ledger=read_ledger(data_dir),
        implications=read_implications(data_dir, now - config.window_s),
        config=config,
    )
    if entry is not None:
        record_health(data_dir, [entry])
    return entry


def _per_attempt(implications: list[Implication]) -> list[Implication]:
    """One per (job, run, attempt), the earliest, oldest first: an attempt that recorded its
    incident twice (or whose verdict is also passed in) implicates its node once."""
    seen: dict[tuple[str | None, str | None, int | None], Implication] = {}
    for i in sorted(implications, key=lambda i: i.time):
        seen.setdefault((i.job_id, i.run_id or None, i.attempt), i)
    return list(seen.values())


def _xid(verdict: Verdict) -> int | None:
    """The Xid the verdict's summary or evidence quotes (kernel log or NVML text)."""
    for text in [verdict.summary, *(e.text for e in verdict.evidence)]:
        m = _XID_RE.search(text)
        if m:
            return int(m.group(1) or m.group(2))
    return None


def _evidence(verdict: Verdict) -> list[dict[str, object]]:
    evidence: list[dict[str, object]] = verdict.to_dict()["evidence"][:_EVIDENCE_KEPT]
    return evidence


def quarantine_lemons(
    data_dir: str | os.PathLike[str],
    *,
    job_id: str,
    run_id: str,
    now: float,
    config: QuarantineConfig = QuarantineConfig(),
) -> list[HealthEntry]:
    """Quarantine the nodes the lemon test flags over the last `repeat_window_days` that no
    quarantine holds yet; the entries written."""
    with open_snapshot(data_dir) as snap:
        risks = fleet_node_risks(snap.con, FleetConfig(since=now - config.window_s, lemon=config.lemon_test))
    lemons = [r for r in risks if r.lemon]
    if not lemons:
        return []
    state = current_state(read_ledger(data_dir))
    entries = [
        HealthEntry(
            time=now,
            node=r.node,
            gpu=None,
            state=QUARANTINED,
            reason=f"lemon node: {r.evidence} within {config.repeat_window_days:g} days",
            source=SOURCE_LEMON,
            by=BY,
            evidence=[r.to_dict()],
            job_id=job_id,
            run_id=run_id,
        )
        for r in lemons
        if standing(state, r.node) is None
    ]
    record_health(data_dir, entries)
    return entries
