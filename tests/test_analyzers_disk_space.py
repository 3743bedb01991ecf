"""A checkpoint write that failed on a node whose disk was full: the disk is the root cause."""

import pytest
from jobdata_builder import T0, JobBuilder

from triage.analyzers.config import AnalyzerConfig
from triage.analyzers.job_analysis import analyze_job
from triage.taxonomy import Category

# what torch's zip writer says when a write runs out of space: the errno is lost
SHORT_WRITE = (
    "CheckpointError: checkpoint_error: saving /ckpt/step_00000040.tmp at step 40 failed: "
    "rank {r}: RuntimeError: [enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598"
)
TB = 10**12


def failed_save(culprit: int, full_node: str | None, full_at: float = 1.0, free: int = 0) -> JobBuilder:
    """4 ranks on node0/node1; `culprit`'s checkpoint write fails 1 s after step 40, then the
    others report the same save failed; `full_node`'s disk reads `free` bytes at `full_at`
    seconds from the failure."""
    b = JobBuilder().world(4, per_node=2)
    end = b.steps(0, range(40), T0 + 5)
    for node in ("node0", "node1"):
        b.disk_sample(node, end - 30, "/ckpt", 400 * 10**9, TB)
        if node == full_node:
            b.disk_sample(node, end + 1 + full_at, "/ckpt", free, TB)
    b.event(0, culprit, end + 1, "exception", SHORT_WRITE.format(r=culprit))
    for r in set(range(4)) - {culprit}:
        b.event(0, r, end + 1.5, "exception", SHORT_WRITE.format(r=culprit))
    return b


def root(b: JobBuilder):
    (incident,) = [i for i in analyze_job(b.load(), AnalyzerConfig()).incidents if i.root]
    return incident.verdict


@pytest.mark.parametrize("culprit, node", [(3, "node1"), (0, "node0"), (2, "node1")])
def test_a_short_checkpoint_write_on_a_full_disk_is_a_storage_error(culprit, node):
    v = root(failed_save(culprit, node, free=5 * 10**6))
    assert v.category is Category.STORAGE_ERROR, v.summary
    assert (v.culprit.rank, v.culprit.node) == (culprit, node)
    assert v.evidence[0].source == "disk" and f"/ckpt on {node}: 5.0 MB free of 1.0 TB" in v.evidence[0].text
    assert "unexpected pos" in v.summary  # what the rank said stays in the verdict


def test_a_disk_read_just_before_the_failure_counts_too():
    v = root(failed_save(1, "node0", full_at=-20.0))
    assert v.category is Category.STORAGE_ERROR and v.culprit.rank == 1


@pytest.mark.parametrize(
    "full_node, full_at, free",
    [
        ("node1", 1.0, 0),  # the other node's disk: not where the write failed
        ("node0", -900.0, 0),  # long before: cleared since
        ("node0", 1.0, 200 * 10**9),  # space left: not full
    ],
)
def test_without_a_full_disk_there_at_the_time_it_stays_a_checkpoint_error(full_node, full_at, free):
    v = root(failed_save(1, full_node, full_at=full_at, free=free))
    assert v.category is Category.CHECKPOINT_ERROR and v.culprit.rank == 1


def test_a_full_disk_alone_ends_nothing():
    b = JobBuilder().world(4, per_node=2)
    end = b.steps(0, range(40), T0 + 5)
    b.disk_sample("node1", end - 5, "/ckpt", 0, TB)
    for r in range(4):
        b.event(0, r, end + 1, "exit", "exit 0", exit_code=0)
    assert not [i for i in analyze_job(b.load(), AnalyzerConfig()).incidents if i.root]
