"""Evidence from outside the ranks' hooks: an attempt's captured output (`rank_logs`, the
`captured_output` analyzer) and PyTorch Flight Recorder dumps (`flight_recorder` in the hooks,
the supervisor and the analyzers), on hand-made input with varied ranks."""

from __future__ import annotations

import json
import os
import pickle

import pytest
from jobdata_builder import T0, JobBuilder

from triage.analyzers.config import AnalyzerConfig
from triage.analyzers.flight_recorder import flight_recorder_findings
from triage.analyzers.job_analysis import analyze_job
from triage.store.schema import EVENT_FR_DUMP, EVENT_FR_REQUEST, EVENT_LOG_LINE, EVENT_RANK_EXIT
from triage.supervisor.flight_dumps import dump_event_rows
from triage.supervisor.rank_logs import RANK_FILE_SHARE, AttemptLog, torchrun_log_env
from triage.taxonomy import Category
from triage.trainer_hooks import flight_recorder as fr


def torchrun_summary(root_rank: int, root_code: int, others: dict[int, int]) -> list[str]:
    """torchrun's failure summary as it prints it (torch 2.13)."""
    lines = [
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "=" * 54,
        "train.py FAILED",
        "-" * 54,
        "Failures:",
    ]
    for i, (rank, code) in enumerate(others.items(), 1):
        lines += [
            f"[{i}]:",
            "  time      : 2026-12-05_23:55:51",
            "  host      : localhost",
            f"  rank      : {rank} (local_rank: {rank % 2})",
            f"  exitcode  : {code} (pid: {4000 + rank})",
            "  error_file: <N/A>",
        ]
    lines += [
        "-" * 54,
        "Root Cause (first observed failure):",
        "[0]:",
        "  time      : 2026-12-05_23:55:51",
        "  host      : localhost",
        f"  rank      : {root_rank} (local_rank: {root_rank % 2})",
        f"  exitcode  : {root_code} (pid: {4000 + root_rank})",
        "  error_file: <N/A>",
        f"  traceback : Signal {-root_code} (SIGKILL) received by PID {4000 + root_rank}",
        "=" * 54,
    ]
    return lines


def capture(
    tmp_path, lines: list[str], *, stop_after: int | None = None, max_bytes: int = 1 << 20
) -> AttemptLog:
    log = AttemptLog(tmp_path / "attempt-0.log", max_bytes=max_bytes, echo=False)
    for i, line in enumerate(lines):
        if stop_after is not None and i == stop_after:
            log.stopping("hang")
        log._take("stderr", (line + "\n").encode())
    log.close()
    return log


# -- the capture --------------------------------------------------------------------------------
@pytest.mark.parametrize("culprit", [0, 3, 6])
def test_capture_keeps_decisive_lines_and_the_launchers_rank_exits(tmp_path, culprit):
    peers = [r for r in range(4) if r != culprit][:2]
    lines = ["[rank0]:step 1 loss 0.5"]
    lines += [
        f"[rank{r}]:RuntimeError: [../gloo/transport/tcp/pair.cc:537] Read error "
        "[127.0.0.1]:27043: Connection reset by peer"
        for r in peers
    ]
    lines += torchrun_summary(culprit, -9, dict.fromkeys(peers, -15))
    log = capture(tmp_path, lines)
    assert [(ln.rank, ln.signature) for ln in log.decisive][:2] == [(r, "peer-reset") for r in peers]
    exits = {e.rank: e for e in log.exits}
    assert exits[culprit].first_observed and exits[culprit].signal_name == "SIGKILL"
    assert all(not exits[r].first_observed and exits[r].signal_name == "SIGTERM" for r in peers)
    assert (tmp_path / "attempt-0.log").read_text().splitlines() == lines
    rows = log.event_rows("j", "r1", 0, {culprit: "node7"}, "host")
    exit_row = next(r for r in rows if r["kind"] == EVENT_RANK_EXIT and r["rank"] == culprit)
    assert exit_row["node"] == "node7" and "killed by SIGKILL" in exit_row["message"]
    assert {r["source"] for r in rows} == {"supervisor"}


