"""The restart policy: a pure function of the attempts so far, so every rule is unit-testable
without a process in sight ("detect is not act": the analyzers name the failure, this decides).

Rules, in order: a completed attempt ends the job; the taxonomy's default action applies, its
`escalation` when the same category comes back on the next attempt, and a collective timeout
with a known culprit node restarts without that node, and silent data corruption also resumes
from a checkpoint saved before it; `fail_fast` stops; the same failure
(category and culprit) twice in a row without step progress is a restart loop and stops; so
does running out of `max_restarts`. A restart waits the backoff only where the cause may
still be there when it starts again (`needs_backoff`); a known cause left behind restarts at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from triage.display import Status
from triage.taxonomy import TAXONOMY, Action, Category

#: Causes outside the job that can clear up by themselves (a flapping link, a store or
#: filesystem that is briefly unavailable, memory other tenants of the node hold) or an unknown
#: one: a restart on the same nodes at once could meet them again, so it waits the backoff.
TRANSIENT_CAUSES = frozenset(
    {
        Category.NETWORK_ERROR,
        Category.RENDEZVOUS_ERROR,
        Category.STORAGE_ERROR,
        Category.HOST_OOM,
        Category.NODE_FAILURE,
        Category.UNKNOWN,
    }
)

#: How an attempt ended, as the supervisor saw it.
OUTCOMES = (Status.COMPLETED, Status.FAILED, Status.HUNG, Status.PREEMPTED)


@dataclass(frozen=True)
class AttemptResult:
    """What the policy needs to know about one ended attempt.

    `last_step`: the highest global step any rank completed (None: none); `failed_step` the
    step the failure hit (for a rollback: the batch to skip).
    """

    attempt: int
    outcome: str
    category: Category | None = None
    culprit_node: str | None = None
    culprit_rank: int | None = None
    last_step: int | None = None
    failed_step: int | None = None

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome {self.outcome!r}: expected one of {', '.join(OUTCOMES)}")

    def same_failure(self, other: AttemptResult) -> bool:
        """Same category and the same culprit: the same node where both name one (which of a
        node's ranks raised first varies from run to run), else the same rank, else none."""
        if self.category != other.category:
            return False
        if self.culprit_node is not None and other.culprit_node is not None:
            return self.culprit_node == other.culprit_node
        return self.culprit_rank == other.culprit_rank


@dataclass(frozen=True)
class Plan:
    """Where the job stands before an attempt: nodes left out, rollback and skipped steps."""

    excluded_nodes: tuple[str, ...] = ()
    resume_before_step: int | None = None
    skip_steps: tuple[int, ...] = ()


@dataclass(frozen=True)
class Decision:
    """`restart` False ends the job with `final_status` (completed, failed, gave_up)."""

    action: Action | None
    restart: bool
    reason: str
    plan: Plan = field(default_factory=Plan)
    backoff_s: float = 0.0
    final_status: str | None = None


def _action_for(last: AttemptResult, previous: AttemptResult | None) -> tuple[Action, str]:
    category = last.category or Category.UNKNOWN
    spec = TAXONOMY[category]
    if last.outcome == Status.PREEMPTED and last.category is None:
        return Action.CHECKPOINT_AND_REQUEUE, "the job was stopped on purpose (exit 143)"
    if spec.escalation is not None and previous is not None and previous.category is category:
        return spec.escalation, (
            f"{category.value} came back on the next attempt: escalating "
            f"from {spec.action.value} to {spec.escalation.value}"
        )
    if spec.exclude_culprit_if_found and last.culprit_node is not None:
        return Action.RESTART_EXCLUDING_NODE, (f"{category.value} with a culprit on {last.culprit_node}")
    if spec.action is Action.ALERT:
        return Action.RESTART, (
            f"{category.value} calls for a human, but the attempt ended: restarting it as it was"
        )
    return spec.action, f"{category.value}: the taxonomy's action"


def _applied(
    action: Action, why: str, last: AttemptResult, *, nodes: Sequence[str], plan: Plan
) -> tuple[Action, str, Plan]:
    """The action as this job can take it, with the next attempt's plan: a node is left out only
    where another remains, a batch skipped only where the failing step is known. A decision
    not to restart reports this action too (a one-node job never says it would leave its
    node out)."""
    # Every plan field carries over: a node left out stays out, a skipped batch stays skipped.
    # After silent data corruption every checkpoint from its first step on holds wrong
    # numbers: the next attempt resumes from one before it, whichever node it runs on.
    resume = last.failed_step if last.category is Category.SILENT_DATA_CORRUPTION else None
    new = Plan(plan.excluded_nodes, resume, plan.skip_steps)
    if action is Action.RESTART_EXCLUDING_NODE:
        node = last.culprit_node
        remaining = [n for n in nodes if n not in plan.excluded_nodes]
        if node is None or node not in remaining:
            action, why = Action.RESTART, f"{why}; no culprit node to leave out, restarting all"
        elif remaining == [node]:  # a second failure there is a restart loop, and stops
            action, why = Action.RESTART, f"{why}; {node} is the last node left, restarting on it"
        else:
            new = Plan(plan.excluded_nodes + (node,), resume, plan.skip_steps)
            why = f"{why}: leaving {node} out"
    elif action is Action.ROLLBACK:
        if last.failed_step is None:
            action, why = Action.RESTART, f"{why}; the failing step is unknown, restarting"
        else:
            step = last.failed_step
            new = Plan(plan.excluded_nodes, step, tuple(sorted({*plan.skip_steps, step})))
            why = (
                f"{why}: resuming from the newest checkpoint before step {step} and skipping "
                f"that step's batch"
            )
    if resume is not None:
        # `failed_step` is the step after the last one whose canaries all agreed: the fault may
        # have begun there, so every checkpoint from it on is suspect
        why = (
            f"{why}; resuming from the newest checkpoint before step {resume}, the first step the "
            "ranks' canaries no longer vouch for"
        )
    return action, why, new


def decide(
    history: Sequence[AttemptResult], *, nodes: Sequence[str], plan: Plan, max_restarts: int, backoff_s: float
) -> Decision:
    """What to do after `history[-1]` ended; `plan` is what that attempt ran with and `nodes`
    every node of the job (excluded ones included)."""
    last = history[-1]
    previous = history[-2] if len(history) > 1 else None
    if last.outcome == Status.COMPLETED:
        return Decision(None, False, "the job completed", plan, final_status=Status.COMPLETED)
    action, why = _action_for(last, previous)
    if action is Action.FAIL_FAST:
        return Decision(action, False, f"{why}: restarting would repeat it", plan, final_status=Status.FAILED)
    action, why, new = _applied(action, why, last, nodes=nodes, plan=plan)
    if (
        previous is not None
        and last.category is not Category.PREEMPTION
        and last.outcome != Status.PREEMPTED
        and last.same_failure(previous)
        and (last.last_step or 0) <= (previous.last_step or 0)
    ):
        return Decision(
            action,
            False,
            f"restart loop: {(last.category or Category.UNKNOWN).value}"
            f" hit the same culprit on attempts {previous.attempt} and {last.attempt} "
            f"without progress past step {previous.last_step or 0}",
            plan,
            final_status=Status.GAVE_UP,
        )
    restarts_used = len(history) - 1
    if restarts_used >= max_restarts:
        return Decision(
            action,
            False,
            f"{why}; but --max-restarts {max_restarts} is used up",
            plan,
            final_status=Status.GAVE_UP,
        )
    return Decision(action, True, why, new, backoff_s=backoff_s if needs_backoff(action, last) else 0.0)


def needs_backoff(action: Action, last: AttemptResult) -> bool:
    """Whether a restart should wait: not when the culprit node is left out, a bad batch is
    skipped or the job was stopped on purpose (the cause stays behind), nor for a cause inside
    the job that a wait does not change (a CUDA error, a timeout whose culprit is known); yes
    for a transient cause on the same nodes, or none named."""
    if action in (Action.RESTART_EXCLUDING_NODE, Action.ROLLBACK, Action.CHECKPOINT_AND_REQUEUE):
        return False
    if last.category is Category.COLLECTIVE_TIMEOUT:
        return last.culprit_node is None and last.culprit_rank is None
    return last.category is None or last.category in TRANSIENT_CAUSES
