"""The supervisor's conclusions as the node agents read them: incident counts, the newest job
scores, a node's share of the runs' accounting and its health ledger row, from the supervisor's
partition, with pyarrow alone, incrementally."""

from __future__ import annotations

import pytest

from triage.store import StoreConfig, StoreWriter, compact
from triage.store.job_results import JobResultsReader, NodeAccounting
from triage.store.layout import SUPERVISOR_PARTITION
from triage.store.node_health import CLEARED, QUARANTINED, SOURCE_LEMON, SOURCE_MANUAL, SOURCE_VERDICT


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


# -- the node's share of the runs' accounting ---------------------------------------------------


def usage(job: str, run: str, t: float, node: str, gpus: int, span: float, productive: float) -> dict:
    """An `attempt_usage` row: `gpus` ranks on `node` held for `span` s, `productive` of them."""
    return {
        "job_id": job,
        "run_id": run,
        "attempt": 0,
        "time": t,
        "node": node,
        "gpus": gpus,
        "start_time": 1000.0,
        "end_time": 1000.0 + span,
        "productive_s": productive,
    }


def lost(job: str, run: str, t: float, node: str, category: str, gpu_s: float, culprit: str | None) -> dict:
    return {
        "job_id": job,
        "run_id": run,
        "attempt": 0,
        "time": t,
        "bucket": "lost_progress",
        "node": node,
        "seconds": gpu_s,
        "gpu_seconds": gpu_s,
        "category": category,
        "culprit_node": culprit,
    }


def record_run(w: StoreWriter, job: str, run: str, t: float, scale: float = 1.0) -> None:
    """One run's accounting as `record_accounting` writes it: usage, then lost time, both
    stamped `t`. n0: 4 GPUs x 900 s, 720 productive; n1: 2 GPUs x 900 s, 600 productive.
    n0 lost 400 GPU-s to n1's fallen GPU and 200 to overhead; n1 lost 200 to its own GPU."""
    w.append_rows(
        "attempt_usage",
        [usage(job, run, t, "n0", 4, 900.0 * scale, 720.0), usage(job, run, t, "n1", 2, 900.0, 600.0)],
    )
    w.append_rows(
        "lost_time",
        [
            lost(job, run, t, "n0", "gpu_fallen_off_bus", 400.0, "n1"),
            lost(job, run, t, "n0", "overhead", 200.0, None),
            lost(job, run, t, "n1", "gpu_fallen_off_bus", 200.0, "n1"),
        ],
    )


def as_tuple(a: NodeAccounting | None) -> tuple:
    assert a is not None
    return (a.allocated, a.productive, a.lost, a.caused)


NOTHING = (0.0, 0.0, {}, {})


def test_accounting_is_the_nodes_own_share_counted_once_and_later_runs_add(tmp_path, supervisor):
    record_run(supervisor, "j", "r1", 100.0)
    n0, n1 = JobResultsReader(tmp_path), JobResultsReader(tmp_path)
    n0.refresh()
    n1.refresh()
    # n0: its own rows only (4 x 900 held, 4 x 720 productive); nothing it caused.
    assert as_tuple(n0.new_accounting("n0")) == (
        3600.0,
        2880.0,
        {"gpu_fallen_off_bus": 400.0, "overhead": 200.0},
        {},
    )
    # n1: its own 2 GPUs, and what its fallen GPU cost both nodes as culprit.
    assert as_tuple(n1.new_accounting("n1")) == (
        1800.0,
        1200.0,
        {"gpu_fallen_off_bus": 200.0},
        {"gpu_fallen_off_bus": 600.0},
    )
    n0.refresh()
    assert as_tuple(n0.new_accounting("n0")) == NOTHING  # nothing new: not counted again

    # A backfill writes r1's accounting again, stamped later (here with other figures): the
    # run is counted already, so it adds nothing; compaction moves rows to new files: neither.
    record_run(supervisor, "j", "r1", 200.0, scale=2.0)
    assert compact(supervisor)
    n0.refresh()
    assert as_tuple(n0.new_accounting("n0")) == NOTHING

    # A second run adds its figures (another job's run with the same run id is another run).
    record_run(supervisor, "k", "r1", 300.0)
    n0.refresh()
    assert as_tuple(n0.new_accounting("n0")) == (
        3600.0,
        2880.0,
        {"gpu_fallen_off_bus": 400.0, "overhead": 200.0},
        {},
    )


def test_a_first_read_takes_each_runs_oldest_recording(tmp_path, supervisor):
    record_run(supervisor, "j", "r1", 100.0)
    record_run(supervisor, "j", "r1", 200.0, scale=2.0)  # a backfill, already there
    reader = JobResultsReader(tmp_path)
    reader.refresh()
    assert as_tuple(reader.new_accounting("n0"))[:2] == (3600.0, 2880.0)


