"""Attention backends side by side at the preset's shape: forward and backward against a float32
(GPU) / float64 (CPU) reference (output and dQ, dK, dV), with times.

Tolerance: max |x - ref| / max |ref| per output, 4e-2 in bf16 and 1e-2 in fp16 (bf16 operands
land between 1e-3 and 1e-2 on this metric; eager softmax in the input dtype sits near the top).
"""

from __future__ import annotations


import warnings

import torch
import torch.nn.functional as F

from .backend import BackendRow, Stopwatch, first_line, relative_error
from .timing import median_ms, time_once_ms

TOLERANCE = {torch.bfloat16: 4e-2, torch.float16: 1e-2}
# The reference on a GPU is float32 (torch's default: no TF32 in float32 matmuls; its error,
# ~1e-6, is far below the bf16/fp16 tolerances): it is ~1 ms either way once warm, and float32 is
# the dtype the GPU kernel tests use too.
REFERENCE_DTYPE_ON_GPU = torch.float32


SDPA_BACKENDS = {"sdpa-flash": "FLASH_ATTENTION", "sdpa-mem-efficient": "EFFICIENT_ATTENTION",
                 "sdpa-cudnn": "CUDNN_ATTENTION", "sdpa-math": "MATH"}
BACKENDS = ("gpudoctor-triton", "flash-attn", *SDPA_BACKENDS, "eager")
# The default pass: gpudoctor's kernel and torch's own flash kernel (no extra import, no cuDNN
# graph build); the rest with --full-matrix.
QUICK_BACKENDS = ("gpudoctor-triton", "sdpa-flash")


def _backward(out: torch.Tensor, grad_out: torch.Tensor) -> None:
    """Backpropagate ``grad_out`` from ``out`` through a scalar: the gradient reaching ``out`` is
    exactly ``grad_out`` (sum's gradient is 1, the product's is then grad_out * 1). Not
    ``out.backward(grad_out)``: torch.autograd's _make_grads imports torch.fx's symbolic shapes
    (sympy) the first time it is handed a gradient tensor, which cost 2.4 s of the warm pass on
    the H200 (issue 18). The product and sum add two small kernels to every row's backward time."""
    (out * grad_out).sum().backward()


def _load(backend: str, device):
    """Return attention(q, k, v) -> out for (batch, heads, seq, head_dim) inputs, causal."""
    if backend == "gpudoctor-triton":
        from .ops import flash_attention

        return flash_attention
    if backend == "flash-attn":
        if torch.device(device).type != "cuda":
            raise RuntimeError("flash-attn needs a CUDA device")
        from flash_attn import flash_attn_func  # its layout is (batch, seq, heads, head_dim)

        return lambda q, k, v: flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                               causal=True).transpose(1, 2)
    if backend in SDPA_BACKENDS:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        choice = getattr(SDPBackend, SDPA_BACKENDS[backend])

        def sdpa(q, k, v):
            # Only this backend may run: a refusal raises instead of silently falling back.
            with sdpa_kernel([choice]):
                return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=q.shape[1] != k.shape[1])

        return sdpa
    if backend == "eager":
        from .model import eager_attention

        return eager_attention
    raise ValueError(backend)


def probe(batch: int, heads: int, kv_heads: int, seq: int, head_dim: int, dtype: torch.dtype, device,
          backends=BACKENDS, seed: int = 0, external: dict[str, BackendRow] | None = None, before_timing=None) -> list[BackendRow]:
    """``external``: rows measured in a side process (side_probes.py), used as they are.
    ``before_timing``: called once before the first timed call (a side process waits there until
    the main pass leaves the GPU idle, so the two never time each other's kernels)."""
    from ..kernels.attention import reference_attention

    import time

    setup_start = time.perf_counter()
    generator = torch.Generator().manual_seed(seed)

    def draw(*shape):
        return torch.randn(*shape, generator=generator).to(device=device, dtype=dtype)

    q, k, v = draw(batch, heads, seq, head_dim), draw(batch, kv_heads, seq, head_dim), draw(batch, kv_heads, seq, head_dim)
    grad_out = draw(batch, heads, seq, head_dim)
    reference_dtype = REFERENCE_DTYPE_ON_GPU if torch.device(device).type == "cuda" else torch.float64
    q_ref, k_ref, v_ref = (t.to(reference_dtype).requires_grad_() for t in (q, k, v))
    ref_out = reference_attention(q_ref, k_ref, v_ref, causal=True, dtype=reference_dtype)
    _backward(ref_out, grad_out.to(reference_dtype))
    reference = {"out": ref_out.detach(), "dq": q_ref.grad, "dk": k_ref.grad, "dv": v_ref.grad}
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
    setup_ms = (time.perf_counter() - setup_start) * 1000
    tolerance = TOLERANCE[dtype]
    shape = (f"b{batch} h{heads}/kv{kv_heads} s{seq} d{head_dim} {str(dtype).replace('torch.', '')} causal; "
             f"inputs and {str(reference_dtype).replace('torch.', '')} reference {setup_ms:.0f} ms (shared by all rows)")
    rows = []
    for name in backends:
        if external and name in external:
            rows.append(external[name])
            continue
        row = BackendRow("attention", name, tolerance=tolerance, notes=shape)
        rows.append(row)
        try:
            watch = Stopwatch()
            attention = _load(name, device)
            row.notes += f"; import {watch.ms():.0f} ms"
        except (ImportError, RuntimeError) as exc:
            row.status, row.stage, row.reason = "unavailable", "import", first_line(exc)
            row.error_type = type(exc).__name__
            continue
        except Exception as exc:  # noqa: BLE001 - e.g. flash-attn's undefined-symbol ABI error
            row.fail("import", exc)
            continue
        if before_timing:
            before_timing()
            before_timing = None
        leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]

        def forward():
            with torch.no_grad():
                return attention(q, k, v)

        def forward_backward():
            for t in leaves:
                t.grad = None
            out = attention(*leaves)
            _backward(out, grad_out)
            return out

        try:
            # SDPA explains each refusal only in a warning ("Flash attention requires ..."): keep them.
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                row.first_call_ms = time_once_ms(forward, device)
            out = forward()
        except Exception as exc:  # noqa: BLE001
            row.fail("forward", exc)
            why = [str(w.message).split("(Triggered internally")[0].strip() for w in caught]
            if why:
                row.reason = "; ".join(dict.fromkeys(why))[:600]
            continue
        try:
            forward_backward()
            grads = {"dq": leaves[0].grad, "dk": leaves[1].grad, "dv": leaves[2].grad}
        except Exception as exc:  # noqa: BLE001
            row.fail("backward", exc)
            continue
        row.errors = {"out": relative_error(out, reference["out"]),
                      **{key: relative_error(value, reference[key]) for key, value in grads.items()}}
        worst_key = max(row.errors, key=row.errors.get)
        if row.errors[worst_key] > tolerance:
            row.status, row.stage = "mismatch", "agreement"
            row.reason = (f"{worst_key} max relative error {row.errors[worst_key]:.3g} > {tolerance:.3g} against "
                          f"a {str(reference_dtype).replace('torch.', '')} reference")
            continue
        row.forward_ms = median_ms(forward, device)
        row.backward_ms = max(0.0, median_ms(forward_backward, device) - row.forward_ms)
        row.status = "works"
    return rows


