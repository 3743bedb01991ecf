"""Cross-rank root cause on hand-built jobs: cascades, hardware vs software, preemption, nodes."""

import pytest
from jobdata_builder import T0, JobBuilder

from triage.analyzers.config import AnalyzerConfig
from triage.analyzers.job_analysis import analyze_job
from triage.store.job_data import load_job
from triage.store.schema import EVENT_LOG_LINE, EVENT_SUPERVISOR_STOP
from triage.taxonomy import Category

WATCHDOG = (
    "RuntimeError: [Rank {r}] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=57, OpType=ALLGATHER, Timeout(ms)=60000) ran for 60001 milliseconds"
)


def cascade_job() -> JobBuilder:
    """Rank 3's GPU falls off the bus; ranks 0-2 wait in all_gather #57, then time out."""
    b = JobBuilder().world(4, per_node=2)
    end = b.steps(0, range(50), T0 + 10)
    for seq in range(1, 57):
        for r in range(4):
            b.collective(0, r, "default", seq, T0 + 10 + seq * 0.8, T0 + 10 + seq * 0.8 + 0.05)
    b.gpu_event("node1", 1, end + 1, 79, "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.")
    for r in range(3):
        b.collective(0, r, "default", 57, end + 0.5, None)
        for k in range(66):
            b.heartbeat(0, r, end + k, 49, ("all_gather", "default", 57, end + 0.5))
        b.event(0, r, end + 61, "exception", WATCHDOG.format(r=r))
    return b


def roots(analysis):
    return [i for i in analysis.incidents if i.root]


def test_cascade_names_the_gpu_and_lists_timeouts_as_consequences():
    a = analyze_job(cascade_job().load(), AnalyzerConfig())
    (root,) = roots(a)
    v = root.verdict
    assert v.category is Category.GPU_FALLEN_OFF_BUS
    assert (v.culprit.rank, v.culprit.node, v.culprit.gpu) == (3, "node1", 1)
    assert v.culprit.uuid == "GPU-node1-1"
    assert sum("collective_timeout" in c for c in v.consequences) == 4  # the hang + 3 watchdogs
    assert "ranks 0-2 then hit collective_timeout" in v.summary
    assert a.status == "failed"
    assert not [i for i in a.incidents if i.verdict.category is Category.COLLECTIVE_TIMEOUT]


@pytest.mark.parametrize("lost", [0, 1])
def test_a_gpu_known_to_its_rank_by_another_number_is_matched_by_its_uuid(lost):
    # pods that each see their one GPU as cuda:0, on nodes whose agent numbers them 0 and 1
    b = cascade_job()
    b.rows["gpu_events"].clear()
    for row in b.rows["ranks"]:
        row["gpu_uuid"] = f"GPU-{row['node']}-{row['gpu']}"
        row["gpu"] = 0
    for row in b.rows["events"] + b.rows["steps"]:
        row["gpu"] = 0
    for t in range(int(T0), int(T0) + 110, 5):
        for node in ("node0", "node1"):
            for gpu in (0, 1):
                b.gpu_sample(node, gpu, float(t))
    b.gpu_event("node1", lost, T0 + 60, 79, "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.")
    (root,) = roots(analyze_job(b.load(), AnalyzerConfig()))
    v = root.verdict
    assert v.category is Category.GPU_FALLEN_OFF_BUS
    assert (v.culprit.rank, v.culprit.node, v.culprit.gpu) == (2 + lost, "node1", lost)


def test_without_hardware_evidence_the_hang_culprit_is_the_rank_that_never_arrived():
    b = cascade_job()
    b.rows["gpu_events"].clear()
    (root,) = roots(analyze_job(b.load(), AnalyzerConfig()))
    assert root.verdict.category is Category.COLLECTIVE_TIMEOUT
    assert root.verdict.culprit.rank == 3
    assert "never entered" in root.verdict.summary


