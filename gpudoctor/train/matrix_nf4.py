"""NF4 dequantization backends side by side, on the preset's largest base weight.

Reference: the format's definition in float64 (``float64_reference`` below). A correct
backend differs from it only by the final rounding to the output dtype, so the tolerance is that
dtype's unit roundoff, element by element (bf16 2^-8, fp16 2^-11): one wrong code anywhere fails.
The dequant has no backward of its own (the base is frozen); the QLoRA linear's backward
recomputes it, which the training stage exercises.
"""

from __future__ import annotations

import torch

from .backend import BackendRow, Stopwatch, first_line
from .timing import median_ms, time_once_ms

UNIT_ROUNDOFF = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}
BACKENDS = ("gpudoctor-triton", "bitsandbytes", "torch-reference")
# The default pass leaves out bitsandbytes (its import alone took 4.2-4.4 s on the H200).
QUICK_BACKENDS = ("gpudoctor-triton", "torch-reference")


def _elementwise_relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    diff = (out.double() - ref).abs()
    if not torch.isfinite(diff).all():
        return float("inf")
    # Values that round to subnormals or zero in the output dtype are judged on absolute error.
    floor = torch.finfo(out.dtype).tiny
    return float((diff / ref.abs().clamp_min(floor)).max())


def float64_reference(packed: torch.Tensor, state) -> torch.Tensor:
    """value = nf4[code] * absmax, absmax = code2[q] * absmax2 + offset, all in float64: the format
    itself, with no rounding but float64's. High nibble first (bitsandbytes' layout)."""
    n = state.shape.numel()
    flat = packed.reshape(-1).long()
    codes = torch.stack([flat >> 4, flat & 0xF], dim=1).reshape(-1)[:n]
    block2 = torch.arange(state.absmax.numel(), device=packed.device) // state.state2_blocksize
    absmax = state.state2_code.double()[state.absmax.long()] * state.state2_absmax.double()[block2] + state.offset.double()
    block = torch.arange(n, device=packed.device) // state.blocksize
    return (state.code.double()[codes] * absmax[block]).reshape(state.shape)


def _load(backend: str, device):
    """Import the backend; return dequant(packed, state, dtype) -> tensor. Raises ImportError or
    RuntimeError with the reason it cannot run here."""
    if backend == "gpudoctor-triton":
        from ..kernels import nf4 as nf4_kernels

        # Looked up at call time: a test poisons the real kernel's result through the module.
        return lambda packed, state, dtype: nf4_kernels.dequantize_nf4(packed, state, dtype=dtype)
    if backend == "bitsandbytes":
        if torch.device(device).type != "cuda":
            raise RuntimeError("bitsandbytes' NF4 kernels need a CUDA device")
        import bitsandbytes.functional as bnbf

        def dequant(packed, state, dtype):
            nested = bnbf.QuantState(absmax=state.state2_absmax, code=state.state2_code,
                                     blocksize=state.state2_blocksize, dtype=torch.float32)
            quant_state = bnbf.QuantState(absmax=state.absmax, shape=state.shape, code=state.code,
                                          blocksize=state.blocksize, quant_type="nf4", dtype=dtype,
                                          offset=state.offset, state2=nested)
            return bnbf.dequantize_4bit(packed, quant_state, quant_type="nf4")

        return dequant
    if backend == "torch-reference":
        from .qlora import torch_dequantize

        return torch_dequantize
    raise ValueError(backend)


def probe(rows: int, cols: int, dtype: torch.dtype, device, backends=BACKENDS, seed: int = 0,
          external: dict[str, BackendRow] | None = None, before_timing=None) -> list[BackendRow]:
    """``external``: rows measured in a side process (side_probes.py), used as they are.
    ``before_timing``: called once before the first timed call (a side process waits there until
    the main pass leaves the GPU idle, so the two never time each other's kernels)."""
    from ..kernels import nf4 as nf4_kernels

    generator = torch.Generator().manual_seed(seed)
    weight = torch.randn(rows, cols, generator=generator).to(device=device, dtype=dtype)
    packed, state = nf4_kernels.quantize_nf4(weight, blocksize=64, double_quant=True)
    reference = float64_reference(packed, state)
    tolerance = UNIT_ROUNDOFF[dtype] * 1.0001
    results = []
    for name in backends:
        if external and name in external:
            results.append(external[name])
            continue
        row = BackendRow("nf4-dequant", name, tolerance=tolerance,
                         notes=f"{rows}x{cols} {str(dtype).replace('torch.', '')}, blocksize 64, double quant")
        results.append(row)
        try:
            watch = Stopwatch()
            dequant = _load(name, device)
            row.notes += f"; import {watch.ms():.0f} ms"
        except (ImportError, RuntimeError) as exc:
            row.status, row.stage, row.reason = "unavailable", "import", first_line(exc)
            row.error_type = type(exc).__name__
            continue
        except Exception as exc:  # noqa: BLE001 - a broken install is a matrix entry, not a crash
            row.fail("import", exc)
            continue
        if before_timing:
            before_timing()
            before_timing = None
        try:
            row.first_call_ms = time_once_ms(lambda: dequant(packed, state, dtype), device)
        except Exception as exc:  # noqa: BLE001
            row.fail("compile", exc)
            continue
        try:
            out = dequant(packed, state, dtype)
            row.forward_ms = median_ms(lambda: dequant(packed, state, dtype), device)
        except Exception as exc:  # noqa: BLE001
            row.fail("forward", exc)
            continue
        error = _elementwise_relative_error(out, reference)
        row.errors["weight"] = error
        if error <= tolerance:
            row.status = "works"
        else:
            row.status, row.stage = "mismatch", "agreement"
            row.reason = (f"max elementwise relative error {error:.3g} > {tolerance:.3g} "
                          f"(the output dtype's rounding) against the float64 definition")
    return results
