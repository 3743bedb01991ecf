"""The heartbeat's account of a rank's work besides its main thread (`trainer_hooks/activity.py`):
its child processes' CPU, live and reaped, the bytes it reads, and whether its main thread runs Python code."""

import os
import subprocess
import sys
import threading
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


def _thread_looked_at(target, seconds: float = 1.5) -> tuple[int, int]:
    """(looks, moves) of `MainStack` at a thread running `target` for `seconds`, ten looks a second."""
    stop = threading.Event()
    thread = threading.Thread(target=target, args=(stop,), daemon=True)
    thread.start()
    assert thread.ident is not None
    stack, looks = activity.MainStack(thread.ident), 0
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            time.sleep(0.1)
            stack.look()
            looks += 1
    finally:
        stop.set()
        thread.join(10)
    return looks, stack.moves


def _is_punctuation(char: str) -> bool:
    return not char.isalnum() and not char.isspace()


_TEXT = "An evaluation set, tokenized in place; one character at a time." * 4


def _split(text: str) -> list[str]:
    words, word = [], ""
    for char in text:
        if char.isspace() or _is_punctuation(char):
            words.append(word)
            word = ""
        else:
            word += char
    return words


def _normalize(words: list[str]) -> list[str]:
    return ["".join(c.lower() for c in w) for w in words if w]


def _count(words: list[str], counts: dict[str, int]) -> None:
    for w in words:
        for _ in w:
            counts[w] = counts.get(w, 0) + 1


def _python_code(stop: threading.Event) -> None:
    """A slow tokenizer: split, normalize, count, each a Python loop of like cost, so a look
    finds it in one of three functions (a single function holding most of the time made the
    count of changes a coin that came up short under load)."""
    counts: dict[str, int] = {}
    while not stop.is_set():
        _count(_normalize(_split(_TEXT)), counts)


def _blocked(stop: threading.Event) -> None:
    stop.wait()


def test_a_thread_running_python_code_changes_its_stack_at_most_looks():
    looks, moves = _thread_looked_at(_python_code)
    assert moves >= looks // 4


def test_a_thread_blocked_in_one_call_never_changes_its_stack():
    """A deadlock, a synchronize that never returns: the same stack at every look."""
    looks, moves = _thread_looked_at(_blocked)
    assert looks >= 10 and moves == 0


def _polling(stop: threading.Event) -> None:
    """Spins on a native call, as a rank waiting for a collective that never completes does."""
    clock = time.monotonic
    while not stop.is_set():
        end = clock() + 0.5
        while clock() < end:
            pass


def test_a_thread_spinning_on_a_native_call_never_changes_its_functions():
    looks, moves = _thread_looked_at(_polling)
    assert looks >= 10 and moves <= 3  # only when it leaves the inner loop to ask `stop`


def test_a_thread_that_has_ended_has_no_stack():
    thread = threading.Thread(target=lambda: None)
    thread.start()
    thread.join()
    assert thread.ident is not None and activity.MainStack(thread.ident).look() is None


SPIN = "import time\nend = time.monotonic() + {s}\nwhile time.monotonic() < end: pass"


def test_a_thread_starved_of_cpu_is_runnable_and_a_sleeping_one_is_not():
    """On a loaded host a spinning rank got a fraction of a CPU and was judged idle: the hang
    rule stopped a slow job. A thread that waits for a CPU to run on is runnable all that
    time; one that sleeps is not."""
    cpu = sorted(os.sched_getaffinity(0))[0]
    me = threading.get_native_id()
    was = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})  # this thread and a competitor share one CPU
    rival = subprocess.Popen([sys.executable, "-c", SPIN.format(s=4.0)])
    try:
        os.sched_setaffinity(rival.pid, {cpu})
        time.sleep(0.3)
        wall0, ran0, cpu0 = time.monotonic(), activity.runnable_s(me), time.thread_time()
        exec(SPIN.format(s=1.5))
        wall, ran, spent = time.monotonic() - wall0, activity.runnable_s(me) - ran0, time.thread_time() - cpu0
    finally:
        rival.kill()
        rival.wait()
        os.sched_setaffinity(0, was)
    assert spent < 0.8 * wall  # starved: less CPU than wall time ...
    assert ran >= 0.9 * wall  # ... but runnable all along
    slept0 = activity.runnable_s(me)
    time.sleep(1.0)
    assert activity.runnable_s(me) - slept0 < 0.1
