"""Bad inputs, contained: damage a data dir in each way it meets in the wild, next to good
telemetry, and count what the store did with it.

Each case starts from the same good data (a spooled job on one node, a stored job on another
partition), adds one kind of damage beside it, then ingests (twice: the damage must not come
back) and reads the store as `triage jobs` does. A case is *contained* when no error escapes,
the damage is reported (a quarantined spool entry, a refused partition, or a reader's
warning naming the file), and every good row is stored: *rows lost* counts good rows missing
and must be 0. Exit 1 when a case is not contained or loses rows.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypedDict

import pyarrow as pa
import pyarrow.ipc as ipc

from triage.benchmarks.ingest import JOB, NODE, IngestBenchConfig, spool_flushes, write_spool
from triage.store import StoreWriter, ingest_spools, open_snapshot
from triage.trainer_hooks.spool_schema import write_segment, writer_dir

OTHER_NODE, OTHER_JOB = "other-node", "other-job"
_SPOOL = IngestBenchConfig(ranks=2, flushes=6, collectives=4)


def _good(data_dir: Path) -> int:
    """The good data: a spooled job and another partition's stored rows; the spooled steps."""
    write_spool(data_dir, _SPOOL)
    with StoreWriter(data_dir, OTHER_NODE) as w:
        w.append_rows(
            "steps",
            [
                {
                    "job_id": OTHER_JOB,
                    "attempt": 0,
                    "rank": 0,
                    "node": OTHER_NODE,
                    "step": s,
                    "start_time": 1.7e9 + s,
                    "end_time": 1.7e9 + s + 1,
                }
                for s in range(5)
            ],
        )
    return _SPOOL.ranks * _SPOOL.flushes


def _extra_dir(data_dir: Path, rank: int = 7) -> Path:
    d = writer_dir(data_dir, NODE, JOB, 0, rank, 9000 + rank)
    d.mkdir(parents=True, exist_ok=True)
    return d


def _valid_segment(data_dir: Path) -> Path:
    _, _, tables = next(spool_flushes(IngestBenchConfig(ranks=1, flushes=1, collectives=2)))
    return write_segment(_extra_dir(data_dir), 0, tables)


def _truncated_segment(data_dir: Path) -> None:
    path = _valid_segment(data_dir)
    path.write_bytes(path.read_bytes()[:100])


def _garbage_segment(data_dir: Path) -> None:
    (_extra_dir(data_dir) / "00000000.arrow").write_bytes(os.urandom(4096))


def _empty_segment(data_dir: Path) -> None:
    (_extra_dir(data_dir) / "00000000.arrow").write_bytes(b"")


def _foreign_arrow(data_dir: Path) -> None:
    table = pa.table({"x": [1]})  # well-formed Arrow IPC, not a spool flush
    with ipc.new_file(_extra_dir(data_dir) / "00000000.arrow", table.schema) as w:
        w.write_table(table)


def _bad_dir(*parts: bytes) -> Callable[[Path], None]:
    def damage(data_dir: Path) -> None:
        d = os.path.join(os.fsencode(data_dir / "spool" / NODE), *parts)
        os.makedirs(d)
        with open(os.path.join(d, b"00000000.arrow"), "wb") as fh:
            fh.write(b"x")

    return damage


def _symlink_loop(data_dir: Path) -> None:
    loop = data_dir / "spool" / NODE / "loop"
    loop.symlink_to(loop)


def _stray_file(data_dir: Path) -> None:
    (data_dir / "spool" / NODE / "notes.txt").write_text("not a job directory")


def _manifest(data_dir: Path) -> Path:
    return data_dir / "store" / OTHER_NODE / "MANIFEST.json"