def test_ecc_error_on_one_rank_outranks_generic_errors_on_the_others():
    b = JobBuilder().world(4)
    end = b.steps(0, range(20), T0 + 5)
    b.event(0, 2, end + 1, "exception", "RuntimeError: CUDA error: uncorrectable ECC error encountered")
    for r in (0, 1, 3):
        b.event(0, r, end + 3, "exception", "RuntimeError: something failed in the step")
    a = analyze_job(b.load(), AnalyzerConfig())
    (root,) = roots(a)
    assert root.verdict.category is Category.GPU_MEMORY_ERROR
    assert root.verdict.culprit.rank == 2 and root.verdict.culprit.gpu == 2


def test_agent_xid_outranks_the_cuda_error_the_rank_printed_first():
    b = JobBuilder().world(4)
    end = b.steps(0, range(20), T0 + 5)
    b.event(0, 1, end + 1, "exception", "RuntimeError: CUDA error: an illegal memory access was encountered")
    b.gpu_event("node0", 1, end + 30, 48, "NVRM: Xid (PCI:0000:3c:00): 48, DBE")
    (root,) = roots(analyze_job(b.load(), AnalyzerConfig()))
    assert root.verdict.category is Category.GPU_MEMORY_ERROR
    assert root.verdict.culprit.rank == 1
    assert any("cuda_error" in c for c in root.verdict.consequences)


def test_user_error_is_not_outranked_by_the_peer_resets_it_causes():
    b = JobBuilder().world(4)
    end = b.steps(0, range(20), T0 + 5)
    b.event(0, 3, end + 1, "exception", "KeyError: 'labels'")
    for r in (0, 1, 2):
        b.event(0, r, end + 2, "exception", "RuntimeError: Connection reset by peer")
    (root,) = roots(analyze_job(b.load(), AnalyzerConfig()))
    assert root.verdict.category is Category.USER_CODE_ERROR
    assert root.verdict.culprit.rank == 3


def test_a_rank_left_waiting_by_peers_that_lost_their_connections_is_not_the_cause():
    """The peers' connections close (each rank sees `Connection closed by peer`); the one rank
    that had already entered the next collective waits there until its own error: a wait that
    the majority never joined is a consequence, and the verdict is the network error."""
    b = JobBuilder().world(4, per_node=2)
    end = b.steps(0, range(20), T0 + 5)
    for seq in range(1, 27):
        for r in range(4):
            b.collective(0, r, "default", seq, T0 + 5 + seq * 0.7, T0 + 5 + seq * 0.7 + 0.05)
    b.collective(0, 0, "default", 27, end + 0.2, None)
    for k in range(6):
        b.heartbeat(0, 0, end + k, 19, ("all_gather", "default", 27, end + 0.2))
    reset = "RuntimeError: [pair.cc:553] Connection closed by peer [127.0.0.1]:59079"
    for r in (1, 2, 3):
        b.event(0, r, end + 0.3, "exception", reset)
    b.event(0, 0, end + 4.5, "exception", reset)
    a = analyze_job(b.load(), AnalyzerConfig())
    (root,) = roots(a)
    assert root.verdict.category is Category.NETWORK_ERROR, root.verdict.summary
    hang = [c for c in root.verdict.consequences if "left behind by ranks 1-3, which failed" in c]
    assert hang, root.verdict.consequences


