"""Readers keep working while another process ingests and compacts (no locks, counts only grow)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from triage.store import open_snapshot

ROUNDS, STEPS = 25, 4

WRITER = textwrap.dedent(f"""
    import sys
    sys.path.insert(0, {str(Path(__file__).parent)!r})
    from store_spools import write_rank
    from triage.store import StoreConfig, StoreWriter, compact, ingest_partition
    data_dir = sys.argv[1]
    seq = 0
    with StoreWriter(data_dir, "n0", StoreConfig(compact_below_bytes=1 << 20)) as w:
        print("ready", flush=True)
        for i in range({ROUNDS}):
            _, seq = write_rank(data_dir, "n0", "j", 0, 0, steps={STEPS}, first_seq=seq)
            ingest_partition(w)
            if i % 5 == 4:
                compact(w)
""")


@pytest.mark.slow
def test_snapshots_read_while_another_process_ingests(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    seen = []
    while proc.poll() is None:
        with open_snapshot(tmp_path) as snap:
            steps = snap.count("steps")
            (dupes,) = snap.con.execute("SELECT count(*) - count(DISTINCT step) FROM steps").fetchone()
        assert dupes == 0
        seen.append(steps)
    assert proc.wait() == 0
    assert seen == sorted(seen) and len(set(seen)) > 1  # grew, and was read while growing
    with open_snapshot(tmp_path) as snap:
        assert snap.count("steps") == ROUNDS * STEPS
