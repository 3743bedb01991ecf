"""Runs of one job id never mix, and evidence belongs to its time and place.

Hand-built stores (no processes): a reused job id's runs, an old lost GPU or Xid under a new
job's bug, a GPU whose rank kept training after a stale "lost" report, the fleet ledger, names
and the per-job lock. Culprit ranks and nodes vary: a verdict right only for one placement is
wrong.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from jobdata_builder import T0, JobBuilder

from triage.analyzers.config import AnalyzerConfig
from triage.analyzers.job_analysis import analyze_job
from triage.cli import main
from triage.config import ConfigError
from triage.names import check_name
from triage.store import open_snapshot
from triage.store.job_data import NO_RUN, list_runs, load_job
from triage.supervisor.identity import JobLock, JobRunning, default_job_id, new_run_id
from triage.taxonomy import Category

XID79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus."


def roots(analysis):
    return [i for i in analysis.incidents if i.root]


def _key_error(b: JobBuilder, attempt: int, rank: int, t: float) -> None:
    b.event(
        attempt,
        rank,
        t,
        "exception",
        "KeyError: 'label'",
        traceback="Traceback (most recent call last):\n  File \"train.py\", line 9\nKeyError: 'label'",
    )
    for r in b.ranks_of(attempt):
        b.event(attempt, r, t + 1, "exit", "exit code 1", exit_code=1)


PLACEMENTS = [(1, 4, 2), (3, 4, 2), (0, 2, 1), (5, 8, 4)]  # (culprit rank, world, per node)


@pytest.mark.parametrize("rank,world,per_node", PLACEMENTS)
def test_an_old_lost_gpu_is_context_never_the_cause_of_a_new_bug(rank, world, per_node):
    """The GPU under `rank` was lost 20 minutes before this job started (another job's Xid 79,
    still lost): the job's KeyError in `rank` is a user bug, the GPU a separate finding."""
    b = JobBuilder("nightly").world(world, per_node=per_node, start=T0)
    node, gpu = f"node{rank // per_node}", rank % per_node
    old = T0 - 1200
    b.gpu_event(node, gpu, old, 79, XID79)
    b.gpu_event(node, gpu, old, 79, "GPU is lost", kind="gpu_lost")
    for k in range(0, 1300, 60):  # the agent kept sampling the lost GPU
        b.gpu_sample(node, gpu, old + 1 + k, gpu_up=False)
    end = b.steps(0, range(5), T0 + 5)
    _key_error(b, 0, rank, end + 0.5)
    a = analyze_job(b.load(margin_s=1800.0), AnalyzerConfig())
    (root,) = roots(a)
    assert root.verdict.category is Category.USER_CODE_ERROR
    assert root.verdict.culprit.rank == rank
    inherited = [i for i in a.incidents if not i.root and i.verdict.category is Category.GPU_FALLEN_OFF_BUS]
    assert inherited, [i.verdict.summary for i in a.incidents]
    assert all("job placed on" in i.verdict.summary for i in inherited)
    assert {(i.verdict.culprit.node, i.verdict.culprit.gpu) for i in inherited} == {(node, gpu)}


WATCHDOG = (
    "RuntimeError: [Rank {r}] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=57, OpType=ALLGATHER, Timeout(ms)=60000) ran for 60001 milliseconds"
)


@pytest.mark.parametrize(
    "hung,world,per_node,xid_on",
    [(2, 4, 2, "culprit"), (0, 4, 2, "other"), (3, 4, 4, "culprit"), (5, 8, 4, "other")],
)
def test_a_later_hang_is_not_blamed_on_an_xid_from_before_the_run(hung, world, per_node, xid_on):
    """An Xid 79 four minutes before the run (inside the store's read margin) on the hung
    rank's GPU or another's: the hang is a collective timeout with the rank that never
    entered all_gather #57 as its culprit."""
    b = JobBuilder().world(world, per_node=per_node, start=T0)
    x = hung if xid_on == "culprit" else (hung + 1) % world
    b.gpu_event(f"node{x // per_node}", x % per_node, T0 - 240, 79, XID79)
    end = b.steps(0, range(50), T0 + 10)
    for seq in range(1, 57):
        for r in range(world):
            b.collective(
                0, r, "default", seq, T0 + 10 + seq * 0.8, T0 + 10 + seq * 0.8 + 0.05, group_size=world
            )
    for r in range(world):
        if r == hung:
            continue
        b.collective(0, r, "default", 57, end + 0.5, None, group_size=world)
        for k in range(66):
            b.heartbeat(0, r, end + k, 49, ("all_gather", "default", 57, end + 0.5))
        b.event(0, r, end + 61, "exception", WATCHDOG.format(r=r))
    a = analyze_job(b.load(), AnalyzerConfig())
    (root,) = roots(a)
    assert root.verdict.category is Category.COLLECTIVE_TIMEOUT, root.verdict.summary
    assert root.verdict.culprit.rank == hung


