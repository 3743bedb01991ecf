"""`triage run -- torchrun script.py` on plain DDP and FSDP2 scripts with no Triage code in them
(tests/workloads/), each fault at another rank: a SIGKILLed rank, a user exception, a hung rank,
with the zero-code hooks and without them (output only)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from triage.store import open_snapshot
from triage.trainer_hooks.flight_recorder import FR_PREFIX

WORKLOADS = Path(__file__).parent / "workloads"
pytestmark = pytest.mark.slow


def run_job(
    tmp_path: Path,
    script: str,
    *flags: str,
    fault: tuple[str, int, int] | None = None,
    steps: int = 12,
    env_extra: dict[str, str] | None = None,
    nproc: int = 2,
    slow_start_s: float = 0.0,
) -> tuple[int, dict]:
    """(exit status, the JSON report) of `triage run` over a workload, the fault given as
    (kind, rank, step); each rank's interpreter started `slow_start_s` late (a busy node's or a
    shared file system's imports)."""
    torchrun = str(Path(sys.executable).parent / "torchrun")
    late = ["--no-python", "sh", "-c", f'sleep {slow_start_s}; exec "$0" "$@"', sys.executable]
    env = {**os.environ, **(env_extra or {})}
    if fault is not None:
        env.update(
            WORKLOAD_FAULT=fault[0],
            WORKLOAD_FAULT_RANK=str(fault[1]),
            WORKLOAD_FAULT_STEP=str(fault[2]),
            WORKLOAD_FAULT_ONCE=str(tmp_path / "fault-done"),
        )
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "triage.cli",
            "run",
            "--json",
            "--data-dir",
            str(tmp_path / "d"),
            "--job-id",
            "plain",
            "--backoff",
            "0",
            *flags,
            "--",
            torchrun,
            "--nproc-per-node",
            str(nproc),
            *(late if slow_start_s else []),
            str(WORKLOADS / script),
            "--steps",
            str(steps),
            "--checkpoint",
            str(tmp_path / "ckpt"),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
        env=env,
    )
    assert out.returncode in (0, 1), out.stderr[-3000:]
    text = "\n" + out.stdout  # the script's own prints come first; the report is last
    return out.returncode, json.loads(text[text.rindex("\n{\n") + 1 :])


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "triage.cli", *args, "--data-dir", str(tmp_path / "d")],
        capture_output=True,
        text=True,
        timeout=120,
    )


def analysis(tmp_path: Path) -> dict:
    proc = cli(tmp_path, "analyze", "plain", "--json")
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def root_of(report: dict, attempt: int) -> dict:
    return next(i for i in report["incidents"] if i["attempt"] == attempt and i["root_cause"])


def test_auto_hooks_record_steps_and_name_a_sigkilled_rank(tmp_path):
    rc, report = run_job(tmp_path, "ddp_train.py", fault=("kill", 1, 5))
    assert rc == 0 and report["status"] == "completed"
    first, second = report["attempts"]
    assert (first["outcome"], second["outcome"]) == ("failed", "completed")
    assert first["verdict"]["culprit"]["rank"] == 1, first["verdict"]
    # Which signal: torchrun's report, when it says it before the supervisor stops the attempt;
    # on a loaded machine the supervisor may see the death, judge it and stop torchrun first
    # (it does not wait out torchrun's teardown), and then no process left knows the signal.
    summary = first["verdict"]["summary"]
    assert "killed by SIGKILL" in summary or (
        "killed by a signal" in summary and "the supervisor saw it gone first" in summary
    ), summary
    with open_snapshot(tmp_path / "d") as snap:
        rows = snap.con.execute(
            "SELECT attempt, rank, min(step), max(step) FROM steps GROUP BY ALL ORDER BY ALL"
        ).fetchall()
        hooks = snap.con.execute(
            "SELECT DISTINCT json_extract_string(detail, '$.hooks') FROM events WHERE kind = 'process_start'"
        ).fetchall()
    # AdamW's own step count numbers the steps, and goes on from the script's checkpoint; the
    # killed rank loses what it had not flushed yet (at most the last second: maybe all of it)
    by = {(a, r): (lo, hi) for a, r, lo, hi in rows}
    assert by[(0, 0)] == (1, 5) and by.get((0, 1), (1, 5))[1] <= 5
    assert by[(1, 0)] == by[(1, 1)] == (6, 12)
    assert hooks == [("auto",)]
    assert root_of(analysis(tmp_path), 0)["culprit"]["rank"] == 1
    jobs = cli(tmp_path, "jobs")
    assert jobs.returncode == 0 and "plain" in jobs.stdout
    log = Path(first["log"])
    assert log.is_file() and "[rank0]:step 0 loss" in log.read_text()


