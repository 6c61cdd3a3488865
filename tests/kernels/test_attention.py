"""FlashAttention kernel (gpudoctor.kernels.attention) against plain softmax attention.

CPU: Triton's interpreter (conftest sets TRITON_INTERPRET=1), tiny shapes, float64 reference.
GPU (`pytest -m gpu`): realistic shapes in both dtypes against a float32 reference.
Inputs are drawn fresh on every run; the seed is in each failure message to replay it.
"""

from __future__ import annotations

import random

import pytest
import torch

import dataclasses

from gpudoctor.kernels import attention as attention_module
from gpudoctor.kernels import attention_plan
from gpudoctor.kernels.attention import (
    DEVICE_DESCRIPTORS,
    HOST_DESCRIPTORS,
    AttentionConfig,
    flash_attention,
    head_dim_slices,
    reference_attention,
    select_config,
    tensor_descriptors_usable,
    usable_config,
)


def _fresh_seed() -> int:
    return random.SystemRandom().randrange(2**31)


def _make_inputs(batch, heads, kv_heads, seq_q, seq_k, head_dim, dtype, device, seed):
    generator = torch.Generator(device="cpu").manual_seed(seed)

    def draw(*shape):
        return torch.randn(*shape, generator=generator, dtype=torch.float32).to(device, dtype)

    q = draw(batch, heads, seq_q, head_dim).requires_grad_()
    k = draw(batch, kv_heads, seq_k, head_dim).requires_grad_()
    v = draw(batch, kv_heads, seq_k, head_dim).requires_grad_()
    grad_out = draw(batch, heads, seq_q, head_dim)
    return q, k, v, grad_out


def _relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    actual = actual.to(expected.dtype)
    assert torch.isfinite(actual).all(), "non-finite values in the kernel's result"
    return ((actual - expected).norm() / expected.norm()).item()


def _compare_with_reference(shape, causal, dtype, device, reference_dtype, tolerance, config=None,
                            deterministic=False):
    batch, heads, kv_heads, seq_q, seq_k, head_dim = shape
    seed = _fresh_seed()
    q, k, v, grad_out = _make_inputs(batch, heads, kv_heads, seq_q, seq_k, head_dim, dtype,
                                     device, seed)
    out = flash_attention(q, k, v, causal=causal, config=config, deterministic=deterministic)
    out.backward(grad_out)

    q_ref, k_ref, v_ref = (t.detach().to(reference_dtype).requires_grad_() for t in (q, k, v))
    out_ref = reference_attention(q_ref, k_ref, v_ref, causal=causal, dtype=reference_dtype)
    out_ref.backward(grad_out.to(reference_dtype))

    errors = {
        "out": _relative_error(out.detach(), out_ref.detach()),
        "dq": _relative_error(q.grad, q_ref.grad),
        "dk": _relative_error(k.grad, k_ref.grad),
        "dv": _relative_error(v.grad, v_ref.grad),
    }
    worst = max(errors.values())
    assert worst < tolerance, (f"shape={shape} causal={causal} dtype={dtype} seed={seed}: "
                               f"relative errors {errors} above {tolerance}")
    return errors


# (batch, heads, kv_heads, seq_q, seq_k, head_dim): odd lengths cross the 16-wide interpreter
# tiles; 48, 80 and 96 take the main+tail head_dim split, 40, 56 and 112 the masked padding.
CPU_CASES = [
    ((1, 2, 2, 16, 16, 64), True),
    ((1, 2, 2, 16, 16, 64), False),
    ((1, 2, 1, 37, 37, 80), True),
    ((2, 2, 2, 29, 29, 80), False),
    ((1, 4, 2, 33, 33, 96), True),
    ((1, 4, 1, 19, 45, 96), False),  # cross-attention, multi-query
    ((1, 2, 2, 45, 19, 80), False),  # more queries than keys
    ((1, 2, 2, 23, 23, 40), True),
    ((1, 2, 1, 26, 26, 48), False),
    ((1, 2, 1, 17, 17, 56), True),
    ((1, 1, 1, 31, 31, 112), False),
    ((1, 2, 2, 20, 20, 32), True),
    ((1, 1, 1, 18, 18, 128), True),
    ((1, 1, 1, 17, 17, 256), False),
    ((1, 1, 1, 1, 7, 64), False),  # a single query
]


@pytest.mark.parametrize("shape,causal", CPU_CASES,
                         ids=[f"{'x'.join(map(str, s))}-{'causal' if c else 'full'}"
                              for s, c in CPU_CASES])
def test_matches_float64_reference(shape, causal, device):
    _compare_with_reference(shape, causal, torch.float16, device, torch.float64, tolerance=5e-3)


def test_bfloat16_matches_float64_reference(device):
    if device == "cpu":
        # Seen with Triton 3.6: the interpreter returns garbage (errors ~1e9) for bfloat16
        # tiles in tl.dot; the GPU tests cover bfloat16 instead.
        pytest.skip("Triton's interpreter does not compute bfloat16 dots correctly")
    if torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("bfloat16 needs sm80+")
    _compare_with_reference((1, 2, 1, 21, 21, 80), True, torch.bfloat16, device, torch.float64,
                            tolerance=3e-2)


def test_padding_and_split_head_dim_agree(device):
    """head_dim 80 computed as 64+16 and as padded-to-128 give the same function."""
    assert head_dim_slices(80) == (64, 16, True)
    assert head_dim_slices(80, split=False) == (128, 16, False)
    base = select_config(None if device == "cpu" else torch.cuda.get_device_capability(), 80)
    padded = AttentionConfig(base.forward, base.backward_dkdv, base.backward_dq,
                             split_head_dim=False)
    _compare_with_reference((1, 2, 2, 27, 27, 80), True, torch.float16, device, torch.float64,
                            tolerance=5e-3, config=padded)


