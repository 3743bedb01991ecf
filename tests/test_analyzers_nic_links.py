"""A port that lost its link names the culprit of the transport errors every rank then prints."""

import pytest
from jobdata_builder import T0, JobBuilder

from triage.analyzers.config import AnalyzerConfig
from triage.analyzers.job_analysis import analyze_job
from triage.taxonomy import Category

CLOSED = (
    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer "
    "[10.0.0.{peer}]:40123"
)


def cut_link(first_to_print: int, down: tuple[str, int | None] | None, down_at: float = 0.8) -> JobBuilder:
    """4 ranks, 2 per node; every rank's collective fails with "connection closed by peer" 1 s
    after step 20, `first_to_print` first; the port beside `down` = (node, gpu) reads link down
    `down_at` s from the failure (gpu None: a port the agent could not map to a GPU)."""
    b = JobBuilder().world(4, per_node=2)
    end = b.steps(0, range(20), T0 + 5)
    for node in ("node0", "node1"):
        for gpu in (0, 1):
            b.nic_sample(node, end - 10, f"ib{gpu}", True, gpu, link_downs=3)
    if down is not None:
        node, gpu = down
        b.nic_sample(node, end + 1 + down_at, f"ib{gpu or 0}", False, gpu, link_downs=4)
    b.event(0, first_to_print, end + 1, "exception", CLOSED.format(peer=first_to_print))
    for r in set(range(4)) - {first_to_print}:
        b.event(0, r, end + 1.2, "exception", CLOSED.format(peer=r))
    return b


def roots(b: JobBuilder):
    return [i.verdict for i in analyze_job(b.load(), AnalyzerConfig()).incidents if i.root]


@pytest.mark.parametrize(
    "first_to_print, node, gpu, culprit",
    [(3, "node1", 0, 2), (1, "node0", 0, 0), (0, "node1", 1, 3), (2, "node0", 1, 1)],
)
def test_the_rank_beside_the_down_port_is_the_culprit_whoever_printed_first(
    first_to_print, node, gpu, culprit
):
    (v,) = roots(cut_link(first_to_print, (node, gpu)))
    assert v.category is Category.NETWORK_ERROR
    assert (v.culprit.rank, v.culprit.node) == (culprit, node), v.summary
    assert v.evidence[0].source == "nic" and f"port ib{gpu} on {node}" in v.evidence[0].text
    assert "Connection closed by peer" in " ".join(e.text for e in v.evidence)


def test_a_port_read_just_before_the_errors_counts_too():
    (v,) = roots(cut_link(3, ("node0", 1), down_at=-3.0))
    assert (v.culprit.rank, v.culprit.node) == (1, "node0")


def test_a_port_with_no_gpu_beside_it_names_the_node():
    (v,) = roots(cut_link(3, ("node0", None)))
    assert v.category is Category.NETWORK_ERROR
    assert (v.culprit.rank, v.culprit.node) == (None, "node0"), v.summary


def test_a_link_lost_and_back_between_samples_counts_by_its_counter():
    b = JobBuilder().world(4, per_node=2)
    end = b.steps(0, range(20), T0 + 5)
    b.nic_sample("node1", end - 10, "mlx5_1/1", True, 1, link_downs=0)
    b.nic_sample("node1", end + 1.5, "mlx5_1/1", True, 1, link_downs=1)  # up again, one more loss
    for r in range(4):
        b.event(0, r, end + 1 + 0.1 * r, "exception", CLOSED.format(peer=r))
    (v,) = roots(b)
    assert (v.culprit.rank, v.culprit.node) == (3, "node1"), v.summary


@pytest.mark.parametrize("down_at", [400.0, -400.0])
def test_a_port_down_far_from_the_failure_explains_nothing(down_at):
    (v,) = roots(cut_link(3, ("node0", 0), down_at=down_at))
    assert v.evidence[0].source != "nic"
    assert v.culprit.rank == 3  # the first to print, as without port samples


def test_a_link_flap_the_job_rode_out_is_an_advisory_incident():
    b = JobBuilder().world(4, per_node=2)
    end = b.steps(0, range(20), T0 + 5)
    b.nic_sample("node1", end - 10, "ib0", False, 0)
    for r in range(4):
        b.event(0, r, end + 1, "exit", "exit 0", exit_code=0)
    incidents = analyze_job(b.load(), AnalyzerConfig()).incidents
    assert not [i for i in incidents if i.root]
    (flap,) = incidents
    assert flap.verdict.category is Category.NETWORK_ERROR and flap.verdict.culprit.rank == 2
    assert "went on" in flap.verdict.summary


