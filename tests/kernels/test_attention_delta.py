"""The backward's delta kernel (attention.launch_delta): delta = rowsum(out * grad_out), and the
zeros it writes into dQ's float32 sums where a backward sums dQ (the fill kernel it replaced).

CPU: Triton's interpreter; and the kernel compiled for sm90 in a child process, whose PTX must
load 16 bytes at a time at head dims that are multiples of 8 but not 16 (it loaded 2 before the
twenty-eighth session). GPU (`pytest -m gpu`): the same checks at a training shape.
"""

from __future__ import annotations

import pytest
import torch

from gluonhelpers import compiled_in_child
from gpudoctor.kernels import attention as attention_module

# (batch, heads, seq, head_dim, extra columns of the storage): extra columns make out and
# grad_out views whose row stride is not a multiple of 8 (ROW_ALIGN 1), or is one (0, 8).
CPU_CASES = [(1, 2, 20, 72, 0), (2, 1, 33, 40, 0), (1, 2, 17, 56, 4), (1, 1, 16, 64, 8)]


def _rows(batch, heads, seq, head_dim, extra, device, dtype, generator):
    storage = torch.randn(batch, heads, seq, head_dim + extra, generator=generator, dtype=torch.float32)
    return storage.to(device, dtype)[..., :head_dim]


def _check(batch, heads, seq, head_dim, extra, device, dtype, zero):
    generator = torch.Generator(device="cpu").manual_seed(seq * 1000 + head_dim)
    out = _rows(batch, heads, seq, head_dim, extra, device, dtype, generator)
    grad_out = _rows(batch, heads, seq, head_dim, extra, device, dtype, generator)
    delta = torch.full((batch, heads, seq), float("nan"), device=device)
    sums = torch.full((batch * heads * seq, head_dim), float("nan"), device=device) if zero else None
    attention_module.launch_delta(out, grad_out, delta, sums)
    expected = (out.double() * grad_out.double()).sum(-1)
    torch.testing.assert_close(delta.double(), expected, rtol=1e-5, atol=1e-4)
    if zero:
        assert torch.equal(sums, torch.zeros_like(sums)), "dQ's sums not zeroed everywhere"


@pytest.mark.parametrize("zero", [False, True], ids=["delta", "delta-and-zeros"])
@pytest.mark.parametrize("case", CPU_CASES, ids=[f"b{b}h{h}s{s}hd{d}+{e}" for b, h, s, d, e in CPU_CASES])
def test_delta_and_zeroed_sums(case, zero, device):
    if device != "cpu":
        pytest.skip("the GPU's cases are test_gpu_delta_and_zeroed_sums")
    _check(*case, device, torch.float16, zero)


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim", [40, 72, 88, 128, 136, 232])
@pytest.mark.parametrize("extra", [0, 4])
def test_gpu_delta_and_zeroed_sums(head_dim, extra, device):
    if device != "cuda":
        pytest.skip("needs a GPU")
    for zero in (False, True):
        _check(2, 8, 1000, head_dim, extra, device, torch.bfloat16, zero)


def test_launch_delta_refuses_a_head_dim_off_multiples_of_8():
    out = torch.zeros(1, 1, 4, 36)
    with pytest.raises(ValueError, match="multiple of 8"):
        attention_module.launch_delta(out, out, torch.zeros(1, 1, 4))


# The kernel's signature as launch_delta specializes it on contiguous bf16 tensors whose strides
# Triton does not see divisible by 16 (head_dim 72: row stride 72), compiled for sm90.
_COMPILE = r"""
import json, re, sys
import triton
from triton.backends.compiler import GPUTarget
from gpudoctor.kernels import attention

kernel = attention._backward_delta_kernel
rows = []
for head_dim, row_align, zero in json.loads(sys.argv[1]):
    constants = {"stride_od": 1, "stride_dod": 1, "D_PADDED": triton.next_power_of_2(head_dim), "BLOCK_M": 64,
                 "ROW_ALIGN": row_align, "ZERO_DQ_SUM": zero}
    signature, attrs = {}, {}
    for index, name in enumerate(kernel.arg_names):
        if name in constants:
            signature[name] = "constexpr"
        elif name in ("O", "DO"):
            signature[name], attrs[(index,)] = "*bf16", [["tt.divisibility", 16]]
        elif name in ("DELTA", "DQ_SUM"):
            signature[name], attrs[(index,)] = "*fp32", [["tt.divisibility", 16]]
        else:  # strides, head_dim, num_heads, seq_q: none divisible by 16 as Triton sees them
            signature[name] = "i32"
    source = triton.compiler.ASTSource(fn=kernel, signature=signature, constexprs=constants, attrs=attrs)
    target = GPUTarget("cuda", 90, 32)
    options = triton.compiler.make_backend(target).parse_options({"num_warps": 4})
    ptx = triton.compile(source, target=target, options=options.__dict__).asm["ptx"]
    rows.append({"loads": sorted(set(re.findall(r"ld\.global[.\w]*", ptx))),
                 "stores": sorted(set(re.findall(r"st\.global[.\w]*", ptx)))})
print(json.dumps(rows))
"""
COMPILE_CASES = [(72, 8, True), (40, 8, False), (232, 8, True), (72, 1, False)]


@pytest.fixture(scope="module")
def compiled():
    return compiled_in_child(_COMPILE, COMPILE_CASES)


@pytest.mark.parametrize("case", COMPILE_CASES[:3], ids=["hd72-zeros", "hd40", "hd232-zeros"])
def test_rows_load_16_bytes_at_a_time_on_sm90(case, compiled):
    row = compiled[case]
    assert row["loads"] == ["ld.global.v4.b32"], row
    if case[2]:  # the zeros: 16-byte stores beside delta's own 4-byte ones
        assert "st.global.v4.b32" in row["stores"], row


def test_rows_whose_strides_are_not_multiples_of_8_load_narrower(compiled):
    """The other side of the check above (ROW_ALIGN 1: nothing proves 16-byte rows): the compile
    check can tell the two apart."""
    assert "ld.global.v4.b32" not in compiled[(72, 1, False)]["loads"]
