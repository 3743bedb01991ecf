"""The known-answer canary for silent data corruption.

Every rank multiplies the same fixed matrices; healthy ranks of one job (same hardware, same
kernels) produce bit-identical results, so a rank whose digest differs from the others computes
wrong numbers. The inputs are built once; a run costs one small matmul and a digest.
"""

from __future__ import annotations

import hashlib

import torch

CANARY_SIZE = 64


class Canary:
    def __init__(self, device: torch.device) -> None:
        gen = torch.Generator().manual_seed(20240917)
        a = torch.randn(CANARY_SIZE, CANARY_SIZE, generator=gen, dtype=torch.float32)
        self._a = a.to(device)
        self._b = a.t().contiguous().to(device)

    def run(self) -> torch.Tensor:
        """The product, still on the device; `digest` reads it later, off the hot path."""
        return torch.mm(self._a, self._b)

    @staticmethod
    def digest(result: torch.Tensor) -> tuple[str, float]:
        host = result.detach().to("cpu")
        return hashlib.sha256(host.numpy().tobytes()).hexdigest()[:16], float(host.double().sum())