def test_a_gpu_whose_rank_kept_stepping_was_not_lost_then():
    """A stale "lost" report at T0+10 on rank 2's GPU while rank 2 trained on to T0+40: not
    the cause of the KeyError that ended the attempt on rank 0."""
    b = JobBuilder().world(4, per_node=2, start=T0)
    b.gpu_event("node1", 0, T0 + 10, None, "GPU is lost", kind="gpu_lost")
    end = b.steps(0, range(35), T0 + 5)
    _key_error(b, 0, 0, end + 0.5)
    a = analyze_job(b.load(), AnalyzerConfig())
    (root,) = roots(a)
    assert root.verdict.category is Category.USER_CODE_ERROR and root.verdict.culprit.rank == 0
    lost = [i for i in a.incidents if i.verdict.category is Category.GPU_FALLEN_OFF_BUS]
    assert lost and not lost[0].root and "kept completing steps" in lost[0].verdict.summary


def test_an_xid_during_the_attempt_still_is_the_root_cause():
    """The window rule must not hide a real fault: Xid 79 mid-attempt, its rank silent after."""
    b = JobBuilder().world(4, per_node=2, start=T0)
    end = b.steps(0, range(10), T0 + 5)
    b.gpu_event("node0", 1, end + 1, 79, XID79)
    for r in (0, 2, 3):
        b.event(0, r, end + 30, "exception", "RuntimeError: Timed out waiting 15000ms for recv")
    a = analyze_job(b.load(), AnalyzerConfig())
    (root,) = roots(a)
    assert root.verdict.category is Category.GPU_FALLEN_OFF_BUS
    assert (root.verdict.culprit.rank, root.verdict.culprit.node) == (1, "node0")


def test_an_uncleared_quarantine_is_reported_when_a_job_lands_on_it():
    b = JobBuilder("j2").world(2, per_node=1, start=T0)
    b.rows["node_health"].append(
        dict(
            time=T0 - 3600,
            node="node1",
            gpu=None,
            state="quarantined",
            category="node_failure",
            xid=None,
            reason="heartbeats of every rank stopped",
            evidence="[]",
            source="verdict",
            job_id="j1",
            run_id="r1",
            attempt=0,
            by="triage run",
        )
    )
    end = b.steps(0, range(3), T0 + 5)
    for r in range(2):
        b.event(0, r, end, "exit", "exit code 0", exit_code=0)
    a = analyze_job(b.load(), AnalyzerConfig())
    assert not roots(a)
    (found,) = [i for i in a.incidents if i.verdict.category is Category.NODE_FAILURE]
    assert "job placed on node1" in found.verdict.summary and "job j1" in found.verdict.summary


def test_a_cleared_quarantine_is_not_reported():
    b = JobBuilder("j2").world(2, per_node=1, start=T0)
    for t, state in ((T0 - 3600, "quarantined"), (T0 - 60, "cleared")):
        b.rows["node_health"].append(
            dict(
                time=t,
                node="node1",
                gpu=None,
                state=state,
                category="node_failure",
                xid=None,
                reason="x",
                evidence="[]",
                source="manual",
                job_id="j1",
                run_id=None,
                attempt=0,
                by="me",
            )
        )
    end = b.steps(0, range(3), T0 + 5)
    for r in range(2):
        b.event(0, r, end, "exit", "exit code 0", exit_code=0)
    assert not analyze_job(b.load(), AnalyzerConfig()).incidents


@pytest.mark.parametrize("cleared_gpu", [None, 1])
def test_an_old_xid_on_a_gpu_returned_to_service_is_history_not_a_condition(cleared_gpu):
    """Xid 79 on node1 GPU 1 under an earlier job, then `triage nodes clear node1` (the node,
    or just that GPU): a job placed there later inherits nothing; without the clear it
    would be told it was placed on a GPU that was lost."""

    def job(clear: bool):
        b = JobBuilder("j3").world(4, per_node=2, start=T0)
        b.gpu_event("node1", 1, T0 - 900, 79, XID79)
        if clear:
            b.rows["node_health"].append(
                dict(
                    time=T0 - 60,
                    node="node1",
                    gpu=cleared_gpu,
                    state="cleared",
                    category=None,
                    xid=None,
                    reason="GPU reseated",
                    evidence="[]",
                    source="manual",
                    job_id=None,
                    run_id=None,
                    attempt=None,
                    by="ops",
                )
            )
        end = b.steps(0, range(3), T0 + 5)
        for r in range(4):
            b.event(0, r, end, "exit", "exit code 0", exit_code=0)
        return analyze_job(b.load(margin_s=1800.0), AnalyzerConfig())

    (found,) = job(clear=False).incidents
    assert "job placed on GPU 1 of node1 (rank 3)" in found.verdict.summary
    assert not job(clear=True).incidents