def test_lines_after_the_supervisor_began_stopping_are_kept_on_disk_only(tmp_path):
    lines = [
        "[rank1]:step 4",
        "torch.distributed.elastic.multiprocessing.api.SignalException: Process 10570 got signal: 15",
        *torchrun_summary(1, -9, {0: -15}),
    ]
    log = capture(tmp_path, lines, stop_after=1)
    assert log.decisive == [] and log.exits == []
    kept = (tmp_path / "attempt-0.log").read_text().splitlines()
    # every line, and where the stop began: a later read of the file knows the SIGTERMs are Triage's
    assert len(kept) == len(lines) + 1
    assert kept[1] == "[triage] stopping the attempt: hang (the SIGTERMs that follow are Triage's)"


def test_capture_rotates_within_its_bound_and_reads_pipes(tmp_path):
    r, w = os.pipe()
    log = AttemptLog(tmp_path / "attempt-2.log", max_bytes=64 * 1024, echo=False)
    log.attach(os.fdopen(r, "rb"), None)
    with os.fdopen(w, "wb") as out:
        for i in range(3000):
            out.write(f"[rank{i % 4}]:line {i} ".encode() + b"x" * 40 + b"\n")
        out.write(b"[rank2]:ValueError: bad batch shape at step 7\n")
    log.close()
    files = sorted(tmp_path.glob("attempt-2.log*"))
    assert [f.name for f in files] == ["attempt-2.log", "attempt-2.log.1"]
    assert sum(f.stat().st_size for f in files) <= 64 * 1024
    assert files[0].read_text().splitlines()[-1] == "[rank2]:ValueError: bad batch shape at step 7"
    assert log.lines == 3001
    assert [ln.rank for ln in log.decisive] == [2]
    # each rank's lines in a file of its own, bounded by its share
    for rank in range(4):
        own = sorted((tmp_path / "attempt-2").glob(f"rank-{rank}.log*"))
        assert own and sum(f.stat().st_size for f in own) <= 64 * 1024 // RANK_FILE_SHARE
        assert all(ln.startswith(f"[rank{rank}]:") for f in own for ln in f.read_text().splitlines())
    assert (tmp_path / "attempt-2" / "rank-2.log").read_text().splitlines()[-1].endswith("at step 7")


def test_pytorchs_own_rank_prefix_is_not_doubled(tmp_path):
    r, w = os.pipe()
    log = AttemptLog(tmp_path / "attempt-0.log", echo=False)
    log.attach(os.fdopen(r, "rb"), None)
    with os.fdopen(w, "wb") as out:
        out.write(b"[rank0]:[rank0]: Traceback (most recent call last):\n[rank1]:[rank1]x\n")
    log.close()
    assert (tmp_path / "attempt-0.log").read_text().splitlines() == [
        "[rank0]: Traceback (most recent call last):",
        "[rank1]:[rank1]x",
    ]


def test_lines_without_a_rank_prefix_stay_in_the_combined_log_only(tmp_path):
    log = capture(tmp_path, ["W1206 torchrun warning", "[rank1]:step 1", "[rank3]:step 1"])
    assert sorted(p.name for p in (tmp_path / "attempt-0").iterdir()) == ["rank-1.log", "rank-3.log"]
    assert (tmp_path / "attempt-0" / "rank-3.log").read_text() == "[rank3]:step 1\n"
    assert log.lines == 3


def test_a_disk_that_fails_ends_the_file_not_the_capture(tmp_path):
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("")
    log = AttemptLog(blocked / "attempt-0.log", echo=False)
    log._take("stderr", b"[rank1]:ValueError: bad batch shape at step 7\n")
    log.close()
    assert log._file.error and log.decisive[0].rank == 1


def test_torchrun_log_env_leaves_a_jobs_own_choices():
    env: dict[str, str] = {}
    assert torchrun_log_env(env, fr.Path("/scratch"))
    assert env["PET_TEE"] == "3" and env["PET_LOG_DIR"] == "/scratch"
    assert env["TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"] == "[rank${rank}]:"
    own = {"PET_REDIRECTS": "3", "PET_LOG_DIR": "/mine"}
    assert not torchrun_log_env(own, fr.Path("/scratch"))
    assert "PET_TEE" not in own and own["PET_LOG_DIR"] == "/mine"


