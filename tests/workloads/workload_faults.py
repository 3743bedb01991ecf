"""The faults the test workloads inject, from the environment, as a test harness would: kept
apart from the scripts so they read like a user's.

WORKLOAD_FAULT (`kill`, `raise`, `hang`) at WORKLOAD_FAULT_RANK / WORKLOAD_FAULT_STEP, once:
the first run that injects it leaves WORKLOAD_FAULT_ONCE (a file) behind, so the restart runs
clean. WORKLOAD_LINGER_RANK works WORKLOAD_LINGER_S seconds more after training, as a rank 0
that saves the final model while the others have exited.
"""

import os
import signal
import time


def fault(step: int, rank: int) -> None:
    kind = os.environ.get("WORKLOAD_FAULT")
    marker = os.environ.get("WORKLOAD_FAULT_ONCE", "")
    if not kind or rank != int(os.environ.get("WORKLOAD_FAULT_RANK", "0")):
        return
    if step != int(os.environ.get("WORKLOAD_FAULT_STEP", "0")) or os.path.exists(marker):
        return
    if marker:
        open(marker, "w").close()
    if kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if kind == "raise":
        raise ValueError(f"bad batch shape at step {step}")
    if kind == "hang":
        time.sleep(3600)


def linger(rank: int) -> None:
    if os.environ.get("WORKLOAD_LINGER_RANK") == str(rank):
        time.sleep(float(os.environ.get("WORKLOAD_LINGER_S", "0")))