def _truncated_manifest(data_dir: Path) -> None:
    text = _manifest(data_dir).read_text()
    _manifest(data_dir).write_text(text[: len(text) // 3])


def _garbage_manifest(data_dir: Path) -> None:
    _manifest(data_dir).write_bytes(os.urandom(512))


def _missing_manifest(data_dir: Path) -> None:
    _manifest(data_dir).unlink()


def _store_file(data_dir: Path) -> Path:
    return next((data_dir / "store" / OTHER_NODE / "steps").glob("*.parquet"))


def _truncated_store_file(data_dir: Path) -> None:
    path = _store_file(data_dir)
    path.write_bytes(path.read_bytes()[:64])


def _random_store_file(data_dir: Path) -> None:
    _store_file(data_dir).write_bytes(os.urandom(2048))


def _garbage_footer(data_dir: Path) -> None:
    path = _store_file(data_dir)  # magic and footer length plausible: only a real read tells
    size = path.stat().st_size
    path.write_bytes(b"PAR1" + os.urandom(size - 12) + (64).to_bytes(4, "little") + b"PAR1")


def _newer_table(data_dir: Path) -> None:
    raw = json.loads(_manifest(data_dir).read_text())
    raw["segments"].append(
        dict(raw["segments"][0], table="from_a_newer_triage", file="from_a_newer_triage/x.parquet")
    )
    _manifest(data_dir).write_text(json.dumps(raw))


#: name -> damage, applied beside the good data
CASES: dict[str, Callable[[Path], None]] = {
    "spool segment truncated": _truncated_segment,
    "spool segment of random bytes": _garbage_segment,
    "spool segment of zero bytes": _empty_segment,
    "spool segment: Arrow file of another layout": _foreign_arrow,
    "spool job dir not UTF-8": _bad_dir(b"job-\xff\xfe", b"0", b"rank0-1"),
    "spool job dir with two run ids": _bad_dir(b"a@b@c", b"0", b"rank0-1"),
    "spool attempt dir not a number": _bad_dir(JOB.encode(), b"first", b"rank0-1"),
    "spool writer dir misnamed": _bad_dir(JOB.encode(), b"0", b"not-a-rank"),
    "spool symlink loop": _symlink_loop,
    "spool stray file": _stray_file,
    "manifest truncated (other partition)": _truncated_manifest,
    "manifest of random bytes (other partition)": _garbage_manifest,
    "manifest missing, segments present (other partition)": _missing_manifest,
    "store segment truncated (other partition)": _truncated_store_file,
    "store segment of random bytes (other partition)": _random_store_file,
    "store segment with a garbage footer (other partition)": _garbage_footer,
    "table of a newer version (other partition)": _newer_table,
}
#: Damage that leaves nothing to report: a file that is no spool entry harms no reader, and
#: stays where it is.
_SILENT = {"spool stray file"}


class CaseResult(TypedDict):
    case: str
    contained: bool
    reported: str | None
    error: str | None
    rows_lost: int


class BadInputsReport(TypedDict):
    benchmark: str
    tried: int
    contained: int
    rows_lost: int
    cases: list[CaseResult]


def try_case(name: str, template: Path, work: Path, expected: int) -> CaseResult:
    data_dir = work / "case"
    shutil.copytree(template, data_dir, symlinks=True)
    CASES[name](data_dir)
    said: list[str] = []
    try:
        for _ in range(2):
            report = ingest_spools(data_dir)
            said += [f"{e.path}: {e.error}" for e in report.errors] + report.refused
        with open_snapshot(data_dir) as snap:
            said += snap.problems
            row = snap.con.execute("SELECT count(*) FROM steps WHERE job_id = $1", [JOB]).fetchone()
            assert row is not None  # count(*) returns one row
            stored = int(row[0])
        escaped = None
    except Exception as exc:  # noqa: BLE001 - what the benchmark counts
        escaped, stored = f"{type(exc).__name__}: {exc}", 0
    shutil.rmtree(data_dir)
    reported = bool(said) or name in _SILENT
    lost = expected - stored
    return {
        "case": name,
        "contained": escaped is None and reported and lost == 0,
        "reported": said[0][:160] if said else ("nothing to report" if name in _SILENT else None),
        "error": escaped,
        "rows_lost": lost,
    }


def measure() -> BadInputsReport:
    with tempfile.TemporaryDirectory(prefix="triage-bench-bad-inputs-") as tmp:
        template = Path(tmp) / "good"
        expected = _good(template)
        results = [try_case(name, template, Path(tmp), expected) for name in CASES]
    return {
        "benchmark": "bad-inputs",
        "tried": len(results),
        "contained": sum(bool(r["contained"]) for r in results),
        "rows_lost": sum(int(r["rows_lost"]) for r in results),
        "cases": results,
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    out = measure()
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        for r in out["cases"]:
            mark = "contained" if r["contained"] else "NOT CONTAINED"
            print(f"{r['case']:<52} {mark:<13} rows lost {r['rows_lost']}")
            print(f"    {r['reported'] or r['error']}")
        print(
            f"{out['tried']} bad inputs tried, {out['contained']} contained, "
            f"{out['rows_lost']} good rows lost"
        )
    return 0 if out["contained"] == out["tried"] and out["rows_lost"] == 0 else 1