# -- the captured-output analyzer ------------------------------------------------------------------
def supervisor_event(
    b: JobBuilder, attempt: int, rank: int | None, t: float, kind: str, message: str, **detail: object
) -> None:
    b.rows["events"].append(
        {
            "job_id": b.job_id,
            "run_id": b.run_id,
            "attempt": attempt,
            "rank": rank,
            "node": "node0",
            "gpu": None,
            "time": t,
            "kind": kind,
            "step": None,
            "message": message,
            "detail": json.dumps(detail),
            "source": "supervisor",
        }
    )


def root(analysis, attempt: int = 0):
    return next(i for i in analysis.incidents if i.attempt == attempt and i.root)


def sigkilled(b: JobBuilder, rank: int, time: float) -> None:
    """The launcher's report that `rank` died of SIGKILL, the first death it saw."""
    supervisor_event(
        b,
        0,
        rank,
        time,
        EVENT_RANK_EXIT,
        f"rank {rank} was killed",
        exit_code=-9,
        signal="SIGKILL",
        first_observed=True,
    )


@pytest.mark.parametrize("killed", [1, 2])
def test_a_rank_the_launcher_saw_killed_is_the_culprit_not_its_peers_resets(killed):
    b = JobBuilder().world(4, per_node=2)
    end = b.steps(0, range(5), T0 + 5)
    for r in range(4):
        for k in range(3):
            b.heartbeat(0, r, end - 2 + k, 4)
    for r in (r for r in range(4) if r != killed):  # the peers raise once it is gone
        b.event(0, r, end + 0.5, "exception", "RuntimeError: Connection reset by peer")
    sigkilled(b, killed, end + 2)
    v = root(analyze_job(b.load(), AnalyzerConfig())).verdict
    assert v.culprit.rank == killed and "killed by SIGKILL" in v.summary
    assert v.culprit.node == f"node{killed // 2}"


@pytest.mark.parametrize(
    ("ended", "code", "category"), [(1, 3, "user_code_error"), (2, 2, "user_code_error"), (3, 1, None)]
)
def test_a_rank_the_launcher_saw_end_itself_with_its_own_code_is_the_culprit(ended, code, category):
    # sys.exit(3), argparse's 2: the program ended itself, the same on every run; its peers'
    # resets are the consequence. 1 is any uncaught exception's: no such reading
    b = JobBuilder().world(4, per_node=2)
    end = b.steps(0, range(5), T0 + 5)
    for r in range(4):
        for k in range(3):
            b.heartbeat(0, r, end - 2 + k, 4)
    for r in (r for r in range(4) if r != ended):
        b.event(0, r, end + 0.5, "exception", "RuntimeError: Connection reset by peer")
    supervisor_event(
        b,
        0,
        ended,
        end + 2,
        EVENT_RANK_EXIT,
        f"rank {ended} exited",
        exit_code=code,
        signal=None,
        first_observed=True,
    )
    v = root(analyze_job(b.load(), AnalyzerConfig())).verdict
    if category is None:
        assert "exited with code" not in v.summary
    else:
        assert (v.category.value, v.culprit.rank) == (category, ended)
        assert f"exited with code {code} on its own" in v.summary


WORKER_GONE = "RuntimeError: DataLoader worker (pid(s) 4242) exited unexpectedly"


@pytest.mark.parametrize("killed, other", [(3, 2), (0, 1), (1, 3)])
def test_a_dataloader_worker_stopped_by_the_teardown_after_a_kill_is_its_consequence(killed, other):
    """torchrun stops every rank's process group once one rank dies; the rank whose DataLoader
    worker went first says "worker exited unexpectedly". The killed rank is the cause."""
    b = JobBuilder().world(4, per_node=2)
    end = b.steps(0, range(10), T0 + 5)
    for r in range(4):
        b.heartbeat(0, r, end, 9)
    b.event(0, other, end + 0.4, "exception", WORKER_GONE)
    for r in set(range(4)) - {killed, other}:
        b.event(0, r, end + 0.6, "exception", "RuntimeError: Connection reset by peer")
    sigkilled(b, killed, end + 0.3)
    v = root(analyze_job(b.load(), AnalyzerConfig())).verdict
    assert (v.category, v.culprit.rank) == (Category.UNKNOWN, killed), v.summary
    # a worker that died before any rank was killed is the data pipeline's own failure
    b.rows["events"] = [e for e in b.rows["events"] if e["kind"] != EVENT_RANK_EXIT]
    b.event(0, killed, end + 1.0, "exception", "RuntimeError: Connection reset by peer")
    v = root(analyze_job(b.load(), AnalyzerConfig())).verdict
    assert (v.category, v.culprit.rank) == (Category.DATA_PIPELINE_ERROR, other), v.summary


