"""16-byte rows in the Triton attention kernels at head dims that are multiples of 8 but not 16
(attention._row_align, _aligned: they loaded 2 bytes at a time there before the twenty-eighth
session), and the backward's delta kernel (attention.launch_delta): delta = rowsum(out *
grad_out), and the zeros it writes into dQ's float32 sums where a backward sums dQ (the fill
kernel it replaced).

CPU: Triton's interpreter; and the kernels compiled for sm90 in a child process, whose PTX must
load and store 16 bytes at a time. GPU (`pytest -m gpu`): the delta kernel at a training shape
(the attention kernels' results at these head dims: test_attention.py's GPU tests).
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


def _contiguous(head_dim, width=None):
    return torch.empty(2, 4, 16, width or head_dim)[..., :head_dim]


@pytest.mark.parametrize("head_dim,width,expected", [
    (72, None, 8),    # contiguous: row stride 72
    (40, None, 8),
    (80, None, 1),    # every value divisible by 16: Triton's own specialization proves the rows
    (128, None, 1),
    (72, 80, 8),      # strides divisible by 16, head_dim not: its column mask needs the proof
    (72, 76, 1),      # row stride 76: nothing to prove
])
def test_row_align_of_a_launch(head_dim, width, expected):
    assert attention_module._row_align(_contiguous(head_dim, width)) == expected


def test_row_align_takes_every_tensor_of_the_launch():
    assert attention_module._row_align(_contiguous(72), _contiguous(72, 76)) == 1


# Each kernel's signature as a launch on contiguous bf16 tensors specializes it where Triton does
# not see the strides divisible by 16 (head_dim 72 or 40: row strides 72 or 40), pointer loads
# (TMA 0), the shipped sm90 tiles, compiled for sm90 (Triton's interpreter cannot).
_COMPILE = r"""
import json, re, sys
import triton
from triton.backends.compiler import GPUTarget
from gpudoctor.kernels import attention as A


def compiled_ptx(kernel, constants, num_warps, num_stages):
    signature, attrs = {}, {}
    for index, name in enumerate(kernel.arg_names):
        if name in constants:
            signature[name] = "constexpr"
        elif name.endswith("_DESC"):
            signature[name], constants[name] = "constexpr", None
        elif name in ("LSE", "DELTA", "DQ_SUM", "DQ_ACC"):
            signature[name], attrs[(index,)] = "*fp32", [["tt.divisibility", 16]]
        elif name.isupper():
            signature[name], attrs[(index,)] = "*bf16", [["tt.divisibility", 16]]
        elif name in ("qk_scale", "softmax_scale"):
            signature[name] = "fp32"
        elif re.fullmatch(r"stride_\w+d", name):
            signature[name], constants[name] = "constexpr", 1
        else:  # strides, head_dim, lengths: none divisible by 16 as Triton sees them
            signature[name] = "i32"
    source = triton.compiler.ASTSource(fn=kernel, signature=signature, constexprs=constants, attrs=attrs)
    target = GPUTarget("cuda", 90, 32)
    options = triton.compiler.make_backend(target).parse_options({"num_warps": num_warps, "num_stages": num_stages})
    return triton.compile(source, target=target, options=options.__dict__).asm["ptx"]


rows = []
for kernel_name, head_dim, row_align, zero in json.loads(sys.argv[1]):
    config = A.select_config((9, 0), head_dim)
    slices = {name: value for name, value in A._slice_constants(head_dim, config).items() if name != "head_dim"}
    common = dict(slices, CAUSAL=True, INTERPRETED=False, ROW_ALIGN=row_align)
    if kernel_name == "delta":
        ptx = compiled_ptx(A._backward_delta_kernel, {"D_PADDED": triton.next_power_of_2(head_dim), "BLOCK_M": 64,
                                                      "ROW_ALIGN": row_align, "ZERO_DQ_SUM": zero}, 4, 3)
    elif kernel_name == "fused":
        dkdv, dq = config.backward_dkdv, config.backward_dq
        ptx = compiled_ptx(A._attention_backward_fused_kernel, dict(
            common, DKDV_BLOCK_M=dkdv.block_m, DKDV_BLOCK_N=dkdv.block_n, DQ_BLOCK_M=dq.block_m,
            DQ_BLOCK_N=dq.block_n, DKDV_CHECK_M=False, DKDV_CHECK_N=False, DQ_CHECK_M=False, DQ_CHECK_N=False),
            dkdv.num_warps, dkdv.num_stages)
    else:
        kernel, tiles, extra = {
            "forward": (A._attention_forward_kernel, config.forward, {}),
            "dkdv": (A._attention_backward_dkdv_kernel, config.backward_dkdv, {"ATOMIC_DQ": False, "TMA_REDUCE": False}),
            "dq": (A._attention_backward_dq_kernel, config.backward_dq, {"COMPUTE_DELTA": True}),
        }[kernel_name]
        ptx = compiled_ptx(kernel, dict(common, BLOCK_M=tiles.block_m, BLOCK_N=tiles.block_n, CHECK_M=False,
                                        CHECK_N=False, TMA=0, **extra), tiles.num_warps, tiles.num_stages)
    rows.append({"loads": sorted(set(re.findall(r"ld\.global[.\w]*", ptx))),
                 "stores": sorted(set(re.findall(r"st\.global[.\w]*", ptx)))})
print(json.dumps(rows))
"""
# (kernel, head_dim, ROW_ALIGN, the delta kernel's ZERO_DQ_SUM)
COMPILE_CASES = [("delta", 72, 8, True), ("delta", 40, 8, False), ("delta", 232, 8, True),
                 ("forward", 72, 8, False), ("dkdv", 72, 8, False), ("dq", 72, 8, False), ("fused", 40, 8, False),
                 ("forward", 72, 1, False), ("delta", 72, 1, False)]


@pytest.fixture(scope="module")
def compiled():
    return compiled_in_child(_COMPILE, COMPILE_CASES)


@pytest.mark.parametrize("case", COMPILE_CASES[:7], ids=[f"{name}-hd{d}{'-zeros' if z else ''}"
                                                          for name, d, _, z in COMPILE_CASES[:7]])
def test_rows_load_and_store_16_bytes_at_a_time_on_sm90(case, compiled):
    """Every bf16 row load 16 bytes wide (lse, delta: 4-byte loads of float32 vectors), and the
    rows stored (the output, dK/dV, dQ, the zeros) 16 bytes wide."""
    row = compiled[case]
    assert not [load for load in row["loads"] if load in ("ld.global.b16", "ld.global.b8")], row
    assert "ld.global.v4.b32" in row["loads"], row
    if case[0] != "delta" or case[3]:
        assert "st.global.v4.b32" in row["stores"] and "st.global.b16" not in row["stores"], row


@pytest.mark.parametrize("case", COMPILE_CASES[7:], ids=["forward-hd72", "delta-hd72"])
def test_rows_nothing_proves_load_2_bytes_at_a_time(case, compiled):
    """The other side of the check above (ROW_ALIGN 1 on the same strides: as before the
    twenty-eighth session): the compile check tells the two apart."""
    loads = compiled[case]["loads"]
    assert "ld.global.b16" in loads and "ld.global.v4.b32" not in loads