def test_head_dim_slices():
    assert head_dim_slices(64) == (64, 16, False)
    assert head_dim_slices(96) == (64, 32, True)
    assert head_dim_slices(48) == (32, 16, True)
    assert head_dim_slices(160) == (128, 32, True)
    assert head_dim_slices(256) == (256, 16, False)
    # Remainders that would need a partially masked tail are padded instead (see the docstring).
    assert head_dim_slices(40) == (64, 16, False)
    assert head_dim_slices(72) == (128, 16, False)
    assert head_dim_slices(112) == (128, 16, False)
    assert head_dim_slices(136) == (256, 16, False)


def test_head_dim_slices_on_tensor_descriptors():
    """The copy engine zero-fills past head_dim: a partial tail whenever it is narrower than
    padding to the next power of two, and never padding on the host."""
    assert head_dim_slices(40, tma=True) == (64, 16, False)  # 32+16 measured slower than 64
    assert head_dim_slices(72, tma=True) == (64, 16, True)
    assert head_dim_slices(88, tma=True) == (64, 32, True)
    assert head_dim_slices(80, tma=True) == (64, 16, True)
    assert head_dim_slices(136, tma=True) == (128, 16, True)
    assert head_dim_slices(176, tma=True) == (128, 64, True)
    assert head_dim_slices(112, tma=True) == (128, 16, False)  # 64+64 is no narrower than 128
    assert head_dim_slices(56, tma=True) == (64, 16, False)
    assert head_dim_slices(64, tma=True) == (64, 16, False)
    config = dataclasses.replace(select_config(None, 40), tma=HOST_DESCRIPTORS)
    assert attention_module.padded_width(40, config) == 40
    assert attention_module.padded_width(112, config) == 112


# Interpreter cases for the descriptor (TMA) kernels: partial tails (40 = 32+16, 72 = 64+16,
# 88 = 64+32, 136 = 128+16, 176 = 128+64), a zero-filled main slice (112, 56), GQA, ragged and
# cross-attention lengths.
TMA_CASES = [
    ((1, 2, 1, 37, 37, 40), True),
    ((1, 4, 2, 33, 33, 72), True),
    ((1, 2, 1, 19, 45, 88), False),
    ((1, 2, 2, 45, 19, 112), False),
    ((1, 2, 2, 29, 29, 56), True),
    ((1, 1, 1, 18, 18, 136), True),
    ((1, 1, 1, 17, 17, 176), False),
    ((2, 2, 2, 29, 29, 80), False),
]


DESCRIPTOR_MODES = {"device-descriptors": DEVICE_DESCRIPTORS, "host-descriptors": HOST_DESCRIPTORS}


def test_sm90_takes_the_descriptor_kernels_where_they_measured_faster():
    """Padded head dims and 256 at long sequences, and from 512 keys outside small calls; short
    sequences, other head dims and other GPUs keep the pointer kernels."""
    pointers = attention_module.POINTERS
    assert select_config((9, 0), 72, 4096).tma == HOST_DESCRIPTORS
    assert select_config((9, 0), 112, 1024).tma == HOST_DESCRIPTORS
    assert select_config((9, 0), 256, 4096).tma == HOST_DESCRIPTORS
    assert select_config((9, 0), 72).tma == HOST_DESCRIPTORS  # sequence unknown: long
    assert select_config((9, 0), 80, 256).tma == pointers  # the training pass's length
    assert select_config((9, 0), 112, 512, 32 * 32 * 512 * 512).tma == HOST_DESCRIPTORS  # large calls from 512
    assert select_config((9, 0), 112, 512, 4 * 32 * 512 * 512).tma == HOST_DESCRIPTORS  # and since the
    # twenty-eighth session small ones from 256 keys where the pointer kernels pad (UNPADDED_GLUON_MIN_SEQ)
    assert select_config((9, 0), 72, 256).tma == HOST_DESCRIPTORS
    assert select_config((9, 0), 72, 128, 4 * 32 * 128 * 128).tma == pointers  # the one-launch backward's
    for head_dim in (64, 80, 96, 128, 144, 192):
        assert select_config((9, 0), head_dim, 4096).tma == pointers, head_dim
    for capability in ((8, 0), (8, 6), (7, 5), (10, 0), (12, 0)):
        assert select_config(capability, 72, 4096).tma == pointers


def test_sm90_runs_the_backward_in_one_launch_for_small_calls():
    """The fused backward for attention matrices up to FUSED_BACKWARD_MAX_SCORES elements on sm90
    (measured faster there); larger or unknown sizes and other GPUs keep the three launches; the
    tiles are the table's either way."""
    limit = attention_module.FUSED_BACKWARD_MAX_SCORES
    assert limit == 4 * 32 * 512 * 512  # the largest measured clear win: batch 4, 32 heads, seq 512
    # Few heads at a long sequence: under the size limit, but never timed fused.
    assert not select_config((9, 0), 128, 4096, 1 * 2 * 4096 * 4096).fused_backward
    q = torch.empty(4, 32, 256, 80)  # the training pass's shape
    assert attention_module.config_for(q, q, (9, 0)).fused_backward
    assert attention_module.config_for(q, q) is select_config(None, 80)  # q's device: the CPU
    # (72 and the other head dims padded on pointers: below; 128 and 256 in fewer scores than
    # SMALL_CALLS_LONG_PATH_MIN_SCORES only: below too)
    for head_dim, scores in ((64, limit), (80, limit), (128, 2 ** 23), (256, 2 ** 23)):
        small = select_config((9, 0), head_dim, 512, scores)
        table = attention_module._ARCH_CONFIGS["sm90"][attention_module._bucket((9, 0), head_dim)]
        assert small.fused_backward and small.backward_dkdv == table.backward_dkdv, head_dim
        for scores in (limit + 1, None):
            assert not select_config((9, 0), head_dim, 512, scores).fused_backward, (head_dim, scores)
    for capability in ((8, 0), (8, 6), (7, 5), (10, 0)):
        assert not select_config(capability, 80, 256, 4 * 32 * 256 * 256).fused_backward


