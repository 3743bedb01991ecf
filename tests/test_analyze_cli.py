"""`triage analyze` on a real store written through the store's writer."""

import json
import re

import pytest
from jobdata_builder import T0, JobBuilder

from triage.cli import main


def failed_store(tmp_path):
    b = JobBuilder("ecc-job").world(4, per_node=2)
    end = b.steps(0, range(20), T0 + 5)
    for r in range(4):
        b.event(0, r, T0 + 8, "checkpoint_save_begin", step=2)
        b.event(0, r, T0 + 9, "checkpoint_save_end", step=2)
    b.gpu_event("node1", 1, end + 1, 48, "NVRM: Xid (PCI:0000:3c:00): 48, DBE")
    b.event(0, 3, end + 2, "exception", "RuntimeError: CUDA error: uncorrectable ECC error encountered")
    for r in range(3):
        b.event(0, r, end + 5, "exception", "RuntimeError: Connection reset by peer")
    b.write_store(tmp_path)
    return tmp_path


def test_json_report_names_root_cause_and_exits_1_on_a_failed_job(tmp_path, capsys):
    data = failed_store(tmp_path)
    rc = main(["analyze", "ecc-job", "--data-dir", str(data), "--json", "--no-ingest"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 1 and out["status"] == "failed" and out["job_id"] == "ecc-job"
    assert set(out) >= {"attempts", "incidents", "goodput", "stragglers", "recommended_checkpoint_interval_s"}
    root = [i for i in out["incidents"] if i["root_cause"]]
    assert len(root) == 1 and root[0]["category"] == "gpu_memory_error"
    assert root[0]["culprit"] == {"rank": 3, "node": "node1", "gpu": 1, "uuid": "GPU-node1-1"}
    assert set(out["goodput"]["badput"]) >= {"initialization", "checkpoint_save", "lost_progress"}
    assert 0 < out["goodput"]["ratio"] < 1
    assert out["recommended_checkpoint_interval_s"] > 0
    assert {s["rank"] for s in out["stragglers"]} == {0, 1, 2, 3}


@pytest.mark.parametrize("columns", [80, 200])
def test_terminal_report_reads_as_a_verdict_block_at_any_width(tmp_path, capsys, monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", str(columns))
    data = failed_store(tmp_path)
    assert main(["analyze", "ecc-job", "--data-dir", str(data), "--no-ingest"]) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= columns
    block = lines[next(i for i, line in enumerate(lines) if line.startswith("Root cause, attempt 0:")) :]
    assert "gpu_memory_error" in block[0] and "confidence" in block[0]
    fields = {line.split()[0]: line for line in block[:12] if line[:1].isalpha()}
    # culprit, action and evidence each on a line of their own, the culprit never split up
    assert "rank 3 on node1, GPU 1 (GPU-node1-1)" in fields["culprit"]
    assert "restart from the last checkpoint without the culprit's node" in " ".join(block[:12])
    assert re.search(r"^evidence\s+\d\d:\d\d:\d\d \S+", fields["evidence"])
    assert "Goodput" in out and "times in UTC" in out


def test_unknown_job_lists_known_jobs_and_exits_2(tmp_path, capsys):
    data = failed_store(tmp_path)
    assert main(["analyze", "nope", "--data-dir", str(data), "--no-ingest"]) == 2
    err = capsys.readouterr().err
    assert "no job 'nope'" in err and "ecc-job" in err


def test_bad_data_dir_exits_2(tmp_path, capsys):
    assert main(["analyze", "x", "--data-dir", str(tmp_path / "missing")]) == 2


def test_a_negative_now_is_refused(tmp_path, capsys):
    data = failed_store(tmp_path)
    assert main(["analyze", "ecc-job", "--data-dir", str(data), "--no-ingest", "--now", "-5"]) == 2
    assert "--now must be a unix time" in capsys.readouterr().err


def test_what_the_supervisor_decided_is_shown_beside_the_action_the_cause_calls_for(tmp_path, capsys):
    """An attempt that ended on a cause whose action is `alert` was restarted by the supervisor
    as it was: the report showed only "keep running; alert", which reads as if nothing was
    done. Its decision, as the supervisor recorded it, is shown beside it."""
    from triage.supervisor.observe import record_attempt

    data = failed_store(tmp_path)
    decided = "gpu_memory_error with a culprit on node1: leaving node1 out"
    record_attempt(
        data, "ecc-job", None, 0, status="failed", exit_code=1, reason=decided, verdict=None, action="restart"
    )
    assert main(["analyze", "ecc-job", "--data-dir", str(data), "--no-ingest"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert f"supervisor {decided}" in out, out
    assert main(["analyze", "ecc-job", "--data-dir", str(data), "--no-ingest", "--json"]) == 1
    (attempt,) = json.loads(capsys.readouterr().out)["attempts"]
    assert attempt["supervisor"] == decided
    assert attempt["supervisor_action"] is None  # no verdict recorded: the cause's action shows


@pytest.mark.parametrize(
    ("taken", "said"), [("restart", "restart from the last checkpoint"), ("fail_fast", "stop:")]
)
def test_the_action_the_supervisor_took_is_the_one_shown_as_triage_run_showed_it(
    tmp_path, capsys, taken, said
):
    """`triage run` showed the action it took ("restart from the last checkpoint" after an
    `unknown`); `triage analyze` of the same run showed the cause's ("keep running; alert")."""
    from triage.supervisor.observe import record_attempt
    from triage.taxonomy import Category
    from triage.verdict import Verdict

    data = failed_store(tmp_path)
    unknown = Verdict(Category.UNKNOWN, 0.3, "ranks 0-3 stopped with no error")
    reason = "unknown calls for a human, but the attempt ended: restarting it as it was"
    record_attempt(
        data, "ecc-job", None, 0, status="failed", exit_code=1, reason=reason, verdict=unknown, action=taken
    )
    assert main(["analyze", "ecc-job", "--data-dir", str(data), "--no-ingest"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert f"action {said}" in out and "keep running" not in out, out
    assert main(["analyze", "ecc-job", "--data-dir", str(data), "--no-ingest", "--json"]) == 1
    (attempt,) = json.loads(capsys.readouterr().out)["attempts"]
    assert attempt["supervisor_action"] == taken


@pytest.mark.parametrize("stopped_at", [T0 + 40.0, T0 + 19.0])
def test_an_attempt_its_operator_stopped_failed_on_nothing_found_after_the_stop(tmp_path, capsys, stopped_at):
    """A Ctrl-C at a terminal reaches the ranks too: their KeyboardInterrupts and the peers that
    lost them read as a collective timeout, and `analyze` said "failed" with an invented cause,
    counted in the fleet's failures. An attempt recorded `interrupted` is judged on what came
    before its stop only: a network error before it stays its root cause."""
    from triage.supervisor.observe import record_attempt, record_output, stop_event_row

    b = JobBuilder("stopped").world(4, per_node=2)
    end = b.steps(0, range(20), T0 + 5)  # steps end at T0 + 25
    b.event(
        0,
        2,
        T0 + 20,
        "exception",
        "RuntimeError: NCCL communicator was aborted: NET/IB : Got completion from peer 10.0.0.2 with error 12",
    )
    for r in range(4):
        b.event(0, r, end + 16, "exception", "KeyboardInterrupt")
    for r in (0, 1):
        b.event(0, r, end + 17, "exception", "RuntimeError: Connection closed by peer [10.0.0.3]:29500")
    b.write_store(tmp_path)
    record_output(
        tmp_path,
        "stopped",
        None,
        0,
        events=[stop_event_row("stopped", None, 0, "node0", stopped_at, "Ctrl-C")],
        ranks=[],
        host="node0",
    )
    record_attempt(
        tmp_path,
        "stopped",
        None,
        0,
        status="interrupted",
        exit_code=130,
        reason="interrupted",
        verdict=None,
        action=None,
    )
    assert main(["analyze", "stopped", "--data-dir", str(tmp_path), "--no-ingest", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "interrupted" and out["attempts"][0]["status"] == "interrupted"
    roots = [i["category"] for i in out["incidents"] if i["root_cause"]]
    assert roots == (["network_error"] if stopped_at > T0 + 20 else [])
    assert not any("KeyboardInterrupt" in json.dumps(i) for i in out["incidents"])