def test_a_rank_slow_to_start_that_then_dies_is_no_hang():
    """Ranks 0-2 wait in their first all_gather while rank 3, alive, is still starting (a
    loaded node); then rank 3 is SIGKILLed, which it cannot record (the supervisor does, as a
    `rank_exit`), and the attempt is stopped: the wait exceeded the hang threshold only
    because it went on after the death. The death is the failure, the wait its consequence."""
    b = JobBuilder().world(4, per_node=2)
    for r in range(4):
        b.collective(0, r, "default", 1, T0 + 1, T0 + 1.1)
    for r in range(3):
        b.collective(0, r, "default", 2, T0 + 1.2, None)
        for k in range(7):
            b.heartbeat(0, r, T0 + 1.5 + k, None, ("all_gather", "default", 2, T0 + 1.2))
    for k in range(5):
        b.heartbeat(0, 3, T0 + 1.5 + k, None)
    b.event(
        0,
        3,
        T0 + 5.8,
        "rank_exit",
        "rank 3 (pid 4242) ended with no exit or exception of its own recorded (seen gone first)",
        exit_code=None,
        signal=None,
        pid=4242,
        first_observed=True,
        vanished=True,
    )
    a = analyze_job(b.load(), AnalyzerConfig(hang_min_s=5.0))
    (root,) = roots(a)
    assert root.verdict.category is not Category.COLLECTIVE_TIMEOUT, root.verdict.summary
    assert root.verdict.culprit.rank == 3
    assert any("left behind by rank 3, which failed" in c for c in root.verdict.consequences), root.verdict


def test_a_kill_at_start_up_outranks_the_guess_at_a_peer_s_bare_error_it_caused():
    """Rank 0, the store's host, is SIGKILLed in its first step; rank 1 reads EOF from the store
    a moment before the launcher reports the kill. The bare `EOFError` is only a guess at a user
    bug (below the confidence threshold): the kill, a finding sure enough to report, is the
    root, and its rank the culprit."""
    b = JobBuilder().world(4, per_node=2)
    b.event(0, 1, T0 + 2.0, "exception", "EOFError: ", traceback="EOFError: ")
    b.event(
        0,
        0,
        T0 + 2.3,
        "rank_exit",
        "Signal 9 (SIGKILL) received by PID 4242",
        exit_code=-9,
        signal="SIGKILL",
        pid=4242,
        first_observed=True,
    )
    (root,) = roots(analyze_job(b.load(), AnalyzerConfig()))
    assert root.verdict.category is Category.UNKNOWN and root.verdict.culprit.rank == 0, root.verdict.summary
    assert "SIGKILL" in root.verdict.summary


def test_in_a_pair_the_heartbeats_say_who_never_entered_but_blame_no_one():
    """Two ranks: rank 0 waits in all_reduce #10 while rank 1, alive and raising nothing,
    never enters it. Half of the group: the summary says so, the culprit is left to the
    Flight Recorder's stacks (tests/test_unmodified_script.py)."""
    b = JobBuilder().world(2, per_node=2)
    end = b.steps(0, range(9), T0 + 5)
    for seq in range(1, 10):
        for r in range(2):
            b.collective(0, r, "default", seq, T0 + 5 + seq, T0 + 5 + seq + 0.05, group_size=2)
    b.collective(0, 0, "default", 10, end + 0.2, None, group_size=2)
    for k in range(60):
        b.heartbeat(0, 0, end + k, 8, ("all_reduce", "default", 10, end + 0.2))
        b.heartbeat(0, 1, end + k, 8)
    (root,) = roots(analyze_job(b.load(), AnalyzerConfig()))
    assert root.verdict.category is Category.COLLECTIVE_TIMEOUT
    assert root.verdict.culprit.rank is None and "rank 1 never entered it" in root.verdict.summary