def _two_runs() -> JobBuilder:
    """`nightly` ran twice: run A failed twice then gave up at attempt 2; run B, started an
    hour later, completed its attempt 0 on other ranks."""
    old = JobBuilder("nightly", run_id="runA").world(2, per_node=1, start=T0)
    for attempt in (1, 2):
        old.world(2, per_node=1, attempt=attempt, start=T0 + 100 * attempt)
    for attempt in (0, 1, 2):
        end = old.steps(attempt, range(3), T0 + 100 * attempt + 5)
        _key_error(old, attempt, 1, end)
    new = JobBuilder("nightly", run_id="runB").world(4, per_node=2, start=T0 + 3600)
    end = new.steps(0, range(8), T0 + 3605)
    for r in range(4):
        new.event(0, r, end + 1, "exit", "exit code 0", exit_code=0)
    for table, rows in new.rows.items():
        old.rows[table].extend(rows)
    return old


def test_a_reused_job_id_is_two_runs_and_the_newest_is_analysed():
    b = _two_runs()
    con = b.connect()
    assert [r.run_id for r in list_runs(con, "nightly")] == ["runA", "runB"]
    newest = load_job(con, "nightly")
    assert newest.run_id == "runB" and newest.attempts == [0]
    a = analyze_job(newest, AnalyzerConfig())
    assert a.status == "completed" and not a.incidents and a.attempts[0].ranks == 4
    older = analyze_job(load_job(con, "nightly", run="runA"), AnalyzerConfig())
    assert older.run_id == "runA" and [x.attempt for x in older.attempts] == [0, 1, 2]
    assert all(i.verdict.culprit.rank == 1 for i in roots(older))
    with pytest.raises(KeyError):
        load_job(con, "nightly", run="runC")


def test_cli_lists_runs_and_analyses_either(tmp_path, capsys):
    _two_runs().write_store(tmp_path)
    assert main(["jobs", "--data-dir", str(tmp_path), "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert [(r["run_id"], r["status"]) for r in listing["runs"]] == [
        ("runB", "completed"),
        ("runA", "failed"),
    ]
    assert listing["jobs"][0]["run_id"] == "runB" and listing["jobs"][0]["runs"] == 2
    assert main(["analyze", "nightly", "--data-dir", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["run_id"] == "runB"
    assert main(["analyze", "nightly", "--run", "runA", "--data-dir", str(tmp_path), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["run_id"] == "runA"
    assert main(["analyze", "nightly", "--run", "nope", "--data-dir", str(tmp_path)]) == 2
    assert "runB, runA" in capsys.readouterr().err


def test_telemetry_without_a_run_id_is_a_run_of_its_own():
    b = JobBuilder("plain").world(2, per_node=1, start=T0)
    b.steps(0, range(3), T0 + 5)
    con = b.connect()
    (run,) = list_runs(con, "plain")
    assert run.run_id is None and run.label == NO_RUN
    assert load_job(con, "plain", run=NO_RUN).run_id is None


def test_snapshot_attempts_and_runs_are_per_run(tmp_path):
    _two_runs().write_store(tmp_path)
    with open_snapshot(tmp_path) as snap:
        assert [(a.run_id, a.attempt) for a in snap.attempts("nightly")] == [
            ("runA", 0),
            ("runA", 1),
            ("runA", 2),
            ("runB", 0),
        ]
        assert [a.attempt for a in snap.attempts("nightly", "runB")] == [0]
        (job,) = snap.jobs()
        assert (job.run_id, job.runs, job.status, job.attempts) == ("runB", 2, "completed", 1)


@pytest.mark.parametrize("bad", ["", "../x", "a/b", ".hidden", "x" * 129, "é", "a b", "-x"])
def test_names_that_would_become_bad_paths_are_refused(bad):
    with pytest.raises(ConfigError, match="bad job id"):
        check_name("job id", bad)


def test_generated_ids_are_valid_and_unique():
    runs = {new_run_id() for _ in range(200)}
    jobs = {default_job_id() for _ in range(200)}
    assert len(runs) == 200 and len(jobs) == 200
    assert all(check_name("run id", r) for r in runs | jobs)


def test_the_job_lock_admits_one_supervisor_per_job(tmp_path):
    with JobLock(tmp_path, "nightly", "r1"):
        with pytest.raises(JobRunning, match="run r1"):
            JobLock(tmp_path, "nightly", "r2").acquire()
        with JobLock(tmp_path, "other", "r3"):  # another job id is not held back
            pass
        # Another process is refused too (flock is per open file, so across processes).
        probe = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from triage.supervisor.identity import JobLock;"
                f"JobLock({str(tmp_path)!r}, 'nightly', 'r4').acquire()",
            ],
            capture_output=True,
            text=True,
        )
        assert probe.returncode != 0 and "already running" in probe.stderr
    with JobLock(tmp_path, "nightly", "r5"):  # released with the holder
        pass