def _routed_before_the_rule(head_dim, seq, scores, backward=False):
    """select_config on sm90 with no head_dim taking the long calls' path for being wide (the
    routing before the twenty-ninth session)."""
    rule = attention_module.SMALL_CALLS_LONG_PATH_MIN_HEAD_DIM
    attention_module.SMALL_CALLS_LONG_PATH_MIN_HEAD_DIM = attention_module.MAX_HEAD_DIM + 1
    try:
        return select_config((9, 0), head_dim, seq, scores, backward)
    finally:
        attention_module.SMALL_CALLS_LONG_PATH_MIN_HEAD_DIM = rule


def test_sm90_head_dims_from_96_take_the_long_path_from_256_keys_in_calls_of_2_to_24_scores():
    """From UNPADDED_GLUON_MIN_SEQ keys, head dims from SMALL_CALLS_LONG_PATH_MIN_HEAD_DIM run as
    long calls do (the Gluon forward and backward) in small calls of SMALL_CALLS_LONG_PATH_MIN_SCORES
    or more, and from SHORT_CALLS_LONG_PATH_MIN_HEAD_DIM in larger calls under 1024 keys
    (twenty-ninth session: measured faster on the device from 2^24 scores, host-bound below);
    narrower head dims, fewer scores, fewer keys, deterministic=True and other GPUs keep their
    routing."""
    assert attention_module.SMALL_CALLS_LONG_PATH_MIN_HEAD_DIM == 96
    assert attention_module.SHORT_CALLS_LONG_PATH_MIN_HEAD_DIM == 128
    assert attention_module.SMALL_CALLS_LONG_PATH_MIN_SCORES == 2 ** 24  # the fewest measured
    for head_dim in (96, 128, 144, 160, 192, 256):
        long = select_config((9, 0), head_dim)
        assert long.gluon_forward and not long.fused_backward
        for batch, seq in ((8, 256), (16, 256), (4, 512), (1, 1024)):  # small calls
            assert select_config((9, 0), head_dim, seq, batch * 32 * seq * seq, backward=True) is long, (head_dim, seq)
        for batch, seq in ((32, 256), (64, 256), (6, 512)):  # larger ones under 1024 keys: not at 96
            config = select_config((9, 0), head_dim, seq, batch * 32 * seq * seq, backward=True)
            assert (config is long) == (head_dim >= 128), (head_dim, seq)
        assert (select_config((9, 0), head_dim, 256) is long) == (head_dim >= 128)  # scores unknown: many
        # as before the rule: from 1024 keys past the small calls (unmeasured), and with
        # deterministic=True (the Gluon dK/dV kernel beside the Triton dQ: untimed, no plan)
        for seq, scores in ((1500, 8 * 1500 * 1500), (1024, 48 * 1024 * 1024), (4096, 2 ** 24)):
            assert select_config((9, 0), head_dim, seq, scores) is _routed_before_the_rule(head_dim, seq, scores)
        for batch, seq in ((8, 256), (4, 512), (32, 256)):
            scores = batch * 32 * seq * seq
            assert (select_config((9, 0), head_dim, seq, scores, backward=True, deterministic=True)
                    is _routed_before_the_rule(head_dim, seq, scores, backward=True)), (head_dim, seq)
        assert select_config((9, 0), head_dim, 512, 2 ** 24, deterministic=True).fused_backward
        small = select_config((9, 0), head_dim, 512, 2 ** 24 - 1, backward=True)
        assert small.fused_backward and not small.gluon_forward, head_dim
        assert select_config((9, 0), head_dim, 128, 2 ** 24).fused_backward, head_dim  # under 256 keys
    for head_dim in (32, 48, 64, 80):
        assert select_config((9, 0), head_dim, 512, 4 * 32 * 512 * 512).fused_backward, head_dim
        assert select_config((9, 0), head_dim, 256, 8 * 32 * 256 * 256).fused_backward, head_dim
    for capability in ((8, 0), (8, 6), (10, 0), None):
        assert not attention_module._long_path_from_256_keys(capability, 128, 512, 2 ** 25, True)
        assert not select_config(capability, 128, 512, 4 * 32 * 512 * 512).gluon_forward


def test_sm90_head_dims_padded_on_pointers_take_descriptors_and_gluon_from_256_keys():
    """Head dims the pointer kernels pad to a power of two run, from UNPADDED_GLUON_MIN_SEQ keys in
    calls of every size, on descriptors with the Gluon forward and the Gluon backward summing dQ
    (measured 2-3x faster than the one-launch backward on padded copies); below, and on other GPUs,
    as before; head dims the pointer kernels run unpadded keep their routing."""
    assert attention_module.UNPADDED_GLUON_MIN_SEQ == 256  # the shortest measured
    for head_dim in (40, 56, 72, 88, 104, 112, 120, 136, 200, 248):
        assert attention_module._pads_on_pointers((9, 0), head_dim), head_dim
        for seq, scores in ((256, 4 * 32 * 256 * 256), (512, 4 * 32 * 512 * 512), (512, 32 * 512 * 512),
                            (1024, 32 * 1024 * 1024), (512, None), (4096, None)):
            config = select_config((9, 0), head_dim, seq, scores, backward=True)
            assert (not config.fused_backward and config.tma == HOST_DESCRIPTORS and config.gluon_forward
                    and config.gluon_atomic_dq), (head_dim, seq, scores)
            assert attention_module.padded_width(head_dim, config) == head_dim
        assert select_config((9, 0), head_dim, 128, 4 * 32 * 128 * 128).fused_backward, head_dim
        # remembered, as every call asks (select_config runs on each call's general path)
        assert select_config((9, 0), head_dim, 512, 2 ** 25) is select_config((9, 0), head_dim, 512, 2 ** 25)
    for head_dim in (32, 48, 64, 80, 96, 128, 144, 160, 192, 256):
        assert not attention_module._pads_on_pointers((9, 0), head_dim), head_dim
    assert select_config((9, 0), 80, 512, 4 * 32 * 512 * 512).fused_backward
    for capability in ((8, 0), (8, 6), (7, 5), (10, 0), None):
        assert not attention_module._pads_on_pointers(capability, 72)
    assert select_config((8, 0), 72, 512, 4 * 32 * 512 * 512).tma == attention_module.POINTERS


