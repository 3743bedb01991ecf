"""`triage jobs`: the table (statuses in triage.display's colours, times in UTC), --json, an
empty store and a bad data dir."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from rich.color import Color
from store_spools import write_rank

from triage.cli import main
from triage.commands import jobs
from triage.display import Status, status_colour, when


def test_lists_jobs_after_ingesting_pending_spools(tmp_path, capsys):
    for rank in (0, 1):
        write_rank(tmp_path, "n0", "train-42", 0, rank, steps=3, events=("exit",))
    assert main(["jobs", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "train-42" in out and "completed" in out


def test_json(tmp_path, capsys):
    write_rank(tmp_path, "n0", "j1", 0, 0, steps=3, events=("sigterm",))
    write_rank(tmp_path, "n0", "j1", 1, 0, steps=5)
    write_rank(tmp_path, "n0", "j1", 1, 1, steps=5)
    assert main(["jobs", "--data-dir", str(tmp_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (job,) = doc["jobs"]
    assert (job["job_id"], job["attempts"], job["ranks"], job["max_step"]) == ("j1", 2, 2, 4)
    assert job["status"] == "failed"  # heartbeats from 1970: no longer running, no clean exit
    assert doc["ingest"]["rows"]["steps"] == 13


def test_no_ingest_only_reads(tmp_path, capsys):
    write_rank(tmp_path, "n0", "j1", 0, 0, steps=1)
    assert main(["jobs", "--data-dir", str(tmp_path), "--json", "--no-ingest"]) == 0
    assert json.loads(capsys.readouterr().out)["jobs"] == []


def test_empty_store_says_what_to_run(tmp_path, capsys):
    assert main(["jobs", "--data-dir", str(tmp_path)]) == 0
    assert "triage demo" in capsys.readouterr().out


def test_missing_or_foreign_data_dir_exits_2(tmp_path, capsys, monkeypatch):
    assert main(["jobs", "--data-dir", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err
    # a file given for the folder says so, not that it is missing
    (tmp_path / "afile").write_text("x")
    assert main(["jobs", "--data-dir", str(tmp_path / "afile")]) == 2
    assert "is a file, not a directory" in capsys.readouterr().err
    assert main(["run", "--data-dir", str(tmp_path / "afile"), "--", "true"]) == 2
    assert "is a file, not a directory" in capsys.readouterr().err
    assert main(["run", "--data-dir", str(tmp_path / "d"), "--agents", "bogus!", "--", "true"]) == 2
    err = capsys.readouterr().err
    assert "bad node name 'bogus!' (--agents)" in err and "kept under" not in err
    (tmp_path / "notes.txt").write_text("not a data dir")
    monkeypatch.setenv("TRIAGE_DATA_DIR", str(tmp_path))
    assert main(["jobs"]) == 2
    assert "not a Triage data directory" in capsys.readouterr().err


def _seen(run: dict) -> float:
    keys = ("last_progress", "last_heartbeat", "end_time", "start_time")
    return max(run[k] for k in keys if run[k] is not None)


def test_table_shows_last_seen_in_utc_as_display_writes_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    write_rank(tmp_path, "n0", "train-42", 0, 0, steps=3, events=("exit",))
    assert main(["jobs", "--data-dir", str(tmp_path), "--json"]) == 0
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    assert main(["jobs", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "(times in UTC)" in out
    assert when(_seen(run))[5:19] in out and when(_seen(run)).endswith(" UTC")


@pytest.mark.parametrize("columns", [80, 200])
def test_ids_and_times_stay_whole_at_any_width(tmp_path, capsys, monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", str(columns))
    job = "demo-gpu-lost-20261206-031049"
    write_rank(tmp_path, "n0", job, 0, 0, steps=3, events=("exit",))
    assert main(["jobs", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert job in out and max(len(line.rstrip()) for line in out.splitlines()) <= columns
    assert re.search(r"\d\d-\d\d \d\d:\d\d:\d\d", out) and re.search(r"\S+ ago", out)


def _sgr(colour: str) -> str:
    """The truecolor foreground escape of a hex colour, as rich writes it."""
    r, g, b = Color.parse(colour).get_truecolor()
    return f"38;2;{r};{g};{b}m"


def test_statuses_take_their_colour_from_triage_display(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("COLORTERM", "truecolor")
    monkeypatch.delenv("NO_COLOR", raising=False)
    write_rank(tmp_path, "n0", "ok", 0, 0, steps=3, events=("exit",))
    write_rank(tmp_path, "n0", "bad", 0, 0, steps=3)  # heartbeats from 1970: failed
    assert main(["jobs", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    # completed in its colour; failed needs attention, so bold (1;) as well
    assert _sgr(status_colour("completed")) + "completed" in out
    assert "1;" + _sgr(status_colour("failed")) + "failed" in out


def test_status_style_uses_the_one_colour_definition():
    assert jobs.status_style("completed") == status_colour("completed") == Status.COMPLETED.colour
    assert jobs.status_style("gave_up") == f"bold {Status.GAVE_UP.colour}"
    assert jobs.status_style("no-such-status") == status_colour("no-such-status")  # grey, not an error
    source = (Path(jobs.__file__)).read_text()
    assert "_STATUS_STYLE" not in source and '"bold red"' not in source


def test_a_bad_heartbeat_timeout_names_its_flag(tmp_path, capsys):
    assert main(["jobs", "--data-dir", str(tmp_path), "--heartbeat-timeout-s", "-1"]) == 2
    assert "--heartbeat-timeout-s must be > 0, got -1.0" in capsys.readouterr().err
