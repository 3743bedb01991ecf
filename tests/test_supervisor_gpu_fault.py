"""The supervisor's watch for a fatal Xid on a GPU of the running attempt (`read_attempt_progress`
with `since`): only the codes that end the GPU's work, only on the attempt's own GPUs, only
after it started."""

from __future__ import annotations

import pytest
from jobdata_builder import T0, JobBuilder

from triage.analyzers.gpu_health import IMMEDIATE_XIDS
from triage.supervisor.observe import read_attempt_progress

XID_79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus."


def store(tmp_path, *events: tuple[str, int, float, int]):
    """Ranks 0-3 on node0 and node1, two GPUs each, attempt 1 started at T0 + 100."""
    b = JobBuilder("j", run_id="r").world(4, per_node=2, attempt=1, start=T0 + 100)
    b.steps(1, range(3), T0 + 105)
    for node, gpu, t, xid in events:
        b.gpu_event(node, gpu, t, xid, XID_79.replace(": 79,", f": {xid},"))
    b.write_store(tmp_path)
    return read_attempt_progress(tmp_path, "j", "r", 1, since=T0 + 100).gpu_fault


@pytest.mark.parametrize("node, gpu, xid", [("node1", 1, 79), ("node0", 0, 48), ("node1", 0, 95)])
def test_a_fatal_xid_on_a_gpu_of_the_attempt_is_reported(tmp_path, node, gpu, xid):
    fault = store(tmp_path, (node, gpu, T0 + 110, xid))
    assert fault is not None and fault.startswith(f"Xid {xid} on GPU {gpu} of {node} at ")


@pytest.mark.parametrize(
    "event",
    [
        ("node1", 1, T0 + 90, 79),  # before the attempt: a condition the node had, not its fault
        ("node1", 1, T0 + 110, 13),  # application-side: the rank's own error ends the attempt
        ("node1", 1, T0 + 110, 94),  # contained ECC: the application may go on
        ("node1", 1, T0 + 110, 74),  # NVLink: may be sympathetic
        ("node2", 0, T0 + 110, 79),  # a GPU this attempt does not use
    ],
)
def test_other_gpu_events_do_not_stop_the_attempt(tmp_path, event):
    assert store(tmp_path, event) is None


def test_the_immediate_codes_are_the_lost_gpu_and_uncorrectable_memory_ones():
    assert {79, 119, 120, 48, 64, 95} == IMMEDIATE_XIDS


@pytest.mark.parametrize(("gpu", "ours"), [(1, True), (2, True), (0, False)])
def test_a_rank_seeing_its_gpu_as_cuda_0_is_matched_by_the_gpus_uuid(tmp_path, gpu, ours):
    """Pods given one GPU each see it as cuda:0: node1's ranks say GPU 0 and hold the node's
    GPUs 1 and 2 (by UUID). An Xid on GPU 1 or 2 is theirs; one on the node's GPU 0, another
    job's, is not."""
    b = JobBuilder("j", run_id="r").world(4, per_node=2, attempt=1, start=T0 + 100)
    b.steps(1, range(3), T0 + 105)
    for row in b.rows["ranks"]:
        if row["node"] == "node1":
            row["gpu_uuid"] = f"GPU-node1-{row['gpu'] + 1}"
            row["gpu"] = 0
    b.gpu_event("node1", gpu, T0 + 110, 79, XID_79)
    b.write_store(tmp_path)
    fault = read_attempt_progress(tmp_path, "j", "r", 1, since=T0 + 100).gpu_fault
    assert (fault is not None) is ours, fault