def _descriptors_here(device, mode) -> bool:
    return device == "cpu" or tensor_descriptors_usable(mode, torch.empty(8, device="cuda"))


@pytest.mark.parametrize("mode", DESCRIPTOR_MODES.values(), ids=DESCRIPTOR_MODES.keys())
@pytest.mark.parametrize("atomic_dq", [False, True], ids=["dq-kernel", "atomic-dq"])
@pytest.mark.parametrize("shape,causal", TMA_CASES,
                         ids=[f"{'x'.join(map(str, s))}-{'causal' if c else 'full'}" for s, c in TMA_CASES])
def test_tensor_descriptor_kernels_match_float64_reference(shape, causal, atomic_dq, mode, device):
    """The descriptor paths (Hopper's TMA; on the CPU Triton's interpreter, which emulates the
    zero-fill and clipping) and the atomic-dQ backward compute the same function."""
    if not _descriptors_here(device, mode):
        pytest.skip("tensor descriptors run on sm90 only")
    base = select_config(None if device == "cpu" else torch.cuda.get_device_capability(), shape[-1])
    config = dataclasses.replace(base, tma=mode, atomic_dq=atomic_dq)
    _compare_with_reference(shape, causal, torch.float16, device, torch.float64, tolerance=5e-3,
                            config=config, deterministic=False)


@pytest.mark.parametrize("head_dim", [40, 64])
def test_forward_without_grad_matches_reference(head_dim, device):
    """Under no_grad (or with inputs that need no gradient) the forward skips the autograd node;
    same function, padding and cutting back included."""
    q, k, v, _ = _make_inputs(1, 2, 1, 21, 21, head_dim, torch.float16, device, _fresh_seed())
    with torch.no_grad():
        out = flash_attention(q, k, v, causal=True)
    assert out.shape == q.shape and not out.requires_grad
    expected = reference_attention(q.detach(), k.detach(), v.detach(), causal=True)
    assert _relative_error(out, expected) < 5e-3


def _launches(monkeypatch, kernel_name: str) -> list:
    """The grids the kernel ``kernel_name`` of the attention module is launched on from now on
    (it still runs). Plans remembered by earlier calls are dropped: they would replay the launches
    without the spy."""
    launched = []
    real = getattr(attention_module, kernel_name)
    attention_plan.forget()

    class Spy:
        def __getitem__(self, grid):
            launched.append(grid)
            return real[grid]

    monkeypatch.setattr(attention_module, kernel_name, Spy())
    return launched


def test_atomic_dq_only_when_not_deterministic(device, monkeypatch):
    """deterministic=True keeps the separate dQ kernel (bitwise reproducible) even when the
    config allows atomic dQ; deterministic=False skips it."""
    launched = _launches(monkeypatch, "_attention_backward_dq_kernel")
    config = dataclasses.replace(select_config(None if device == "cpu" else torch.cuda.get_device_capability(), 64),
                                 atomic_dq=True)
    q, k, v, grad_out = _make_inputs(1, 2, 1, 20, 20, 64, torch.float16, device, _fresh_seed())
    flash_attention(q, k, v, config=config, deterministic=True).backward(grad_out)
    assert len(launched) == 1
    flash_attention(q, k, v, config=config, deterministic=False).backward(grad_out)
    assert len(launched) == 1


def test_descriptor_path_falls_back_on_unaligned_inputs(device):
    """A view whose rows are not 16-byte aligned cannot feed the copy engine: the pointer kernels
    run instead (padding included), and the result is still right."""
    base = select_config(None if device == "cpu" else torch.cuda.get_device_capability(), 40)
    config = dataclasses.replace(base, tma=HOST_DESCRIPTORS)
    storage = torch.randn(1, 2, 23, 41, dtype=torch.float16).to(device)
    q = storage[..., 1:]  # base pointer 2 bytes past an aligned one, rows 82 bytes apart
    assert not attention_module._descriptor_ready(q)
    assert usable_config(config, q, q, q).tma == attention_module.POINTERS
    q = q.detach().requires_grad_()
    out = flash_attention(q, q, q, causal=True, config=config)
    expected = reference_attention(q.detach().double(), q.detach().double(), q.detach().double())
    assert _relative_error(out.detach(), expected) < 5e-3
    aligned = torch.randn(1, 2, 23, 40, dtype=torch.float16).to(device)
    assert attention_module._descriptor_ready(aligned)


# Layouts the kernels faulted on (offsets, rows 84/88 apart) or ran right on (the others), seen
# on the H200: bench/results/attention-h200-2026-11-23-s6-layouts.json.
LAYOUTS = ["offset-2-bytes", "offset-8-bytes", "rows-84-apart", "rows-88-apart", "head-dim-transposed",
           "bshd-transposed"]


def _laid_out(layout, shape, generator, device):
    batch, heads, seq, head_dim = shape

    def draw(*dims):
        return torch.randn(*dims, generator=generator).to(device, torch.float16)

    count = batch * heads * seq * head_dim
    if layout.startswith("offset"):
        skip = 1 if layout == "offset-2-bytes" else 4
        return draw(count + skip)[skip:].view(*shape)
    if layout.startswith("rows"):
        return draw(batch, heads, seq, int(layout.split("-")[1]))[..., :head_dim]
    if layout == "head-dim-transposed":
        return draw(batch, heads, head_dim, seq).transpose(-1, -2)
    return draw(batch, seq, heads, head_dim).transpose(1, 2)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_strided_and_offset_inputs_are_read_right(device, layout):
    _check_layout(device, 80, layout)


