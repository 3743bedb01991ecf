"""Bad data never stops Triage and never costs good data.

One case per kind of damage a data dir meets in the wild: each states what must happen (the
bad thing moved aside and reported, or refused with a one-line error and exit 2) and checks
that the good data beside it is all still there. `BAD_INPUTS` counts what was tried.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
from conftest import TRIAGE_CLI as TRIAGE
from store_spools import write_rank

from triage.store import ingest_spools, open_snapshot
from triage.trainer_hooks.spool_schema import writer_dir


def good_rank(data_dir: Path, node: str = "node0", job: str = "good", rank: int = 0) -> dict:
    counts, _ = write_rank(data_dir, node, job, 0, rank, steps=4)
    return counts


def stored_steps(data_dir: Path, job: str = "good") -> int:
    with open_snapshot(data_dir) as snap:
        return int(snap.sql("SELECT count(*) AS n FROM steps WHERE job_id = $1", [job])[0]["n"])


def triage(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*TRIAGE, *args], capture_output=True, text=True, timeout=120, env=env)


def assert_one_line_error(out: subprocess.CompletedProcess, *needles: str) -> None:
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr, out.stderr
    lines = [line for line in out.stderr.splitlines() if "error:" in line]
    assert lines, out.stderr
    for needle in needles:
        assert needle in out.stderr, out.stderr


# -- spool segments and directories ----------------------------------------------------------


def test_an_arrow_file_of_another_layout_is_quarantined_and_the_rest_ingested(tmp_path):
    counts = good_rank(tmp_path)
    d = writer_dir(tmp_path, "node0", "good", 0, 1, 77)
    d.mkdir(parents=True)
    other = pa.table({"x": [1]})  # well-formed Arrow IPC of one row, not a flush of structs
    with ipc.new_file(d / "00000000.arrow", other.schema) as w:
        w.write_table(other)
    report = ingest_spools(tmp_path, "node0")
    (err,) = report.errors
    assert err.path.endswith("00000000.arrow") and Path(err.quarantined_to).exists()
    assert stored_steps(tmp_path) == counts["steps"]
    assert ingest_spools(tmp_path, "node0").errors == []  # not read again


@pytest.mark.parametrize("command", ["analyze", "jobs"])
def test_a_damaged_segment_a_reading_command_ingests_is_said_with_where_it_is_kept(tmp_path, command):
    """`triage analyze` set such a segment aside in silence, and its job then looked as if it
    were still running: the reader must know records are missing."""
    good_rank(tmp_path)
    bad = next(writer_dir(tmp_path, "node0", "good", 0, 0, 0).parent.parent.rglob("*.arrow"))
    bad.write_bytes(bad.read_bytes()[: len(bad.read_bytes()) // 2])  # cut short, as a crash leaves it
    out = triage(command, *(["good"] if command == "analyze" else []), "--data-dir", str(tmp_path))
    assert "Traceback" not in out.stderr, out.stderr
    (warning,) = [line for line in out.stderr.splitlines() if bad.name in line]
    assert f"triage {command}: warning:" in warning and "kept in" in warning and "missing" in warning
    assert Path(warning.split("(kept in ")[1].split(")")[0]).exists()


@pytest.mark.parametrize("name", [b"job-\xff\xfe", b"two@runs@here", b"has space", b"-dash"])
def test_a_job_directory_no_writer_makes_is_moved_aside_unread(tmp_path, name):
    counts = good_rank(tmp_path)
    bad = os.path.join(os.fsencode(tmp_path / "spool" / "node0"), name, b"0", b"rank0-1")
    os.makedirs(bad)
    with open(os.path.join(bad, b"00000000.arrow"), "wb") as fh:
        fh.write(b"whatever")
    report = ingest_spools(tmp_path, "node0")
    (err,) = report.errors
    assert "not a spool directory name" in err.error and Path(err.quarantined_to).is_dir()
    assert not os.path.exists(os.path.dirname(os.path.dirname(bad)))
    assert stored_steps(tmp_path) == counts["steps"]
    out = triage("jobs", "--data-dir", str(tmp_path), "--json")
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("level,name", [(1, "first"), (2, "not-a-rank-dir")])
def test_attempt_and_writer_directories_are_checked_too(tmp_path, level, name):
    counts = good_rank(tmp_path)
    parts = ["good", "0", "rank0-4242"][:level] + [name]
    bad = tmp_path.joinpath("spool", "node0", *parts)
    bad.mkdir(parents=True)
    (bad / "00000000.arrow").write_bytes(b"x")
    (err,) = ingest_spools(tmp_path, "node0").errors
    assert name in err.path and not bad.exists()
    assert stored_steps(tmp_path) == counts["steps"]


def test_a_spool_the_agent_cannot_ingest_never_stops_its_gpu_records(tmp_path, monkeypatch, caplog):
    """Whatever breaks the spool ingest (here: every call raises) costs the ingest only: the
    simulated GPUs' samples are stored, `triage_agent_up` stays 1, the error is logged once."""
    from triage.agent import node_agent
    from triage.agent.config import AgentConfig
    from triage.collectors.gpu_backend import GpuConfig
    from triage.collectors.kernel_log import KernelLogConfig

    def broken(writer):
        raise UnicodeEncodeError("utf-8", "job-\udcff", 4, 5, "surrogates not allowed")

    monkeypatch.setattr(node_agent, "ingest_partition", broken)
    agent = node_agent.NodeAgent(
        AgentConfig(
            data_dir=str(tmp_path),
            node="n0",
            gpu="sim",
            gpus=GpuConfig(gpu="none", sim_gpus=2),
            kernel=KernelLogConfig("none"),
        )
    )
    try:
        now = time.time()
        for k in range(3):
            agent.collect(now + k, force=True)
            agent.store_batch(now + k)
        assert agent.state.agent_up
    finally:
        agent.close()
    with open_snapshot(tmp_path) as snap:
        assert snap.count("gpu_samples") == 6
    assert sum("ingesting the spools of n0 failed" in r.message for r in caplog.records) == 1


