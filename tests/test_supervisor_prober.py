"""The watch loop's store reads on their own thread: the newest result, and a read that hangs is said."""

import threading
import time

from triage.supervisor.prober import Prober


def test_takes_the_newest_result_once():
    results = iter(range(1000))
    with Prober(lambda: next(results), 0.01) as prober:
        deadline = time.monotonic() + 30
        while (got := prober.take()) is None and time.monotonic() < deadline:
            time.sleep(0.01)
    assert isinstance(got, int)
    assert prober.take() != got  # taken: never handed out twice


def test_a_read_that_does_not_return_is_shown_with_its_stack():
    release = threading.Event()

    def read_that_hangs_in_the_store():
        release.wait(30)

    with Prober(read_that_hangs_in_the_store, 0.01) as prober:
        assert prober.stuck(after_s=3600) is None  # under way, not stuck yet
        deadline = time.monotonic() + 30
        while (where := prober.stuck(after_s=0.05)) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        release.set()
    assert where is not None and "read_that_hangs_in_the_store" in where


def test_a_prober_between_reads_is_not_stuck():
    with Prober(lambda: 1, 3600) as prober:
        deadline = time.monotonic() + 30
        while prober.take() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert prober.stuck(after_s=0.0) is None  # waiting out its interval, no read under way
