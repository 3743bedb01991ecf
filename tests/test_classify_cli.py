"""`triage classify` and `triage bench classify` end to end through the CLI entry point."""

import io
import json
import random
import re
import sys
from pathlib import Path

from triage.cli import main

CORPUS = Path(__file__).parent / "data" / "logs"
ECC = CORPUS / "cascade_ecc_rank3_torchrun.log"


def _json_lines(out):
    return [json.loads(line) for line in out.strip().splitlines()]


def test_json_one_object_per_file(capsys):
    rc = main(["classify", "--json", str(ECC), str(CORPUS / "dmesg_xid79_three_gpus.log")])
    records = _json_lines(capsys.readouterr().out)
    assert rc == 0 and len(records) == 2
    ecc = records[0]
    assert set(ecc) >= {"file", "category", "layer", "action", "confidence", "culprit", "summary", "evidence"}
    assert (ecc["file"], ecc["category"], ecc["layer"], ecc["action"]) == (
        str(ECC),
        "gpu_memory_error",
        "gpu",
        "restart_excluding_node",
    )
    assert ecc["culprit"] == {"rank": 3, "node": None, "gpu": None}
    assert ecc["evidence"][0] == {
        "line": 5,
        "text": "[rank3]: RuntimeError: CUDA error: uncorrectable ECC error encountered",
    }
    assert records[1]["category"] == "gpu_fallen_off_bus"


def test_human_report_names_category_culprit_and_evidence(capsys):
    assert main(["classify", str(ECC)]) == 0
    out = capsys.readouterr().out
    assert "gpu_memory_error" in out and "rank 3" in out
    assert "[rank3]: RuntimeError: CUDA error: uncorrectable ECC error encountered" in out


def test_stdin(monkeypatch, capsys):
    data = b"slurmstepd: error: *** JOB 608 ON gpu-3 CANCELLED AT 2022-08-12T02:06:12 DUE TO PREEMPTION ***\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert main(["classify", "--json", "-"]) == 0
    (rec,) = _json_lines(capsys.readouterr().out)
    assert (rec["file"], rec["category"], rec["culprit"]["node"]) == ("<stdin>", "preemption", "gpu-3")


def test_binary_empty_and_missing_input(tmp_path, capsys, monkeypatch):
    binary = tmp_path / "core.bin"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\0\0\0 No space left on device\n")
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    missing = tmp_path / "nope.log"
    rc = main(["classify", "--json", str(binary), str(missing), str(empty), str(ECC)])
    captured = capsys.readouterr()
    records = {Path(r["file"]).name: r for r in _json_lines(captured.out)}
    assert rc == 2  # a missing path is bad input, the other files are still reported
    assert records["core.bin"]["category"] == "unknown" and "binary" in records["core.bin"]["summary"]
    assert records["empty.log"]["category"] == "unknown" and "empty" in records["empty.log"]["summary"]
    assert records["nope.log"]["category"] == "unknown" and "error" in records["nope.log"]
    assert records[ECC.name]["category"] == "gpu_memory_error"
    assert "nope.log" in captured.err
    # read by a person: why it was not read, said once (not as its summary and its error), and a
    # path with brackets shown as it is
    monkeypatch.chdir(tmp_path)
    assert main(["classify", "[rank0] nope.log"]) == 2
    shown = " ".join(capsys.readouterr().out.split())
    assert shown.count("cannot read") == 1 and "[rank0] nope.log" in shown, shown


def test_a_log_with_a_crashs_nul_padding_or_in_utf16_is_read_and_random_bytes_are_not(tmp_path, capsys):
    traceback = (
        "[rank2]: Traceback (most recent call last):\n"
        '[rank2]:   File "train.py", line 3, in <module>\n'
        "[rank2]: RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    logs = {
        # a node that crashed mid-write leaves NUL blocks where the last writes never landed
        "padded_end.log": traceback.encode() + b"\0" * 4096,
        "padded_start.log": b"\0" * 9000 + traceback.encode(),
        "stray_nul.log": traceback.replace("Traceback", "Trace\0back").encode(),
        # Windows PowerShell's `>` writes UTF-16 with a byte order mark; without one, too
        "powershell.log": traceback.encode("utf-16"),
        "utf16le.log": traceback.encode("utf-16-le"),
        "random.bin": random.Random(7).randbytes(20000),
    }
    for name, data in logs.items():
        (tmp_path / name).write_bytes(data)
    assert main(["classify", "--json", *(str(tmp_path / n) for n in logs)]) == 0
    records = {Path(r["file"]).name: r for r in _json_lines(capsys.readouterr().out)}
    for name in logs:
        if name == "random.bin":
            assert records[name]["category"] == "unknown" and "binary" in records[name]["summary"]
            continue
        rec = records[name]
        assert (rec["category"], rec["culprit"]["rank"]) == ("cuda_error", 2), name
        assert rec["evidence"][0]["line"] == 3, name
        assert "\0" not in rec["evidence"][0]["text"]


