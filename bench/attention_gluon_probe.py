"""A FlashAttention-3-style forward in Gluon (Triton 3.6's lower-level language) against the shipped
Triton forward and SDPA, on Hopper (issue 18 item 1: what limits us).

Why Gluon: in Triton's own language the compiler places every wgmma wait. For the forward's
Q·Kᵀ it waits at once (``warp_group_dot_wait {pendings = 0}`` right after the dot in the
shipped kernel's TTGIR, even when the loop is rewritten to compute the next block's scores a
block early), so the tensor cores idle while the softmax runs. FlashAttention-3's
"intra-warpgroup pipelining" overlaps them: in iteration j the kernel issues Q·K_jᵀ and
P_{j-1}·V_{j-1} asynchronously, waits only for the first, runs block j's softmax while
P_{j-1}·V_{j-1} is still on the tensor cores, and then waits for it and rescales. Gluon lets the
kernel say where each wait goes (``warpgroup_mma_wait(num_outstanding=...)``).

The kernel here: one program per (128-row query block, batch x head), 8 warps (two warpgroups of
64 rows), no warp specialization; Q, K and V through host-side TMA descriptors over 2-D
(rows, head_dim) views; K and V each in a ring of two shared-memory slots filled by TMA with
mbarriers (block j+2's K and block j+1's V are requested at the end of iteration j, so each has
a whole iteration to arrive); P stays in registers as wgmma's A operand; the output goes back
through shared memory and TMA; it writes the base-2 log-sum-exp the shipped backward reads.
Limits of this probe: sequences a multiple of the tiles (the descriptors are 2-D, so a ragged
block would read the next head's rows), head_dim a power of two from 64 to 256, contiguous
(batch, heads, seq, head_dim) inputs, sm90.

Usage:
  python bench/attention_gluon_probe.py --compile-only            (no GPU: registers, spills)
  python bench/attention_gluon_probe.py --json OUT.json [--shapes hd128 hd64 ...]   (Hopper GPU)
"""

from __future__ import annotations

import argparse
import os
import sys

import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attention_ws_common import (  # noqa: E402
    LOG2_E,
    attempt,
    describe_environment,
    environment_line,
    gqa_inputs,
    one_line,
    ptxas_figures,
    time_ms,
    write_json,
)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from gpudoctor.kernels.attention_gluon import _key_blocks, _masked_softmax  # noqa: E402 - the shipped kernel's


@gluon.jit
def _query_block(seq_k, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr):
    """(first query row, key blocks) of this program's query block, causal ones longest first."""
    if CAUSAL:
        start_m = (gl.num_programs(0) - 1 - gl.program_id(0)) * BLOCK_M
    else:
        start_m = gl.program_id(0) * BLOCK_M
    return start_m, _key_blocks(start_m, seq_k, BLOCK_M, BLOCK_N, CAUSAL)


@gluon.jit
def _load_block(desc, row, bar, slot, pred):
    mbarrier.expect(bar, desc.block_type.nbytes, pred=pred)
    tma.async_copy_global_to_shared(desc, [row, 0], bar, slot, pred=pred)


