"""The supervisor's conclusions as the node agents read them: incident counts and the newest job
scores from the supervisor's partition, with pyarrow alone, incrementally."""

from __future__ import annotations

import pytest

from triage.store import StoreConfig, StoreWriter, compact
from triage.store.job_results import JobResultsReader
from triage.store.layout import SUPERVISOR_PARTITION


def incident(job: str, category: str, t: float) -> dict:
    return {
        "job_id": job,
        "attempt": 0,
        "time": t,
        "category": category,
        "layer": "hardware",
        "action": "restart",
        "confidence": 0.9,
        "summary": category,
    }


def score(
    job: str,
    name: str,
    t: float,
    value: float,
    rank: int | None = None,
    node: str | None = None,
    attempt: int = 0,
) -> dict:
    return {
        "job_id": job,
        "attempt": attempt,
        "time": t,
        "name": name,
        "rank": rank,
        "node": node,
        "value": value,
    }


@pytest.fixture
def supervisor(tmp_path):
    # No grace: compaction deletes the files it replaces at the next commit, as much later.
    with StoreWriter(tmp_path, SUPERVISOR_PARTITION, StoreConfig(retire_grace_s=0)) as w:
        yield w


def test_no_supervisor_partition_reads_nothing(tmp_path):
    reader = JobResultsReader(tmp_path)
    reader.refresh()
    assert reader.incident_counts(["j"]) == {}
    assert reader.new_scores(["j"]) == []


def test_incidents_are_counted_per_job_and_category_and_recounted_after_a_change(tmp_path, supervisor):
    supervisor.append_rows(
        "incidents", [incident("j", "gpu_fallen_off_bus", 10.0), incident("other", "oom", 11.0)]
    )
    supervisor.append_rows(
        "incidents", [incident("j", "gpu_fallen_off_bus", 20.0), incident("j", "hang", 21.0)]
    )
    reader = JobResultsReader(tmp_path)
    reader.refresh()
    assert reader.incident_counts(["j"]) == {"j": {"gpu_fallen_off_bus": 2, "hang": 1}}
    supervisor.append_rows("incidents", [incident("j", "hang", 30.0)])
    reader.refresh()
    assert reader.incident_counts(["j", "other"]) == {
        "j": {"gpu_fallen_off_bus": 2, "hang": 2},
        "other": {"oom": 1},
    }
    # Compaction rewrites the same rows into a new file: counted once, not twice.
    assert compact(supervisor)
    reader.refresh()
    assert reader.incident_counts(["j"]) == {"j": {"gpu_fallen_off_bus": 2, "hang": 2}}


def test_scores_are_returned_once_oldest_first_and_only_for_the_jobs_asked(tmp_path, supervisor):
    supervisor.append_rows(
        "job_scores",
        [
            score("j", "goodput_ratio", 100.0, 0.8),
            score("j", "straggler_score", 100.0, 1.4, 3, "n1"),
            score("other", "goodput_ratio", 100.0, 0.1),
        ],
    )
    reader = JobResultsReader(tmp_path)
    reader.refresh()
    first = reader.new_scores(["j"])
    assert sorted((s.name, s.rank or -1, s.node or "", s.value) for s in first) == [
        ("goodput_ratio", -1, "", 0.8),
        ("straggler_score", 3, "n1", 1.4),
    ]
    reader.refresh()
    assert reader.new_scores(["j"]) == []  # nothing new
    supervisor.append_rows("job_scores", [score("j", "goodput_ratio", 160.0, 0.85)])
    supervisor.append_rows("job_scores", [score("j", "goodput_ratio", 220.0, 0.9)])
    assert compact(supervisor)  # the old rows move to a new file: not returned again
    reader.refresh()
    assert [(s.time, s.value) for s in reader.new_scores(["j"])] == [(160.0, 0.85), (220.0, 0.9)]
    reader.refresh()
    assert reader.new_scores(["j"]) == []
