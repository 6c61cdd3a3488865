"""gpudoctor's Triton kernels as torch custom ops.

Why custom ops: torch.compile cannot trace into a Python launcher full of host-side logic (state
unwrapping, table caches, grid maths) and would break the graph at every kernel call. A
``torch.library.custom_op`` with a fake (shape-only) implementation is opaque to Dynamo: it lands
in the graph as one node, so the whole QLoRA step compiles with zero graph breaks.

Only traced code goes through the ops. ``custom_op`` wraps its implementation in
``torch._disable_dynamo``, which imports torch._dynamo at the first *eager* call (about 1 s, an
eighth of the pass's warm budget); eager calls therefore go straight to the same kernels, and
``torch.compiler.is_compiling()`` (a flag Dynamo folds to True while tracing) picks the op.

Importing this module registers the ops once per process (``gpudoctor::...``).
"""

from __future__ import annotations

import math

import torch

from ..kernels import attention as attention_kernels
from ..kernels import nf4 as nf4_kernels


def nf4_dequantize(packed, absmax, code, absmax2, code2, offset, rows: int, cols: int, blocksize: int,
                   dtype: torch.dtype) -> torch.Tensor:
    """The dense (rows, cols) weight from NF4 tensors: gpudoctor's Triton kernel, one launch."""
    if torch.compiler.is_compiling():
        return nf4_dequantize_op(packed, absmax, code, absmax2, code2, offset, rows, cols, blocksize, dtype)
    return _nf4_dequantize_eager(packed, absmax, code, absmax2, code2, offset, rows, cols, blocksize, dtype)


def _nf4_dequantize_eager(packed, absmax, code, absmax2, code2, offset, rows, cols, blocksize, dtype):
    state = nf4_kernels.NF4State(shape=torch.Size((rows, cols)), dtype=dtype, blocksize=blocksize,
                                 absmax=absmax, code=code, offset=offset, state2_absmax=absmax2,
                                 state2_code=code2)
    # Looked up on the module at call time, so a test can poison the real kernel's result.
    return nf4_kernels.dequantize_nf4(packed, state, dtype=dtype)


@torch.library.custom_op("gpudoctor::nf4_dequantize", mutates_args=())
def nf4_dequantize_op(packed: torch.Tensor, absmax: torch.Tensor, code: torch.Tensor, absmax2: torch.Tensor,
                      code2: torch.Tensor, offset: torch.Tensor, rows: int, cols: int, blocksize: int,
                      dtype: torch.dtype) -> torch.Tensor:
    return _nf4_dequantize_eager(packed, absmax, code, absmax2, code2, offset, rows, cols, blocksize, dtype)


@nf4_dequantize_op.register_fake
def _(packed, absmax, code, absmax2, code2, offset, rows, cols, blocksize, dtype):
    return packed.new_empty((rows, cols), dtype=dtype)


def _scale(head_dim: int, softmax_scale: float) -> float:
    return softmax_scale if softmax_scale > 0 else 1.0 / math.sqrt(head_dim)


def _config(q: torch.Tensor, k: torch.Tensor):
    # the shapes pick the descriptor kernels or the pointer ones and the one-launch backward or
    # not on sm90, and q's GPU (remembered per device) the tiles, as in flash_attention
    return attention_kernels.config_for(q, k)


@torch.library.custom_op("gpudoctor::flash_attention_forward", mutates_args=())
def flash_attention_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                            softmax_scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    attention_kernels.validate_inputs(q, k, v, causal, None)
    scale = _scale(q.shape[-1], softmax_scale)
    return attention_kernels.attention_forward(q, k, v, causal, scale, _config(q, k))


@flash_attention_forward.register_fake
def _(q, k, v, causal, softmax_scale):
    batch, heads, seq, _ = q.shape
    return torch.empty_like(q, memory_format=torch.contiguous_format), \
        q.new_empty((batch * heads, seq), dtype=torch.float32)


@torch.library.custom_op("gpudoctor::flash_attention_backward", mutates_args=())
def flash_attention_backward(grad_out: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                             out: torch.Tensor, lse: torch.Tensor, causal: bool,
                             softmax_scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    scale = _scale(q.shape[-1], softmax_scale)
    return attention_kernels.attention_backward(grad_out, q, k, v, out, lse, causal, scale, _config(q, k))


@flash_attention_backward.register_fake
def _(grad_out, q, k, v, out, lse, causal, softmax_scale):
    return (torch.empty_like(q, memory_format=torch.contiguous_format),
            torch.empty_like(k, memory_format=torch.contiguous_format),
            torch.empty_like(v, memory_format=torch.contiguous_format))


def _attention_setup(ctx, inputs, output):
    q, k, v, causal, softmax_scale = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse)
    ctx.causal = causal
    ctx.softmax_scale = softmax_scale


def _attention_backward(ctx, grad_out, _grad_lse):
    q, k, v, out, lse = ctx.saved_tensors
    dq, dk, dv = flash_attention_backward(grad_out.contiguous(), q, k, v, out, lse, ctx.causal, ctx.softmax_scale)
    return dq, dk, dv, None, None


flash_attention_forward.register_autograd(_attention_backward, setup_context=_attention_setup)


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True) -> torch.Tensor:
    """(batch, heads, seq, head_dim) attention through gpudoctor's Triton kernels (GQA allowed)."""
    if torch.compiler.is_compiling():
        out, _ = flash_attention_forward(q, k, v, causal, 0.0)
        return out
    return attention_kernels.flash_attention(q, k, v, causal=causal)