def test_a_rerecorded_run_adds_nothing_even_to_a_table_it_had_no_rows_in(tmp_path, supervisor):
    supervisor.append_rows("attempt_usage", [usage("j", "r1", 100.0, "n0", 4, 900.0, 720.0)])
    reader = JobResultsReader(tmp_path)
    reader.refresh()
    assert as_tuple(reader.new_accounting("n0"))[:2] == (3600.0, 2880.0)
    record_run(supervisor, "j", "r1", 5000.0)  # a backfill, a long while later, with lost time
    reader.refresh()
    assert as_tuple(reader.new_accounting("n0")) == NOTHING


def test_accounting_committed_late_is_still_counted(tmp_path, supervisor):
    reader = JobResultsReader(tmp_path)
    # The run's usage is committed, its lost time not yet (two commits in `record_accounting`).
    supervisor.append_rows("attempt_usage", [usage("j", "r1", 100.0, "n0", 4, 900.0, 720.0)])
    reader.refresh()
    assert as_tuple(reader.new_accounting("n0")) == (3600.0, 2880.0, {}, {})
    # Another supervisor's run, stamped later, lands first; then r1's lost time (stamped 100),
    # and a run stamped before the newest taken but committed after it (its supervisor waited
    # for the writer lock): each counted once.
    supervisor.append_rows("attempt_usage", [usage("j", "r2", 160.0, "n0", 1, 100.0, 50.0)])
    reader.refresh()
    assert as_tuple(reader.new_accounting("n0"))[:2] == (100.0, 50.0)
    supervisor.append_rows("lost_time", [lost("j", "r1", 100.0, "n0", "collective_timeout", 300.0, "n0")])
    supervisor.append_rows("attempt_usage", [usage("j", "r3", 150.0, "n0", 1, 10.0, 5.0)])
    reader.refresh()
    assert as_tuple(reader.new_accounting("n0")) == (
        10.0,
        5.0,
        {"collective_timeout": 300.0},
        {"collective_timeout": 300.0},
    )
    reader.refresh()
    assert as_tuple(reader.new_accounting("n0")) == NOTHING


def test_no_accounting_reads_zero_and_a_vanished_segment_takes_nothing(tmp_path, supervisor):
    reader = JobResultsReader(tmp_path)
    reader.refresh()
    assert as_tuple(reader.new_accounting("n0")) == NOTHING
    record_run(supervisor, "j", "r1", 100.0)
    reader.refresh()
    (segment,) = [s for s in supervisor.manifest.segments if s.table == "attempt_usage"]
    supervisor.segment_path(segment).rename(tmp_path / "aside")  # as if compacted away
    assert reader.new_accounting("n0") is None  # retried whole next time, not half taken
    (tmp_path / "aside").rename(supervisor.segment_path(segment))
    assert as_tuple(reader.new_accounting("n0"))[:3] == (
        3600.0,
        2880.0,
        {"gpu_fallen_off_bus": 400.0, "overhead": 200.0},
    )


def test_accounting_reads_each_segment_once_until_compaction_rewrites_it(tmp_path, supervisor):
    reader = JobResultsReader(tmp_path)
    read: list[str] = []
    real = reader._read

    def counting(segments, columns, filters):
        read.extend(s.table for s in segments)
        return real(segments, columns, filters)

    reader._read = counting
    record_run(supervisor, "j", "r1", 100.0)
    reader.refresh()
    reader.new_accounting("n0")
    assert sorted(read) == ["attempt_usage", "lost_time"]
    read.clear()
    reader.refresh()
    assert as_tuple(reader.new_accounting("n0")) == NOTHING
    assert read == []  # nothing new: no file opened
    record_run(supervisor, "j", "r2", 200.0)
    assert compact(supervisor)
    reader.refresh()
    assert as_tuple(reader.new_accounting("n0"))[:2] == (3600.0, 2880.0)  # r2 only, r1 not again
    assert sorted(read) == ["attempt_usage", "lost_time"]


def health(t: float, node: str, state: str, source: str, gpu: int | None = None) -> dict:
    return {"time": t, "node": node, "gpu": gpu, "state": state, "source": source, "reason": "r", "by": "t"}


def test_node_standing_is_the_newest_node_level_ledger_row(tmp_path, supervisor):
    reader = JobResultsReader(tmp_path)
    reader.refresh()
    assert reader.node_standing("n0") is None
    supervisor.append_rows(
        "node_health",
        [
            health(10.0, "n0", QUARANTINED, SOURCE_LEMON),
            health(20.0, "n0", QUARANTINED, SOURCE_VERDICT, gpu=1),  # a GPU's row: not the node's
            health(30.0, "n1", CLEARED, SOURCE_MANUAL),
        ],
    )
    reader.refresh()
    e = reader.node_standing("n0")
    assert e is not None and (e.time, e.state, e.source, e.gpu) == (10.0, QUARANTINED, SOURCE_LEMON, None)
    supervisor.append_rows("node_health", [health(40.0, "n0", CLEARED, SOURCE_MANUAL)])
    reader.refresh()
    e = reader.node_standing("n0")
    assert e is not None and (e.time, e.state) == (40.0, CLEARED)