# -- the store --------------------------------------------------------------------------------


def two_nodes(tmp_path: Path) -> dict:
    """Job `good` on node0 and job `other` on node1, ingested."""
    counts = good_rank(tmp_path)
    good_rank(tmp_path, node="node1", job="other")
    report = ingest_spools(tmp_path)
    assert report.errors == [] and report.refused == []
    return counts


def jobs_listed(tmp_path: Path) -> tuple[set[str], str]:
    out = triage("jobs", "--data-dir", str(tmp_path), "--json")
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    import json

    return {j["job_id"] for j in json.loads(out.stdout)["jobs"]}, out.stderr


@pytest.mark.parametrize("damage", ["truncated", "not json", "other json", "empty"])
def test_a_damaged_manifest_costs_its_partition_only(tmp_path, damage):
    counts = two_nodes(tmp_path)
    manifest = tmp_path / "store" / "node1" / "MANIFEST.json"
    text = manifest.read_text()
    manifest.write_text(
        {
            "truncated": text[: len(text) // 2],
            "not json": "\x00\x01garbage",
            "other json": '{"format": "something else"}',
            "empty": "",
        }[damage]
    )
    before = sorted(p.name for p in (tmp_path / "store" / "node1").rglob("*.parquet"))
    jobs, warnings = jobs_listed(tmp_path)
    assert jobs == {"good"} and "partition node1 skipped" in warnings
    assert stored_steps(tmp_path) == counts["steps"]
    # a writer refuses it (one line, exit 2 for the command that needs it) and deletes nothing
    good_rank(tmp_path, node="node1", job="later")
    report = ingest_spools(tmp_path)
    assert len(report.refused) == 1 and "MANIFEST.json" in report.refused[0]
    assert sorted(p.name for p in (tmp_path / "store" / "node1").rglob("*.parquet")) == before
    assert any((tmp_path / "spool" / "node1" / "later").rglob("*.arrow"))  # still spooled


def test_segment_files_without_a_manifest_are_refused_not_deleted(tmp_path):
    two_nodes(tmp_path)
    part = tmp_path / "store" / "node1"
    (part / "MANIFEST.json").unlink()
    files = sorted(p.name for p in part.rglob("*.parquet"))
    assert files
    report = ingest_spools(tmp_path, "node1")
    (why,) = report.refused
    assert "no MANIFEST.json: refusing to start it empty" in why
    assert sorted(p.name for p in part.rglob("*.parquet")) == files
    jobs, _ = jobs_listed(tmp_path)
    assert jobs == {"good"}  # node1 is simply not a partition to readers


def test_an_unlisted_segment_of_an_older_generation_is_kept(tmp_path):
    """Orphan cleanup deletes only what a crashed commit of this writer could have left."""
    two_nodes(tmp_path)
    stray = tmp_path / "store" / "node0" / "steps" / "00000000-0123456789ab.parquet"
    stray.write_bytes(b"PAR1 someone's data PAR1")
    leftover = tmp_path / "store" / "node0" / "steps" / "99999999-0123456789ab.parquet"
    leftover.write_bytes(b"PAR1")
    good_rank(tmp_path, job="again", rank=3)
    ingest_spools(tmp_path, "node0")
    assert stray.exists() and not leftover.exists()


@pytest.mark.parametrize("damage", ["truncate", "zero", "remove"])
def test_an_unreadable_store_file_is_skipped_and_named(tmp_path, damage):
    two_nodes(tmp_path)
    (victim,) = (tmp_path / "store" / "node1" / "steps").glob("*.parquet")
    if damage == "remove":
        victim.unlink()
    else:
        data = victim.read_bytes()
        victim.write_bytes(data[: len(data) // 2] if damage == "truncate" else b"")
    jobs, warnings = jobs_listed(tmp_path)
    assert jobs == {"good", "other"} and f"{victim} skipped" in warnings
    out = triage("analyze", "good", "--data-dir", str(tmp_path), "--json")
    assert out.returncode in (0, 1) and "Traceback" not in out.stderr, out.stderr


def test_a_table_of_a_newer_version_is_ignored_with_a_note(tmp_path):
    import json

    two_nodes(tmp_path)
    manifest = tmp_path / "store" / "node0" / "MANIFEST.json"
    raw = json.loads(manifest.read_text())
    seg = dict(raw["segments"][0], table="from_the_future", file="from_the_future/x.parquet")
    raw["segments"].append(seg)
    manifest.write_text(json.dumps(raw))
    jobs, warnings = jobs_listed(tmp_path)
    assert jobs == {"good", "other"} and "from_the_future of a newer Triage ignored" in warnings


# -- hostile logs -----------------------------------------------------------------------------

WATCHDOG = (
    "[rank{r}]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog "
    "caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, "
    "Timeout(ms)=600000) ran for 600060 milliseconds before timing out."
)


# VmHWM, not ru_maxrss: the latter keeps the high-water mark of the forked copy of pytest
# from before the exec.
_MEASURED_CLASSIFY = """
import sys
from triage.cli import main
code = main(["classify", "--json", sys.argv[1]])
hwm = next(l for l in open("/proc/self/status") if l.startswith("VmHWM:")).split()[1]
print(f"peak_rss_kb={hwm}", file=sys.stderr)
sys.exit(code)
"""


def classify(path: Path) -> tuple[dict, int]:
    """`triage classify --json` of one file in a child of its own, and its peak RSS in MB."""
    import json

    out = subprocess.run(
        [sys.executable, "-c", _MEASURED_CLASSIFY, str(path)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode in (0, 1) and "Traceback" not in out.stderr, out.stderr
    peak_kb = int(out.stderr.rsplit("peak_rss_kb=", 1)[1])
    return json.loads(out.stdout), peak_kb // 1024


def test_a_huge_rank_number_in_a_log_costs_nothing(tmp_path):
    log = tmp_path / "hostile.log"
    log.write_text("[rank900000000]: starting\n" + WATCHDOG.format(r=0) + "\n" + WATCHDOG.format(r=1) + "\n")
    record, peak_mb = classify(log)
    assert record["category"] == "collective_timeout" and peak_mb < 400
    assert record["culprit"]["rank"] is None  # 900 million silent ranks are no one culprit


def test_a_log_of_many_distinct_ranks_is_remembered_boundedly():
    from triage.analyzers.log_classifier import MAX_DISTINCT, LogClassifier

    c = LogClassifier("x")
    for r in range(MAX_DISTINCT + 5000):
        c.feed(f"[rank{r}]: hello")
    assert len(c._ranks_seen) == MAX_DISTINCT


@pytest.mark.parametrize("content", ["empty", "binary", "one long line", "random bytes", "sparse 512MB"])
def test_odd_files_classify_to_a_clear_verdict(tmp_path, content):
    path = tmp_path / "odd.log"
    if content == "empty":
        path.write_bytes(b"")
    elif content == "binary":
        path.write_bytes(b"\x7fELF\x00\x00" * 1000)
    elif content == "one long line":
        path.write_bytes(b"x" * (64 << 20) + b" CUDA out of memory. Tried to allocate 2 GiB\n")
    elif content == "random bytes":
        path.write_bytes(os.urandom(1 << 20).replace(b"\x00", b"\x01"))
    else:  # a text head, then half a gigabyte of hole: one endless line of NULs
        with open(path, "wb") as fh:
            fh.write(WATCHDOG.format(r=0).encode() + b"\n")
            fh.truncate(512 << 20)
    record, peak_mb = classify(path)
    assert record["category"] and peak_mb < 400
    if content in ("empty", "binary"):
        assert record["category"] == "unknown" and content.split()[0] in record["summary"]


def test_a_missing_or_unreadable_log_is_one_line_and_exit_2(tmp_path):
    assert_one_line_error(triage("classify", str(tmp_path / "nope.log")), "cannot read")
    loop = tmp_path / "loop.log"
    loop.symlink_to(loop)
    assert_one_line_error(triage("classify", str(loop)), "cannot read")


# -- names ------------------------------------------------------------------------------------


@pytest.mark.parametrize("node", ["..", "a/b", ".", "x" * 200, "bad name"])
def test_a_node_name_that_is_no_directory_name_is_refused_everywhere(tmp_path, node):
    assert_one_line_error(
        triage("agent", "--data-dir", str(tmp_path), "--node", node, "--port", "0", "--gpu", "none"),
        "bad node name",
    )
    env = {**os.environ, "TRIAGE_NODE": node}
    assert_one_line_error(
        triage("agent", "--data-dir", str(tmp_path), "--port", "0", "--gpu", "none", env=env),
        "env TRIAGE_NODE",
    )
    assert not (tmp_path / "store").exists() or not any((tmp_path / "store").iterdir())


@pytest.mark.parametrize("job", ["../x", "a/b", "job@run"])
def test_a_job_id_that_is_no_directory_name_is_refused(tmp_path, job):
    out = triage("run", "--data-dir", str(tmp_path), "--job-id", job, "--agents", "none", "--", "true")
    assert_one_line_error(out, "bad job id")
    assert not (tmp_path / "spool").exists() and not (tmp_path / "locks").exists()


def test_a_command_that_cannot_start_is_refused_not_retried(tmp_path):
    # every attempt would fail at its first instruction: no restart, no verdict, exit 2
    out = triage("run", "--data-dir", str(tmp_path), "--agents", "none", "--", "torchrunn", "train.py")
    assert_one_line_error(out, "cannot start 'torchrunn'", "no such command")
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/sh\necho hi\n")  # not executable
    out = triage("run", "--data-dir", str(tmp_path), "--agents", "none", "--", str(script))
    assert_one_line_error(out, "not an executable file")
    assert not (tmp_path / "spool").exists()


def test_a_hang_timeout_too_short_to_see_work_outside_steps_is_said_so(tmp_path):
    # an 8 s timeout stopped a healthy 15 s evaluation as a hang: the user is told up front
    out = triage("run", "--data-dir", str(tmp_path), "--agents", "none", "--hang-timeout", "8", "--", "true")
    assert out.returncode == 0, out.stderr
    assert "note: --hang-timeout 8 s is shorter than the 20 s" in out.stderr
    out = triage("run", "--data-dir", str(tmp_path), "--agents", "none", "--hang-timeout", "60", "--", "true")
    assert out.returncode == 0 and "note:" not in out.stderr


# -- durability -------------------------------------------------------------------------------

_CRASHING_INGEST = r"""
import os, sys
from triage.store import ingest
from triage.store import manifest, writer
point, n = sys.argv[2], int(sys.argv[3])
calls = {"fsync": 0, "replace": 0}
real_fsync, real_replace = writer.fsync_path, os.replace
def fsync(path):
    calls["fsync"] += 1
    if point == "fsync" and calls["fsync"] == n:
        os._exit(137)  # the kernel's SIGKILL: no cleanup, no flush
    real_fsync(path)
def replace(a, b):
    if point == "replace":
        os._exit(137)
    real_replace(a, b)
writer.fsync_path = manifest.fsync_path = fsync
manifest.os.replace = replace
ingest.ingest_spools(sys.argv[1], "node0")
print(calls["fsync"])
"""


def test_a_writer_killed_at_any_step_of_a_commit_loses_and_duplicates_nothing(tmp_path):
    """Kill the ingesting process at every fsync of a commit (each segment file, each folder,
    the manifest's own) and just before the manifest's rename: readers then see the old state
    or the new one, and the next ingest stores every row exactly once."""
    points = [("replace", 0)] + [("fsync", k) for k in range(1, 40)]
    for point, n in points:
        data = tmp_path / f"{point}-{n}"
        counts = good_rank(data)
        good_rank(data, rank=1)
        out = subprocess.run(
            [sys.executable, "-c", _CRASHING_INGEST, str(data), point, str(n)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if out.returncode == 0:  # past the last fsync: every crash point was tried
            assert point == "fsync" and n > 3, out.stdout
            break
        assert out.returncode == 137, out.stderr
        assert stored_steps(data) in (0, 2 * counts["steps"]), (point, n)
        ingest_spools(data, "node0")
        assert stored_steps(data) == 2 * counts["steps"], (point, n)
        with open_snapshot(data) as snap:
            assert snap.count("collectives") == 2 * counts["collectives"]
    else:
        pytest.fail("the ingest never completed without a crash")


def test_the_bad_input_benchmark_contains_every_case_and_loses_no_row():
    import json

    out = triage("bench", "bad-inputs", "--json")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr
    result = json.loads(out.stdout)
    assert result["tried"] >= 16 and result["contained"] == result["tried"]
    assert result["rows_lost"] == 0
    assert all(c["reported"] for c in result["cases"])


@pytest.mark.slow
def test_a_supervised_job_beside_damaged_data_runs_to_completion(tmp_path):
    """Damage in the spool of the job's own node and in an unrelated partition: the node
    agent and the supervisor move past it, and the job trains to the end undisturbed."""
    import json

    data = tmp_path / "data"
    good_rank(data, node="node0", job="older", rank=0)
    ingest_spools(data)
    other = writer_dir(data, "node0", "older", 1, 0, 5)
    other.mkdir(parents=True)
    (other / "00000000.arrow").write_bytes(os.urandom(1000))
    os.makedirs(os.path.join(os.fsencode(data / "spool" / "node0"), b"bad-\xff", b"0", b"rank0-1"))
    good_rank(data, node="node9", job="elsewhere")
    ingest_spools(data, "node9")
    good_rank(data, node="node9", job="elsewhere", rank=1)  # pending, behind a broken manifest
    (data / "store" / "node9" / "MANIFEST.json").write_text('{"format": ')
    out = subprocess.run(
        [
            *TRIAGE,
            "run",
            "--data-dir",
            str(data),
            "--job-id",
            "beside",
            "--json",
            "--backoff",
            "0",
            "--",
            *TRIAGE,
            "train",
            "--nnodes",
            "1",
            "--nproc-per-node",
            "1",
            "--model",
            "tiny",
            "--steps",
            "6",
            "--run-dir",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout)
    assert report["status"] == "completed" and len(report["attempts"]) == 1
    assert report["attempts"][0]["last_step"] == 6 and report["store_errors"] == []
    quarantined = list((data / "store" / "node0" / "quarantine").rglob("*"))
    assert any(p.name == "00000000.arrow" for p in quarantined)
    assert any(p.name.startswith("bad-") for p in quarantined)
    assert stored_steps(data, "older") == 4


def test_a_full_disk_loses_no_spooled_row_and_a_read_only_one_still_reads(tmp_path):
    """A real full filesystem (an 8 MB tmpfs) and a real read-only remount, in a private
    mount namespace: the ingest fails and keeps every spool segment, `triage jobs` says why
    and lists what is stored; with space again every row is stored; read-only, the store is
    read and the failed ingest is a warning."""
    import json

    mnt = tmp_path / "small"
    mnt.mkdir()
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"no private mount namespace here: {probe.stderr.decode().strip()}")
    script = Path(__file__).parent / "workloads" / "full_and_readonly_disk.py"
    out = subprocess.run(
        [
            "unshare",
            "-m",
            "sh",
            "-c",
            f'mount -t tmpfs -o size=8m tmpfs "{mnt}" && "{sys.executable}" "{script}" "{mnt}"',
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads(out.stdout)
    assert r["kept_while_full"] and r["spooled"] > 0
    assert r["full_rc"] == 0 and "No space left on device" in r["full_stderr"]
    assert "Traceback" not in r["full_stderr"]
    assert r["stored_after_space"] == r["expected_steps"]
    assert r["ro_jobs_rc"] == 0 and [j["job_id"] for j in r["ro_jobs"]] == ["job"]
    assert "could not ingest" in r["ro_jobs_stderr"] and "Read-only file system" in r["ro_jobs_stderr"]
    assert r["ro_analyze_rc"] in (0, 1) and "Traceback" not in r["ro_analyze_stderr"]


def test_a_segment_damaged_past_the_cheap_checks_is_found_and_skipped(tmp_path):
    """Magic and footer length right, footer garbage: only DuckDB can tell; the reader finds
    the file, names it, and reads the rest."""
    two_nodes(tmp_path)
    (victim,) = (tmp_path / "store" / "node1" / "steps").glob("*.parquet")
    size = victim.stat().st_size
    victim.write_bytes(b"PAR1" + os.urandom(size - 12) + (64).to_bytes(4, "little") + b"PAR1")
    jobs, warnings = jobs_listed(tmp_path)
    assert jobs == {"good", "other"} and f"{victim} skipped" in warnings
    assert stored_steps(tmp_path) == 4


def test_an_error_about_the_data_is_one_line_and_exit_2_a_bug_is_a_traceback(tmp_path, monkeypatch, capsys):
    import duckdb

    from triage.cli import main
    from triage.commands import jobs

    two_nodes(tmp_path)

    def damaged(*a, **kw):
        raise duckdb.IOException("Could not read enough bytes from file x.parquet")

    monkeypatch.setattr(jobs, "open_snapshot", damaged)
    assert main(["jobs", "--data-dir", str(tmp_path), "--no-ingest"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "IOException: Could not read enough bytes" in err[0]
    monkeypatch.setattr(jobs, "open_snapshot", lambda *a, **kw: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        main(["jobs", "--data-dir", str(tmp_path), "--no-ingest"])