@pytest.mark.parametrize(
    ("launcher_says", "named"), [("SIGKILL", "SIGKILL"), ("SIGTERM", "a signal"), (None, "a signal")]
)
def test_a_rank_seen_vanishing_takes_the_signal_its_launcher_reported_later(launcher_says, named):
    """Whether the supervisor's poll or the launcher sees a death first is a race: the verdict
    names the signal either way (a stop signal is the launcher's own teardown, not the cause)."""
    b = JobBuilder().world(4, per_node=2)
    end = b.steps(0, range(10), T0 + 5)
    for r in range(4):
        b.heartbeat(0, r, end, 9)
    supervisor_event(
        b,
        0,
        1,
        end + 0.3,
        EVENT_RANK_EXIT,
        "rank 1 ended with no exit or exception of its own recorded",
        exit_code=None,
        signal=None,
        first_observed=True,
        vanished=True,
    )
    if launcher_says is not None:
        supervisor_event(
            b,
            0,
            1,
            end + 0.9,
            EVENT_RANK_EXIT,
            "rank 1 exited",
            exit_code=-9,
            signal=launcher_says,
            first_observed=False,
        )
    v = root(analyze_job(b.load(), AnalyzerConfig())).verdict
    assert (v.category, v.culprit.rank) == (Category.UNKNOWN, 1)
    assert f"was killed by {named} with no exception" in v.summary, v.summary


@pytest.mark.parametrize("killed", [1, 3])
def test_a_rank_seen_dying_by_itself_is_no_collective_timeout(killed):
    """The supervisor saw `killed` gone (SIGKILLed, no record of its own) while its peers waited
    in a collective it never entered: it died, it did not hang. The verdict is the kill (an
    unknown cause, restarted as it was), not a timeout that would leave a healthy node out."""
    b = JobBuilder().world(4, per_node=2)
    end = b.steps(0, range(10), T0 + 5)
    peers = [r for r in range(4) if r != killed]
    for r in peers:
        b.collective(0, r, "default", 11, end + 0.2, None)
        for k in range(6):
            b.heartbeat(0, r, end + k, 9, ("all_gather", "default", 11, end + 0.2))
    b.heartbeat(0, killed, end, 9)
    supervisor_event(
        b,
        0,
        killed,
        end + 0.3,
        EVENT_RANK_EXIT,
        f"rank {killed} ended with no exit or exception of its own recorded",
        exit_code=None,
        signal=None,
        first_observed=True,
        vanished=True,
    )
    v = root(analyze_job(b.load(), AnalyzerConfig())).verdict
    assert v.category is Category.UNKNOWN and v.culprit.rank == killed, v
    assert "the supervisor saw it gone first" in v.summary
    # without that observation the same stall is a hang
    b.rows["events"] = [e for e in b.rows["events"] if e["kind"] != EVENT_RANK_EXIT]
    assert root(analyze_job(b.load(), AnalyzerConfig())).verdict.category is Category.COLLECTIVE_TIMEOUT


def test_a_rank_that_recorded_its_own_exception_is_judged_by_it():
    b = JobBuilder().world(2, per_node=2)
    end = b.steps(0, range(3), T0 + 5)
    b.event(0, 1, end + 0.2, "exception", "ValueError: bad batch shape at step 3")
    supervisor_event(
        b,
        0,
        1,
        end + 1,
        EVENT_LOG_LINE,
        "[rank1]:ValueError: bad batch shape",
        stream="stderr",
        signature="x",
    )
    supervisor_event(
        b, 0, 1, end + 2, EVENT_RANK_EXIT, "rank 1 exited", exit_code=1, signal=None, first_observed=True
    )
    incidents = [i for i in analyze_job(b.load(), AnalyzerConfig()).incidents if i.root]
    assert len(incidents) == 1 and incidents[0].verdict.category is Category.USER_CODE_ERROR
    assert incidents[0].verdict.evidence[0].source == "exception"


