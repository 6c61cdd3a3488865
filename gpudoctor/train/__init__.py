"""The training pass (`gpudoctor check --train`): a small QLoRA model run for real on Triton JIT,
gpudoctor's NF4 and FlashAttention kernels and every installed backend, in a child process.

Importing this package imports no torch: ``runner`` (the parent side) launches
``python -m gpudoctor.train`` and turns what it reports, or how it died, into findings. Only the
child's modules (child, model, ops, ...) import torch and triton.
"""

from __future__ import annotations


def run_training_pass(*args, **kwargs):
    from .runner import run_training_pass as run

    return run(*args, **kwargs)


__all__ = ["run_training_pass"]
