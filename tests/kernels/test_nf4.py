"""NF4 quantize / dequantize (gpudoctor.kernels.nf4).

CPU: under TRITON_INTERPRET=1 (set by conftest.py), small shapes, against a float64 reference built
from the format's definition. GPU (`pytest -m gpu`): bit-exactness against bitsandbytes 0.50.
"""

from __future__ import annotations

import math

import pytest
import torch

from gpudoctor.kernels.nf4 import NF4_CODE, NF4State, dequantize_nf4, quantize_nf4

# Odd element counts on purpose: not multiples of 2, 64 (a block) or 256 (a nested block).
ODD_SHAPES = [(1,), (63,), (65,), (3, 37), (5, 129), (2, 3, 77), (257, 5)]
DTYPES = [torch.bfloat16, torch.float16]

# Largest relative error of one round-to-nearest to the output dtype (half an ulp), plus the fp32
# roundings of the scale on the way (about 2**-23 each), with room.
HALF_ULP = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}
FP32_SLACK = 2.0**-20
# fp16 has subnormals below 2**-14: there the error is absolute, half of 2**-24.
ABS_SLACK = {torch.bfloat16: 0.0, torch.float16: 2.0**-25}


def _generator() -> torch.Generator:
    """Fresh random data every run; the seed is printed so a failure can be replayed."""
    seed = torch.seed() % (2**31)
    print(f"seed={seed}")
    return torch.Generator().manual_seed(seed)


def _weights(shape, dtype, device, gen) -> torch.Tensor:
    # Normal data like real weights, with a random per-row scale so the absmax values spread out
    # (which exercises the nested 8-bit absmax code).
    x = torch.randn(shape, generator=gen, dtype=torch.float32)
    x = x * torch.exp(torch.randn(x.shape[:1] + (1,) * (x.dim() - 1), generator=gen))
    return x.to(dtype).to(device)