@pytest.mark.parametrize("stuck", [0, 1])
def test_in_a_pair_the_rank_that_outlived_its_peers_collective_timeout_is_the_hangs_culprit(stuck):
    """The pair above, with a collective timeout shorter than the hang threshold: the waiting
    rank's all_reduce timed out with an error while its peer lived on past it with none (it was
    stopped with the job after). A rank blocked in a collective the hooks do not see would have
    timed out as well: the one that never entered is the culprit, and the reporter of the
    timeout never is (it was named, with 0.90, before)."""
    waiter = 1 - stuck
    b = JobBuilder().world(2, per_node=2)
    end = b.steps(0, range(9), T0 + 5)
    for seq in range(1, 10):
        for r in range(2):
            b.collective(0, r, "default", seq, T0 + 5 + seq, T0 + 5 + seq + 0.05, group_size=2)
    b.collective(0, waiter, "default", 10, end + 0.2, None, group_size=2)
    for k in range(16):
        b.heartbeat(0, waiter, end + k, 8, ("all_reduce", "default", 10, end + 0.2))
        b.heartbeat(0, stuck, end + k, 8)
    timeout = (
        "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:129] "
        "Timed out waiting 15000ms for send operation to complete"
    )
    b.event(0, waiter, end + 15.2, "exception", timeout, traceback=timeout)
    b.event(
        0,
        stuck,
        end + 15.9,  # the launcher stopping the job after the waiter's exit
        "rank_exit",
        f"rank {stuck} (pid 4242) was killed by SIGTERM",
        exit_code=-15,
        signal="SIGTERM",
        pid=4242,
        first_observed=False,
    )
    b.event(
        0,
        waiter,
        end + 15.9,
        "rank_exit",
        f"rank {waiter} (pid 4243) exited with status 1 (the launcher's first observed failure)",
        exit_code=1,
        signal=None,
        pid=4243,
        first_observed=True,
    )
    (root,) = roots(analyze_job(b.load(), AnalyzerConfig()))
    v = root.verdict
    assert v.category is Category.COLLECTIVE_TIMEOUT and v.culprit.rank == stuck, v.summary
    assert "never entered it" in v.summary and v.confidence < 0.9


@pytest.mark.parametrize("late", [0, 2])
def test_a_rank_that_never_reached_the_start_up_barrier_is_the_hangs_culprit(late):
    """Before any step, ranks wait in the world group's first collective (a start-up barrier)
    and one rank, alive, never entered any collective: no rank completed one, so no rows say
    who is in the group; the world group holds every rank of the attempt."""
    b = JobBuilder().world(3, per_node=4)
    for k in range(60):
        for r in range(3):
            inflight = None if r == late else ("barrier", "0", 1, T0 + 1)
            b.heartbeat(0, r, T0 + 1 + k, None, inflight)
    (root,) = roots(analyze_job(b.load(), AnalyzerConfig()))
    v = root.verdict
    assert v.category is Category.COLLECTIVE_TIMEOUT and v.culprit.rank == late, v.summary
    assert "never entered it" in v.summary
    # before any step it may be preparing on purpose: named, its node not blamed
    assert v.culprit.node is None
    assert any("entered none of its collectives" in e.text for e in v.evidence)


def test_sigterm_on_every_rank_is_preemption():
    b = JobBuilder().world(4)
    end = b.steps(0, range(10), T0 + 5)
    for r in range(4):
        b.event(0, r, end + 1, "sigterm", "SIGTERM received")
    a = analyze_job(b.load(), AnalyzerConfig())
    (root,) = roots(a)
    assert root.verdict.category is Category.PREEMPTION
    assert a.status == "preempted"


def test_sigterms_the_supervisor_sent_to_stop_a_hung_attempt_are_no_preemption():
    """Rank 1 sleeps in step 10 while rank 0 waits in all_reduce #10; the supervisor stops the
    attempt and every rank records the SIGTERM it sent. The hang is the cause; a preemption
    before the stop still is one."""
    b = JobBuilder().world(2)
    end = b.steps(0, range(10), T0 + 5)
    b.collective(0, 0, "default", 10, end + 0.2, None, group_size=2)
    for k in range(40):
        b.heartbeat(0, 0, end + k, 9, ("all_reduce", "default", 10, end + 0.2))
        b.heartbeat(0, 1, end + k, 9)
    stop = b.event(0, 0, end + 40, EVENT_SUPERVISOR_STOP, "the supervisor stopped the attempt (hang)")
    stop.rows["events"][-1].update(rank=None, source="supervisor")
    for r in range(2):
        b.event(0, r, end + 40.3, "sigterm", "SIGTERM received")
    (root,) = roots(analyze_job(b.load(), AnalyzerConfig()))
    assert root.verdict.category is Category.COLLECTIVE_TIMEOUT

    for r in range(2):  # half a second before the stop: a preemption it reacted to at once
        b.event(0, r, end + 39.5, "sigterm", "SIGTERM received")
    (root,) = roots(analyze_job(b.load(), AnalyzerConfig()))
    assert root.verdict.category is Category.PREEMPTION


