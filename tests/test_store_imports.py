"""The store's write side runs without DuckDB or pandas: the node agent writes its partition
within a small memory budget (DuckDB alone is ~55 MB resident), and only readers need them.

Each check runs in a fresh interpreter, since this test process has long imported both.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

#: pyarrow imports pandas lazily, only to check whether a value is a pandas object; the agent
#: blocks the import the same way, so a write path that really needs pandas fails here.
_BLOCK_PANDAS = textwrap.dedent("""
    import sys

    class _NoPandas:
        def find_spec(self, name, path=None, target=None):
            if name == "pandas" or name.startswith("pandas."):
                raise ModuleNotFoundError(f"{name} is blocked in this process")
            return None

    sys.meta_path.insert(0, _NoPandas())
""")

_WRITE = _BLOCK_PANDAS + textwrap.dedent("""
    import pyarrow.parquet as pq

    import triage.store
    import triage.store.ingest
    import triage.store.maintenance
    import triage.store.writer
    from triage.store import StoreWriter, apply_retention, compact

    with StoreWriter(sys.argv[1], "node0", clock=lambda: 1000.0) as w:
        for k in range(4):
            w.append_rows("steps", [{"job_id": "j", "step": k * 10 + i, "end_time": float(k * 10 + i)}
                                    for i in range(10)])
        w.append_rows("collectives", [{"job_id": "j", "rank": r, "group": "dp", "seq": 0, "group_size": 2,
                                       "enter_time": 1.0 + r} for r in range(2)])
        apply_retention(w)
        merged = [s for s in compact(w) if s.table == "steps"][0]
        (collectives,) = w.manifest.table_segments("collectives")
        assert (w.segment_path(collectives).parent / (collectives.file.split("/")[1] + ".summary")).exists()
        live = w.manifest.table_segments("steps")
        steps = [s for seg in live for s in pq.read_table(w.segment_path(seg), columns=["step"])
                 .column("step").to_pylist()]
    assert live == [merged] and merged.rows == 40, live
    assert steps == list(range(40)), steps
    loaded = [m for m in ("duckdb", "pandas") if m in sys.modules]
    assert not loaded, f"the write side imported {loaded}"
""")

_READ = textwrap.dedent("""
    import sys
    import triage.store
    assert "duckdb" not in sys.modules
    from triage.store import Snapshot, open_snapshot
    assert "duckdb" in sys.modules and open_snapshot.__module__ == "triage.store.snapshot"
    assert Snapshot is sys.modules["triage.store.snapshot"].Snapshot
""")


def _run(code: str, *args: str) -> None:
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_writing_and_compacting_imports_neither_duckdb_nor_pandas(tmp_path):
    _run(_WRITE, str(tmp_path))


def test_reader_names_still_import_from_the_package(tmp_path):
    _run(_READ)
