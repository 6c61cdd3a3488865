"""NF4 (QLoRA 4-bit NormalFloat) quantization in bitsandbytes' exact layout, and a fused
one-launch Triton dequantization kernel.

Format facts, all from bitsandbytes 0.50 (github.com/bitsandbytes-foundation/bitsandbytes):

* ``functional.get_4bit_type("nf4")`` / ``csrc/kernels.cu: nf4_dequantization_lut``: the 16 code
  values below (fp32). Code 7 is exactly 0.
* ``csrc/kernels.cu: kQuantizeBlockwise``: per block of ``blocksize`` elements the absmax
  ``max(|float(x)|)`` is stored as fp32, the values are normalized by multiplying with
  ``1.0f / absmax`` and mapped to a code by ``dQuantizeNF4``, a decision tree whose thresholds are
  the midpoints of neighbouring code values (``x > t`` is strict). Element ``2j`` goes to the HIGH
  nibble of byte ``j``, element ``2j + 1`` to the low nibble. A missing last element (odd count) is
  quantized as 0.0.
* ``functional.quantize_4bit(..., compress_statistics=True)``: ``offset = absmax.mean()``, then
  ``quantize_blockwise(absmax - offset, blocksize=256)`` with the signed dynamic map
  (``create_dynamic_map(signed=True)``), whose kernel maps each value by ``dQuantize<0>``, a binary
  search over the sorted 256-entry map followed by a round-to-nearest-midpoint step.
* ``functional.dequantize_4bit``: ``absmax = dequantize_blockwise(qabsmax, state2)`` (an fp32
  product ``code2[q] * absmax2[q_block]``, rounded), then ``absmax += offset`` in a separate torch
  op (a second rounding: the two must not fuse into one FMA), then ``kDequantizeBlockwise``
  writes ``T(float(nf4[code]) * absmax)``: an fp32 product rounded once more to bf16/fp16 (RNE).

bitsandbytes builds its CUDA library with ``--use_fast_math`` (its CMakeLists.txt), so in
*quantization* ``1.0f / local_abs_max`` (csrc/kernels.cu, kQuantizeBlockwise, thread 0 stores it
in shared memory for the whole block) is the hardware's approximate reciprocal,
``rcp.approx.ftz.f32`` (LLVM's NVPTX backend selects it for 1/x under fast math; at most 1 ulp
from the correctly rounded one). On a CUDA device this module computes the block reciprocals with
the same PTX instruction (``_approx_reciprocal``); on the CPU (no such instruction) it falls back
to the correctly rounded ``1 / absmax``. The 1-4 packed bytes that differed from bitsandbytes for
fp32 inputs of 16-33 M elements (issue 18) had another cause, found on the H200: the thresholds'
float32 values (``NF4_THRESHOLDS_FP32``: rounded once from the decimal, as nvcc reads the literal).
Dequantization has no division, and the kernel here reproduces it bit for bit.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import struct
from fractions import Fraction
from typing import Any, Optional

import torch
import triton
import triton.language as tl

from .launch import sm_count

__all__ = ["NF4State", "quantize_nf4", "dequantize_nf4", "NF4_CODE", "create_dynamic_map"]

# bitsandbytes functional.get_4bit_type("nf4") (== csrc/kernels.cu nf4_dequantization_lut).
NF4_CODE = (
    -1.0,
    -0.6961928009986877,
    -0.5250730514526367,
    -0.39491748809814453,
    -0.28444138169288635,
    -0.18477343022823334,
    -0.09105003625154495,
    0.0,
    0.07958029955625534,
    0.16093020141124725,
    0.24611230194568634,
    0.33791524171829224,
    0.44070982933044434,
    0.5626170039176941,
    0.7229568362236023,
    1.0,
)

# csrc/kernels.cu dQuantizeNF4: the decision tree's thresholds, ascending, as its source writes
# them (float literals). The tree returns the number of thresholds t with x > t, so a vectorized
# count gives the same code (NaN -> 0). See NF4_THRESHOLDS_FP32 for the values compared.
NF4_THRESHOLDS = (
    -0.8480964004993439,
    -0.6106329262256622,
    -0.4599952697753906,
    -0.33967943489551544,
    -0.23460740596055984,
    -0.13791173323988914,
    -0.045525018125772476,
    0.03979014977812767,
    0.1202552504837513,
    0.2035212516784668,
    0.2920137718319893,
    0.3893125355243683,
    0.5016634166240692,
    0.6427869200706482,
    0.8614784181118011,
)



def _float32_from_decimal(text: str) -> float:
    """The float32 nearest to the decimal ``text`` (ties to even), as a C compiler reads the
    literal ``<text>f``. Not float32(float(text)): that rounds twice, and four of the thresholds
    above are midpoints of two NF4 code values, so their decimal lies within 1e-17 of the midpoint
    of two float32s; rounding to a double lands exactly on that midpoint and ties-to-even then
    picks the wrong neighbour (0.5016634166240692 -> 0.50166344642639 instead of 0.50166338682174).
    That was the cause of the 1-4 packed bytes that differed from bitsandbytes for fp32 inputs of
    16-33 M elements (issue 18; measured on the H200: every differing element's normalized value
    was exactly that float32)."""
    exact = Fraction(text)
    bits = struct.unpack("<I", struct.pack("<f", float(exact)))[0]
    candidates = [struct.unpack("<f", struct.pack("<I", b))[0] for b in (bits - 1, bits, bits + 1)]
    return min(candidates, key=lambda value: (abs(Fraction(value) - exact),
                                              struct.unpack("<I", struct.pack("<f", value))[0] & 1))


NF4_THRESHOLDS_FP32 = tuple(_float32_from_decimal(repr(threshold)) for threshold in NF4_THRESHOLDS)

# bitsandbytes quantize_4bit(compress_statistics=True) always quantizes the absmax in blocks of 256.
NESTED_BLOCKSIZE = 256


def create_dynamic_map(signed: bool = True, max_exponent_bits: int = 7, total_bits: int = 8) -> torch.Tensor:
    """bitsandbytes ``functional.create_dynamic_map``, reproduced op for op (same torch calls in
    the same order) so that its 256 fp32 values are bit-identical."""
    data: list[float] = []
    non_sign_bits = total_bits - 1
    additional_items = 2 ** (non_sign_bits - max_exponent_bits) - 1
    for i in range(max_exponent_bits):
        fraction_items = int(
            2 ** (i + non_sign_bits - max_exponent_bits) + 1
            if signed
            else 2 ** (i + non_sign_bits - max_exponent_bits + 1) + 1,
        )
        boundaries = torch.linspace(0.1, 1, fraction_items, dtype=torch.float32)
        means = (boundaries[:-1] + boundaries[1:]) / 2.0
        data += ((10 ** (-(max_exponent_bits - 1) + i)) * means).tolist()
        if signed:
            data += (-(10 ** (-(max_exponent_bits - 1) + i)) * means).tolist()
    if additional_items > 0:
        boundaries = torch.linspace(0.1, 1, additional_items + 1, dtype=torch.float32)
        means = (boundaries[:-1] + boundaries[1:]) / 2.0
        data += ((10 ** (-(max_exponent_bits - 1) + i)) * means).tolist()
        if signed:
            data += (-(10 ** (-(max_exponent_bits - 1) + i)) * means).tolist()
    data.append(0)
    data.append(1.0)
    assert len(data) == 2**total_bits
    data += [0] * (256 - len(data))
    data.sort()
    return torch.tensor(data, dtype=torch.float32)


@functools.lru_cache(maxsize=None)
def _table(name: str, device: str) -> torch.Tensor:
    """Small constant tables, one copy per device (64 bytes / 1 KiB / 60 bytes)."""
    if name == "nf4":
        return torch.tensor(NF4_CODE, dtype=torch.float32, device=device)
    if name == "nf4_pairs":
        # Entry b = (value of b's high nibble, value of its low nibble): a packed byte decoded
        # to its two elements (2j is the high nibble) with one 8-byte load. 2 KiB.
        code = torch.tensor(NF4_CODE, dtype=torch.float32)
        index = torch.arange(256)
        return torch.stack([code[index >> 4], code[index & 15]], dim=1).reshape(-1).contiguous().to(device)
    if name == "nf4_thresholds":
        return torch.tensor(NF4_THRESHOLDS_FP32, dtype=torch.float32, device=device)
    if name == "dynamic":
        return create_dynamic_map(signed=True).to(device)
    raise KeyError(name)


@dataclasses.dataclass(frozen=True)
class NF4State:
    """What :func:`dequantize_nf4` needs besides the packed bytes. Field names follow
    bitsandbytes' ``QuantState`` so the same code path reads both.

    absmax: uint8 codes of the nested absmax (double_quant) or the fp32 absmax itself.
    offset / state2_*: only with double quantization (``nested``).
    """

    shape: torch.Size
    dtype: torch.dtype
    blocksize: int
    absmax: torch.Tensor
    code: torch.Tensor
    offset: Optional[torch.Tensor] = None
    state2_absmax: Optional[torch.Tensor] = None
    state2_code: Optional[torch.Tensor] = None
    state2_blocksize: int = NESTED_BLOCKSIZE
    quant_type: str = "nf4"

    @property
    def nested(self) -> bool:
        return self.state2_absmax is not None


def _nf4_codes(normalized: torch.Tensor) -> torch.Tensor:
    """dQuantizeNF4 for a tensor of normalized fp32 values: count of thresholds strictly below."""
    thresholds = _table("nf4_thresholds", str(normalized.device))
    codes = torch.zeros(normalized.shape, dtype=torch.uint8, device=normalized.device)
    for threshold in thresholds.unbind():  # 15 passes, no (n, 15) temporary
        codes += normalized > threshold
    return codes


def _dynamic_codes(x: torch.Tensor, code: torch.Tensor) -> torch.Tensor:
    """csrc/kernels.cu ``dQuantize<0>`` vectorized: the same 7-step binary search over the sorted
    map, then the same midpoint rounding, in fp32 (so ties and NaN go where bitsandbytes sends them)."""
    pivot = torch.full(x.shape, 127, dtype=torch.int64, device=x.device)
    upper_pivot = torch.full_like(pivot, 255)
    lower_pivot = torch.zeros_like(pivot)
    lower = torch.full(x.shape, -1.0, dtype=torch.float32, device=x.device)
    upper = torch.full_like(lower, 1.0)
    val = code[pivot]
    step = 64
    while step > 0:
        go_up = x > val
        lower_pivot = torch.where(go_up, pivot, lower_pivot)
        lower = torch.where(go_up, val, lower)
        upper_pivot = torch.where(go_up, upper_pivot, pivot)
        upper = torch.where(go_up, upper, val)
        pivot = torch.where(go_up, pivot + step, pivot - step)
        val = code[pivot]
        step //= 2
    upper = torch.where(upper_pivot == 255, code[255], upper)
    lower = torch.where(lower_pivot == 0, code[0], lower)
    above = x > val
    pick_upper = x > (upper + val) * 0.5
    pick_lower = x < (lower + val) * 0.5
    result = torch.where(
        above,
        torch.where(pick_upper, upper_pivot, pivot),
        torch.where(pick_lower, lower_pivot, pivot),
    )
    return result.to(torch.uint8)


def _blockwise_absmax(values: torch.Tensor, blocksize: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad the flat fp32 values with 0.0 to whole blocks (what bitsandbytes' block load does) and
    return (padded values as [blocks, blocksize], fp32 absmax per block)."""
    n = values.numel()
    blocks = -(n // -blocksize)
    padded = torch.zeros(blocks * blocksize, dtype=torch.float32, device=values.device)
    padded[:n] = values
    padded = padded.view(blocks, blocksize)
    return padded, padded.abs().amax(dim=1)


@triton.jit
def _approx_reciprocal_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets, mask=offsets < n, other=1.0)
    # What nvcc --use_fast_math makes of bitsandbytes' `1.0f / local_abs_max`.
    reciprocal = tl.inline_asm_elementwise("rcp.approx.ftz.f32 $0, $1;", "=r,r", [x], dtype=tl.float32,
                                           is_pure=True, pack=1)
    tl.store(out_ptr + offsets, reciprocal, mask=offsets < n)


