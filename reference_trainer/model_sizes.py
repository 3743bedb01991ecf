"""The reference model's sizes, apart from the model: `triage train`'s launcher checks a
`--model` choice without importing torch (seconds of CPU per launch, in every attempt)."""

from __future__ import annotations

from dataclasses import dataclass

VOCAB_SIZE = 256  # byte-level tokens


@dataclass(frozen=True)
class GPTConfig:
    n_layer: int
    n_head: int
    d_model: int
    max_seq_len: int = 1024
    vocab_size: int = VOCAB_SIZE


#: `tiny` keeps tests fast on CPU (~0.2M parameters); `small` is the benchmark size (~25M).
MODEL_SIZES: dict[str, GPTConfig] = {
    "tiny": GPTConfig(n_layer=2, n_head=4, d_model=64),
    "small": GPTConfig(n_layer=8, n_head=8, d_model=512),
}