@pytest.mark.gpu
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("head_dim", [64, 80, 96, 128])
def test_gpu_strided_and_offset_inputs_are_read_right(device, head_dim, layout):
    if device != "cuda":
        pytest.skip("needs a GPU")
    if layout.startswith("rows") and int(layout.split("-")[1]) < head_dim:
        layout = f"rows-{head_dim + int(layout.split('-')[1]) - 80}-apart"  # 4 or 8 wider than head_dim
    _check_layout(device, head_dim, layout)


def _check_layout(device, head_dim, layout):
    """Inputs that are views into larger buffers: the kernels read a copy where the layout is
    one they faulted on ("an illegal memory access" on the H200, which leaves the CUDA context
    unusable) and the view itself elsewhere; results and gradients stay right either way."""
    seed = _fresh_seed()
    generator = torch.Generator(device="cpu").manual_seed(seed)
    shape = (1, 2, 37, head_dim)
    q, k, v, grad_out = (_laid_out(layout, shape, generator, device) for _ in range(4))
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    out = flash_attention(q, k, v, causal=True)
    out.backward(grad_out)
    _assert_like_the_reference(q, k, v, out, grad_out, seed)


def _assert_like_the_reference(q, k, v, out, grad_out, seed):
    """out and q/k/v's gradients (after out.backward(grad_out)) against float64 causal attention."""
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    expected = reference_attention(*leaves, causal=True)
    expected.backward(grad_out.double())
    assert _relative_error(out.detach(), expected.detach()) < 5e-3, f"seed={seed}"
    for got, leaf in zip((q, k, v), leaves):
        assert _relative_error(got.grad, leaf.grad) < 1e-2, f"seed={seed}"


def test_only_layouts_the_kernels_faulted_on_are_copied():
    readable = attention_module._readable
    contiguous = torch.zeros(1, 2, 5, 80, dtype=torch.float16)
    assert readable(contiguous) is contiguous
    bshd = torch.zeros(1, 5, 2, 80, dtype=torch.float16).transpose(1, 2)
    assert readable(bshd) is bshd
    for view in (torch.zeros(801, dtype=torch.float16)[1:].view(1, 1, 10, 80),
                 torch.zeros(1, 2, 5, 88, dtype=torch.float16)[..., :80],
                 torch.zeros(1, 2, 80, 5, dtype=torch.float16).transpose(-1, -2)):
        copy = readable(view)
        assert copy.is_contiguous() and copy.data_ptr() % 16 == 0 and torch.equal(copy, view)


def test_backward_is_deterministic(device):
    seed = _fresh_seed()
    q, k, v, grad_out = _make_inputs(1, 4, 2, 40, 40, 80, torch.float16, device, seed)
    grads = []
    for _ in range(2):
        for tensor in (q, k, v):
            tensor.grad = None
        flash_attention(q, k, v, causal=True, deterministic=True).backward(grad_out)
        grads.append([tensor.grad.clone() for tensor in (q, k, v)])
    for first, second in zip(*grads):
        assert torch.equal(first, second), f"seed={seed}: backward differs between two runs"


def _tensor(shape, dtype=torch.float16, device="cpu"):
    return torch.randn(*shape, dtype=torch.float32).to(device, dtype)


@pytest.mark.parametrize(
    "q_shape,kv_shape,dtype,causal,error,message",
    [
        ((1, 2, 16, 76), (1, 2, 16, 76), torch.float16, True, ValueError, "multiple of 8"),
        ((1, 2, 16, 24), (1, 2, 16, 24), torch.float16, True, ValueError, "from 32 to 256"),
        ((1, 2, 16, 264), (1, 2, 16, 264), torch.float16, True, ValueError, "from 32 to 256"),
        ((1, 2, 16, 64), (1, 2, 16, 64), torch.float32, True, TypeError, "not supported"),
        ((1, 3, 16, 64), (1, 2, 16, 64), torch.float16, True, ValueError, "must divide"),
        ((1, 2, 16, 64), (1, 2, 16, 32), torch.float16, True, ValueError, "head_dim of q"),
        ((1, 2, 16, 64), (2, 2, 16, 64), torch.float16, True, ValueError, "batch"),
        ((1, 2, 16, 64), (1, 2, 24, 64), torch.float16, True, ValueError, "same length"),
        ((2, 16, 64), (2, 16, 64), torch.float16, True, ValueError, "4-D"),
    ],
)
def test_unsupported_inputs_raise_clear_errors(q_shape, kv_shape, dtype, causal, error, message,
                                               device):
    q = _tensor(q_shape, dtype, device)
    k = _tensor(kv_shape, dtype, device)
    v = _tensor(kv_shape, dtype, device)
    with pytest.raises(error, match=message):
        flash_attention(q, k, v, causal=causal)


def test_mismatched_kv_shapes_and_dtypes_raise(device):
    q = _tensor((1, 2, 16, 64), device=device)
    with pytest.raises(ValueError, match="k and v shapes differ"):
        flash_attention(q, _tensor((1, 2, 16, 64), device=device),
                        _tensor((1, 2, 8, 64), device=device), causal=False)
    with pytest.raises(TypeError, match="share one dtype"):
        flash_attention(q, _tensor((1, 2, 16, 64), torch.bfloat16, device),
                        _tensor((1, 2, 16, 64), device=device))
    with pytest.raises(TypeError, match="torch.Tensor"):
        flash_attention(q, q.tolist(), q)
    with pytest.raises(ValueError, match="softmax_scale"):
        flash_attention(q, q, q, softmax_scale=-1.0)