def test_long_lines_and_invalid_utf8_are_streamed(tmp_path, capsys):
    log = tmp_path / "big.log"
    with log.open("wb") as f:
        f.write(b"x" * 200_000 + b"\n")  # one line longer than the read size
        f.write(b"\xff\xfe garbage \xc3\x28\n")  # not UTF-8
        for i in range(5000):
            f.write(b"step %d loss 2.1\n" % i)
        f.write(b"[rank6]: OSError: [Errno 28] No space left on device\n")
    assert main(["classify", "--json", str(log)]) == 0
    (rec,) = _json_lines(capsys.readouterr().out)
    assert rec["category"] == "storage_error" and rec["culprit"]["rank"] == 6
    assert rec["evidence"][0]["line"] == 5003  # the over-long line is cut, not split


def test_the_end_of_an_over_long_line_is_read_as_a_terminal_shows_it(tmp_path, capsys):
    # tqdm's carriage-return updates, megabytes of them on one line, and the error printed
    # after the last one: the line's end is read (its middle skipped), and the words after the
    # last carriage return are the evidence, with their rank
    bar = "\r".join(f"Epoch 0: {i % 100}%|#| {i % 100}/100 [00:01<00:02, loss=2.1]" for i in range(60_000))
    for culprit in (3, 12):
        log = tmp_path / f"bar{culprit}.log"
        error = f"[rank{culprit}]: RuntimeError: CUDA error: an illegal memory access was encountered"
        log.write_text(f"start\n{bar}\r{error}\nstep 9 loss 2.1\n")
        assert main(["classify", "--json", str(log)]) == 0
        (rec,) = _json_lines(capsys.readouterr().out)
        assert (rec["category"], rec["culprit"]["rank"]) == ("cuda_error", culprit), rec
        assert rec["evidence"][0]["line"] == 2 and rec["evidence"][0]["text"].startswith(f"[rank{culprit}]:")


def test_a_long_read_says_how_far_it_has_come_where_asked(tmp_path, monkeypatch, capsys):
    from triage.commands import classify as classify_command

    monkeypatch.setattr(classify_command, "_PROGRESS_EVERY_S", 0.0)  # every check, not every 2 s
    log = tmp_path / "long.log"
    lines = [f"step {i} loss 2.1" for i in range(3 * classify_command._PROGRESS_CHECK_LINES)]
    log.write_text("\n".join([*lines, "[rank6]: OSError: [Errno 28] No space left on device"]) + "\n")
    assert main(["classify", "--json", "--progress", str(log)]) == 0
    said = capsys.readouterr()
    assert _json_lines(said.out)[0]["category"] == "storage_error"  # the report is untouched
    reports = said.err.splitlines()
    shape = re.compile(
        rf"triage classify: {re.escape(str(log))}: [\d.]+ of [\d.]+ MB \(\d+%\) read, ([\d,]+) lines"
    )
    counts = [int(m.group(1).replace(",", "")) for r in reports if (m := shape.match(r))]
    assert len(counts) == len(reports) >= 2 and counts == sorted(counts), reports
    # stdin's size is unknown: what was read, no share of it
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(log.read_bytes())))
    assert main(["classify", "--json", "--progress", "-"]) == 0
    piped = capsys.readouterr().err.splitlines()
    assert len(piped) == len(reports) and all(
        re.match(r"triage classify: <stdin>: [\d.]+ MB read", r) for r in piped
    )
    # not on a terminal and not asked: nothing said
    assert main(["classify", "--json", str(log)]) == 0 and capsys.readouterr().err == ""


def test_bad_threshold_is_usage_error(capsys):
    assert main(["classify", "--threshold", "2", str(ECC)]) == 2
    assert "--threshold" in capsys.readouterr().err


