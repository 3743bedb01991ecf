"""Run inside `unshare -m` with DATA_DIR a fresh small tmpfs (see tests/test_bad_inputs.py):
telemetry spooled, then the disk fills up, then it turns read-only. Prints one JSON object of
what `triage jobs` and the ingest did at each stage."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent))
from store_spools import write_rank

from triage.store import ingest_spools, open_snapshot

data = Path(sys.argv[1])
TRIAGE = [sys.executable, "-m", "triage.cli"]
counts, _ = write_rank(data, "node0", "job", 0, 0, steps=20)
spooled = sorted(str(p) for p in (data / "spool").rglob("*.arrow"))
filler = data / "filler"
fd = os.open(filler, os.O_WRONLY | os.O_CREAT)  # fill the disk to the last block
for block in (65536, 512, 1):
    try:
        while True:
            os.write(fd, b"\0" * block)
    except OSError:
        pass
os.close(fd)
full = subprocess.run([*TRIAGE, "jobs", "--data-dir", str(data), "--json"], capture_output=True, text=True)
kept = sorted(str(p) for p in (data / "spool").rglob("*.arrow"))
filler.unlink()
ingest_spools(data)
with open_snapshot(data) as snap:
    stored = snap.count("steps")
subprocess.run(["mount", "-o", "remount,ro", str(data)], check=True)
ro_jobs = subprocess.run([*TRIAGE, "jobs", "--data-dir", str(data), "--json"], capture_output=True, text=True)
ro_analyze = subprocess.run(
    [*TRIAGE, "analyze", "job", "--data-dir", str(data), "--json"], capture_output=True, text=True
)
print(
    json.dumps(
        {
            "spooled": len(spooled),
            "kept_while_full": len(kept) == len(spooled) and kept == spooled,
            "full_rc": full.returncode,
            "full_stderr": full.stderr,
            "expected_steps": counts["steps"],
            "stored_after_space": stored,
            "ro_jobs_rc": ro_jobs.returncode,
            "ro_jobs_stderr": ro_jobs.stderr,
            "ro_jobs": json.loads(ro_jobs.stdout)["jobs"] if ro_jobs.returncode == 0 else None,
            "ro_analyze_rc": ro_analyze.returncode,
            "ro_analyze_stderr": ro_analyze.stderr,
        }
    )
)
