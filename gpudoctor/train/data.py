"""Synthetic tokens with a learnable pattern: every sequence walks a fixed cycle over a small
alphabet of the vocabulary from a random start. Next-token prediction is then a fixed mapping that
LoRA on frozen random weights can learn within a few steps; a stack that cannot lower this loss is
broken, not under-trained."""

from __future__ import annotations

import torch


def cycle_batches(vocab: int, batch: int, seq: int, steps: int, device, seed: int = 0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    alphabet_size = min(16, vocab)
    alphabet = torch.randperm(vocab, generator=generator)[:alphabet_size]
    positions = torch.arange(seq)
    batches = []
    for _ in range(steps):
        starts = torch.randint(0, alphabet_size, (batch, 1), generator=generator)
        batches.append(alphabet[(starts + positions) % alphabet_size].to(device))
    return batches
