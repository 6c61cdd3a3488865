"""The QLoRA linear: a frozen NF4 base weight plus a trainable rank-r LoRA adapter.

The base weight is never kept dense. Forward dequantizes it with gpudoctor's Triton kernel; the
backward dequantizes it *again* instead of saving the dense copy from forward (what bitsandbytes'
and Unsloth's fast paths do too): activation memory stays at the 4-bit size, at the cost of one
more kernel launch per linear per step, which the pass times.
"""

from __future__ import annotations

import math
import torch
from torch import nn

from ..kernels import nf4 as nf4_kernels
from . import ops

def torch_dequantize(packed: torch.Tensor, state, dtype: torch.dtype) -> torch.Tensor:
    """The NF4 format in plain torch ops, rounded where bitsandbytes rounds (the nested absmax
    product, then + offset, then code * absmax, each in fp32; one final rounding to dtype)."""
    n = math.prod(state.shape)
    flat = packed.reshape(-1)
    codes = torch.stack([flat >> 4, flat & 0xF], dim=1).reshape(-1)[:n].long()
    absmax2 = state.state2_absmax.repeat_interleave(state.state2_blocksize)[: state.absmax.numel()]
    absmax = state.state2_code[state.absmax.long()] * absmax2
    absmax = absmax + state.offset
    values = state.code[codes] * absmax.repeat_interleave(state.blocksize)[:n]
    return values.reshape(state.shape).to(dtype)


class NF4Weight:
    """A frozen NF4-quantized weight: the packed bytes and the quantization state's tensors."""

    def __init__(self, weight: torch.Tensor):
        packed, state = nf4_kernels.quantize_nf4(weight, blocksize=64, double_quant=True)
        self.packed = packed
        self.state = state
        self.rows, self.cols = weight.shape

    def tensors(self) -> tuple[torch.Tensor, ...]:
        s = self.state
        return (self.packed, s.absmax, s.code, s.state2_absmax, s.state2_code, s.offset.reshape(1))


class NF4LinearFunction(torch.autograd.Function):
    """y = x @ W.T with W dequantized in forward and recomputed in backward (never saved)."""

    @staticmethod
    def forward(ctx, x, packed, absmax, code, absmax2, code2, offset, rows, cols, blocksize, dtype, backend):
        weight = _dequantize(backend, packed, absmax, code, absmax2, code2, offset, rows, cols, blocksize, dtype)
        ctx.save_for_backward(packed, absmax, code, absmax2, code2, offset)  # 4-bit inputs only
        ctx.meta = (rows, cols, blocksize, dtype, backend)
        return x @ weight.t()

    @staticmethod
    def backward(ctx, grad_out):
        rows, cols, blocksize, dtype, backend = ctx.meta
        weight = _dequantize(backend, *ctx.saved_tensors, rows, cols, blocksize, dtype)
        grad_x = grad_out @ weight
        return (grad_x,) + (None,) * 11


def _dequantize(backend, packed, absmax, code, absmax2, code2, offset, rows, cols, blocksize, dtype):
    if backend == "triton":
        return ops.nf4_dequantize(packed, absmax, code, absmax2, code2, offset, rows, cols, blocksize, dtype)
    state = nf4_kernels.NF4State(torch.Size((rows, cols)), dtype, blocksize, absmax, code, offset.reshape(()),
                                 absmax2, code2)
    return torch_dequantize(packed, state, dtype)


class QLoRALinear(nn.Linear):
    """Frozen NF4 base + LoRA (A: r x in, B: out x r, B starts at zero so step 0 is the base model).

    An ``nn.Linear`` whose ``weight`` holds the packed uint8 bytes (as bitsandbytes' Linear4bit
    does), so PEFT's LoRA wraps it like any linear (``--peft``); ``lora=False`` leaves that to PEFT.
    """

    def __init__(self, in_features: int, out_features: int, rank: int, alpha: int, dtype: torch.dtype,
                 device, generator: torch.Generator, lora: bool = True, backend: str = "triton"):
        nn.Module.__init__(self)  # not nn.Linear's: it would allocate the dense weight we avoid
        self.in_features, self.out_features, self.dtype, self.backend = in_features, out_features, dtype, backend
        # Drawn on the target device: CPU randn of a phi2/llama MLP weight would cost seconds.
        base = torch.randn(out_features, in_features, generator=generator, device=device) / math.sqrt(in_features)
        quantized = NF4Weight(base.to(device=device, dtype=dtype))
        tensors = quantized.tensors()
        self.weight = nn.Parameter(tensors[0], requires_grad=False)  # packed NF4 bytes, frozen
        self.bias = None
        for i, tensor in enumerate(tensors[1:], start=1):
            self.register_buffer(f"nf4_{i}", tensor, persistent=False)  # moves with .to(), never trained
        self.scaling = alpha / rank
        if lora:
            bound = 1.0 / math.sqrt(in_features)  # PEFT's kaiming_uniform(a=sqrt(5)) bound
            a = (torch.rand(rank, in_features, generator=generator, device=device) * 2 - 1) * bound
            self.lora_a = nn.Parameter(a)
            self.lora_b = nn.Parameter(torch.zeros(out_features, rank, device=device))
        else:
            self.lora_a = self.lora_b = None

    def store_packed_as_float(self) -> None:
        """Keep the packed NF4 bytes in a bfloat16-typed parameter: the same bytes, two per element.

        Why: FSDP2 in torch 2.11 re-wraps each sharded parameter as ``nn.Parameter(dtensor)``
        (requires_grad=True) before restoring the flag, which an integer tensor refuses with
        "only Tensors of floating point dtype can require gradients" (measured on the 2xH200
        machine); torchao's NF4Tensor likewise presents a floating dtype to FSDP. Nothing reads
        these elements as numbers: ``_nf4`` views them back as bytes. An odd byte count gets one
        pad byte, never read (``packed_bytes`` cuts it off)."""
        if self.weight.dtype != torch.uint8:
            return
        packed = self.weight.detach().reshape(-1)
        self.packed_bytes = packed.numel()
        if packed.numel() % 2:
            packed = torch.cat([packed, packed.new_zeros(1)])
        self.weight = nn.Parameter(packed.reshape(-1, 2).view(torch.bfloat16), requires_grad=False)

    def _packed(self) -> torch.Tensor:
        if self.weight.dtype == torch.uint8:
            return self.weight
        return self.weight.view(torch.uint8).reshape(-1)[: self.packed_bytes].reshape(-1, 1)

    def _nf4(self) -> tuple[torch.Tensor, ...]:
        return (self._packed(),) + tuple(getattr(self, f"nf4_{i}") for i in range(1, 6))

    def dense_weight(self) -> torch.Tensor:
        return _dequantize(self.backend, *self._nf4(), self.out_features, self.in_features, 64, self.dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = NF4LinearFunction.apply(x, *self._nf4(), self.out_features, self.in_features, 64, self.dtype, self.backend)
        if self.lora_a is not None:
            # LoRA weights are fp32 masters; the product runs in the model's dtype.
            y = y + (x @ self.lora_a.to(x.dtype).t() @ self.lora_b.to(x.dtype).t()) * self.scaling
        return y