def test_a_rank_zero_writing_its_checkpoint_to_stalled_storage_is_saving_not_hung(tmp_path):
    """Rank 0 alone saves the trainer state (`torch.save` to a path) and the write stalls 8 s,
    off the CPU, while ranks 1 and 2 wait for it in the step's barrier: to the collective stall
    that is one idle rank of three that never entered it, but the save's begin is in the store
    as it starts, so the job is left to finish."""
    rc, report = run_job(tmp_path, "fsdp_train.py", fault=("slow_save", 0, 3), steps=6, nproc=3)
    assert rc == 0 and report["status"] == "completed", report["reason"]
    (only,) = report["attempts"]
    assert only["outcome"] == "completed" and only["detection"] != "hang", only
    with open_snapshot(tmp_path / "d") as snap:
        writes = snap.con.execute(
            "SELECT step, CAST(json_extract_string(detail, '$.seconds') AS DOUBLE) FROM events "
            "WHERE kind = 'file_save_end' AND rank = 0 "
            "AND json_extract_string(detail, '$.path') LIKE '%trainer_state.pt' ORDER BY step"
        ).fetchall()
        dcp = snap.con.execute(
            "SELECT rank, count(*) FROM events WHERE kind = 'file_save_end' "
            "AND json_extract_string(detail, '$.path') NOT LIKE '%trainer_state.pt' GROUP BY rank ORDER BY rank"
        ).fetchall()
        checkpoints = snap.con.execute("SELECT count(*) FROM checkpoints").fetchone()
    # AdamW's step count numbers them: the write after optimizer step 4 is the stalled one;
    # every rank's DCP save of every step is timed too; file writes are no checkpoints
    assert [s for s, _ in writes] == list(range(1, 7)) and dict(writes)[4] >= 8, writes
    assert dcp == [(0, 6), (1, 6), (2, 6)], dcp
    assert checkpoints == (0,)


def test_a_rank_that_ends_its_part_cleanly_is_no_failure(tmp_path):
    """Rank 1 exits after training while rank 0 works 6 s more (saving the final model): the
    hooks recorded rank 1's clean exit, so the job is left to finish, not stopped as failed."""
    rc, report = run_job(
        tmp_path, "ddp_train.py", env_extra={"WORKLOAD_LINGER_RANK": "0", "WORKLOAD_LINGER_S": "6"}, steps=6
    )
    assert rc == 0 and report["status"] == "completed", report["reason"]
    (only,) = report["attempts"]
    assert only["outcome"] == "completed" and only["detection"] == "launcher_exit", only


def test_a_job_without_hooks_is_never_stopped_as_hung_and_judged_by_its_output(tmp_path):
    # no hooks, a start-up timeout far below the job's run time, rank 0 SIGKILLed: the job
    # must run to its end, and the kill be told from the launcher's report in the output
    rc, report = run_job(
        tmp_path, "ddp_train.py", "--no-auto-hooks", "--startup-timeout", "1", fault=("kill", 0, 4)
    )
    assert rc == 0 and [a["outcome"] for a in report["attempts"]] == ["failed", "completed"]
    assert report["attempts"][0]["detection"] != "hang"
    incident = root_of(analysis(tmp_path), 0)
    assert incident["culprit"]["rank"] == 0 and incident["evidence"][0]["source"] == "launcher"


@pytest.mark.parametrize(
    "fault, hooks, said",
    [
        (("raise", 1, 3), "--no-auto-hooks", "bad batch shape at step 3"),
        # a plain RuntimeError in words no library uses: only where it was raised says whose it
        # is (a new user's first try was called a network error on the rank that lost its peer)
        (("raise_own", 1, 3), "--no-auto-hooks", "my own check failed at step 3"),
        (("raise_own", 0, 4), "--auto-hooks", "my own check failed at step 4"),
        # not sys.exit(3) mid-training: its process may linger in the process group's teardown
        # while its peer aborts on the closed connection, and torchrun then names the peer
        # first; the rule for a rank torchrun names with its own code is tested on the log
    ],
    ids=["valueerror", "own-runtimeerror", "own-runtimeerror-hooked-rank0"],
)
def test_a_user_exception_fails_fast_with_its_rank(tmp_path, fault, hooks, said):
    rc, report = run_job(tmp_path, "ddp_train.py", hooks, fault=fault)
    assert rc == 1 and report["status"] == "failed"
    [attempt] = report["attempts"]
    assert attempt["verdict"]["category"] == "user_code_error"
    assert attempt["verdict"]["culprit"]["rank"] == fault[1] and attempt["action"] == "fail_fast"
    assert said in attempt["verdict"]["summary"]


def test_a_rank_stuck_before_the_first_step_is_found_when_a_startup_timeout_is_given(tmp_path):
    # rank 1 sleeps before its first forward pass; its peer waits in DDP's first all-reduce.
    # Unset, no hang is declared before the first step (a rank 0 downloading looks the same);
    # given, the auto-instrumented attempt is stopped and the sleeping rank named, not its node.
    # The ranks come up later than the limit (as on a loaded CI machine, whose run stopped them
    # still importing and found no one): it counts from their start, not from the launch
    rc, report = run_job(
        tmp_path,
        "ddp_train.py",
        "--startup-timeout",
        "8",
        "--max-restarts",
        "0",
        fault=("hang", 1, 0),
        slow_start_s=10,
    )
    assert rc == 1
    first = report["attempts"][0]
    assert first["outcome"] == "hung", first
    assert first["detected_at"] - first["started"] >= 10 + 8, first  # their 8 s began once up
    verdict = first["verdict"]
    assert verdict["category"] == "collective_timeout" and verdict["culprit"]["rank"] == 1, verdict
    assert verdict["culprit"]["node"] is None  # a sleep in the job's own code blames no node


