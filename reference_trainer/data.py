"""The input pipeline: a deterministic token stream behind a real `torch.utils.data.DataLoader`.

Every sequence is a pure function of (seed, global sequence index), so the data position is one
number (`sequences consumed`) that a checkpoint stores and a resumed run, at any world size,
continues from. A step the supervisor skips (env TRIAGE_SKIP_STEPS, after a rollback) is a
no-op that still consumes its batch: every other step sees exactly the batch it would have seen
in an uninterrupted run, so a rolled-back run stays deterministic.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info

from triage.config import ENV_SKIP_STEPS, ConfigError
from triage.reference_trainer.model_sizes import VOCAB_SIZE


def skip_steps_from_env() -> frozenset[int]:
    """TRIAGE_SKIP_STEPS=12,30: the steps whose batches are skipped (no update)."""
    raw = os.environ.get(ENV_SKIP_STEPS, "")
    items = [s.strip() for s in raw.split(",") if s.strip()]
    if not all(s.isdigit() for s in items):
        raise ConfigError(f"env {ENV_SKIP_STEPS}={raw!r}: expected step numbers, e.g. 12,30")
    return frozenset(int(s) for s in items)


def training_steps(first: int, last: int, skip: frozenset[int]) -> list[int]:
    """The steps in [first, last] that train, in order: what the loader fetches batches for."""
    return [s for s in range(first, last + 1) if s not in skip]


def synthetic_sequence(seed: int, index: int, length: int) -> torch.Tensor:
    """A learnable byte sequence: an arithmetic progression mod 256 with sparse noise."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + index)
    start = torch.randint(0, VOCAB_SIZE, (1,), generator=g)
    stride = torch.randint(1, 8, (1,), generator=g)
    seq = (start + stride * torch.arange(length)) % VOCAB_SIZE
    noise = torch.rand(length, generator=g) < 0.1
    return torch.where(noise, torch.randint(0, VOCAB_SIZE, (length,), generator=g), seq)


class TokenBatches(Dataset[dict[str, torch.Tensor]]):
    """Item `step` is this rank's batch of that step: {"input_ids", "labels"} of shape (B, T).

    `kill_worker_at` holds the steps at which the worker fetching them crashes with SIGSEGV (as a
    native decoder does on a corrupt sample), the data_error fault: the main process then gets
    the DataLoader's own "worker killed" error. (Not SIGKILL: a worker killed by signal 9 reads
    as the kernel's OOM killer, which is a different failure.)
    """

    def __init__(
        self,
        *,
        seed: int,
        rank: int,
        world_size: int,
        batch_size: int,
        seq_len: int,
        start_step: int,
        start_position: int,
        data_path: str | None = None,
        kill_worker_at: frozenset[int] = frozenset(),
    ) -> None:
        self.seed, self.rank, self.world_size = seed, rank, world_size
        self.batch_size, self.seq_len = batch_size, seq_len
        self.start_step, self.start_position = start_step, start_position
        self.kill_worker_at = kill_worker_at
        self.data = (
            torch.frombuffer(bytearray(Path(data_path).read_bytes()), dtype=torch.uint8)
            if data_path
            else None
        )

    def position_after(self, step: int) -> int:
        """Global sequences consumed once `step` is done: what a checkpoint at `step` stores."""
        return self.start_position + (step - self.start_step) * self.batch_size * self.world_size

    def _sequence(self, index: int) -> torch.Tensor:
        n = self.seq_len + 1
        if self.data is None:
            return synthetic_sequence(self.seed, index, n)
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        offset = int(torch.randint(0, len(self.data) - n + 1, (1,), generator=g))
        return self.data[offset : offset + n].long()

    def __len__(self) -> int:
        raise TypeError("TokenBatches is indexed by step; use it with an explicit sampler")

    def __getitem__(self, step: int) -> dict[str, torch.Tensor]:
        if step in self.kill_worker_at and get_worker_info() is not None:
            os.kill(os.getpid(), signal.SIGSEGV)
        first = self.position_after(step - 1) + self.rank * self.batch_size
        seqs = torch.stack([self._sequence(first + j) for j in range(self.batch_size)])
        return {"input_ids": seqs[:, :-1].contiguous(), "labels": seqs[:, 1:].contiguous()}


def make_loader(
    dataset: TokenBatches, steps: Sequence[int], num_workers: int
) -> DataLoader[dict[str, torch.Tensor]]:
    """One item per step, in step order; workers prefetch so data wait stays off the step."""
    return DataLoader(
        dataset,
        batch_size=None,
        sampler=list(steps),
        num_workers=num_workers,
        prefetch_factor=2 if num_workers else None,
    )
