"""The faults the test workloads inject, from the environment, as a test harness would: kept
apart from the scripts so they read like a user's.

WORKLOAD_FAULT (`kill`, `raise`, `hang`, `slow_save`, `nan`) at WORKLOAD_FAULT_RANK /
WORKLOAD_FAULT_STEP, once: the first run that injects it leaves WORKLOAD_FAULT_ONCE (a file)
behind, so the restart runs clean. `slow_save` makes that step's checkpoint write wait
WORKLOAD_SAVE_PAUSE_S seconds, idle, as a write to stalled network storage does.
WORKLOAD_LINGER_RANK works WORKLOAD_LINGER_S seconds more after training, as a rank 0 that
saves the final model while the others have exited. WORKLOAD_PREPARE_RANK prepares the data
for WORKLOAD_PREPARE_S seconds while its peers wait at a barrier (before training, or before
step WORKLOAD_PREPARE_STEP: an evaluation set built on rank 0 first), as HF's
`main_process_first` has rank 0 do: WORKLOAD_PREPARE=map in a pool of worker processes (its
main thread idle, waiting on them, as `dataset.map(num_proc=N)`), `download` reading a file a
chunk at a time (idle between chunks, as streaming a dataset from storage is), `main` on the
main thread itself (as `dataset.map` without `num_proc`). After it every rank evaluates the
model for WORKLOAD_EVAL_S seconds: forward passes, no optimizer step.
"""

import multiprocessing
import os
import signal
import time

import torch
import torch.distributed as dist


def _fires(kind: str, step: int, rank: int) -> bool:
    marker = os.environ.get("WORKLOAD_FAULT_ONCE", "")
    if os.environ.get("WORKLOAD_FAULT") != kind or rank != int(os.environ.get("WORKLOAD_FAULT_RANK", "0")):
        return False
    if step != int(os.environ.get("WORKLOAD_FAULT_STEP", "0")) or os.path.exists(marker):
        return False
    if marker:
        open(marker, "w").close()
    return True


class _StalledWrite:
    """Pickled by `torch.save`: blocks the write, off the CPU."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __reduce__(self) -> tuple:
        time.sleep(self.seconds)
        return (str, ("",))


def save_extras(step: int, rank: int) -> dict:
    """What the checkpoint at `step` holds besides the state: a stalled write for `slow_save`."""
    if _fires("slow_save", step, rank):
        return {"stall": _StalledWrite(float(os.environ.get("WORKLOAD_SAVE_PAUSE_S", "8")))}
    return {}


def fault(step: int, rank: int, model: torch.nn.Module | None = None) -> None:
    kind = os.environ.get("WORKLOAD_FAULT", "")
    if kind not in ("kill", "raise", "raise_own", "hang", "nan") or not _fires(kind, step, rank):
        return
    if kind == "nan" and model is not None:  # the weights go NaN, and the script trains on
        with torch.no_grad():
            next(model.parameters()).fill_(float("nan"))
    if kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if kind == "raise":
        raise ValueError(f"bad batch shape at step {step}")
    if kind == "raise_own":  # in words no library uses: only where it was raised says whose
        raise RuntimeError(f"my own check failed at step {step}")
    if kind == "hang":
        time.sleep(3600)


def linger(rank: int) -> None:
    if os.environ.get("WORKLOAD_LINGER_RANK") == str(rank):
        time.sleep(float(os.environ.get("WORKLOAD_LINGER_S", "0")))


def _tokenize(seconds: float) -> int:
    """A worker's share of the corpus: CPU work for `seconds`."""
    end, n = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        n += sum(i * i for i in range(1000))
    return n


def _is_punctuation(char: str) -> bool:
    return not char.isalnum() and not char.isspace()


def _split_words(text: str) -> list[str]:
    """A slow tokenizer's basic split, in Python, a call per character (as BERT's is)."""
    words, word = [], []
    for char in text:
        if char.isspace() or _is_punctuation(char):
            if word:
                words.append("".join(word).lower())
                word = []
            if _is_punctuation(char):
                words.append(char)
        else:
            word.append(char)
    return words


def prepares_before(step: int | None) -> bool:
    """Whether the data is prepared before `step` (None: before training)."""
    at = os.environ.get("WORKLOAD_PREPARE_STEP")
    return (at is None and step is None) or (at is not None and step is not None and int(at) == step)


def prepare(rank: int) -> None:
    if os.environ.get("WORKLOAD_PREPARE_RANK") != str(rank):
        return
    seconds = float(os.environ.get("WORKLOAD_PREPARE_S", "8"))
    if os.environ.get("WORKLOAD_PREPARE") == "download":
        end = time.monotonic() + seconds
        with open("/dev/zero", "rb") as stream:
            while time.monotonic() < end:
                stream.read(1 << 18)
                time.sleep(0.05)
        return
    if os.environ.get("WORKLOAD_PREPARE") == "main":
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            _split_words(
                "Rank 0 tokenizes the evaluation set, one character at a time; as slow tokenizers do."
            )
        return
    with multiprocessing.get_context("fork").Pool(2) as pool:
        pool.map(_tokenize, [seconds / 2] * 4)


def evaluate(model: torch.nn.Module) -> None:
    """Forward passes for WORKLOAD_EVAL_S seconds, as many on every rank: each rank's clock
    alone would have some ranks go on to the next step's reduce-scatter while others still
    all-gather for one more batch, a desync that hangs the job (Triage found one so)."""
    seconds = float(os.environ.get("WORKLOAD_EVAL_S", "0"))
    if seconds <= 0:
        return
    end, more = time.monotonic() + seconds, torch.ones(1)
    with torch.no_grad():
        while True:
            more.fill_(float(time.monotonic() < end))
            dist.all_reduce(more, op=dist.ReduceOp.MIN)
            if not more.item():
                return
            model(torch.randn(16, 32))