def _approx_reciprocal(absmax: torch.Tensor) -> torch.Tensor:
    """1 / absmax as bitsandbytes' CUDA quantizer computes it (see the module docstring): the
    approximate PTX reciprocal on a CUDA device, the correctly rounded one elsewhere."""
    if absmax.device.type != "cuda" or _interpreting():
        return 1.0 / absmax
    absmax = absmax.contiguous()
    out = torch.empty_like(absmax)
    n = absmax.numel()
    if n:
        _approx_reciprocal_kernel[(triton.cdiv(n, 1024),)](absmax, out, n, BLOCK=1024, num_warps=4)
    return out


def quantize_nf4(weight: torch.Tensor, blocksize: int = 64, double_quant: bool = True, *,
                 _exact_reciprocal: bool = False) -> tuple[torch.Tensor, NF4State]:
    """Quantize ``weight`` (fp32/fp16/bf16, any shape) to NF4 in bitsandbytes' layout.

    Returns ``(packed, state)``: ``packed`` is uint8 of shape ``((n + 1) // 2, 1)`` like
    ``bitsandbytes.functional.quantize_4bit(weight, blocksize, compress_statistics=double_quant,
    quant_type="nf4")``. Torch ops on any device (plus one tiny Triton kernel for the block
    reciprocals on CUDA). ``_exact_reciprocal`` uses the correctly rounded reciprocal even on
    CUDA (the benchmark's control for the module docstring's claim), not API.
    """
    if weight.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"NF4 quantization takes fp32/fp16/bf16, got {weight.dtype}")
    if blocksize not in (32, 64, 128, 256, 512, 1024, 2048, 4096):
        raise ValueError(f"invalid blocksize {blocksize} (bitsandbytes allows 32..4096, powers of 2)")
    device = weight.device
    n = weight.numel()
    blocks, absmax = _blockwise_absmax(weight.detach().reshape(-1).float(), blocksize)
    # kQuantizeBlockwise multiplies by the reciprocal rather than dividing (see module docstring).
    reciprocal = (lambda x: 1.0 / x) if _exact_reciprocal else _approx_reciprocal
    normalized = blocks * reciprocal(absmax)[:, None]
    codes = _nf4_codes(normalized).view(-1)  # padded to whole blocks, so an even count
    packed = ((codes[0::2] << 4) | codes[1::2])[: (n + 1) // 2].reshape(-1, 1).contiguous()
    del blocks, normalized, codes

    nf4_code = _table("nf4", str(device))
    if not double_quant:
        return packed, NF4State(weight.shape, weight.dtype, blocksize, absmax, nf4_code)

    offset = absmax.mean()
    centered = absmax - offset
    dynamic = _table("dynamic", str(device))
    blocks2, absmax2 = _blockwise_absmax(centered, NESTED_BLOCKSIZE)
    qabsmax = _dynamic_codes(blocks2 * reciprocal(absmax2)[:, None], dynamic).view(-1)[: absmax.numel()]
    return packed, NF4State(
        shape=weight.shape,
        dtype=weight.dtype,
        blocksize=blocksize,
        absmax=qabsmax.contiguous(),
        code=nf4_code,
        offset=offset,
        state2_absmax=absmax2,
        state2_code=dynamic,
        state2_blocksize=NESTED_BLOCKSIZE,
    )


# ---------------------------------------------------------------------------------------------
# Triton kernel
# ---------------------------------------------------------------------------------------------


@triton.jit
def _lut_load(pointers):
    # ld.global.nc: read-only path; the 64-byte table stays resident in L1.
    return tl.inline_asm_elementwise(
        "ld.global.nc.f32 $0, [$1];", "=r,l", [pointers], dtype=tl.float32, is_pure=True, pack=1
    )


@triton.jit
def _pair_load(pointers):
    # One 8-byte ld.global.nc gives both decoded values of a packed byte (high nibble, low
    # nibble) from the 256-entry pair table: half the gathers and no nibble arithmetic.
    return tl.inline_asm_elementwise(
        "ld.global.nc.v2.f32 {$0, $1}, [$2];", "=r,=r,l", [pointers], dtype=(tl.float32, tl.float32),
        is_pure=True, pack=1,
    )


@triton.jit
def _dequant_tile(
    packed_ptr,
    absmax_ptr,
    absmax2_ptr,
    code2_ptr,
    offset,
    nf4_ptr,
    out_ptr,
    tile,
    n_elements,
    BLOCKSIZE: tl.constexpr,
    BLOCKSIZE2: tl.constexpr,
    ROW_BYTES: tl.constexpr,
    ROWS: tl.constexpr,
    NESTED: tl.constexpr,
    MASKED: tl.constexpr,
    BF16_RNE_BY_HAND: tl.constexpr,
    DECODE_IN_OUTPUT_LAYOUT: tl.constexpr,
    LUT_BY_ASM: tl.constexpr,
    PACKED_VECTOR_BYTES: tl.constexpr,
    STORE_CACHE: tl.constexpr,
    PACKED_EVICT: tl.constexpr,
    PAIR_LUT: tl.constexpr,
):
    # A tile is ROWS rows of ROW_BYTES packed bytes; one row lies inside one quantization block,
    # so the block scale is a per-row value computed once and broadcast along the row.
    row = tile * ROWS + tl.arange(0, ROWS)  # global row index (int64)
    first_byte = row * ROW_BYTES
    byte_offsets = first_byte[:, None] + tl.arange(0, ROW_BYTES)[None, :]
    if PACKED_VECTOR_BYTES < ROW_BYTES:
        # Narrower packed loads (e.g. 4 bytes = 8 outputs per thread) make the decoded values
        # land in exactly the layout of 16-byte output stores: no layout conversion.
        byte_offsets = tl.max_contiguous(byte_offsets, [1, PACKED_VECTOR_BYTES])
    block = (row * (2 * ROW_BYTES)) // BLOCKSIZE
    if MASKED:
        n_bytes = (n_elements + 1) // 2
        row_valid = row * (2 * ROW_BYTES) < n_elements
        packed = tl.load(packed_ptr + byte_offsets, mask=byte_offsets < n_bytes, other=0)
        if NESTED:
            quantized_absmax = tl.load(absmax_ptr + block, mask=row_valid, other=0)
            absmax2 = tl.load(absmax2_ptr + block // BLOCKSIZE2, mask=row_valid, other=0.0)
        else:
            scale = tl.load(absmax_ptr + block, mask=row_valid, other=0.0)
    else:
        packed = tl.load(packed_ptr + byte_offsets, eviction_policy=PACKED_EVICT)
        if NESTED:
            quantized_absmax = tl.load(absmax_ptr + block)
            absmax2 = tl.load(absmax2_ptr + block // BLOCKSIZE2)
        else:
            scale = tl.load(absmax_ptr + block)
    if NESTED:
        # bitsandbytes: kDequantizeBlockwise (fp32 product, rounded), then `absmax += offset`
        # as a separate op (rounded again). The launch passes enable_fp_fusion=False so these
        # two stay a MUL and an ADD instead of one FMA.
        scale = tl.load(code2_ptr + quantized_absmax.to(tl.int32)) * absmax2
        scale = scale + offset
    if DECODE_IN_OUTPUT_LAYOUT:
        # Duplicate every byte into its two output slots, then pick the nibble by parity: the
        # LUT gather and the scale multiply then happen in the store's own layout.
        both = tl.reshape(tl.join(packed, packed), [ROWS, 2 * ROW_BYTES]).to(tl.int32)
        shift = 4 - 4 * (tl.arange(0, 2 * ROW_BYTES) % 2)  # even element: high nibble
        codes = (both >> shift[None, :]) & 0xF
        if LUT_BY_ASM:
            values = _lut_load(nf4_ptr + codes) * scale[:, None]
        else:
            values = tl.load(nf4_ptr + codes) * scale[:, None]
    elif PAIR_LUT:
        # nf4_ptr is the pair table here: entry b = (code[b >> 4], code[b & 15]), so a packed
        # byte is its own index. The products are the same fp32 MULs as below, bit for bit.
        pair = nf4_ptr + 2 * packed.to(tl.int32)
        if LUT_BY_ASM:
            even, odd = _pair_load(pair)
        else:
            even = tl.load(pair)
            odd = tl.load(pair + 1)
        values = tl.reshape(tl.join(even * scale[:, None], odd * scale[:, None]), [ROWS, 2 * ROW_BYTES])
    else:
        high = (packed >> 4).to(tl.int32)
        low = (packed & 0xF).to(tl.int32)
        # 16-entry LUT gather (64 bytes, stays in L1), fp32 product rounded once to the output
        # dtype: exactly `T(dDequantizeNF4(q) * local_abs_max)` in bitsandbytes.
        if LUT_BY_ASM:
            # The same gather as inline PTX: an elementwise op keeps the packed bytes' register
            # layout (a tl.load gather gets its own layout from Triton's coalescing pass, and
            # the conversions between layouts cost shared-memory round trips and barriers).
            even = _lut_load(nf4_ptr + high) * scale[:, None]
            odd = _lut_load(nf4_ptr + low) * scale[:, None]
        else:
            even = tl.load(nf4_ptr + high) * scale[:, None]
            odd = tl.load(nf4_ptr + low) * scale[:, None]
        # join + reshape == tl.interleave (spelled out: tl.interleave is a @jit helper that the
        # interpreter cannot run when triton was imported before TRITON_INTERPRET was set).
        values = tl.reshape(tl.join(even, odd), [ROWS, 2 * ROW_BYTES])
    if BF16_RNE_BY_HAND:
        # Triton's CPU interpreter converts fp32 -> bf16 by truncation; the GPU (and bitsandbytes'
        # __float2bfloat16) rounds to nearest even. Do RNE on the bits so the interpreter agrees.
        bits = values.to(tl.uint32, bitcast=True)
        bits = bits + 0x7FFF + ((bits >> 16) & 1)
        values = (bits >> 16).to(tl.uint16).to(tl.bfloat16, bitcast=True)
    else:
        values = values.to(out_ptr.dtype.element_ty)
    out_offsets = (first_byte * 2)[:, None] + tl.arange(0, 2 * ROW_BYTES)[None, :]
    if MASKED:
        tl.store(out_ptr + out_offsets, values, mask=out_offsets < n_elements, cache_modifier=STORE_CACHE)
    else:
        tl.store(out_ptr + out_offsets, values, cache_modifier=STORE_CACHE)


@triton.jit
def _nf4_dequant_kernel(
    packed_ptr,
    absmax_ptr,
    absmax2_ptr,
    code2_ptr,
    offset_ptr,
    nf4_ptr,
    out_ptr,
    n_elements,
    BLOCKSIZE: tl.constexpr,
    BLOCKSIZE2: tl.constexpr,
    ROW_BYTES: tl.constexpr,
    ROWS: tl.constexpr,
    NESTED: tl.constexpr,
    BF16_RNE_BY_HAND: tl.constexpr,
    DECODE_IN_OUTPUT_LAYOUT: tl.constexpr,
    LUT_BY_ASM: tl.constexpr,
    PACKED_VECTOR_BYTES: tl.constexpr,
    STORE_CACHE: tl.constexpr,
    PACKED_EVICT: tl.constexpr,
    PAIR_LUT: tl.constexpr,
):
    tile = tl.program_id(0).to(tl.int64)  # int64: tile * tile_elements may pass 2**31
    tile_elements: tl.constexpr = ROWS * ROW_BYTES * 2
    if NESTED:
        offset = tl.load(offset_ptr)  # a device scalar: no host sync to read it
    else:
        offset = 0.0
    # Every tile but a ragged last one runs without masks, so loads and stores stay 16 bytes wide.
    if (tile + 1) * tile_elements <= n_elements:
        _dequant_tile(packed_ptr, absmax_ptr, absmax2_ptr, code2_ptr, offset, nf4_ptr, out_ptr, tile, n_elements,
                      BLOCKSIZE, BLOCKSIZE2, ROW_BYTES, ROWS, NESTED, False, BF16_RNE_BY_HAND,
                      DECODE_IN_OUTPUT_LAYOUT, LUT_BY_ASM, PACKED_VECTOR_BYTES, STORE_CACHE, PACKED_EVICT, PAIR_LUT)
    else:
        _dequant_tile(packed_ptr, absmax_ptr, absmax2_ptr, code2_ptr, offset, nf4_ptr, out_ptr, tile, n_elements,
                      BLOCKSIZE, BLOCKSIZE2, ROW_BYTES, ROWS, NESTED, True, BF16_RNE_BY_HAND,
                      DECODE_IN_OUTPUT_LAYOUT, LUT_BY_ASM, PACKED_VECTOR_BYTES, STORE_CACHE, "", PAIR_LUT)


@triton.jit
def _load_tile(packed_ptr, absmax_ptr, absmax2_ptr, tile, BLOCKSIZE: tl.constexpr, BLOCKSIZE2: tl.constexpr,
               ROW_BYTES: tl.constexpr, ROWS: tl.constexpr, NESTED: tl.constexpr,
               PACKED_VECTOR_BYTES: tl.constexpr, PACKED_EVICT: tl.constexpr):
    # The memory half of an unmasked tile: everything that comes from DRAM (packed bytes, absmax
    # code, second-level absmax). Split from _store_tile so the persistent loop can issue the next
    # tile's loads before it spends the current tile's.
    # Whole 4-byte words (the launch checks the alignment), one per thread per load, as a flat
    # tile: a loaded word stays one register until _store_tile takes it apart, and its 8 outputs
    # are exactly one 16-byte store of the same thread. (Loaded as bytes, Triton unpacks them
    # right after the load, so the loop waited for the prefetch at the end of every turn; as a
    # 2D [rows, words] tile Triton gave the load another thread layout than the stores and
    # converted between them through shared memory.) The contiguity hint of 1 keeps Triton from
    # widening the load to 16 bytes, which would again mismatch the stores' layout.
    word = tile * (ROWS * ROW_BYTES // 4) + tl.arange(0, ROWS * ROW_BYTES // 4)
    word = tl.max_contiguous(word, [1])
    block = (word * 8) // BLOCKSIZE
    packed = tl.load(packed_ptr.to(tl.pointer_type(tl.int32)) + word, eviction_policy=PACKED_EVICT)
    if NESTED:
        quantized_absmax = tl.load(absmax_ptr + block).to(tl.int32)
        absmax2 = tl.load(absmax2_ptr + block // BLOCKSIZE2)
    else:
        quantized_absmax = block.to(tl.int32)  # unused
        absmax2 = tl.load(absmax_ptr + block)  # the fp32 absmax itself
    return packed, quantized_absmax, absmax2


@triton.jit
def _store_tile(packed, quantized_absmax, absmax2, code2_ptr, offset, nf4_ptr, out_ptr, tile,
                ROW_BYTES: tl.constexpr, ROWS: tl.constexpr, NESTED: tl.constexpr,
                BF16_RNE_BY_HAND: tl.constexpr, LUT_BY_ASM: tl.constexpr, STORE_CACHE: tl.constexpr):
    # The same arithmetic as _dequant_tile's unmasked path (see the comments there), per word.
    if NESTED:
        scale = tl.load(code2_ptr + quantized_absmax) * absmax2
        scale = scale + offset
    else:
        scale = absmax2
    # Output e (0..7) of a little-endian word is nibble (e // 2) * 8 + 4 * (1 - e % 2): the even
    # element of each byte is its high nibble.
    e = tl.arange(0, 8)
    shift = (e // 2) * 8 + 4 - 4 * (e % 2)
    codes = (packed[:, None] >> shift[None, :]) & 0xF
    if LUT_BY_ASM:
        values = _lut_load(nf4_ptr + codes) * scale[:, None]
    else:
        values = tl.load(nf4_ptr + codes) * scale[:, None]
    if BF16_RNE_BY_HAND:
        bits = values.to(tl.uint32, bitcast=True)
        bits = bits + 0x7FFF + ((bits >> 16) & 1)
        values = (bits >> 16).to(tl.uint16).to(tl.bfloat16, bitcast=True)
    else:
        values = values.to(out_ptr.dtype.element_ty)
    values = tl.reshape(values, [ROWS * ROW_BYTES * 2])
    out_offsets = tile * (ROWS * ROW_BYTES * 2) + tl.arange(0, ROWS * ROW_BYTES * 2)
    tl.store(out_ptr + out_offsets, values, cache_modifier=STORE_CACHE)


@triton.jit
def _pipeline_step(p0, q0, a0, tile, programs, n_full, last_full, packed_ptr, absmax_ptr, absmax2_ptr, code2_ptr,
                   offset, nf4_ptr, out_ptr, BLOCKSIZE: tl.constexpr, BLOCKSIZE2: tl.constexpr,
                   ROW_BYTES: tl.constexpr, ROWS: tl.constexpr, NESTED: tl.constexpr,
                   BF16_RNE_BY_HAND: tl.constexpr, LUT_BY_ASM: tl.constexpr, PACKED_VECTOR_BYTES: tl.constexpr,
                   STORE_CACHE: tl.constexpr, PACKED_EVICT: tl.constexpr):
    # Two turns of the persistent loop, unrolled by hand so that no register copy is needed: with
    # one turn per iteration the prefetched tile and the tile being stored are live at once, and
    # the copy of the former into the loop-carried registers at the end of the turn waits for the
    # load to land (seen in the SASS: every turn then costs a full DRAM latency).
    # (p0, q0, a0): tile `tile`, loaded one turn ago. Tile `tile + programs` is loaded here, then
    # tile `tile` stored, then tile `tile + 2 * programs` loaded into the registers just freed,
    # then tile `tile + programs` stored. Prefetch indices are clamped to the last full tile
    # rather than masked (a mask costs selects; the redundant read is one tile per program).
    second = tile + programs
    p1, q1, a1 = _load_tile(packed_ptr, absmax_ptr, absmax2_ptr, tl.minimum(second, last_full).to(tl.int64),
                            BLOCKSIZE, BLOCKSIZE2, ROW_BYTES, ROWS, NESTED, PACKED_VECTOR_BYTES, PACKED_EVICT)
    _store_tile(p0, q0, a0, code2_ptr, offset, nf4_ptr, out_ptr, tile.to(tl.int64), ROW_BYTES, ROWS, NESTED,
                BF16_RNE_BY_HAND, LUT_BY_ASM, STORE_CACHE)
    p0, q0, a0 = _load_tile(packed_ptr, absmax_ptr, absmax2_ptr,
                            tl.minimum(tile + 2 * programs, last_full).to(tl.int64), BLOCKSIZE, BLOCKSIZE2,
                            ROW_BYTES, ROWS, NESTED, PACKED_VECTOR_BYTES, PACKED_EVICT)
    if second < n_full:
        _store_tile(p1, q1, a1, code2_ptr, offset, nf4_ptr, out_ptr, second.to(tl.int64), ROW_BYTES, ROWS, NESTED,
                    BF16_RNE_BY_HAND, LUT_BY_ASM, STORE_CACHE)
    return p0, q0, a0


@triton.jit
def _nf4_dequant_persistent_kernel(
    packed_ptr,
    absmax_ptr,
    absmax2_ptr,
    code2_ptr,
    offset_ptr,
    nf4_ptr,
    out_ptr,
    n_elements,
    BLOCKSIZE: tl.constexpr,
    BLOCKSIZE2: tl.constexpr,
    ROW_BYTES: tl.constexpr,
    ROWS: tl.constexpr,
    NESTED: tl.constexpr,
    BF16_RNE_BY_HAND: tl.constexpr,
    LUT_BY_ASM: tl.constexpr,
    PACKED_VECTOR_BYTES: tl.constexpr,
    STORE_CACHE: tl.constexpr,
    PACKED_EVICT: tl.constexpr,
    FOR_LOOP: tl.constexpr,
):
    # A few programs per SM, each looping over tiles pid, pid + programs, ... Software pipelining
    # of the dependent load chain: tile t+1's DRAM loads are issued before tile t's LUT gathers
    # and stores, so every thread keeps reads in flight while it works, instead of each
    # short-lived program waiting out one full DRAM latency alone.
    # Measured on the H200 (docs/benchmarks.md, issue 4): slower than _nf4_dequant_kernel at every
    # shape and setting tried (46-47 us against 42 us at 4096x14336, flat from 4 to 16 programs
    # per SM and 1024- to 8192-element tiles), so it is not the default; kept for the sweep.
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    tile_elements: tl.constexpr = ROWS * ROW_BYTES * 2
    n_full = n_elements // tile_elements
    last_full = n_full - 1
    if NESTED:
        offset = tl.load(offset_ptr)
    else:
        offset = 0.0
    if pid < n_full:
        p0, q0, a0 = _load_tile(packed_ptr, absmax_ptr, absmax2_ptr, pid.to(tl.int64), BLOCKSIZE, BLOCKSIZE2,
                                ROW_BYTES, ROWS, NESTED, PACKED_VECTOR_BYTES, PACKED_EVICT)
        if FOR_LOOP:
            for tile in range(pid, n_full, 2 * programs):
                p0, q0, a0 = _pipeline_step(
                    p0, q0, a0, tile, programs, n_full, last_full, packed_ptr, absmax_ptr, absmax2_ptr, code2_ptr,
                    offset, nf4_ptr, out_ptr, BLOCKSIZE, BLOCKSIZE2, ROW_BYTES, ROWS, NESTED, BF16_RNE_BY_HAND,
                    LUT_BY_ASM, PACKED_VECTOR_BYTES, STORE_CACHE, PACKED_EVICT)
        else:
            # Triton 3.6's CPU interpreter cannot take run-time range() bounds; on the GPU a while
            # loop made Triton pick a row-per-thread layout for the scale and convert it through
            # shared memory with barriers every turn, hence the two spellings.
            tile = pid
            while tile < n_full:
                p0, q0, a0 = _pipeline_step(
                    p0, q0, a0, tile, programs, n_full, last_full, packed_ptr, absmax_ptr, absmax2_ptr, code2_ptr,
                    offset, nf4_ptr, out_ptr, BLOCKSIZE, BLOCKSIZE2, ROW_BYTES, ROWS, NESTED, BF16_RNE_BY_HAND,
                    LUT_BY_ASM, PACKED_VECTOR_BYTES, STORE_CACHE, PACKED_EVICT)
                tile += 2 * programs
    # The ragged last tile (if any), masked, by the program whose turn it would have been.
    if n_full * tile_elements < n_elements:
        if pid == n_full % programs:
            _dequant_tile(packed_ptr, absmax_ptr, absmax2_ptr, code2_ptr, offset, nf4_ptr, out_ptr,
                          n_full.to(tl.int64), n_elements, BLOCKSIZE, BLOCKSIZE2, ROW_BYTES, ROWS, NESTED, True,
                          BF16_RNE_BY_HAND, False, LUT_BY_ASM, PACKED_VECTOR_BYTES, STORE_CACHE, "", False)


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def _launch_config(n_elements: int) -> tuple[int, int, int]:
    """(elements per tile, num_warps, programs per SM; 0 = one program per tile, no loop).

    From the H200 sweeps (bench/results/nf4-h200.json): tiles of 2048 to 8192 elements with 4
    warps were within run-to-run spread (about 1 us) of each other and 1024 was clearly slower on
    the large shapes (48 vs 42 us at 4096x14336); tiny tensors use 1024 so that more SMs get a
    tile. The persistent kernel measured slower at every shape, programs-per-SM count and tile
    size tried (46-47 us against 42 us at 4096x14336), so it is only a sweep variant."""
    if n_elements >= 1 << 20:
        return 2048, 4, 0
    return 1024, 4, 0


def _unwrap_state(packed: Any, state: Any) -> tuple[torch.Tensor, Any]:
    """Accept gpudoctor's NF4State, a bitsandbytes QuantState, or a Params4bit (duck-typed)."""
    if state is None and hasattr(packed, "quant_state"):
        state = packed.quant_state
    # A Params4bit passed as the state: it is a tensor whose quant_state is the real state (it
    # also mirrors blocksize and absmax as properties, so duck-typing on those would accept it).
    if isinstance(state, torch.Tensor) and getattr(state, "quant_state", None) is not None:
        state = state.quant_state
    if state is None:
        raise ValueError("dequantize_nf4 needs a state (NF4State, bitsandbytes QuantState or Params4bit)")
    if getattr(state, "quant_type", "nf4") != "nf4":
        raise ValueError(f"only NF4 is supported, got quant_type={state.quant_type!r}")
    tensor = packed.data if isinstance(packed, torch.nn.Parameter) else packed
    return tensor, state


def _nested_parts(state: Any) -> tuple[Optional[torch.Tensor], Optional[torch.Tensor], Optional[torch.Tensor], int]:
    """(offset, absmax2, code2, blocksize2) from either state flavour; Nones when not nested."""
    if isinstance(state, NF4State):
        if not state.nested:
            return None, None, None, NESTED_BLOCKSIZE
        return state.offset, state.state2_absmax, state.state2_code, state.state2_blocksize
    if getattr(state, "nested", False) or getattr(state, "state2", None) is not None:
        state2 = state.state2
        return state.offset, state2.absmax, state2.code, int(state2.blocksize)
    return None, None, None, NESTED_BLOCKSIZE


def dequantize_nf4(
    packed: torch.Tensor,
    state: Any = None,
    dtype: Optional[torch.dtype] = None,
    out: Optional[torch.Tensor] = None,
    *,
    _elements_per_program: Optional[int] = None,
    _num_warps: Optional[int] = None,
    _decode_in_output_layout: bool = False,
    _lut_by_asm: Optional[bool] = None,
    _packed_vector_bytes: int = 4,
    _store_cache: str = "",
    _programs_per_sm: Optional[int] = None,
    _packed_evict: str = "",
    _pair_lut: bool = False,
) -> torch.Tensor:
    """Dequantize NF4 ``packed`` bytes to a contiguous bf16/fp16 tensor of ``state.shape`` in ONE
    Triton launch (nested absmax decoded in the same pass). Bit-identical to bitsandbytes'
    ``dequantize_4bit``. ``dtype`` defaults to the state's dtype when that is fp16/bf16, else bf16.
    ``packed`` may be a bitsandbytes ``Params4bit`` (then ``state`` may be omitted).

    The underscore keywords are launch variants for bench/nf4.py's sweep, not API.
    """
    tensor, state = _unwrap_state(packed, state)
    if dtype is None:
        dtype = out.dtype if out is not None else state.dtype
        if dtype not in (torch.float16, torch.bfloat16):
            dtype = torch.bfloat16
    if dtype not in (torch.float16, torch.bfloat16):
        raise ValueError(f"dtype must be torch.bfloat16 or torch.float16, got {dtype}")
    shape = torch.Size(state.shape)
    n_elements = shape.numel()
    blocksize = int(state.blocksize)
    if blocksize & (blocksize - 1) or blocksize < 2:
        raise ValueError(f"blocksize must be a power of two, got {blocksize}")
    if not tensor.is_contiguous():
        raise ValueError("packed NF4 data must be contiguous")
    packed_bytes = tensor.view(torch.uint8) if tensor.dtype != torch.uint8 else tensor  # quant_storage
    if packed_bytes.numel() < (n_elements + 1) // 2:
        raise ValueError(f"packed has {packed_bytes.numel()} bytes, {shape} needs {(n_elements + 1) // 2}")
    if out is None:
        out = torch.empty(shape, dtype=dtype, device=packed_bytes.device)
    else:
        if out.dtype != dtype or out.numel() != n_elements or not out.is_contiguous():
            raise ValueError(f"out must be a contiguous {dtype} tensor of {n_elements} elements")
        if out.device != packed_bytes.device:
            raise ValueError("out must be on the packed tensor's device")
    if n_elements == 0:
        return out

    offset, absmax2, code2, blocksize2 = _nested_parts(state)
    nested = absmax2 is not None
    absmax = state.absmax
    nf4_table = _table("nf4", str(packed_bytes.device))
    if nested:
        if absmax.dtype != torch.uint8:
            raise ValueError(f"nested absmax must be uint8 codes, got {absmax.dtype}")
        offset_tensor = offset if isinstance(offset, torch.Tensor) else torch.tensor(float(offset))
        offset_tensor = offset_tensor.to(device=packed_bytes.device, dtype=torch.float32).reshape(1)
        absmax2 = absmax2.float()
        code2 = code2.float()
    else:
        absmax = absmax.float()
        offset_tensor = absmax  # unused by the kernel when not nested; any pointer will do
        absmax2 = absmax
        code2 = absmax

    row_bytes = min(blocksize, 64) // 2  # one row never straddles two quantization blocks
    elements_per_program, num_warps, programs_per_sm = _launch_config(n_elements)
    if _elements_per_program is not None:
        elements_per_program = _elements_per_program
    if _num_warps is not None:
        num_warps = _num_warps
    decode_in_output_layout = _decode_in_output_layout
    packed_vector_bytes = _packed_vector_bytes
    lut_by_asm = (not _interpreting()) if _lut_by_asm is None else _lut_by_asm  # no PTX on the CPU
    rows = max(1, elements_per_program // (2 * row_bytes))
    tile_elements = rows * 2 * row_bytes
    if _programs_per_sm is not None:
        programs_per_sm = _programs_per_sm
    # The persistent kernel reads whole 4-byte words (so needs that alignment) and takes one scale
    # per word (so a block must hold at least a word's 8 elements); otherwise the one-tile kernel.
    persistent = programs_per_sm > 0 and packed_bytes.data_ptr() % 4 == 0 and blocksize >= 8
    # Arguments both kernels take; enable_fp_fusion=False keeps bitsandbytes' two roundings.
    args = (packed_bytes, absmax, absmax2, code2, offset_tensor, nf4_table, out, n_elements)
    common = dict(
        BLOCKSIZE=blocksize,
        BLOCKSIZE2=int(blocksize2),
        ROW_BYTES=row_bytes,
        ROWS=rows,
        NESTED=nested,
        BF16_RNE_BY_HAND=dtype == torch.bfloat16 and _interpreting(),
        LUT_BY_ASM=lut_by_asm,
        PACKED_VECTOR_BYTES=packed_vector_bytes,
        STORE_CACHE=_store_cache,
        PACKED_EVICT=_packed_evict,
        num_warps=num_warps,
        enable_fp_fusion=False,
    )
    if persistent and not decode_in_output_layout:
        # (the persistent kernel reads the 16-entry table; the pair table is a one-tile option)
        n_tiles = triton.cdiv(n_elements, tile_elements)
        grid = (max(1, min(n_tiles, programs_per_sm * sm_count(packed_bytes.device))),)
        _nf4_dequant_persistent_kernel[grid](*args, FOR_LOOP=not _interpreting(), **common)
        return out
    grid = (triton.cdiv(n_elements, tile_elements),)
    pair_lut = _pair_lut and not decode_in_output_layout
    if pair_lut:
        args = args[:5] + (_table("nf4_pairs", str(packed_bytes.device)),) + args[6:]
    _nf4_dequant_kernel[grid](*args, DECODE_IN_OUTPUT_LAYOUT=decode_in_output_layout, PAIR_LUT=pair_lut, **common)
    return out