@pytest.mark.parametrize("aborted", [0, 2])
def test_a_hooked_rank_that_printed_its_cause_before_its_abort_is_judged_by_what_it_printed(aborted):
    # gloo's EnforceNotMet on a collective mismatch ends the rank in C++ (SIGABRT), with no Python
    # exception for the hooks to record: its printed lines are the cause, not "a signal with no
    # exception of its own", and the peers' resets (raised, recorded) stay its consequences
    b = JobBuilder().world(4, per_node=2)
    end = b.steps(0, range(5), T0 + 5)
    for r in (r for r in range(4) if r != aborted):
        b.event(0, r, end + 0.5, "exception", "RuntimeError: Connection reset by peer")
    supervisor_event(
        b,
        0,
        aborted,
        end + 0.6,
        EVENT_LOG_LINE,
        f"[rank{aborted}]:  what():  [enforce fail at pair.cc:456] op.preamble.length <= op.nbytes. 1452 vs 4. "
        "Received data size doesn't match expected size. Is there a distributed collective mismatch in your code?",
        stream="stderr",
        signature="collective-mismatch",
    )
    supervisor_event(
        b, 0, aborted, end + 1, EVENT_RANK_EXIT, "x", exit_code=-6, signal="SIGABRT", first_observed=True
    )
    v = root(analyze_job(b.load(), AnalyzerConfig())).verdict
    assert v.category is Category.USER_CODE_ERROR, v
    assert "killed by SIGABRT" not in v.summary


def test_a_sigkill_is_from_outside_whatever_the_rank_printed_before():
    # an optional import's NumPy-2 complaint long before, then the rank SIGKILLed: the kill is the
    # reading (the host's OOM killer, usually), not the line it printed
    b = JobBuilder().world(4, per_node=2)
    end = b.steps(0, range(5), T0 + 5)
    supervisor_event(
        b,
        0,
        2,
        T0 + 1,
        EVENT_LOG_LINE,
        "[rank2]:AttributeError: _ARRAY_API not found",
        stream="stderr",
        signature="x",
    )
    for r in (0, 1, 3):
        b.event(0, r, end + 0.5, "exception", "RuntimeError: Connection reset by peer")
    sigkilled(b, 2, end + 1)
    v = root(analyze_job(b.load(), AnalyzerConfig())).verdict
    assert v.culprit.rank == 2 and "killed by SIGKILL" in v.summary, v.summary


@pytest.mark.parametrize("rank", [0, 3])
def test_a_job_without_hooks_is_judged_by_its_output(rank):
    """Only the supervisor's rows: ranks seen from outside, and the decisive lines."""
    b = JobBuilder()
    for r in range(4):
        b.rows["ranks"].append(
            {
                "job_id": "job1",
                "run_id": None,
                "attempt": 0,
                "rank": r,
                "node": "vm",
                "gpu": None,
                "pid": 100 + r,
                "local_rank": r,
                "world_size": 4,
                "hostname": "vm",
                "start_time": T0,
            }
        )
    supervisor_event(
        b,
        0,
        rank,
        T0 + 3,
        EVENT_LOG_LINE,
        f"[rank{rank}]:ValueError: bad batch shape at step 4",
        stream="stderr",
        signature="python-exception",
    )
    for r in (r for r in range(4) if r != rank):
        supervisor_event(
            b,
            0,
            r,
            T0 + 3.1,
            EVENT_LOG_LINE,
            f"[rank{r}]:RuntimeError: Connection closed by peer",
            stream="stderr",
            signature="peer-reset",
        )
    supervisor_event(
        b, 0, rank ^ 1, T0 + 4, EVENT_RANK_EXIT, "x", exit_code=-15, signal="SIGTERM", first_observed=True
    )  # a stop signal blames no one
    v = root(analyze_job(b.load(), AnalyzerConfig())).verdict
    assert v.category is Category.USER_CODE_ERROR
    assert (v.culprit.rank, v.culprit.node) == (rank, "vm")
    assert v.evidence[0].source == "captured_output"


# -- Flight Recorder ---------------------------------------------------------------------------------
def trace(rank: int, entered: int, members: str = "[0, 1, 2, 3]") -> dict:
    """A dump as torch 2.13 gloo writes it: the default group filed under '' in pg_config."""
    entries = [
        {
            "record_id": s,
            "pg_id": 0,
            "collective_seq_id": s,
            "p2p_seq_id": 0,
            "profiling_name": "gloo:all_reduce" if s % 2 else "gloo:broadcast",
            "process_group": ["0", "default_pg"],
            "state": "scheduled",
            "time_created_ns": int((T0 + s) * 1e9),
            "input_sizes": [[72]],
            "is_p2p": False,
        }
        for s in range(1, entered + 1)
    ]
    return {
        "version": "2.10",
        "entries": entries,
        "pg_config": {"": {"name": "", "desc": "", "ranks": members}},
        "pg_status": {
            "0": {
                "last_enqueued_collective": entered,
                "last_started_collective": -1,
                "last_completed_collective": entered,
            }
        },
    }