def _reference(packed: torch.Tensor, state: NF4State) -> torch.Tensor:
    """Float64 dequantization straight from the format's definition (not from the kernel):
    element 2j is the high nibble of byte j; value = NF4[code] * absmax[block];
    nested absmax = dynamic_map[q] * absmax2[q_block] + offset."""
    n = math.prod(state.shape)
    flat = packed.reshape(-1).cpu().to(torch.int64)
    codes = torch.empty(2 * flat.numel(), dtype=torch.int64)
    codes[0::2] = flat >> 4
    codes[1::2] = flat & 0xF
    codes = codes[:n]
    table = torch.tensor(NF4_CODE, dtype=torch.float64)
    if state.nested:
        q = state.absmax.cpu().long()
        absmax = (
            state.state2_code.cpu().double()[q]
            * state.state2_absmax.cpu().double()[torch.arange(q.numel()) // state.state2_blocksize]
            + state.offset.cpu().double()
        )
    else:
        absmax = state.absmax.cpu().double()
    return (table[codes] * absmax[torch.arange(n) // state.blocksize]).reshape(state.shape)


def _assert_close_to_reference(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype) -> None:
    got = out.cpu().double()
    assert not torch.isnan(got).any(), "unwritten (NaN-poisoned) or NaN elements in the output"
    bound = (HALF_ULP[dtype] + FP32_SLACK) * ref.abs() + ABS_SLACK[dtype]
    worst = ((got - ref).abs() - bound).max().item()
    assert worst <= 0, f"error exceeds one rounding to {dtype} by {worst}"


@pytest.mark.parametrize("shape", ODD_SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_roundtrip_matches_float64_reference(shape, dtype, device):
    gen = _generator()
    weight = _weights(shape, torch.bfloat16, device, gen)
    packed, state = quantize_nf4(weight)
    assert state.nested and packed.dtype == torch.uint8
    assert packed.shape == ((math.prod(shape) + 1) // 2, 1)
    out = torch.full(shape, float("nan"), dtype=dtype, device=device)  # poisoned
    result = dequantize_nf4(packed, state, dtype, out=out)
    assert result is out and out.is_contiguous() and out.shape == shape
    _assert_close_to_reference(out, _reference(packed, state), dtype)
    # The quantization error itself: at most half the widest NF4 gap (0.304 / 2) times absmax,
    # plus the nested absmax error, checked loosely against the original weights.
    absmax = weight.float().abs().max().item()
    assert (out.float() - weight.float()).abs().max().item() <= 0.16 * absmax * 1.05 + 1e-6


@pytest.mark.parametrize("dtype", DTYPES)
def test_without_double_quant_and_other_blocksizes(dtype, device):
    gen = _generator()
    for blocksize in (32, 64, 128, 256):
        weight = _weights((7, 61), torch.float32, device, gen)
        packed, state = quantize_nf4(weight, blocksize=blocksize, double_quant=False)
        assert not state.nested and state.absmax.dtype == torch.float32
        out = torch.full(weight.shape, float("nan"), dtype=dtype, device=device)
        dequantize_nf4(packed, state, dtype, out=out)
        _assert_close_to_reference(out, _reference(packed, state), dtype)
        # Without double quantization the absmax is exactly max |x| per block.
        flat = weight.reshape(-1).float().cpu()
        blocks = -(flat.numel() // -blocksize)
        padded = torch.zeros(blocks * blocksize)
        padded[: flat.numel()] = flat
        assert torch.equal(state.absmax.cpu(), padded.view(blocks, blocksize).abs().amax(1))


def test_bit_layout_high_nibble_is_even_element(device):
    """Build weights whose codes are known: every block holds 1.0 (so absmax is 1.0 and x * 1/1
    is exact) and otherwise exact NF4 values, then read the nibbles back."""
    gen = _generator()
    n = 64 * 3 + 5  # odd: the last byte's low nibble is padding
    codes = torch.randint(0, 16, (n,), generator=gen)
    codes[::64] = 15  # the value 1.0 in every block
    weight = torch.tensor(NF4_CODE, dtype=torch.float32)[codes].to(device)
    packed, state = quantize_nf4(weight, double_quant=False)
    packed = packed.reshape(-1).cpu().long()
    assert torch.equal(packed >> 4, codes[0::2])
    assert torch.equal(packed[: n // 2] & 0xF, codes[1::2])
    assert packed[-1].item() & 0xF == 7  # bitsandbytes pads with 0.0, which is code 7
    assert torch.equal(state.absmax.cpu(), torch.ones(4))
    out = dequantize_nf4(packed.to(torch.uint8).to(device).reshape(-1, 1), state, torch.float16)
    assert torch.equal(out.cpu(), weight.cpu().to(torch.float16))  # NF4 value * 1.0, rounded once


def test_quantizer_picks_nearest_code_and_nested_absmax(device):
    """Codes are the nearest NF4 value to x / absmax (float64 check; ties within rounding allowed),
    and the nested absmax is the nearest dynamic-map entry, with offset = mean(absmax)."""
    gen = _generator()
    weight = _weights((9, 301), torch.float32, device, gen)  # 2709 elements, 43 blocks
    packed, plain = quantize_nf4(weight, double_quant=False)
    _, nested = quantize_nf4(weight, double_quant=True)
    flat = weight.reshape(-1).cpu().double()
    n = flat.numel()
    codes = torch.empty(2 * packed.numel(), dtype=torch.int64)
    codes[0::2] = packed.reshape(-1).cpu().long() >> 4
    codes[1::2] = packed.reshape(-1).cpu().long() & 0xF
    normalized = flat / plain.absmax.cpu().double()[torch.arange(n) // 64]
    table = torch.tensor(NF4_CODE, dtype=torch.float64)
    distance = (normalized[:, None] - table[None, :]).abs()
    chosen = distance.gather(1, codes[:n, None]).squeeze(1)
    assert (chosen - distance.min(1).values).max().item() <= 1e-6

    absmax = plain.absmax.cpu().double()
    assert abs(nested.offset.item() - absmax.mean().item()) <= 1e-6 * absmax.mean().item()
    centered = absmax - nested.offset.cpu().double()
    dynamic = nested.state2_code.cpu().double()
    scaled = centered / nested.state2_absmax.cpu().double()[torch.arange(absmax.numel()) // 256]
    distance2 = (scaled[:, None] - dynamic[None, :]).abs()
    chosen2 = distance2.gather(1, nested.absmax.cpu().long()[:, None]).squeeze(1)
    assert (chosen2 - distance2.min(1).values).max().item() <= 1e-6


@pytest.mark.parametrize("dtype", DTYPES)
def test_kernel_rounds_like_bitsandbytes(dtype, device):
    """The kernel equals bitsandbytes' arithmetic emulated in fp32 torch ops, bit for bit:
    scale = fl(fl(code2[q] * absmax2) + offset) (two roundings, no FMA), out = dtype(fl(nf4 * scale))."""
    gen = _generator()
    weight = _weights((3, 1000), torch.bfloat16, device, gen)
    packed, state = quantize_nf4(weight)
    n = weight.numel()
    scale = state.state2_code[state.absmax.long()] * state.state2_absmax[
        torch.arange(state.absmax.numel(), device=device) // 256
    ]
    scale = scale + state.offset
    flat = packed.reshape(-1).long()
    codes = torch.stack([flat >> 4, flat & 0xF], 1).reshape(-1)[:n]
    table = torch.tensor(NF4_CODE, dtype=torch.float32, device=device)
    expected = (table[codes] * scale[torch.arange(n, device=device) // 64]).to(dtype).reshape(weight.shape)
    got = dequantize_nf4(packed, state, dtype)
    assert torch.equal(got.view(torch.int16), expected.view(torch.int16))


def test_rejects_bad_arguments(device):
    weight = torch.randn(130, device=device)
    packed, state = quantize_nf4(weight)
    with pytest.raises(ValueError):
        dequantize_nf4(packed, state, torch.float32)
    with pytest.raises(ValueError):
        dequantize_nf4(packed, state, torch.bfloat16, out=torch.empty(129, dtype=torch.bfloat16, device=device))
    with pytest.raises(ValueError):
        quantize_nf4(weight, blocksize=48)
    with pytest.raises(ValueError):
        dequantize_nf4(packed, None)


# ------------------------------------------------------------------------------------------------
# GPU: bit-exactness against bitsandbytes
# ------------------------------------------------------------------------------------------------

BENCH_SHAPES = [(2048, 8192), (1024, 4096), (4096, 14336), (4096, 4096), (14336, 4096)]


def _bitsandbytes():
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    return pytest.importorskip("bitsandbytes", reason="bitsandbytes is not importable")


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.int16)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", BENCH_SHAPES + [(4097, 37), (3, 5, 129)])
def test_bit_exact_vs_bitsandbytes(shape):
    bnb = _bitsandbytes()
    F = bnb.functional
    gen = torch.Generator(device="cuda").manual_seed(torch.seed() % (2**31))
    weight = torch.randn(shape, device="cuda", dtype=torch.bfloat16, generator=gen)
    packed, quant_state = F.quantize_4bit(weight, quant_type="nf4", compress_statistics=True)
    for dtype in DTYPES:
        quant_state.dtype = dtype  # bitsandbytes dequantizes to quant_state.dtype
        expected = F.dequantize_4bit(packed, quant_state, quant_type="nf4")
        for variant in ({}, {"_pair_lut": False}, {"_pair_lut": True}):
            out = torch.full(shape, float("nan"), dtype=dtype, device="cuda")
            dequantize_nf4(packed, quant_state, dtype, out=out, **variant)
            assert torch.equal(_bits(out), _bits(expected)), f"{dtype} {variant}: differs from bitsandbytes"


# fp32 inputs of 16-33 M elements are where the correctly rounded reciprocal used to give 1-4
# packed bytes that differ from bitsandbytes (issue 18); the quantizer must now match exactly.
QUANTIZER_CASES = [((4096, 4096), torch.float32), ((2560, 10240), torch.float32), ((4096, 8192), torch.float32),
                   ((4097, 37), torch.float32), ((4096, 4096), torch.bfloat16), ((1024, 4096), torch.float16)]


@pytest.mark.gpu
@pytest.mark.parametrize("shape,dtype", QUANTIZER_CASES, ids=[f"{s[0]}x{s[1]}-{str(d)[6:]}" for s, d in QUANTIZER_CASES])
def test_quantizer_matches_bitsandbytes(shape, dtype):
    """quantize_nf4 vs bitsandbytes.functional.quantize_4bit on the same data, byte for byte:
    packed codes, first-level absmax, nested codes, offset and second-level absmax."""
    bnb = _bitsandbytes()
    F = bnb.functional
    seed = torch.seed() % (2**31)
    weight = torch.randn(shape, device="cuda", dtype=torch.float32,
                         generator=torch.Generator(device="cuda").manual_seed(seed)).to(dtype)
    packed_ref, state_ref = F.quantize_4bit(weight, quant_type="nf4", compress_statistics=True)
    packed, state = quantize_nf4(weight)
    assert packed.shape == packed_ref.shape and packed.dtype == packed_ref.dtype
    assert torch.equal(state.state2_code.cpu(), state_ref.state2.code.cpu()), "dynamic map differs"
    assert torch.equal(state.code.cpu(), state_ref.code.cpu()), "NF4 code differs"
    plain_ref = F.quantize_4bit(weight, quant_type="nf4", compress_statistics=False)[1]
    _, plain = quantize_nf4(weight, double_quant=False)
    assert torch.equal(plain.absmax, plain_ref.absmax), "first-level absmax differs"
    differing = (packed != packed_ref).sum().item()
    differing_absmax = (state.absmax != state_ref.absmax).sum().item()
    assert (differing, differing_absmax) == (0, 0), (
        f"seed={seed}: {differing} of {packed.numel()} packed bytes and {differing_absmax} of "
        f"{state.absmax.numel()} absmax codes differ from bitsandbytes")
    assert torch.equal(state.offset.reshape(()), state_ref.offset.reshape(()))
    assert torch.equal(state.state2_absmax, state_ref.state2.absmax)
    # bitsandbytes itself dequantizes gpudoctor's state to what gpudoctor's kernel writes.
    out_dtype = torch.bfloat16 if dtype == torch.float32 else dtype
    bnb_state = F.QuantState(
        absmax=state.absmax, shape=state.shape, code=state.code, blocksize=64, quant_type="nf4",
        dtype=out_dtype, offset=state.offset,
        state2=F.QuantState(absmax=state.state2_absmax, code=state.state2_code, blocksize=256, dtype=torch.float32),
    )
    assert torch.equal(_bits(F.dequantize_4bit(packed, bnb_state)), _bits(dequantize_nf4(packed, state, out_dtype)))


@pytest.mark.gpu
def test_accepts_params4bit():
    bnb = _bitsandbytes()
    weight = torch.randn(768, 1000, dtype=torch.bfloat16)
    param = bnb.nn.Params4bit(weight, requires_grad=False, quant_type="nf4", compress_statistics=True).cuda()
    expected = bnb.functional.dequantize_4bit(param.data, param.quant_state)
    assert torch.equal(_bits(dequantize_nf4(param)), _bits(expected))
    assert torch.equal(_bits(dequantize_nf4(param.data, param, torch.bfloat16)), _bits(expected))


@pytest.mark.parametrize("nested", [True, False])
def test_pair_table_variant_equals_default(nested, device):
    """The pair-table decode (one 8-byte gather per packed byte) gives the same bits as the
    16-entry table at ragged sizes; on the GPU it runs as inline PTX (checked by the gpu tests)."""
    gen = _generator()
    for shape in [(5, 129), (1,), (300, 70)]:
        packed, state = quantize_nf4(_weights(shape, torch.bfloat16, device, gen), double_quant=nested)
        for dtype in DTYPES:
            default = dequantize_nf4(packed, state, dtype)
            out = torch.full(shape, float("nan"), dtype=dtype, device=device)
            dequantize_nf4(packed, state, dtype, out=out, _pair_lut=True)
            assert torch.equal(_bits(out), _bits(default)), (shape, dtype)


def test_thresholds_are_the_float32_nvcc_reads():
    """Each threshold is the float32 nearest to bitsandbytes' decimal literal, rounded once: the
    double-rounded value differs for four of them (the issue-18 fp32 mismatch)."""
    from fractions import Fraction

    from gpudoctor.kernels.nf4 import NF4_THRESHOLDS, NF4_THRESHOLDS_FP32

    for decimal, value in zip(NF4_THRESHOLDS, NF4_THRESHOLDS_FP32):
        exact = Fraction(repr(decimal))
        as_float32 = torch.tensor(value, dtype=torch.float32)
        assert as_float32.item() == value
        up = torch.nextafter(as_float32, torch.tensor(2.0)).item()
        down = torch.nextafter(as_float32, torch.tensor(-2.0)).item()
        assert abs(Fraction(value) - exact) <= min(abs(Fraction(up) - exact), abs(Fraction(down) - exact))
    assert NF4_THRESHOLDS_FP32[12] == 0.5016633868217468 != torch.tensor(0.5016634166240692).item()