def _desync_job(ops: list[str]) -> JobBuilder:
    """Every rank entered collective #11 of the default group, rank r the op `ops[r]`."""
    b = JobBuilder().world(len(ops), per_node=2)
    end = b.steps(0, range(10), T0 + 5)
    for seq in range(1, 11):
        for r in range(len(ops)):
            b.collective(0, r, "default", seq, T0 + 5 + seq * 0.4, T0 + 5 + seq * 0.4 + 0.05)
    for r, op in enumerate(ops):
        b.collective(0, r, "default", 11, end + 0.5, None)
        for k in range(60):
            b.heartbeat(0, r, end + k, 9, (op, "default", 11, end + 0.5))
    return b


def test_ranks_waiting_in_different_collectives_at_one_sequence_number_are_a_desync():
    """Rank 3 went on to the next step's reduce-scatter while ranks 0-2 all-gather for one
    more batch: every rank entered #11, none is missing, and no transport stalled: the code
    took different paths, with rank 3 alone on its own."""
    (root,) = roots(
        analyze_job(_desync_job(["all_gather"] * 3 + ["reduce_scatter"]).load(), AnalyzerConfig())
    )
    v = root.verdict
    assert v.category is Category.USER_CODE_ERROR and v.culprit.rank == 3
    assert "ranks 0-2 in all_gather" in v.summary and "desync" in v.summary
    # two against two: no side is the odd one out
    (root,) = roots(analyze_job(_desync_job(["all_gather", "reduce_scatter"] * 2).load(), AnalyzerConfig()))
    assert root.verdict.category is Category.USER_CODE_ERROR and root.verdict.culprit.rank is None
    # the same op everywhere is still a stalled transport, not a desync
    (root,) = roots(analyze_job(_desync_job(["all_gather"] * 4).load(), AnalyzerConfig()))
    assert root.verdict.category is Category.COLLECTIVE_TIMEOUT


def test_what_a_completed_attempt_printed_is_no_root_cause():
    """torchrun's store warns of a connection reset as a healthy job's ranks leave: the
    supervisor saw the attempt complete, so the line is no cause; without that word it is."""
    line = (
        "[W1207 13:46:36.256367060 TCPStore.cpp:115] [c10d] recvVector failed on SocketImpl(fd=4, "
        "addr=[::ffff:127.0.0.1]:59856, remote=[::ffff:127.0.0.1]:51555): Connection reset by peer"
    )

    def job(outcome: str | None) -> JobBuilder:
        b = JobBuilder().world(2)
        end = b.steps(0, range(10), T0 + 5)
        for r in range(2):
            b.event(0, r, end + 0.5, "exit", "process exiting", exit_code=0)
        b.event(0, 0, end + 1, EVENT_LOG_LINE, line)
        b.rows["events"][-1].update(rank=None, source="supervisor")
        if outcome is not None:
            b.rows["attempt_outcomes"].append(
                dict(
                    job_id=b.job_id,
                    run_id=b.run_id,
                    attempt=0,
                    time=end + 2,
                    status=outcome,
                    exit_code=0,
                    reason="",
                )
            )
        return b

    assert roots(analyze_job(job("completed").load(), AnalyzerConfig())) == []
    (root,) = roots(analyze_job(job(None).load(), AnalyzerConfig()))
    assert root.verdict.category is Category.NETWORK_ERROR


