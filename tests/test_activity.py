"""The heartbeat's account of a rank's work besides its main thread (`trainer_hooks/activity.py`):
its child processes' CPU, live and reaped, and the bytes it reads."""

import subprocess
import sys
import time

import pytest

from triage.trainer_hooks import activity

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

BUSY = "import time\nend = time.process_time() + 0.6\nwhile time.process_time() < end: pass\nimport sys; sys.stdin.read()"


def test_a_busy_child_counts_while_alive_and_after_it_is_reaped():
    before = activity.children_cpu_s()
    child = subprocess.Popen([sys.executable, "-c", BUSY], stdin=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while activity.children_cpu_s() - before < 0.5 and time.monotonic() < deadline:
            time.sleep(0.05)
        alive = activity.children_cpu_s() - before
    finally:
        child.communicate(b"")
    reaped = activity.children_cpu_s() - before
    assert alive >= 0.5 and reaped >= alive - 0.05


def test_what_the_process_reads_is_counted():
    before = activity.read_bytes()
    with open("/dev/zero", "rb") as f:
        f.read(1 << 20)
    assert activity.read_bytes() - before >= 1 << 20


def test_the_readers_own_reads_of_proc_are_not_the_rank_s():
    children = [
        subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
        for _ in range(8)
    ]
    try:
        before = activity.read_bytes()
        for _ in range(50):
            activity.children_cpu_s()
        assert activity.read_bytes() - before < 4096
    finally:
        for c in children:
            c.communicate(b"")