def test_cpu_tensors_without_interpreter_raise(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    q = _tensor((1, 2, 16, 64))
    with pytest.raises(ValueError, match="CUDA device"):
        flash_attention(q, q, q)


def test_configs_cover_every_architecture_and_head_dim():
    for capability in [(7, 5), (8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (12, 0)]:
        for head_dim in range(32, 257, 8):
            config = select_config(capability, head_dim)
            for tiles, outer_is_m in ((config.forward, True), (config.backward_dkdv, False),
                                      (config.backward_dq, True)):
                # The causal split into off-diagonal and diagonal loops needs the outer tile
                # to be a whole number of inner tiles.
                if outer_is_m:
                    assert tiles.block_m % tiles.block_n == 0, (capability, head_dim, tiles)
                else:
                    assert tiles.block_n % tiles.block_m == 0, (capability, head_dim, tiles)
                assert min(tiles.block_m, tiles.block_n) >= 16
            if capability == (7, 5):
                # Turing has 64 KB of shared memory: Q resident + one (K, V) stage must fit.
                d_main, d_tail, has_tail = head_dim_slices(head_dim)
                width = d_main + (d_tail if has_tail else 0)
                forward = config.forward
                resident = 2 * width * (forward.block_m + 2 * forward.block_n * forward.num_stages)
                assert resident <= 48 * 1024, (head_dim, forward, resident)


# ----------------------------------------------------------------------------------------------
# GPU (device machine): realistic sizes, both dtypes, float32 reference.
# ----------------------------------------------------------------------------------------------

# Relative L2 error of out, dq, dk, dv against the float32 reference. fp16 keeps 11 mantissa bits
# (inputs and P rounded to it give ~1e-3); bf16 keeps 8 (~8x that), so its bound is wider.
GPU_TOLERANCE = {torch.float16: 5e-3, torch.bfloat16: 3e-2}


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("seqs", [(1000,), (128, 4096)], ids=["ragged", "whole-tiles"])
@pytest.mark.parametrize("head_dim", [64, 80, 96, 128, 256])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_gpu_matches_float32_reference(head_dim, seqs, dtype, causal):
    """Lengths that share one compiled kernel run in one test (128 and 4096 both fill whole
    tiles), so each compile is paid once."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    if dtype == torch.bfloat16 and torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("bfloat16 needs sm80+")
    for seq in seqs:
        # 4 query heads over 2 KV heads: the GQA path at realistic lengths.
        _compare_with_reference((2, 4, 2, seq, seq, head_dim), causal, dtype, "cuda", torch.float32,
                                tolerance=GPU_TOLERANCE[dtype])


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["default", "padded"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("head_dim", range(32, 257, 8))
def test_gpu_every_head_dim(head_dim, causal, layout):
    """Every supported head_dim (split, padded and masked-tail paths), odd length, fp16. The
    default layout runs what flash_attention picks at this size (on sm90 the one-launch
    backward), the padded one the three-launch backward."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    config = select_config(torch.cuda.get_device_capability(), head_dim, 333, 1 * 4 * 333 * 333)
    if layout == "padded":
        if head_dim_slices(head_dim, split=False) == head_dim_slices(head_dim):
            pytest.skip("this head_dim is not split by default: same as 'default'")
        config = AttentionConfig(config.forward, config.backward_dkdv, config.backward_dq,
                                 split_head_dim=False)
    _compare_with_reference((1, 4, 2, 333, 333, head_dim), causal, torch.float16, "cuda",
                            torch.float32, tolerance=GPU_TOLERANCE[torch.float16], config=config)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", DESCRIPTOR_MODES.values(), ids=DESCRIPTOR_MODES.keys())
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("head_dim", range(32, 257, 8))
def test_gpu_every_head_dim_on_tensor_descriptors(head_dim, causal, mode):
    """Every head_dim on the descriptor kernels (partial tails zero-filled by the copy engine:
    the case that broke the masked pointer kernels), odd length, GQA, fp16; the host-descriptor
    runs also take the atomic-dQ backward."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    if not _descriptors_here("cuda", mode):
        pytest.skip("tensor descriptors run on sm90 only")
    config = dataclasses.replace(select_config(torch.cuda.get_device_capability(), head_dim),
                                 tma=mode, atomic_dq=mode == HOST_DESCRIPTORS)
    if config.atomic_dq and head_dim > 192:
        # atomic dQ (never shipped on sm90) keeps more in shared memory: with the shipped two-stage
        # dK/dV tile of the 256 bucket it needs 271 KB (sm90 has 227 KB; H200, 2026-11-23), so
        # it runs on one stage, the tile it was tested with before
        config = dataclasses.replace(config, backward_dkdv=dataclasses.replace(config.backward_dkdv, num_stages=1))
    _compare_with_reference((1, 4, 2, 333, 333, head_dim), causal, torch.float16, "cuda",
                            torch.float32, tolerance=GPU_TOLERANCE[torch.float16], config=config)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("head_dim", [40, 64, 80, 112, 128, 256])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_gpu_host_descriptors_realistic_lengths(head_dim, causal, dtype):
    """The host-descriptor kernels at realistic lengths (ragged 1000, whole 4096), GQA."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    if not _descriptors_here("cuda", HOST_DESCRIPTORS):
        pytest.skip("tensor descriptors run on sm90 only")
    config = dataclasses.replace(select_config(torch.cuda.get_device_capability(), head_dim),
                                 tma=HOST_DESCRIPTORS)
    for seq in (1000, 4096):
        _compare_with_reference((2, 4, 2, seq, seq, head_dim), causal, dtype, "cuda", torch.float32,
                                tolerance=GPU_TOLERANCE[dtype], config=config)


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim", [80, 128])
def test_gpu_cross_attention_different_lengths(head_dim):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    _compare_with_reference((2, 4, 1, 1000, 777, head_dim), False, torch.float16, "cuda",
                            torch.float32, tolerance=GPU_TOLERANCE[torch.float16])



def _tile_configs():
    """Every (architecture, head_dim bucket) configuration the GPU would use, once each."""
    from gpudoctor.kernels.attention import _ARCH_CONFIGS

    cases = {}
    for family, by_width in _ARCH_CONFIGS.items():
        for bucket, config in by_width.items():
            head_dim = {96: 80}.get(bucket, bucket)  # the 96 bucket serves the 64+16 split too
            cases.setdefault((config, head_dim), f"{family}-hd{head_dim}")
    # sm90 runs the head dims the pointer kernels would pad on the descriptor kernels: 40 and 72
    # split (32+16, 64+16), 112 and 200 zero-filled to 128 and 256.
    for head_dim in (40, 72, 112, 200):
        cases.setdefault((select_config((9, 0), head_dim), head_dim), f"sm90-descriptors-hd{head_dim}")
    return [(name, config, head_dim) for (config, head_dim), name in cases.items()]


@pytest.mark.parametrize("name,config,head_dim", _tile_configs(), ids=[c[0] for c in _tile_configs()])
def test_every_architecture_tile_shape_in_the_interpreter(name, config, head_dim, device):
    """The tiles of GPUs never measured here (sm75, sm80, sm86/89) run their real block shapes
    through the kernels (on the CPU: Triton's interpreter), with a length that leaves a ragged
    last block for every tile size in the table, causal and not, with GQA."""
    if device != "cpu":
        pytest.skip("the GPU tests cover the tiles of the GPU they run on")
    seq = max(config.forward.block_m, config.backward_dkdv.block_n, config.backward_dq.block_m) + 9
    for causal in (True, False):
        _compare_with_reference((1, 2, 1, seq, seq, head_dim), causal, torch.float16, device, torch.float64,
                                tolerance=5e-3, config=config)


@pytest.mark.parametrize("fused", [False, True], ids=["split-backward", "fused-backward"])
@pytest.mark.parametrize("head_dim", [40, 112])
def test_in_kernel_column_mask_of_the_public_launchers(head_dim, fused, device):
    """attention_forward / attention_backward called directly (not through flash_attention, which
    zero-pads such head dims; the training pass's custom ops do call them so) mask the padded
    columns inside the kernels: still right, with the three-launch and the one-launch backward."""
    from gpudoctor.kernels.attention import attention_backward, attention_forward

    config = select_config(None if device == "cpu" else torch.cuda.get_device_capability(), head_dim)
    config = dataclasses.replace(config, fused_backward=fused)
    seed = _fresh_seed()
    q, k, v, grad_out = _make_inputs(1, 2, 1, 21, 21, head_dim, torch.float16, device, seed)
    scale = head_dim ** -0.5
    out, lse = attention_forward(q.detach(), k.detach(), v.detach(), True, scale, config)
    dq, dk, dv = attention_backward(grad_out, q.detach(), k.detach(), v.detach(), out, lse, True, scale, config)
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    expected = reference_attention(q64, k64, v64, causal=True)
    expected.backward(grad_out.double())
    for got, want in ((out, expected.detach()), (dq, q64.grad), (dk, k64.grad), (dv, v64.grad)):
        assert _relative_error(got, want) < 5e-3, f"head_dim={head_dim} seed={seed}"


# delta = rowsum(o * do) computed inside the dQ kernel (delta_in_dq) instead of its own pass:
# ragged query blocks, a head_dim tail (80 = 64+16, and 72 = 64+16 zero-filled on the
# descriptor kernels), the masked-column padding (40 on descriptors), GQA, cross-attention.
DELTA_IN_DQ_CASES = [
    ((1, 4, 2, 37, 37, 80), True, attention_module.POINTERS),
    ((1, 2, 1, 19, 45, 64), False, attention_module.POINTERS),
    ((1, 4, 2, 33, 33, 72), True, HOST_DESCRIPTORS),
    ((1, 2, 2, 29, 29, 40), False, DEVICE_DESCRIPTORS),
]


@pytest.mark.parametrize("shape,causal,mode", DELTA_IN_DQ_CASES,
                         ids=[f"{'x'.join(map(str, s))}-{'causal' if c else 'full'}-tma{m}"
                              for s, c, m in DELTA_IN_DQ_CASES])
def test_delta_computed_in_the_dq_kernel_matches_float64_reference(shape, causal, mode, device):
    if mode != attention_module.POINTERS and not _descriptors_here(device, mode):
        pytest.skip("tensor descriptors run on sm90 only")
    base = select_config(None if device == "cpu" else torch.cuda.get_device_capability(), shape[-1])
    config = dataclasses.replace(base, tma=mode, delta_in_dq=True)
    _compare_with_reference(shape, causal, torch.float16, device, torch.float64, tolerance=5e-3,
                            config=config, deterministic=True)


def test_delta_in_dq_launches_no_delta_kernel(device, monkeypatch):
    launched = _launches(monkeypatch, "_backward_delta_kernel")
    base = select_config(None if device == "cpu" else torch.cuda.get_device_capability(), 64)
    q, k, v, grad_out = _make_inputs(1, 2, 1, 20, 20, 64, torch.float16, device, _fresh_seed())
    flash_attention(q, k, v, config=dataclasses.replace(base, delta_in_dq=False)).backward(grad_out)
    assert len(launched) == 1
    flash_attention(q, k, v, config=dataclasses.replace(base, delta_in_dq=True)).backward(grad_out)
    assert len(launched) == 1


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(1, 4, 2, 130, 130, 80), (1, 8, 2, 2048, 2048, 128)],
                         ids=["triton", "gluon-on-hopper"])
