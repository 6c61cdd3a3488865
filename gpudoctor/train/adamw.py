"""AdamW for the LoRA tensors, in foreach ops.

Why not torch.optim.AdamW: its first step imports torch._dynamo (about 1 s, measured on the device
machine's torch 2.11 and this venv's 2.13), an eighth of the pass's whole warm-cache budget, for a
handful of rank-16 tensors. This is the same update (decoupled weight decay, bias-corrected
moments; tests/train/test_adamw.py checks it against torch.optim.AdamW step for step).
"""

from __future__ import annotations

import math

import torch


class AdamW:
    def __init__(self, params, lr: float, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0):
        if not lr >= 0.0:  # also refuses NaN, as torch.optim.AdamW does
            raise ValueError(f"Invalid learning rate: {lr}")
        self.params = [p for p in params]
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]
        self.step_count = 0

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        indices = [i for i, p in enumerate(self.params) if p.grad is not None]
        if not indices:
            return
        self.step_count += 1
        beta1, beta2 = self.betas
        params = [self.params[i] for i in indices]
        grads = [self.params[i].grad for i in indices]
        exp_avg = [self.exp_avg[i] for i in indices]
        exp_avg_sq = [self.exp_avg_sq[i] for i in indices]
        if self.weight_decay:
            torch._foreach_mul_(params, 1 - self.lr * self.weight_decay)
        torch._foreach_lerp_(exp_avg, grads, 1 - beta1)
        torch._foreach_mul_(exp_avg_sq, beta2)
        torch._foreach_addcmul_(exp_avg_sq, grads, grads, 1 - beta2)
        bias1 = 1 - beta1 ** self.step_count
        bias2 = 1 - beta2 ** self.step_count
        denom = torch._foreach_sqrt(exp_avg_sq)
        torch._foreach_div_(denom, math.sqrt(bias2))
        torch._foreach_add_(denom, self.eps)
        torch._foreach_addcdiv_(params, exp_avg, denom, -self.lr / bias1)
