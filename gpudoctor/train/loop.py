"""A few QLoRA steps and the signals that say whether the stack can train.

Signals: loss falling, finite loss and gradients, every LoRA tensor receiving a non-zero
gradient, every base tensor frozen (no gradient, bytes unchanged), peak GPU memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from .data import cycle_batches
from .model import QLoRADecoder, base_parameters, causal_lm_loss, lora_parameters
from .presets import Preset
from .signals import MIN_LOSS_DROP, loss_fell
from .timing import synchronize



@dataclass
class TrainingResult:
    """What the QLoRA steps showed: each step's loss and time, the tensors whose gradients or frozen bytes
    went wrong, the tensor and parameter counts, and peak GPU memory."""

    losses: list[float] = field(default_factory=list)
    step_ms: list[float] = field(default_factory=list)
    nonfinite_grads: list[str] = field(default_factory=list)
    zero_lora_grads: list[str] = field(default_factory=list)
    base_with_grad: list[str] = field(default_factory=list)
    base_changed: list[str] = field(default_factory=list)
    lora_tensors: int = 0
    lora_parameters: int = 0
    base_tensors: int = 0
    peak_memory_bytes: int | None = None
    checksum_ms: float = 0.0

    def problems(self) -> list[str]:
        """Why this run did not train, one sentence per failed signal (empty: it trained)."""
        problems = []
        if not all(math.isfinite(x) for x in self.losses):
            problems.append(f"loss became non-finite: {self.losses}")
        elif len(self.losses) >= 2 and not self.loss_fell():
            problems.append(f"loss did not fall by {MIN_LOSS_DROP:.0%}: {self.losses[0]:.4f} -> {self.losses[-1]:.4f}")
        if self.nonfinite_grads:
            problems.append(f"non-finite gradients in {len(self.nonfinite_grads)} tensors, e.g. {self.nonfinite_grads[0]}")
        if self.zero_lora_grads:
            problems.append(f"{len(self.zero_lora_grads)} of {self.lora_tensors} LoRA tensors never got a non-zero "
                            f"gradient, e.g. {self.zero_lora_grads[0]}")
        if self.base_with_grad or self.base_changed:
            names = self.base_with_grad + self.base_changed
            problems.append(f"the frozen base changed or got gradients: {names[:3]}")
        return problems

    def loss_fell(self) -> bool:
        return loss_fell(self.losses)

    def to_json(self) -> dict:
        return {
            "losses": [round(x, 5) if math.isfinite(x) else str(x) for x in self.losses],
            "loss_fell": self.loss_fell() if self.losses and all(math.isfinite(x) for x in self.losses) else False,
            "step_ms": [round(x, 3) for x in self.step_ms],
            "lora_tensors": self.lora_tensors,
            "lora_parameters": self.lora_parameters,
            "base_tensors": self.base_tensors,
            "nonfinite_grads": self.nonfinite_grads[:10],
            "zero_lora_grads": self.zero_lora_grads[:10],
            "base_with_grad": self.base_with_grad[:10],
            "base_changed": self.base_changed[:10],
            "peak_memory_bytes": self.peak_memory_bytes,
            "checksum_ms": round(self.checksum_ms, 1),
            "problems": self.problems(),
        }


def _checksum(tensor: torch.Tensor) -> float:
    return float(tensor.detach().float().sum()) if tensor.is_floating_point() else float(tensor.detach().long().sum())


def train(model: torch.nn.Module, preset: Preset, device, steps: int | None = None, lr: float | None = None,
          step_fn=None, batches: list[torch.Tensor] | None = None) -> TrainingResult:
    """AdamW on the LoRA tensors only. ``step_fn(tokens) -> loss`` replaces the eager forward
    (``--compile`` passes the compiled one); ``batches`` replaces the preset's own (the FSDP2
    pass's single-device reference trains on its global batch)."""
    import time

    from .adamw import AdamW

    steps = steps or preset.steps
    lr = preset.lr if lr is None else lr
    lora = lora_parameters(model)
    base = base_parameters(model)
    result = TrainingResult(lora_tensors=len(lora), lora_parameters=sum(p.numel() for p in lora.values()),
                            base_tensors=len(base))
    start = time.perf_counter()
    before = {name: _checksum(p) for name, p in base.items()}
    result.checksum_ms = (time.perf_counter() - start) * 1000  # also waits for the model's quantization
    optimizer = AdamW(lora.values(), lr=lr, weight_decay=0.0)
    got_grad = {name: False for name in lora}
    step_fn = step_fn or (lambda tokens: causal_lm_loss(model(tokens), tokens))
    if torch.device(device).type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    if batches is None:
        batches = cycle_batches(preset.vocab, preset.batch, preset.seq, steps, device)
    for tokens in batches:
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = step_fn(tokens)
        loss.backward()
        for name, p in lora.items():
            if p.grad is None:
                continue
            if not torch.isfinite(p.grad).all():
                result.nonfinite_grads.append(name)
            elif p.grad.abs().max() > 0:
                got_grad[name] = True
        optimizer.step()
        result.losses.append(float(loss.detach()))  # float() synchronizes: the step time includes the GPU work
        synchronize(device)
        result.step_ms.append((time.perf_counter() - start) * 1000)
    result.nonfinite_grads = sorted(set(result.nonfinite_grads))
    result.zero_lora_grads = [name for name, seen in got_grad.items() if not seen]
    result.base_with_grad = [name for name, p in base.items() if p.grad is not None]
    result.base_changed = [name for name, p in base.items() if _checksum(p) != before[name]]
    if torch.device(device).type == "cuda":
        result.peak_memory_bytes = int(torch.cuda.max_memory_allocated(device))
    return result


def build_model(preset: Preset, device, attention_backend="triton", nf4_backend="triton", lora=True):
    dtype = getattr(torch, preset.dtype)
    return QLoRADecoder(preset, device, dtype, attention_backend=attention_backend, nf4_backend=nf4_backend, lora=lora)
