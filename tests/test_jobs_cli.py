"""`triage jobs`: the table, --json, an empty store and a bad data dir."""

from __future__ import annotations

import json

from store_spools import write_rank

from triage.cli import main


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
    (tmp_path / "notes.txt").write_text("not a data dir")
    monkeypatch.setenv("TRIAGE_DATA_DIR", str(tmp_path))
    assert main(["jobs"]) == 2
    assert "not a Triage data directory" in capsys.readouterr().err