def test_a_port_that_flapped_earlier_still_explains_its_later_fatal_drop():
    b = JobBuilder().world(4, per_node=2)
    end = b.steps(0, range(200), T0 + 5)
    b.nic_sample("node1", T0 + 30, "ib1", False, 1)  # a flap the job rode out
    b.nic_sample("node1", T0 + 31, "ib1", True, 1)
    b.nic_sample("node1", end + 0.5, "ib1", False, 1)  # the drop that ends it, minutes later
    for r in range(4):
        b.event(0, r, end + 1 + 0.1 * r, "exception", CLOSED.format(peer=r))
    (v,) = roots(b)
    assert (v.culprit.rank, v.culprit.node) == (3, "node1") and v.evidence[0].source == "nic", v.summary


def test_a_port_on_a_rail_no_rank_uses_explains_nothing():
    b = cut_link(3, None)
    b.nic_sample("node0", T0 + 5 + 20 + 1.5, "ib3", False, 3)  # GPU 3 of node0: no rank on it
    incidents = analyze_job(b.load(), AnalyzerConfig()).incidents
    (root,) = [i.verdict for i in incidents if i.root]
    assert root.evidence[0].source != "nic" and root.culprit.rank == 3
    (advisory,) = [i.verdict for i in incidents if not i.root and i.verdict.evidence[0].source == "nic"]
    assert advisory.culprit.node == "node0" and "went on" in advisory.summary


def test_the_port_of_a_node_left_out_of_the_attempt_explains_nothing():
    """Attempt 0 ran on both nodes; attempt 1 on node0 only, while node1's port stays down."""
    b = JobBuilder().world(4, per_node=2)
    end = b.steps(0, range(10), T0 + 5)
    b.nic_sample("node1", end + 0.5, "ib0", False, 0)
    for r in range(4):
        b.event(0, r, end + 1 + 0.1 * r, "exception", CLOSED.format(peer=r))
    b.world(2, per_node=2, attempt=1, start=end + 30)
    end1 = b.steps(1, range(10, 20), end + 35)
    b.nic_sample("node1", end1 + 0.5, "ib0", False, 0)
    b.event(1, 1, end1 + 1, "exception", CLOSED.format(peer=0))
    b.event(1, 0, end1 + 1.1, "exception", CLOSED.format(peer=1))
    by_attempt = {i.attempt: i.verdict for i in analyze_job(b.load(), AnalyzerConfig()).incidents if i.root}
    assert (by_attempt[0].culprit.rank, by_attempt[0].culprit.node) == (2, "node1")
    assert by_attempt[1].evidence[0].source != "nic" and by_attempt[1].culprit.node != "node1"


def test_a_port_lost_long_after_the_failure_is_not_its_cause():
    (v,) = roots(cut_link(3, ("node0", 0), down_at=60.0))
    assert v.evidence[0].source != "nic" and v.culprit.rank == 3


@pytest.mark.parametrize("recorded", ["completed", None])
def test_a_port_lost_after_a_completed_run_is_the_next_jobs(tmp_path, recorded):
    """A trial's next job cut a NIC 9 s after the last one completed; `analyze` of the finished
    one then listed the link as its own incident. A run its supervisor recorded completed ended
    on no fault: its nodes' records past the clock skew are whatever ran next's. Without that
    record, evidence trailing the ranks' last telemetry is still the run's (a fault's own
    records can come last)."""
    from triage.store import open_snapshot
    from triage.store.job_data import load_job
    from triage.supervisor.observe import record_attempt

    b = JobBuilder("done").world(4, per_node=2)
    end = b.steps(0, range(20), T0 + 5)
    for r in range(4):
        b.event(0, r, end + 0.5, "exit", "exit 0", exit_code=0)
    b.nic_sample("node0", end - 10, "ib0", True, 0, link_downs=3)
    b.nic_sample("node0", end + 9.5, "ib0", False, 0, link_downs=4)
    b.write_store(tmp_path)
    if recorded:
        record_attempt(
            tmp_path, "done", None, 0, status=recorded, exit_code=0, reason="", verdict=None, action=None
        )
    with open_snapshot(tmp_path) as snap:
        incidents = analyze_job(load_job(snap.con, "done"), AnalyzerConfig()).incidents
    network = [i for i in incidents if i.verdict.category is Category.NETWORK_ERROR]
    assert bool(network) is (recorded is None), incidents
