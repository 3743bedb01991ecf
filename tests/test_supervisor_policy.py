"""The restart policy as a pure function of the attempts so far: one test per rule."""

import pytest

from triage.supervisor.policy import AttemptResult, Plan, decide
from triage.taxonomy import Action, Category

NODES = ["node0", "node1"]


def _decide(*history, plan=None, max_restarts=3):
    return decide(list(history), nodes=NODES, plan=plan or Plan(), max_restarts=max_restarts, backoff_s=1.5)


def _failed(attempt, category, node=None, rank=None, last_step=10, failed_step=None, outcome="failed"):
    return AttemptResult(attempt, outcome, category, node, rank, last_step, failed_step)


def test_completed_attempt_ends_the_job():
    d = _decide(AttemptResult(0, "completed", last_step=50))
    assert not d.restart and d.final_status == "completed" and d.action is None


def test_restart_keeps_the_plan_and_waits_the_backoff():
    plan = Plan(("node1",), None, (7,))
    d = _decide(_failed(0, Category.HOST_OOM), plan=plan)
    assert d.restart and d.action is Action.RESTART and d.backoff_s == 1.5
    assert d.plan == Plan(("node1",), None, (7,))


def test_gpu_fault_restarts_without_the_culprit_node():
    d = _decide(_failed(0, Category.GPU_FALLEN_OFF_BUS, node="node1", rank=3))
    assert d.restart and d.action is Action.RESTART_EXCLUDING_NODE
    assert d.plan.excluded_nodes == ("node1",)


def test_exclusion_without_a_culprit_node_restarts_all():
    d = _decide(_failed(0, Category.NETWORK_ERROR))
    assert d.restart and d.action is Action.RESTART and d.plan.excluded_nodes == ()


def test_the_last_node_is_never_excluded():
    d = _decide(_failed(1, Category.GPU_MEMORY_ERROR, node="node0"), plan=Plan(("node1",)))
    assert d.restart and d.action is Action.RESTART and d.plan.excluded_nodes == ("node1",)
    assert "last node" in d.reason


@pytest.mark.parametrize("node, excluded", [("node0", ("node0",)), ("node1", ("node1",))])
def test_corruption_leaves_its_node_out_and_resumes_before_it(node, excluded):
    d = _decide(_failed(0, Category.SILENT_DATA_CORRUPTION, node=node, rank=1, last_step=9, failed_step=3))
    assert d.restart and d.action is Action.RESTART_EXCLUDING_NODE and d.backoff_s == 0.0
    assert d.plan == Plan(excluded, 3, ())
    assert f"leaving {node} out" in d.reason and "before step 3" in d.reason


def test_corruption_on_the_last_node_still_resumes_before_it():
    d = _decide(
        _failed(0, Category.SILENT_DATA_CORRUPTION, node="node1", rank=2, failed_step=5),
        plan=Plan(("node0",)),
    )
    assert d.restart and d.action is Action.RESTART and d.plan == Plan(("node0",), 5, ())


def test_collective_timeout_excludes_a_found_culprit_else_restarts():
    found = _decide(_failed(0, Category.COLLECTIVE_TIMEOUT, node="node1", rank=2))
    assert found.action is Action.RESTART_EXCLUDING_NODE and found.plan.excluded_nodes == ("node1",)
    unknown = _decide(_failed(0, Category.COLLECTIVE_TIMEOUT, outcome="hung"))
    assert unknown.action is Action.RESTART and unknown.plan.excluded_nodes == ()


def test_rollback_resumes_before_the_bad_step_and_skips_it():
    d = _decide(
        _failed(0, Category.NUMERICAL_INSTABILITY, last_step=11, failed_step=12), plan=Plan((), None, (5,))
    )
    assert d.action is Action.ROLLBACK
    assert d.plan.resume_before_step == 12 and d.plan.skip_steps == (5, 12)


def test_rollback_is_one_attempt_only_but_skips_persist():
    d = _decide(_failed(1, Category.HOST_OOM), plan=Plan((), 12, (12,)))
    assert d.plan.resume_before_step is None and d.plan.skip_steps == (12,)


@pytest.mark.parametrize("category", [Category.GPU_OOM, Category.USER_CODE_ERROR, Category.ENVIRONMENT_ERROR])
def test_fail_fast_stops_at_once(category):
    d = _decide(_failed(0, category))
    assert not d.restart and d.final_status == "failed" and d.action is Action.FAIL_FAST


def test_preemption_requeues_even_without_a_verdict():
    d = _decide(AttemptResult(0, "preempted", last_step=20))
    assert d.restart and d.action is Action.CHECKPOINT_AND_REQUEUE
    twice = _decide(
        AttemptResult(0, "preempted", Category.PREEMPTION, last_step=20),
        AttemptResult(1, "preempted", Category.PREEMPTION, last_step=20),
    )
    assert twice.restart  # a scheduler's decision is no restart loop


def test_escalation_when_the_same_category_comes_back():
    first = _decide(_failed(0, Category.CUDA_ERROR, rank=1, last_step=10))
    assert first.restart and first.action is Action.RESTART
    again = _decide(
        _failed(0, Category.CUDA_ERROR, rank=1, last_step=10),
        _failed(1, Category.CUDA_ERROR, rank=2, last_step=30),
    )
    assert not again.restart and again.action is Action.FAIL_FAST