def test_dump_summary_repairs_the_default_group_name_for_fr_trace():
    t = trace(1, 5)
    fr._repair_group_names(t)
    assert set(t["pg_config"]) == {"0"}
    g = fr.summarize(t)["groups"][0]
    assert (g["name"], g["last_enqueued_collective"], g["ranks"]) == ("0", 5, "[0, 1, 2, 3]")
    assert [c["seq"] for c in g["collectives"]] == [1, 2, 3, 4, 5]


def fr_job(entered: dict[int, int], *, requested: bool, stacks: dict[int, str] | None = None) -> JobBuilder:
    b = JobBuilder().world(4, per_node=2)
    b.steps(0, range(5), T0 + 5)
    if requested:
        supervisor_event(b, 0, None, T0 + 40, EVENT_FR_REQUEST, "asked")
    for rank, n in entered.items():
        t = trace(rank, n)
        fr._repair_group_names(t)
        frames = {"MainThread": [(stacks or {}).get(rank, "train.py:10 in main: loss.backward()")]}
        supervisor_event(
            b, 0, rank, T0 + 41, EVENT_FR_DUMP, "dump", reason="asked", stacks=frames, **fr.summarize(t)
        )
    return b


_IN_A_KERNEL = "/opt/venv/lib/python3.11/site-packages/torch/cuda/__init__.py:985 in synchronize: return torch._C._cuda_synchronize()"
_SIMULATED = "/work/triage/reference_trainer/faults.py:133 in hang: time.sleep(0.5)"
# the script's own line, but a sync point: the GPU it waits on may be what is stuck
_AT_A_SYNC = "/workspace/train.py:88 in train: loss_val = loss.item()"


@pytest.mark.parametrize("behind", [0, 2, 3])
@pytest.mark.parametrize("frame", [_IN_A_KERNEL, _SIMULATED, _AT_A_SYNC])
def test_the_rank_that_never_entered_the_collective_is_the_hangs_culprit(behind, frame):
    entered = {r: 9 if r != behind else 8 for r in range(4)}
    b = fr_job(entered, requested=True, stacks={behind: frame})
    [f] = flight_recorder_findings(b.load(), AnalyzerConfig())
    v = f.verdict
    assert v.category is Category.COLLECTIVE_TIMEOUT and v.culprit.rank == behind
    assert "#9" in v.summary and frame in v.summary
    # stuck in a library's call (a kernel that never returns) or in a simulated GPU fault:
    # its node is the suspect
    assert v.culprit.node == f"node{behind // 2}"


@pytest.mark.parametrize("behind", [0, 3])
def test_a_hang_in_the_jobs_own_code_names_its_rank_but_not_its_node(behind):
    # a sleep or a loop the script wrote holds the others up: nothing says the node is at fault,
    # so it is neither excluded nor counted towards a quarantine
    entered = {r: 9 if r != behind else 8 for r in range(4)}
    b = fr_job(entered, requested=True, stacks={behind: "/home/me/train.py:47 in main: time.sleep(3600)"})
    [f] = flight_recorder_findings(b.load(), AnalyzerConfig())
    v = f.verdict
    assert v.category is Category.COLLECTIVE_TIMEOUT and v.culprit.rank == behind
    assert v.culprit.node is None and v.culprit.gpu is None
    assert "job's own code" in v.summary


