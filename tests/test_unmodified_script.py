"""`triage run -- torchrun script.py` on a plain DDP script with no Triage code in it."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from triage.store import open_snapshot

WORKLOAD = Path(__file__).parent / "workloads" / "ddp_train.py"
pytestmark = pytest.mark.slow


def _run(tmp_path: Path, *flags: str) -> dict:
    torchrun = str(Path(sys.executable).parent / "torchrun")
    out = subprocess.run(
        [sys.executable, "-m", "triage.cli", "run", "--json", "--data-dir", str(tmp_path / "d"),
         "--job-id", "plain", "--startup-timeout", "1", *flags, "--", torchrun,
         "--nproc-per-node", "2", str(WORKLOAD), "--steps", "12",
         "--checkpoint", str(tmp_path / "ck.pt")],
        capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    text = "\n" + out.stdout  # the script's own prints come first; the report is last
    return json.loads(text[text.rindex("\n{\n") + 1:])


def test_auto_hooks_record_the_optimizer_steps_of_an_unmodified_script(tmp_path):
    report = _run(tmp_path)
    assert report["status"] == "completed"
    with open_snapshot(tmp_path / "d") as snap:
        rows = snap.con.execute(
            "SELECT rank, min(step), max(step), count(*) FROM steps GROUP BY rank ORDER BY rank"
        ).fetchall()
        hooks = snap.con.execute(
            "SELECT DISTINCT json_extract_string(detail, '$.hooks') FROM events "
            "WHERE kind = 'process_start'").fetchall()
    # AdamW's own step count numbers the steps: 1..12 on both ranks
    assert rows == [(0, 1, 12, 12), (1, 1, 12, 12)]
    assert hooks == [("auto",)]


def test_a_job_without_step_telemetry_is_never_stopped_as_hung(tmp_path):
    # no hooks at all and a start-up timeout far below the job's run time: it must complete
    report = _run(tmp_path, "--no-auto-hooks")
    assert report["status"] == "completed"
    assert [a["outcome"] for a in report["attempts"]] == ["completed"]
