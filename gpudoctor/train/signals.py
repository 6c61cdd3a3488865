"""What says that a training run learned. Torch-free: the single-GPU pass (loop.py) and the
parent-side judge of the FSDP2 pass (distributed/fsdp_judge.py) decide it the same way."""

from __future__ import annotations

from typing import Sequence

# The pattern is deterministic, so a working stack drops the loss far more than this within the
# preset's steps (measured: 20-60 % on every preset); 5 % leaves room for bf16 noise on tiny runs.
MIN_LOSS_DROP = 0.05


def loss_fell(losses: Sequence[float]) -> bool:
    """The mean of the last two losses is at least MIN_LOSS_DROP below the first."""
    tail = losses[-2:]
    return sum(tail) / len(tail) < losses[0] * (1 - MIN_LOSS_DROP)