def test_a_hang_both_witnesses_name_is_reported_from_the_recorder_with_its_stack():
    """Ranks 0-2 wait in collective #9 and rank 3 never entered it: the heartbeats (their wait
    began a little earlier) and the Flight Recorder name rank 3 alike; the verdict is the
    recorder's, which says where rank 3's main thread is, corroborated by the heartbeats."""
    b = fr_job({0: 9, 1: 9, 2: 9, 3: 8}, requested=True, stacks={3: "train.py:33 in fault: time.sleep(3600)"})
    for seq in range(1, 9):
        for r in range(4):
            b.collective(0, r, "0", seq, T0 + seq, T0 + seq + 0.05)
    for r in range(3):
        b.collective(0, r, "0", 9, T0 + 8.5, None)
    for k in range(30):
        for r in range(4):
            b.heartbeat(0, r, T0 + 9 + k, 4, ("all_gather", "0", 9, T0 + 8.5) if r < 3 else None)
    (root,) = [i for i in analyze_job(b.load(), AnalyzerConfig()).incidents if i.root]
    v = root.verdict
    assert v.category is Category.COLLECTIVE_TIMEOUT and v.culprit.rank == 3
    assert "time.sleep(3600)" in v.summary
    assert {e.source for e in v.evidence} >= {"flight_recorder", "heartbeats"}


def test_a_rank_silent_when_asked_is_named_and_equal_ranks_name_no_one():
    b = fr_job({0: 9, 1: 9, 3: 9}, requested=True)
    [f] = flight_recorder_findings(b.load(), AnalyzerConfig())
    assert f.verdict.culprit.rank == 2 and "gave no Flight Recorder dump" in f.verdict.summary
    # the same dumps without a request (ranks dumped on their way out): no one is missing
    assert (
        flight_recorder_findings(fr_job({0: 9, 1: 9, 3: 9}, requested=False).load(), AnalyzerConfig()) == []
    )


def test_dump_files_become_store_events(tmp_path):
    folder = fr.dump_dir(tmp_path, "job1", "run1", 2)
    folder.mkdir(parents=True)
    for rank, n in ((0, 9), (1, 8)):
        body = {
            "rank": rank,
            "pid": 10 + rank,
            "time": T0 + 50,
            "reason": "asked",
            **fr.summarize(trace(rank, n)),
            "stacks": {"MainThread": ["a", "b"]},
        }
        (folder / f"rank{rank}.json").write_text(json.dumps(body))
    (folder / "rank3.json").write_text("{not json")  # a torn dump is skipped
    rows = dump_event_rows(folder, "job1", "run1", 2, {1: "node1"}, "host", requested=T0 + 49)
    assert [(r["kind"], r["rank"], r["node"]) for r in rows] == [
        (EVENT_FR_REQUEST, None, "host"),
        (EVENT_FR_DUMP, 0, "host"),
        (EVENT_FR_DUMP, 1, "node1"),
    ]


def test_a_rank_dumps_on_request_once_and_keeps_that_dump(tmp_path, monkeypatch):
    """The dumper against a stand-in recorder: a request is answered once, and the SIGTERM
    that follows does not replace the hang's dump."""
    import torch._C._distributed_c10d as c10d
    import torch.distributed as dist

    calls = []
    monkeypatch.setenv(fr.ENV_BUFFER, "100")
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(
        c10d,
        "_dump_fr_trace",
        lambda **kw: calls.append(kw) or pickle.dumps(trace(1, 4 + len(calls))),
        raising=False,
    )
    d = fr.FlightRecorderDumper(tmp_path, rank=1)
    d.poll()
    assert calls == []  # no request yet
    fr.request_dumps(tmp_path)
    d.poll()
    d.poll()
    assert len(calls) == 1
    assert not d.dump("SIGTERM received")
    [dumped] = fr.read_dumps(tmp_path)
    assert dumped["reason"].startswith("the supervisor asked")
    assert dumped["groups"][0]["last_enqueued_collective"] == 5
    assert pickle.loads((tmp_path / "fr-rank1").read_bytes())["pg_config"].keys() == {"0"}
    assert "MainThread" in dumped["stacks"]


def test_a_capture_that_fails_still_drains_and_shows_the_pipe(tmp_path, monkeypatch, capfdbinary):
    """A reader that stopped would block the ranks once the pipe buffer (64 KiB) is full."""
    log = AttemptLog(tmp_path / "attempt-0.log", echo=True)
    monkeypatch.setattr(log, "_take", lambda *a: 1 / 0)
    r, w = os.pipe()
    log.attach(None, os.fdopen(r, "rb"))
    with os.fdopen(w, "wb") as out:
        for i in range(20000):  # 300 KB: far more than a pipe holds
            out.write(f"line {i:08d}\n".encode())
    log.close(timeout_s=30)
    assert capfdbinary.readouterr().err.count(b"\n") >= 20000