def test_bench_classify_json(capsys):
    assert main(["bench", "classify", "--json", "--repeat", "1"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["files"] >= 60 and result["accuracy"] >= result["target"] == 0.86
    assert result["lines_per_s"] > 0 and isinstance(result["misses"], list)


def test_bench_classify_reports_each_split_with_f1_and_confusion(tmp_path, capsys):
    md = tmp_path / "classify.md"
    assert main(["bench", "classify", "--json", "--repeat", "1", "--markdown", str(md)]) == 0
    result = json.loads(capsys.readouterr().out)
    tuned, held = result["splits"]["tuned"], result["splits"]["heldout"]
    assert tuned["files"] + held["files"] == result["files"]
    assert set(held) >= {"per_category", "macro_f1", "micro_f1", "confusion", "rank_accuracy"}
    assert held["micro_f1"] == held["accuracy"]
    assert sum(sum(row.values()) for row in held["confusion"].values()) == held["files"]
    text = md.read_text()
    assert "### tuned" in text and "### heldout" in text and "| category | precision |" in text
    # --target applies to the split asked for: its own accuracy decides the exit status.
    rc = main(["bench", "classify", "--json", "--repeat", "1", "--split", "heldout", "--target", "1"])
    only = json.loads(capsys.readouterr().out)
    assert rc == (0 if only["accuracy"] >= 1.0 else 1)
    assert only["split"] == "heldout" and only["files"] == held["files"] and "splits" not in only


def test_bench_classify_fails_below_target_and_reports_misses(tmp_path, capsys):
    (tmp_path / "a.log").write_text("NVRM: Xid (PCI:0000:06:00): 79, GPU has fallen off the bus.\n")
    (tmp_path / "labels.json").write_text(
        json.dumps({"a.log": {"category": "host_oom", "culprit_rank": None, "source": "https://example.org"}})
    )
    assert main(["bench", "classify", "--json", "--corpus", str(tmp_path), "--repeat", "1"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["misses"] == [
        {
            "file": "a.log",
            "expected": "host_oom",
            "got": "gpu_fallen_off_bus",
            "summary": result["misses"][0]["summary"],
        }
    ]


def test_bench_missing_corpus_is_usage_error(tmp_path, capsys):
    assert main(["bench", "classify", "--corpus", str(tmp_path)]) == 2
    assert "labels.json" in capsys.readouterr().err


def test_line_numbers_count_newlines_only_even_in_the_first_block(tmp_path, capsys):
    """A progress bar's carriage-return updates stay one line wherever they are in the file, so
    the evidence's line number is the one `grep -n` and editors show."""
    log = tmp_path / "bars.log"
    bar = "\r".join(f"Epoch 0:  {i}%|#| {i}/100" for i in range(100))
    log.write_text(f"{bar}\nstep 1\n[rank2]: OSError: [Errno 28] No space left on device\n")
    assert main(["classify", "--json", str(log)]) == 0
    (rec,) = _json_lines(capsys.readouterr().out)
    assert rec["category"] == "storage_error" and rec["evidence"][0]["line"] == 3


def test_compressed_logs_read_as_the_text_they_hold(tmp_path, monkeypatch, capsys):
    # rotated logs (kern.log.2.gz) and copied job outputs come compressed; told by magic bytes,
    # so a misnamed file is read too
    import bz2
    import gzip
    import lzma

    text = ECC.read_bytes()
    files = {"a.log.gz": gzip.compress(text), "b.out.bz2": bz2.compress(text), "c.xz": lzma.compress(text)}
    files["misnamed.log"] = gzip.compress(text)
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    assert main(["classify", "--json", *(str(tmp_path / n) for n in files)]) == 0
    records = _json_lines(capsys.readouterr().out)
    assert [(r["category"], r["culprit"]["rank"]) for r in records] == [("gpu_memory_error", 3)] * 4
    assert {r["evidence"][0]["line"] for r in records} == {5}  # line numbers of the text, not the archive
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(gzip.compress(text))))
    assert main(["classify", "--json", "-"]) == 0
    assert _json_lines(capsys.readouterr().out)[0]["category"] == "gpu_memory_error"


def test_a_truncated_archive_keeps_the_verdict_of_what_was_read(tmp_path, capsys):
    import gzip

    lines = [f"step {i} loss 2.1 some padding to make the archive longer {i * 7919}" for i in range(20000)]
    lines.insert(40, "[rank5]: OSError: [Errno 28] No space left on device")
    whole = gzip.compress("\n".join(lines).encode())
    cut = tmp_path / "train.log.gz"
    cut.write_bytes(whole[: len(whole) // 2])  # a copy taken while the file was being written
    assert main(["classify", "--json", str(cut)]) == 2
    captured = capsys.readouterr()
    (rec,) = _json_lines(captured.out)
    assert rec["category"] == "storage_error" and rec["culprit"]["rank"] == 5
    assert "broke off after line" in rec["error"] and "broke off" in captured.err
    read = int(rec["error"].split("after line ")[1].split()[0])
    assert 1000 < read < 20000  # everything before the damage was read, not just the first block


def test_a_compression_it_cannot_read_says_how_to_read_it(tmp_path, capsys):
    zst = tmp_path / "job.log.zst"
    zst.write_bytes(b"\x28\xb5\x2f\xfd" + b"\0" * 40)
    assert main(["classify", "--json", str(zst), str(ECC)]) == 2
    records = _json_lines(capsys.readouterr().out)
    assert "zstd -dc" in records[0]["error"] and records[1]["category"] == "gpu_memory_error"


def test_a_directory_is_every_file_under_it_and_binaries_there_are_skipped(tmp_path, capsys):
    import gzip

    logs = tmp_path / "torchrun-logs"
    (logs / "attempt_0" / "3").mkdir(parents=True)
    (logs / "attempt_0" / "0").mkdir(parents=True)
    (logs / "attempt_0" / "3" / "stderr.log").write_bytes(ECC.read_bytes())
    (logs / "attempt_0" / "0" / "stderr.log.gz").write_bytes(gzip.compress(b"[rank0]: KeyError: 'lr'\n"))
    (logs / "core.1234").write_bytes(b"\x7fELF\0\0\0")
    empty_dir = tmp_path / "nothing-here"
    empty_dir.mkdir()
    assert main(["classify", "--json", str(logs), str(empty_dir)]) == 2
    captured = capsys.readouterr()
    records = _json_lines(captured.out)
    names = [Path(r["file"]).relative_to(tmp_path).as_posix() for r in records]
    assert names == [
        "torchrun-logs/attempt_0/0/stderr.log.gz",
        "torchrun-logs/attempt_0/3/stderr.log",
        "nothing-here",
    ]
    assert [r["category"] for r in records[:2]] == ["user_code_error", "gpu_memory_error"]
    assert "no file under it" in records[2]["error"]
    assert "skipped 1 binary file(s) under" in captured.err


def test_a_plain_log_that_starts_like_an_archive_is_read_as_text(tmp_path, capsys):
    log = tmp_path / "bzh.log"  # "BZh" is bzip2's magic, but no bzip2 stream follows it
    log.write_bytes(b"BZh run 4 started\n[rank2]: KeyError: 'lr'\n")
    assert main(["classify", "--json", str(log)]) == 0
    (rec,) = _json_lines(capsys.readouterr().out)
    assert (rec["category"], rec["culprit"]["rank"]) == ("user_code_error", 2)


def test_a_directory_of_binaries_and_one_that_cannot_be_listed_are_reported(tmp_path, monkeypatch, capsys):
    import os

    binaries = tmp_path / "cores"
    binaries.mkdir()
    (binaries / "core.1").write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 9 + b"\x04\0\x3e\0\x01")
    assert main(["classify", "--json", str(binaries)]) == 0
    (rec,) = _json_lines(capsys.readouterr().out)
    assert rec["category"] == "unknown" and "holds no text log" in rec["summary"]

    locked = tmp_path / "locked"
    (locked / "sub").mkdir(parents=True)
    (locked / "a.log").write_bytes(ECC.read_bytes())
    real_walk = os.walk

    def walk_with_a_locked_subdir(top, onerror=None, **kw):
        yield from real_walk(top, **kw)
        onerror(PermissionError(13, "Permission denied", str(locked / "sub")))

    monkeypatch.setattr("triage.commands.classify.os.walk", walk_with_a_locked_subdir)
    assert main(["classify", "--json", str(locked)]) == 2  # a part not read is not a clean pass
    captured = capsys.readouterr()
    records = _json_lines(captured.out)
    assert records[0]["category"] == "gpu_memory_error"  # what could be read is still reported
    assert "cannot list" in records[1]["error"] and "Permission denied" in records[1]["error"]
    assert "cannot list" in captured.err


def test_zstd_on_stdin_says_how_to_read_it(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"\x28\xb5\x2f\xfd" + b"\0" * 20)))
    assert main(["classify", "--json", "-"]) == 2
    (rec,) = _json_lines(capsys.readouterr().out)
    assert "`zstd -dc FILE | triage classify -`" in rec["error"]