def test_straggler_that_ended_the_attempt_escalates_to_exclusion():
    d = _decide(
        _failed(0, Category.STRAGGLER, node="node0", last_step=5),
        _failed(1, Category.STRAGGLER, node="node1", last_step=9),
    )
    assert d.action is Action.RESTART_EXCLUDING_NODE and d.plan.excluded_nodes == ("node1",)


def test_unknown_failure_restarts_plainly():
    d = _decide(_failed(0, None))
    assert d.restart and d.action is Action.RESTART


def test_same_failure_twice_without_progress_is_a_restart_loop():
    d = _decide(
        _failed(0, Category.HOST_OOM, node="node1", rank=2, last_step=10),
        _failed(1, Category.HOST_OOM, node="node1", rank=2, last_step=10),
    )
    assert not d.restart and d.final_status == "gave_up" and "restart loop" in d.reason


def test_same_failure_is_judged_by_node_where_known():
    same_node = _decide(
        _failed(0, Category.STORAGE_ERROR, node="node0", rank=0),
        _failed(1, Category.STORAGE_ERROR, node="node0", rank=1),
    )
    assert not same_node.restart and "restart loop" in same_node.reason
    other_node = _decide(
        _failed(0, Category.STORAGE_ERROR, node="node0", rank=0),
        _failed(1, Category.STORAGE_ERROR, node="node1", rank=0),
    )
    assert other_node.restart


def test_same_failure_with_progress_restarts_again():
    d = _decide(
        _failed(0, Category.HOST_OOM, rank=2, last_step=10),
        _failed(1, Category.HOST_OOM, rank=2, last_step=25),
    )
    assert d.restart


def test_max_restarts_stops():
    history = [_failed(i, Category.HOST_OOM, rank=i, last_step=10 * (i + 1)) for i in range(3)]
    assert _decide(*history, max_restarts=3).restart
    d = _decide(*history, _failed(3, Category.HOST_OOM, rank=9, last_step=99), max_restarts=3)
    assert not d.restart and d.final_status == "gave_up" and "--max-restarts 3" in d.reason
    assert not _decide(_failed(0, Category.HOST_OOM), max_restarts=0).restart


def test_backoff_only_where_the_cause_may_still_be_there():
    """A transient or unknown cause on the same nodes waits; a cause left behind (the culprit
    node excluded, the bad batch skipped) or one a wait does not change restarts at once."""
    waits = [
        _failed(0, Category.NETWORK_ERROR),
        _failed(0, Category.STORAGE_ERROR, node="node1"),
        _failed(0, None, outcome="hung"),
        _failed(0, Category.COLLECTIVE_TIMEOUT, outcome="hung"),
    ]
    for result in waits:
        assert _decide(result).backoff_s == 1.5, result
    at_once = [
        _failed(0, Category.GPU_FALLEN_OFF_BUS, node="node1", rank=3),
        _failed(0, Category.COLLECTIVE_TIMEOUT, node="node0", rank=1),
        _failed(0, Category.NUMERICAL_INSTABILITY, last_step=11, failed_step=12),
        _failed(0, Category.CUDA_ERROR, node="node1", rank=2),
    ]
    for result in at_once:
        d = _decide(result)
        assert d.restart and d.backoff_s == 0.0, (result, d)


def test_a_decision_to_stop_names_the_action_the_job_could_have_taken():
    """Out of restarts on its last node, a job would have restarted on that node, not left it
    out: the decision says so (the rca campaign found `restart_excluding_node` reported for a
    one-node job)."""
    d = _decide(
        _failed(0, Category.GPU_FALLEN_OFF_BUS, node="node0", rank=1), plan=Plan(("node1",)), max_restarts=0
    )
    assert not d.restart and d.final_status == "gave_up"
    assert d.action is Action.RESTART and d.plan == Plan(("node1",))


@pytest.mark.parametrize(
    ("command", "nodes", "gpus"),
    [
        (["triage", "train", "--nnodes", "3", "--nproc-per-node", "4"], ["node0", "node1", "node2"], 4),
        (["triage", "train", "--nnodes=2", "--nproc-per-node=8"], ["node0", "node1"], 8),
        (["triage", "train"], ["node0"], None),
        # a node of a real cluster, or another launcher: no simulated nodes or GPUs of Triage's
        (["triage", "train", "--nnodes", "2", "--node-rank", "1"], [], None),
        (["torchrun", "--nproc-per-node", "4", "train.py"], [], None),
    ],
)
def test_a_local_triage_trains_simulated_nodes_and_a_gpu_for_every_rank(command, nodes, gpus):
    from triage.supervisor.agents import simulated_gpus_per_node, simulated_nodes

    assert simulated_nodes(command) == nodes
    assert simulated_gpus_per_node(command) == gpus


@pytest.mark.parametrize(
    ("command", "source"),
    [
        # the reference trainer's injected GPU faults are the simulator's
        (["triage", "train", "--inject", "xid@step=3,rank=1"], "sim"),
        (["/venv/bin/triage", "train", "--inject=ecc@step=2,rank=0"], "sim"),
        # any other command's agents decide on their own node (NVML, else none)
        (["torchrun", "--nproc-per-node", "2", "train.py"], "auto"),
        (["python", "main.py", "train", "--output-dir", "/scratch/me/triage"], "auto"),
    ],
)
def test_the_agents_gpu_source_simulates_only_for_the_reference_trainer(command, source):
    from triage.supervisor.agents import agent_gpu_source

    assert agent_gpu_source("auto", command) == source
    assert agent_gpu_source("nvml", command) == "nvml"  # an explicit choice stands