@gluon.jit
def gluon_attention_forward(q_desc, k_desc, v_desc, o_desc, LSE, seq_q, seq_k, num_heads, kv_group_size,
                            qk_scale, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                            CAUSAL: gl.constexpr, OVERLAP: gl.constexpr, num_warps: gl.constexpr):
    dtype: gl.constexpr = q_desc.dtype
    start_m, blocks = _query_block(seq_k, BLOCK_M, BLOCK_N, CAUSAL)
    batch_head = gl.program_id(1)
    batch = batch_head // num_heads
    kv_head = (batch_head % num_heads) // kv_group_size
    q_row = batch_head * seq_q + start_m
    kv_row = (batch * (num_heads // kv_group_size) + kv_head) * seq_k

    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    o_rows: gl.constexpr = gl.SliceLayout(1, o_layout)

    q_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, HEAD_DIM], q_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [2, BLOCK_N, HEAD_DIM], k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [2, BLOCK_N, HEAD_DIM], v_desc.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    v_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    for i in gl.static_range(2):
        mbarrier.init(k_bars.index(i), count=1)
        mbarrier.init(v_bars.index(i), count=1)

    mbarrier.expect(q_bar, q_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(q_desc, [q_row, 0], q_bar, q_smem)
    for i in gl.static_range(2):
        _load_block(k_desc, kv_row + i * BLOCK_N, k_bars.index(i), k_smem.index(i), i < blocks)
        _load_block(v_desc, kv_row + i * BLOCK_N, v_bars.index(i), v_smem.index(i), i < blocks)

    zero_scores = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, o_layout)

    # Block 0: its scores and softmax, nothing to overlap yet.
    mbarrier.wait(q_bar, 0)
    mbarrier.wait(k_bars.index(0), 0)
    s = warpgroup_mma(q_smem, k_smem.index(0).permute((1, 0)), zero_scores, use_acc=False, is_async=True)
    s = warpgroup_mma_wait(0, deps=(s,))
    probs, row_max, correction, row_sum = _masked_softmax(
        s, 0.0, 0.0, start_m, 0, seq_k, qk_scale, BLOCK_M, BLOCK_N, CAUSAL, False, True, s_layout)
    gl.thread_barrier()  # both warpgroups are past Q·K_0ᵀ: K's slot 0 may be refilled
    _load_block(k_desc, kv_row + 2 * BLOCK_N, k_bars.index(0), k_smem.index(0), 2 < blocks)

    for j in range(1, blocks):
        slot = j % 2
        previous = 1 - slot
        mbarrier.wait(k_bars.index(slot), (j // 2) & 1)
        s = warpgroup_mma(q_smem, k_smem.index(slot).permute((1, 0)), zero_scores, use_acc=False,
                          is_async=True)
        if not OVERLAP:  # the control: every product finished before the softmax starts
            s = warpgroup_mma_wait(0, deps=(s,))
        mbarrier.wait(v_bars.index(previous), ((j - 1) // 2) & 1)
        p = gl.convert_layout(probs.to(dtype), p_layout)
        acc = warpgroup_mma(p, v_smem.index(previous), acc, is_async=True)
        if OVERLAP:
            # Wait for Q·K_jᵀ only (issued first): P_{j-1}·V_{j-1} stays on the tensor cores
            # while block j's softmax runs.
            s = warpgroup_mma_wait(1, deps=(s,))
        else:
            acc = warpgroup_mma_wait(0, deps=(acc,))
        probs, row_max, correction, row_sum = _masked_softmax(
            s, row_max, row_sum, start_m, j * BLOCK_N, seq_k, qk_scale, BLOCK_M, BLOCK_N, CAUSAL, False, False,
            s_layout)
        acc = warpgroup_mma_wait(0, deps=(acc,))
        acc = acc * gl.convert_layout(correction, o_rows)[:, None]
        gl.thread_barrier()  # both warpgroups are done with K_j and V_{j-1}
        _load_block(k_desc, kv_row + (j + 2) * BLOCK_N, k_bars.index(slot), k_smem.index(slot), j + 2 < blocks)
        _load_block(v_desc, kv_row + (j + 1) * BLOCK_N, v_bars.index(previous), v_smem.index(previous),
                    j + 1 < blocks)

    last = blocks - 1
    mbarrier.wait(v_bars.index(last % 2), (last // 2) & 1)
    p = gl.convert_layout(probs.to(dtype), p_layout)
    acc = warpgroup_mma(p, v_smem.index(last % 2), acc, is_async=True)
    acc = warpgroup_mma_wait(0, deps=(acc,))

    mbarrier.invalidate(q_bar)
    for i in gl.static_range(2):
        mbarrier.invalidate(k_bars.index(i))
        mbarrier.invalidate(v_bars.index(i))

    out = acc / gl.convert_layout(row_sum, o_rows)[:, None]
    q_smem.store(out.to(dtype))  # Q's slot is free: every Q·Kᵀ is done
    fence_async_shared()
    tma.async_copy_shared_to_global(o_desc, [q_row, 0], q_smem)
    rows = start_m + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, s_layout))
    gl.store(LSE + batch_head.to(gl.int64) * seq_q + rows, row_max + gl.log2(row_sum))
    tma.store_wait(pendings=0)


@gluon.jit
def _ws_consumer(descs, buffers, barriers, scalars, WG: gl.constexpr, HEAD_DIM: gl.constexpr,
                 BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr, PINGPONG: gl.constexpr):
    """One consumer warpgroup: 64 query rows of the program's 128, the softmax of every key block
    and both products, with Q·K_jᵀ overlapping P_{j-1}·V_{j-1} as in the one-partition kernel.
    With PINGPONG the two consumers take turns to issue their products (FlashAttention-3): one
    warpgroup's softmax runs while the other's products keep the tensor cores busy."""
    q_desc, k_desc, v_desc, o_desc, LSE = descs
    q_smem, k_smem, v_smem = buffers
    q_bars, k_full, k_empty, v_full, v_empty, turns = barriers
    seq_q, start_m, batch_head, blocks, qk_scale = scalars
    ROWS: gl.constexpr = 64
    dtype: gl.constexpr = q_desc.dtype
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    o_rows: gl.constexpr = gl.SliceLayout(1, o_layout)
    my_start = start_m + WG * ROWS
    q_row = batch_head * seq_q + my_start
    my_q = q_smem.index(WG)
    mbarrier.expect(q_bars.index(WG), q_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(q_desc, [q_row, 0], q_bars.index(WG), my_q)
    zero_scores = gl.zeros([ROWS, BLOCK_N], gl.float32, s_layout)
    acc = gl.zeros([ROWS, HEAD_DIM], gl.float32, o_layout)
    mbarrier.wait(q_bars.index(WG), 0)

    # Turn k of warpgroup 0 waits for phase (k & 1) ^ 1 of its barrier (a new barrier counts as
    # phase 1 complete: its first turn is free); warpgroup 1's turn k waits for phase k & 1, which
    # warpgroup 0's k-th hand-over completes.
    if PINGPONG:
        mbarrier.wait(turns.index(WG), 1 - WG)
    mbarrier.wait(k_full.index(0), 0)
    s = warpgroup_mma(my_q, k_smem.index(0).permute((1, 0)), zero_scores, use_acc=False, is_async=True)
    if PINGPONG:
        mbarrier.arrive(turns.index(1 - WG), count=1)
    s = warpgroup_mma_wait(0, deps=(s,))
    mbarrier.arrive(k_empty.index(0), count=1)
    probs, row_max, correction, row_sum = _masked_softmax(
        s, 0.0, 0.0, my_start, 0, 0, qk_scale, ROWS, BLOCK_N, CAUSAL, False, True, s_layout)
    for j in range(1, blocks):
        slot = j % 2
        previous = 1 - slot
        if PINGPONG:
            mbarrier.wait(turns.index(WG), (j & 1) ^ (1 - WG))
        mbarrier.wait(k_full.index(slot), (j // 2) & 1)
        s = warpgroup_mma(my_q, k_smem.index(slot).permute((1, 0)), zero_scores, use_acc=False, is_async=True)
        mbarrier.wait(v_full.index(previous), ((j - 1) // 2) & 1)
        p = gl.convert_layout(probs.to(dtype), p_layout)
        acc = warpgroup_mma(p, v_smem.index(previous), acc, is_async=True)
        if PINGPONG:
            mbarrier.arrive(turns.index(1 - WG), count=1)
        s = warpgroup_mma_wait(1, deps=(s,))
        mbarrier.arrive(k_empty.index(slot), count=1)
        probs, row_max, correction, row_sum = _masked_softmax(
            s, row_max, row_sum, my_start, j * BLOCK_N, 0, qk_scale, ROWS, BLOCK_N, CAUSAL, False, False, s_layout)
        acc = warpgroup_mma_wait(0, deps=(acc,))
        mbarrier.arrive(v_empty.index(previous), count=1)
        acc = acc * gl.convert_layout(correction, o_rows)[:, None]
    last = blocks - 1
    mbarrier.wait(v_full.index(last % 2), (last // 2) & 1)
    p = gl.convert_layout(probs.to(dtype), p_layout)
    acc = warpgroup_mma(p, v_smem.index(last % 2), acc, is_async=True)
    acc = warpgroup_mma_wait(0, deps=(acc,))
    mbarrier.arrive(v_empty.index(last % 2), count=1)

    out = acc / gl.convert_layout(row_sum, o_rows)[:, None]
    my_q.store(out.to(dtype))  # this warpgroup's Q slot is free: its last Q·Kᵀ is done
    fence_async_shared()
    tma.async_copy_shared_to_global(o_desc, [q_row, 0], my_q)
    rows = my_start + gl.arange(0, ROWS, layout=gl.SliceLayout(1, s_layout))
    gl.store(LSE + batch_head.to(gl.int64) * seq_q + rows, row_max + gl.log2(row_sum))
    tma.store_wait(pendings=0)


@gluon.jit
def _ws_consumer_1(descs, buffers, barriers, scalars, kv_row, HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr,
                   CAUSAL: gl.constexpr, PINGPONG: gl.constexpr):
    _ws_consumer(descs, buffers, barriers, scalars, 1, HEAD_DIM, BLOCK_N, CAUSAL, PINGPONG)


@gluon.jit
def _ws_producer(descs, buffers, barriers, scalars, kv_row, HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr,
                 CAUSAL: gl.constexpr, PINGPONG: gl.constexpr):
    """One warp: K and V blocks into two-slot rings by TMA, each slot refilled once both
    consumers have said they are done with it."""
    q_desc, k_desc, v_desc, o_desc, LSE = descs
    q_smem, k_smem, v_smem = buffers
    q_bars, k_full, k_empty, v_full, v_empty, turns = barriers
    seq_q, start_m, batch_head, blocks, qk_scale = scalars
    for j in range(blocks):
        slot = j % 2
        phase = ((j // 2) & 1) ^ 1
        mbarrier.wait(k_empty.index(slot), phase)
        _load_block(k_desc, kv_row + j * BLOCK_N, k_full.index(slot), k_smem.index(slot), True)
        mbarrier.wait(v_empty.index(slot), phase)
        _load_block(v_desc, kv_row + j * BLOCK_N, v_full.index(slot), v_smem.index(slot), True)


@gluon.jit
def gluon_attention_forward_ws(q_desc, k_desc, v_desc, o_desc, LSE, seq_q, seq_k, num_heads, kv_group_size,
                               qk_scale, HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr,
                               PINGPONG: gl.constexpr, num_warps: gl.constexpr):
    """Warp-specialized: two consumer warpgroups of 64 query rows each and a producer warp."""
    dtype: gl.constexpr = q_desc.dtype
    start_m, blocks = _query_block(seq_k, 128, BLOCK_N, CAUSAL)
    batch_head = gl.program_id(1)
    batch = batch_head // num_heads
    kv_head = (batch_head % num_heads) // kv_group_size
    kv_row = (batch * (num_heads // kv_group_size) + kv_head) * seq_k

    q_smem = gl.allocate_shared_memory(dtype, [2, 64, HEAD_DIM], q_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [2, BLOCK_N, HEAD_DIM], k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [2, BLOCK_N, HEAD_DIM], v_desc.layout)
    q_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    k_full = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    v_full = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    turns = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(q_bars.index(i), count=1)
        mbarrier.init(k_full.index(i), count=1)
        mbarrier.init(k_empty.index(i), count=2)
        mbarrier.init(v_full.index(i), count=1)
        mbarrier.init(v_empty.index(i), count=2)
        mbarrier.init(turns.index(i), count=1)

    descs = (q_desc, k_desc, v_desc, o_desc, LSE)
    buffers = (q_smem, k_smem, v_smem)
    barriers = (q_bars, k_full, k_empty, v_full, v_empty, turns)
    scalars = (seq_q, start_m, batch_head, blocks, qk_scale)
    gl.warp_specialize([
        (_ws_consumer, (descs, buffers, barriers, scalars, 0, HEAD_DIM, BLOCK_N, CAUSAL, PINGPONG)),
        (_ws_consumer_1, (descs, buffers, barriers, scalars, kv_row, HEAD_DIM, BLOCK_N, CAUSAL, PINGPONG)),
        (_ws_producer, (descs, buffers, barriers, scalars, kv_row, HEAD_DIM, BLOCK_N, CAUSAL, PINGPONG)),
    ], [4, 1], [240, 24])


# Tiles per head_dim: (BLOCK_N, num_warps). BLOCK_M is 128 (two warpgroups of 64 rows).
TILES = {64: (128, 8), 128: (128, 8), 256: (64, 8)}
BLOCK_M = 128


def _layout(block, dtype):
    return gl.NVMMASharedLayout.get_default_for(block, dtype)


WS_MAXNREG = 168  # 12 warps x 32 threads x 168 registers fill the SM's 64 K; setmaxnreg moves them


def _arguments(head_dim: int, causal: bool, block_n: int | None, overlap: bool, ws: bool, pingpong: bool):
    """(kernel, block rows of Q/O, constexprs, compile options) of one variant."""
    block_n = block_n or TILES[head_dim][0]
    if ws:
        return (gluon_attention_forward_ws, 64,
                {"HEAD_DIM": head_dim, "BLOCK_N": block_n, "CAUSAL": causal, "PINGPONG": pingpong, "num_warps": 4},
                {"num_warps": 4, "maxnreg": WS_MAXNREG})
    return (gluon_attention_forward, BLOCK_M,
            {"HEAD_DIM": head_dim, "BLOCK_M": BLOCK_M, "BLOCK_N": block_n, "CAUSAL": causal, "OVERLAP": overlap,
             "num_warps": 8},
            {"num_warps": 8})


def compile_sm90(head_dim: int, causal: bool, block_n: int | None = None, overlap: bool = True, ws: bool = False,
                 pingpong: bool = True):
    """Compiled for sm90 without a GPU (Triton's own ptxas), as a bf16 launch would specialize it."""
    from triton.backends.compiler import GPUTarget

    kernel, q_rows, constexprs, option_values = _arguments(head_dim, causal, block_n, overlap, ws, pingpong)
    block_n = constexprs["BLOCK_N"]
    q_type = f"tensordesc<bf16[{q_rows}, {head_dim}], {_layout([q_rows, head_dim], gl.bfloat16)!r}>"
    kv_type = f"tensordesc<bf16[{block_n}, {head_dim}], {_layout([block_n, head_dim], gl.bfloat16)!r}>"
    signature = {"q_desc": q_type, "k_desc": kv_type, "v_desc": kv_type, "o_desc": q_type, "LSE": "*fp32",
                 "seq_q": "i32", "seq_k": "i32", "num_heads": "i32", "kv_group_size": "i32", "qk_scale": "fp32"}
    signature.update({name: "constexpr" for name in constexprs})
    source = gluon._runtime.GluonASTSource(fn=kernel, signature=signature, constexprs=constexprs, attrs={})
    target = GPUTarget("cuda", 90, 32)
    options = triton.compiler.make_backend(target).parse_options(option_values)
    return triton.compile(source, target=target, options=options.__dict__)


def gluon_forward(q, k, v, causal: bool, softmax_scale: float | None = None, block_n: int | None = None,
                  overlap: bool = True, ws: bool = False, pingpong: bool = True):
    """(out, lse) of a Gluon kernel for contiguous (batch, heads, seq, head_dim) q, k, v."""
    import torch
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    batch, num_heads, seq_q, head_dim = q.shape
    num_kv_heads, seq_k = k.shape[1], k.shape[2]
    kernel, q_rows, constexprs, option_values = _arguments(head_dim, causal, block_n, overlap, ws, pingpong)
    block_n = constexprs["BLOCK_N"]
    if seq_q % BLOCK_M or seq_k % block_n or (causal and seq_q != seq_k):
        raise ValueError(f"the probe needs seq_q % {BLOCK_M} == seq_k % {block_n} == 0")
    softmax_scale = softmax_scale or head_dim ** -0.5
    dtype = gl.bfloat16 if q.dtype == torch.bfloat16 else gl.float16
    out = torch.empty_like(q)
    lse = torch.empty((batch * num_heads, seq_q), device=q.device, dtype=torch.float32)

    def descriptor(tensor, rows):
        flat = tensor.view(-1, head_dim)
        return TensorDescriptor(flat, list(flat.shape), list(flat.stride()), [rows, head_dim],
                                _layout([rows, head_dim], dtype))

    grid = (seq_q // BLOCK_M, batch * num_heads)
    kernel[grid](descriptor(q, q_rows), descriptor(k, block_n), descriptor(v, block_n), descriptor(out, q_rows),
                 lse, seq_q, seq_k, num_heads, num_heads // num_kv_heads, softmax_scale * LOG2_E,
                 **constexprs, **{key: value for key, value in option_values.items() if key != "num_warps"})
    return out, lse


# name, batch, query heads, kv heads, seq, head_dim, causal
SHAPES = (
    ("hd128", 4, 32, 32, 4096, 128, True),
    ("hd128-nc", 4, 32, 32, 4096, 128, False),
    ("hd128-gqa4", 4, 32, 8, 4096, 128, True),
    ("hd64", 4, 32, 32, 4096, 64, True),
    ("hd64-s1024", 16, 32, 32, 1024, 64, True),
    ("hd256", 4, 32, 32, 4096, 256, True),
    ("hd128-train", 4, 32, 32, 256, 128, True),
)


def variants(head_dim: int):
    """(label, keyword arguments of gluon_forward) timed at a head_dim: the default tiles with the
    overlap, the same without it (the control), and a narrower key block where it fits."""
    found = [("gluon", {}), ("gluon-no-overlap", {"overlap": False}), ("gluon-ws-pingpong", {"ws": True}),
             ("gluon-ws", {"ws": True, "pingpong": False})]
    if TILES[head_dim][0] > 64:
        found.append(("gluon-n64", {"block_n": 64}))
    return found


def compile_only() -> int:
    print(f"{'head_dim':>8} {'causal':>6} {'variant':<17} {'regs':>5} {'spills':>6} {'shared':>7}")
    failed = 0
    for head_dim in sorted(TILES):
        for causal in (True, False):
            for label, options in variants(head_dim):
                try:
                    compiled = compile_sm90(head_dim, causal, **options)
                    figures = ptxas_figures(compiled.asm["ptx"])
                    print(f"{head_dim:>8} {causal!s:>6} {label:<17} {figures['registers']:>5} "
                          f"{figures['spill_stores']:>6} {compiled.metadata.shared:>7}", flush=True)
                except Exception as error:  # noqa: BLE001 - one failed compile is a row
                    failed += 1
                    print(f"{head_dim:>8} {causal!s:>6} {label:<17} error: {type(error).__name__}: "
                          f"{one_line(error)}")
    return 1 if failed else 0


def gpu_rows(names):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from gpudoctor.kernels.attention import attention_forward, config_for

    rows = []
    for name, batch, heads, kv_heads, seq, head_dim, causal in SHAPES:
        if names and name not in names:
            continue
        row = {"shape": name, "batch": batch, "heads": heads, "kv_heads": kv_heads, "seq": seq,
               "head_dim": head_dim, "causal": causal}
        rows.append(row)
        q, k, v = gqa_inputs(batch, heads, kv_heads, seq, seq, head_dim, torch.bfloat16, seq + head_dim)
        scale = head_dim ** -0.5
        config = config_for(q, k)

        def check():
            # Against SDPA in float32 on batch 0's first two KV heads (and their query heads).
            group = heads // kv_heads
            ref = F.scaled_dot_product_attention(q[:1, :2 * group].float(), k[:1, :2].float(), v[:1, :2].float(),
                                                 is_causal=causal, enable_gqa=group > 1)
            shipped_out, shipped_lse = attention_forward(q, k, v, causal, scale, config)
            row["shipped_max_error_vs_fp32"] = (shipped_out[:1, :2 * group].float() - ref).abs().max().item()
            for label, options in variants(head_dim):
                out, lse = gluon_forward(q, k, v, causal, **options)
                row[f"{label}_max_error_vs_fp32"] = (out[:1, :2 * group].float() - ref).abs().max().item()
                row[f"{label}_lse_max_diff_vs_shipped"] = (lse - shipped_lse).abs().max().item()
                row[f"{label}_nan"] = bool(torch.isnan(out).any().item())
            row["max_error_vs_fp32"] = max(row[f"{label}_max_error_vs_fp32"] for label, _ in variants(head_dim))

        if attempt(row, check):
            break
        runs = {label: (lambda options=options: gluon_forward(q, k, v, causal, **options))
                for label, options in variants(head_dim)}
        runs["shipped"] = lambda: attention_forward(q, k, v, causal, scale, config)
        for backend, label in ((SDPBackend.CUDNN_ATTENTION, "cudnn"), (SDPBackend.FLASH_ATTENTION, "sdpa_flash")):
            def sdpa(backend=backend):
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=heads != kv_heads)
            runs[label] = sdpa
        for label, run in list(runs.items()) + [("gluon_again", runs["gluon"])]:
            row_key = f"{label}_ms"

            def timed(run=run, row_key=row_key):
                row[row_key] = time_ms(run)
            if attempt(row, timed):
                return rows
        best_sdpa = min(row.get(key, float("inf")) for key in ("cudnn_ms", "sdpa_flash_ms"))
        for label in [label for label, _ in variants(head_dim)] + ["shipped"]:
            if f"{label}_ms" in row:
                row[f"{label}_x_best_sdpa"] = best_sdpa / row[f"{label}_ms"]
                row[f"{label}_x_shipped"] = row["shipped_ms"] / row[f"{label}_ms"]
        print(one_line(row), flush=True)
    return rows


# The shipped module against the Triton forward, by head_dim: name, batch, heads, kv heads, seq, head_dim, causal
MODULE_SHAPES = tuple((f"hd{hd}", 4, 32, 32, 4096, hd, True) for hd in (40, 64, 80, 96, 112, 128, 160, 192, 256)) + (
    ("hd64-s1024", 16, 32, 32, 1024, 64, True),
    ("hd112-nc", 4, 32, 32, 4096, 112, False),
    ("hd128-s1000", 4, 32, 32, 1000, 128, True),
    ("hd128-gqa8-s8k", 2, 32, 4, 8192, 128, True),
    ("hd128-s1024", 4, 32, 32, 1024, 128, True),
)


def module_rows(names):
    """gpudoctor.kernels.attention_gluon (as shipped) against the Triton forward of the same
    config, cuDNN and SDPA-flash, forward and forward+backward, in the same run."""
    import dataclasses

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from gpudoctor.kernels import attention_gluon
    from gpudoctor.kernels.attention import config_for, flash_attention

    rows = []
    for name, batch, heads, kv_heads, seq, head_dim, causal in MODULE_SHAPES:
        if names and name not in names:
            continue
        row = {"shape": name, "batch": batch, "heads": heads, "kv_heads": kv_heads, "seq": seq,
               "head_dim": head_dim, "causal": causal}
        rows.append(row)
        q, k, v = gqa_inputs(batch, heads, kv_heads, seq, seq, head_dim, torch.bfloat16, seq + head_dim)
        grad = torch.randn_like(q)
        config = dataclasses.replace(config_for(q, k), gluon_forward=True)
        triton_only = dataclasses.replace(config, gluon_forward=False)
        gqa = heads != kv_heads

        def forward(config):
            return lambda: flash_attention(q, k, v, causal=causal, config=config)

        def forward_backward(config):
            leaves = [t.detach().requires_grad_() for t in (q, k, v)]
            return lambda: flash_attention(*leaves, causal=causal, config=config).backward(grad)

        def sdpa(backend, backward):
            leaves = [t.detach().requires_grad_(backward) for t in (q, k, v)]

            def run():
                with sdpa_kernel(backend):
                    out = F.scaled_dot_product_attention(*leaves, is_causal=causal, enable_gqa=gqa)
                if backward:
                    out.backward(grad)
            return run

        def check():
            out, _ = attention_gluon.attention_forward(q, k, v, causal, head_dim ** -0.5)
            ref = flash_attention(q, k, v, causal=causal, config=triton_only)
            row["max_diff_vs_triton"] = (out.float() - ref.float()).abs().max().item()

        if attempt(row, check):
            return rows
        runs = [("gluon_fwd", forward(config)), ("triton_fwd", forward(triton_only)),
                ("cudnn_fwd", sdpa(SDPBackend.CUDNN_ATTENTION, False)),
                ("flash_fwd", sdpa(SDPBackend.FLASH_ATTENTION, False)),
                ("gluon_fwdbwd", forward_backward(config)), ("triton_fwdbwd", forward_backward(triton_only)),
                ("cudnn_fwdbwd", sdpa(SDPBackend.CUDNN_ATTENTION, True)),
                ("flash_fwdbwd", sdpa(SDPBackend.FLASH_ATTENTION, True)),
                ("gluon_fwd_again", forward(config))]
        for label, run in runs:
            def timed(run=run, label=label):
                row[f"{label}_ms"] = time_ms(run)
            if attempt(row, timed):
                return rows
        for mode in ("fwd", "fwdbwd"):
            best = min(row.get(f"{backend}_{mode}_ms", float("inf")) for backend in ("cudnn", "flash"))
            row[f"gluon_{mode}_x_triton"] = row[f"triton_{mode}_ms"] / row[f"gluon_{mode}_ms"]
            row[f"gluon_{mode}_x_best_sdpa"] = best / row[f"gluon_{mode}_ms"]
            row[f"triton_{mode}_x_best_sdpa"] = best / row[f"triton_{mode}_ms"]
        print(one_line(row), flush=True)
    return rows


def print_module_table(rows):
    print("module: ms (do_bench median); gluon x triton = Triton forward's time / Gluon's; x sdpa = best SDPA / ours")
    print(f"{'shape':<15} {'g fwd':>7} {'t fwd':>7} {'cudnn':>7} {'g/t':>5} {'g x sdpa':>8} {'t x sdpa':>8} "
          f"{'g f+b':>7} {'t f+b':>7} {'cudnn':>7} {'g/t':>5} {'g x sdpa':>8} {'t x sdpa':>8} {'diff':>7}")
    for row in rows:
        def cell(key, spec):
            return format(row[key], spec) if key in row else "-"
        print(f"{row['shape']:<15} {cell('gluon_fwd_ms', '7.3f'):>7} {cell('triton_fwd_ms', '7.3f'):>7} "
              f"{cell('cudnn_fwd_ms', '7.3f'):>7} {cell('gluon_fwd_x_triton', '5.2f'):>5} "
              f"{cell('gluon_fwd_x_best_sdpa', '8.2f'):>8} {cell('triton_fwd_x_best_sdpa', '8.2f'):>8} "
              f"{cell('gluon_fwdbwd_ms', '7.3f'):>7} {cell('triton_fwdbwd_ms', '7.3f'):>7} "
              f"{cell('cudnn_fwdbwd_ms', '7.3f'):>7} {cell('gluon_fwdbwd_x_triton', '5.2f'):>5} "
              f"{cell('gluon_fwdbwd_x_best_sdpa', '8.2f'):>8} {cell('triton_fwdbwd_x_best_sdpa', '8.2f'):>8} "
              f"{cell('max_diff_vs_triton', '7.4f'):>7} {row.get('error', '')}")


def run_once(shape_name: str, label: str) -> int:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from gpudoctor.kernels.attention import attention_forward, config_for

    name, batch, heads, kv_heads, seq, head_dim, causal = next(shape for shape in SHAPES if shape[0] == shape_name)
    q = torch.randn(batch, heads, seq, head_dim, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(batch, kv_heads, seq, head_dim, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    options = dict(variants(head_dim)).get(label)
    for _ in range(3):
        if options is not None:
            gluon_forward(q, k, v, causal, **options)
        elif label == "shipped":
            attention_forward(q, k, v, causal, head_dim ** -0.5, config_for(q, k))
        else:
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=heads != kv_heads)
    torch.cuda.synchronize()
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile-only", action="store_true")
    parser.add_argument("--json", help="write the GPU rows here")
    parser.add_argument("--shapes", nargs="*", help=f"of {[shape[0] for shape in SHAPES]}")
    parser.add_argument("--module", action="store_true",
                        help="time the shipped module (gpudoctor.kernels.attention_gluon) at MODULE_SHAPES instead")
    parser.add_argument("--once", nargs=2, metavar=("SHAPE", "VARIANT"),
                        help="run one variant (a gluon one, shipped or cudnn) three times at SHAPE and stop, "
                             "for Nsight Compute (ncu --launch-skip ... --launch-count 1)")
    args = parser.parse_args(argv)
    if args.compile_only:
        return compile_only()
    import torch

    if args.once:
        return run_once(*args.once)

    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        print("needs a Hopper GPU (sm90); --compile-only runs anywhere")
        return 2
    environment = describe_environment()
    print(environment_line(environment), flush=True)
    if args.module:
        rows = module_rows(args.shapes)
        print_module_table(rows)
        if args.json:
            write_json(args.json, {"environment": environment, "rows": rows})
        return 0
    rows = gpu_rows(args.shapes)
    print("ms per forward (do_bench median); x sdpa = best SDPA backend's time / this one's")
    print(f"{'shape':<12} {'variant':<17} {'ms':>7} {'x shipped':>9} {'x sdpa':>7} {'err fp32':>8}")
    for row in rows:
        labels = [label for label, _ in variants(row["head_dim"])]
        for label in labels + ["gluon_again", "shipped", "cudnn", "sdpa_flash"]:
            ms = row.get(f"{label}_ms")
            ratio = row.get(f"{label}_x_shipped")
            sdpa = row.get(f"{label}_x_best_sdpa")
            error = row.get(f"{label}_max_error_vs_fp32")
            print(f"{row['shape']:<12} {label:<17} {'-' if ms is None else format(ms, '.3f'):>7} "
                  f"{'' if ratio is None else format(ratio, '.2f'):>9} {'' if sdpa is None else format(sdpa, '.2f'):>7} "
                  f"{'' if error is None else format(error, '.4f'):>8}")
        if "error" in row:
            print(f"{row['shape']:<12} error: {row['error']}")
    if args.json:
        write_json(args.json, {"environment": environment, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