def test_gpu_tensors_on_a_gpu_that_is_not_the_current_one(device, shape):
    """Triton launches on the current device; tensors on cuda:1 while cuda:0 is current must
    still be computed on cuda:1 (as SDPA does), forward and backward. The second shape takes the
    Gluon kernels on Hopper (persistent: one program per SM of cuda:1)."""
    if device != "cuda" or torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    seed = _fresh_seed()
    torch.cuda.set_device(0)
    q, k, v, grad_out = _make_inputs(*shape, torch.float16, "cuda:1", seed)
    out = flash_attention(q, k, v, causal=True)
    out.backward(grad_out)
    torch.cuda.synchronize(1)
    assert out.device == q.grad.device == torch.device("cuda:1") and torch.cuda.current_device() == 0
    _assert_like_the_reference(q, k, v, out, grad_out, seed)


def test_descriptor_kernels_read_ready_layouts_without_a_copy(monkeypatch):
    """Contiguous hd72 (rows 144 bytes apart: descriptor-ready, not a multiple of 16 elements)
    on the descriptor kernels must not be copied at every call; on the pointer kernels the
    same tensor would be padded before it gets here."""
    copies = []
    real = attention_module._readable

    def counting(tensor):
        result = real(tensor)
        copies.append(result is not tensor)
        return result

    monkeypatch.setattr(attention_module, "_readable", counting)
    monkeypatch.setattr(attention_module, "usable_config", lambda config, *tensors: config)
    class NoLaunch:  # the layout decision is what is tested, not the kernels
        def __getitem__(self, grid):
            return lambda *args, **kwargs: None

    monkeypatch.setattr(attention_module, "fast", lambda kernel: NoLaunch())
    q = torch.zeros(1, 2, 40, 72, dtype=torch.float16)
    config = dataclasses.replace(select_config(None, 72), tma=HOST_DESCRIPTORS)
    monkeypatch.setattr(attention_module, "_descriptor_arguments", lambda *a: [None] * 8)
    attention_module.attention_forward(q, q, q, True, 0.1, config)
    assert copies == []
    pointer = dataclasses.replace(config, tma=attention_module.POINTERS)
    attention_module.attention_forward(q, q, q, True, 0.1, pointer)
    assert copies == [True, True, True]