def test_a_loss_that_stays_nan_is_stopped_and_not_reported_completed(tmp_path):
    # the weights go NaN at step 4 and the script trains on: the supervisor stops the attempt
    # (every step after is wasted), says numerical_instability, and rolls back; the script
    # resumes its own NaN checkpoint, so the same failure comes back and the loop rule ends it
    rc, report = run_job(tmp_path, "ddp_train.py", "--max-restarts", "2", fault=("nan", 0, 4), steps=60)
    assert rc == 1 and report["status"] != "completed", report["status"]
    first = report["attempts"][0]
    assert first["detection"] == "nonfinite_loss", first
    assert first["verdict"]["category"] == "numerical_instability" and first["action"] == "rollback"


@pytest.mark.parametrize("script, culprit", [("ddp_train.py", 1), ("fsdp_train.py", 0)])
def test_a_hung_rank_is_found_by_the_flight_recorder_as_fr_trace_finds_it(tmp_path, script, culprit):
    rc, report = run_job(tmp_path, script, "--hang-timeout", "5", fault=("hang", culprit, 4), steps=8)
    assert rc == 0 and report["status"] == "completed"
    first = report["attempts"][0]
    assert first["outcome"] == "hung"
    verdict = first["verdict"]
    assert verdict["category"] == "collective_timeout" and verdict["culprit"]["rank"] == culprit
    assert "time.sleep(3600)" in verdict["summary"]  # where the culprit's main thread is
    # PyTorch's own analyzer on the very dumps names the same rank, and no cause
    dumps = next((tmp_path / "d" / "fr").glob("plain/*/attempt-0"))
    fr_trace = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.flight_recorder.fr_trace",
            str(dumps),
            "--prefix",
            FR_PREFIX,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert fr_trace.returncode == 0, fr_trace.stderr[-2000:]
    said = fr_trace.stdout + fr_trace.stderr  # it reports through logging
    missing = re.search(r"missing ranks: \{([\d, ]+)\}", said)
    assert missing and {int(r) for r in missing.group(1).split(",")} == {culprit}, said
    assert root_of(analysis(tmp_path), 0)["culprit"]["rank"] == culprit


PREPARE = {"WORKLOAD_PREPARE_RANK": "0", "WORKLOAD_PREPARE_STEP": "2"}


@pytest.mark.parametrize(
    "how",
    [
        {"WORKLOAD_PREPARE": "map"},
        {"WORKLOAD_PREPARE": "download"},
        {"WORKLOAD_PREPARE": "main"},
        {"WORKLOAD_PREPARE": "download", "WORKLOAD_PREPARE_RANK": "2"},
        {"WORKLOAD_PREPARE_RANK": "none", "WORKLOAD_EVAL_S": "10"},
    ],
    ids=["map", "download", "main-thread", "download-on-rank-2", "evaluation"],
)
def test_a_rank_preparing_the_data_while_its_peers_wait_at_a_barrier_is_working_not_hung(tmp_path, how):
    """Rank 0 (or another: rank 2) builds an evaluation set first, as HF's `main_process_first`
    has it, while the others wait at a barrier past the stall rule's bound and past the step
    timeout (4 s here): in a
    pool of worker processes (its main thread idle, waiting on them), reading a large file a
    chunk at a time, or on its main thread; or every rank evaluates the model (forward passes
    and FSDP's all-gathers, no optimizer step). It is working, so the job runs through in one
    attempt, the step after the work included (it takes a while to reach the store, and no rank
    works outside steps meanwhile)."""
    env = {**PREPARE, "WORKLOAD_PREPARE_S": "10", **how}
    rc, report = run_job(tmp_path, "fsdp_train.py", "--hang-timeout", "4", steps=4, env_extra=env, nproc=4)
    assert rc == 0 and report["status"] == "completed", report
    first = report["attempts"][0]
    assert len(report["attempts"]) == 1 and first["outcome"] == "completed", (
        first.get("outcome"),
        first.get("detection"),
        (first.get("verdict") or {}).get("summary"),
    )


def test_data_preparation_past_the_prepare_timeout_is_a_hang(tmp_path):
    """The allowance has a bound: a worker stuck in a loop over one sample keeps its pool busy
    forever, and the input pipeline is then what hangs; it is found once the bound is past."""
    env = {**PREPARE, "WORKLOAD_PREPARE_S": "60", "WORKLOAD_PREPARE": "map"}
    flags = ("--hang-timeout", "4", "--prepare-timeout", "10", "--max-restarts", "0")
    rc, report = run_job(tmp_path, "fsdp_train.py", *flags, steps=4, env_extra=env, nproc=4)
    first = report["attempts"][0]
    assert rc == 1 and first["detection"] == "hang", report["attempts"]
    # waited out the preparation's allowance (10 s of no steps), not the step timeout (4 s)
    assert first["detected_at"] - first["last_progress"] >= 10, first