def test_node_whose_heartbeats_stop_together_is_a_node_failure():
    b = JobBuilder().world(4, per_node=2)
    end = b.steps(0, range(10), T0 + 5)
    for r in (0, 1):
        for k in range(1, 40):
            b.heartbeat(0, r, end + k, 9)
        b.event(0, r, end + 40, "exit", "process exiting")
    (root,) = roots(analyze_job(b.load(), AnalyzerConfig()))
    assert root.verdict.category is Category.NODE_FAILURE
    assert root.verdict.culprit.node == "node1"


def test_ranks_that_stop_with_no_record_are_unknown_not_healthy():
    b = JobBuilder().world(2)
    b.steps(0, range(10), T0 + 5)
    a = analyze_job(b.load(), AnalyzerConfig())
    (root,) = roots(a)
    assert root.verdict.category is Category.UNKNOWN
    assert a.status == "failed"


def test_clean_exit_is_completed_with_no_incident():
    b = JobBuilder().world(2)
    end = b.steps(0, range(10), T0 + 5)
    for r in range(2):
        b.event(0, r, end + 1, "exit", "process exiting")
    a = analyze_job(b.load(), AnalyzerConfig())
    assert a.status == "completed" and a.incidents == []


def test_missing_agent_tables_yield_empty_frames():
    b = cascade_job()
    b.rows["gpu_events"].clear()
    job = load_job(b.connect(tables=("ranks", "steps", "events", "heartbeats")), "job1")
    assert job.gpu_events.empty and job.gpu_health.empty and job.arrivals.empty
    assert "xid" in job.gpu_events.columns
    assert roots(analyze_job(job, AnalyzerConfig()))[0].verdict.category is Category.COLLECTIVE_TIMEOUT


def test_a_fault_just_before_a_fast_restart_stays_with_the_attempt_it_ended():
    """The supervisor stops an attempt on a fatal Xid at once and the next one starts within
    the evidence lead (10 s): the Xid is still the first attempt's, not the next one's."""
    b = JobBuilder()
    for r in range(4):
        b.rank(r, f"node{r // 2}", r % 2, attempt=0, start=T0)
        b.rank(r, f"node{r // 2}", r % 2, attempt=1, start=T0 + 24)
    b.steps(0, range(10), T0 + 2)
    for r in range(4):
        for k in range(20):
            b.heartbeat(0, r, T0 + 1 + k, 9)
        b.event(0, r, T0 + 21, "sigterm", "SIGTERM received")  # the supervisor's stop
    b.gpu_event("node1", 1, T0 + 18, 79, "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.")
    end = b.steps(1, range(10, 20), T0 + 26)
    for r in range(4):
        b.event(1, r, end + 0.5, "exit", "exit code 0", exit_code=0)
    analysis = analyze_job(b.load(), AnalyzerConfig())
    assert [(i.attempt, i.verdict.category) for i in analysis.incidents if i.root] == [
        (0, Category.GPU_FALLEN_OFF_BUS)
    ]


def test_a_failure_reached_by_two_routes_is_said_once():
    """A trial's incident page listed each consequence twice and its `KeyError` evidence twice:
    a rank's own exception record and its captured output are one failure."""
    from triage.analyzers.findings import Finding
    from triage.analyzers.root_cause import _root_incident
    from triage.verdict import Culprit, Evidence, Verdict

    said = Evidence("KeyError: 'labels'", "exception", T0 + 1, 1)
    root = Finding(
        0,
        Verdict(Category.USER_CODE_ERROR, 0.9, "rank 1 raised", Culprit(rank=1), T0 + 1, [said, said]),
        True,
        ranks=(1,),
    )
    peer = Verdict(Category.NETWORK_ERROR, 0.6, "rank 0 lost its peer", Culprit(rank=0), T0 + 2, [])
    others = [
        Finding(0, peer, True, symptom=True, ranks=(0,)),
        Finding(0, peer, True, symptom=True, ranks=(0,)),
    ]
    v = _root_incident(root, others)
    assert [e.text for e in v.evidence] == ["KeyError: 'labels'"]
    assert v.consequences == ["network_error: rank 0 lost its peer"]