# The whole backward in one launch (fused_backward): dK/dV and dQ programs side by side, each
# computing its own delta from O. Ragged blocks, a head_dim tail (80 = 64+16), zero-padding (40,
# through flash_attention; the in-kernel column mask: test_in_kernel_column_mask_of_the_public_
# launchers), GQA, cross-attention, and dK/dV and dQ tiles of other sizes, where every CHECK flag
# differs between the two parts (seq 48 with dK/dV 16x32, dQ 32x16).
FUSED_BACKWARD_CASES = [
    ((1, 4, 2, 37, 37, 80), True, None),
    ((1, 2, 1, 19, 45, 64), False, None),
    ((2, 4, 1, 33, 33, 40), True, None),
    ((1, 2, 2, 50, 50, 96), True, ((16, 32), (32, 16))),
    ((1, 2, 1, 48, 48, 64), True, ((16, 32), (32, 16))),
    ((1, 2, 1, 48, 48, 64), False, ((16, 32), (32, 16))),
]


@pytest.mark.parametrize("shape,causal,blocks", FUSED_BACKWARD_CASES,
                         ids=[f"{'x'.join(map(str, s))}-{'causal' if c else 'full'}-{b}"
                              for s, c, b in FUSED_BACKWARD_CASES])
def test_fused_backward_matches_float64_reference(shape, causal, blocks, device):
    base = select_config(None if device == "cpu" else torch.cuda.get_device_capability(), shape[-1], shape[4])
    config = dataclasses.replace(base, fused_backward=True)
    if blocks is not None:
        (dkdv_m, dkdv_n), (dq_m, dq_n) = blocks
        config = dataclasses.replace(
            config, backward_dkdv=dataclasses.replace(config.backward_dkdv, block_m=dkdv_m, block_n=dkdv_n),
            backward_dq=dataclasses.replace(config.backward_dq, block_m=dq_m, block_n=dq_n))
    _compare_with_reference(shape, causal, torch.float16, device, torch.float64, tolerance=5e-3,
                            config=config, deterministic=True)


def test_fused_backward_is_one_launch(device, monkeypatch):
    launched = {name: _launches(monkeypatch, name) for name in (
        "_backward_delta_kernel", "_attention_backward_dkdv_kernel", "_attention_backward_dq_kernel",
        "_attention_backward_fused_kernel")}
    base = select_config(None if device == "cpu" else torch.cuda.get_device_capability(), 64)
    q, k, v, grad_out = _make_inputs(1, 2, 1, 20, 20, 64, torch.float16, device, _fresh_seed())
    flash_attention(q, k, v, config=dataclasses.replace(base, fused_backward=True)).backward(grad_out)
    assert {name: len(calls) for name, calls in launched.items()} == {
        "_backward_delta_kernel": 0, "_attention_backward_dkdv_kernel": 0,
        "_attention_backward_dq_kernel": 0, "_attention_backward_fused_kernel": 1}


@pytest.mark.gpu
@pytest.mark.parametrize("shape,causal", [((4, 32, 32, 256, 256, 80), True), ((2, 8, 2, 512, 512, 128), True),
                                          ((1, 4, 4, 300, 300, 256), False), ((2, 4, 1, 200, 200, 64), True)])
def test_gpu_fused_backward_on_the_shipped_tiles(shape, causal, device):
    """The fused backward on this GPU's own tiles (the dQ programs on the dK/dV tiles' warps),
    at the training pass's shape and beside it."""
    if device != "cuda":
        pytest.skip("needs a GPU")
    batch, heads, _, seq_q, seq_k, head_dim = shape
    config = select_config(torch.cuda.get_device_capability(), head_dim, seq_k, batch * heads * seq_q * seq_k)
    if not config.fused_backward:  # a GPU the fused backward is not shipped for: its own tiles
        config = dataclasses.replace(config, fused_backward=True)
    _compare_with_reference(shape, causal, torch.bfloat16, device, torch.float32,
                            tolerance=GPU_TOLERANCE[torch.bfloat16], config=config, deterministic=True)
