"""FlashAttention forward and backward in Triton, for every head_dim that is a multiple of 8 from
32 to 256, grouped-query attention, causal or not, from Turing (sm75) to Hopper (sm90).

Why this exists: FlashAttention's own CUDA backward refuses some (GPU, head_dim) pairs — head_dim 80
(Phi-2) on a Turing card is the case in the seeds — and its users end up writing CUDA by hand. This
module is the workaround gpudoctor can point to, and the kernel its training pass exercises.

Layout is (batch, heads, seq, head_dim). The design follows the well-known Triton fused-attention
tutorial: an online-softmax forward in base 2 (``softmax_scale * log2(e)`` folded into one multiply
so the exponential is a bare ``exp2``), the causal case split into an unmasked off-diagonal loop and
a masked diagonal loop, the log-sum-exp (base 2) saved for the backward, and a backward made of a
``delta = rowsum(o * do)`` pre-pass, a dK/dV kernel that walks the query blocks and a dQ kernel that
walks the key blocks. For small calls on Hopper (``fused_backward``: batch x heads x seq_q x
seq_k up to a measured limit; at head_dim 96 and up only below 2^24 scores or with
``deterministic=True``, SMALL_CALLS_LONG_PATH_MIN_HEAD_DIM) the three are one launch: the dK/dV and
dQ programs side by side in one grid, each computing the delta it needs from O, since such calls
are host-bound (launches and their Python cost more than the GPU's work). Every gradient element
is written by exactly one program (dK/dV of a shared KV head sum their query heads inside one program, or, in the wide
Gluon kernel's split calls, in a fixed order after it: attention_gluon_backward_wide.splits), so
with ``deterministic=True`` the backward uses no atomics and is bitwise reproducible. With
``deterministic=False`` (flash_attention's default, as FlashAttention's) a config may trade that for
two fewer matrix products per block pair by summing dQ in float32 inside the dK/dV kernel: the
Triton kernel's ``atomic_dq`` is off everywhere (measured slower); the Gluon kernel's
``gluon_atomic_dq`` is on for Hopper from GLUON_MIN_SEQ keys at GLUON_SUMMED_DQ_HEAD_DIMS (from
GLUON_MANY_SCORES_MIN_SEQ in calls of GLUON_MANY_SCORES scores, from more keys at a head_dim
GLUON_MANY_SCORES_MIN_SEQ_AT lists (none since the thirty-sixth session); from GLUON_WIDE_MIN_SEQ
in GLUON_SUMMED_DQ_BUCKETS, or from GLUON_MANY_SCORES_MIN_SEQ there too in calls of GLUON_MANY_SCORES), so there
dQ's last bits vary from run to run. (The training pass's shapes are below both: its eager and compiled paths run the same
kernels.)

Head dims that are a power of two plus a smaller power of two of at least 16 are computed as a
"main" slice plus a "tail" slice (80 = 64 + 16, 96 = 64 + 32) instead of padding to the next
power of two (128), which would spend 37.5 % (80) or 25 % (96) of the matrix work on zeros;
measured on an H200 the split ran hd80 forward+backward 1.56-1.71x faster than padding
(docs/benchmarks.md). Other head dims (40, 72, 112, ...) run on the pointer kernels on inputs
zero-padded to the next power of two (``_FlashAttentionFunction``; see ``head_dim_slices`` for
why not a partial tail), and on Hopper through tensor descriptors (the TMA copy engine), which
read them unpadded, zero-fill past head_dim and so allow partial tails (72 = 64 + 16): there from
UNPADDED_GLUON_MIN_SEQ keys in calls of every size, with the Gluon forward and, where
deterministic=False, the Gluon backward summing dQ (and so, with deterministic=False, do small
calls of 2^24 scores or more from head_dim 96 and calls of 2^24 scores or more under 1024 keys from
128: SMALL_CALLS_LONG_PATH_MIN_HEAD_DIM). See ``select_config`` for where each runs and
the H200 measurements behind it. Hopper-only paths
sit behind ``usable_config``; every other GPU, and any layout the copy engine cannot take, runs
the pointer kernels.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from . import attention_gluon, attention_gluon_backward, attention_plan
from .launch import declare_scratch, fast, fast_launch_enabled, recording, use_torch_scratch

try:  # host-side tensor descriptors: Triton 3.4+
    from triton.tools.tensor_descriptor import TensorDescriptor as _HostDescriptor
except ImportError:  # pragma: no cover - older Triton: the pointer kernels only
    _HostDescriptor = None

LOG2_E = 1.4426950408889634

MIN_HEAD_DIM = 32
MAX_HEAD_DIM = 256
SUPPORTED_DTYPES = (torch.float16, torch.bfloat16)
# tl.dot needs every dimension >= 16, so the tail slice of the head dim is at least 16 wide.
MIN_DOT_WIDTH = 16
# Descriptor kernels split head_dim into main + tail only when main is at least this wide.
SPLIT_MIN_MAIN = 64


# ----------------------------------------------------------------------------------------------
# Tile helpers
# ----------------------------------------------------------------------------------------------


@triton.jit
def _load_tile(base, rows, cols, stride_row, stride_col, row_limit, col_limit,
               CHECK_ROWS: tl.constexpr, CHECK_COLS: tl.constexpr):
    """Load a (rows x cols) tile; masks are compiled in only where the caller says the tile can
    cross the sequence end or the real head_dim, so full tiles stay mask-free."""
    ptrs = base + rows[:, None] * stride_row + cols[None, :] * stride_col
    if CHECK_ROWS:
        if CHECK_COLS:
            tile = tl.load(ptrs, mask=(rows[:, None] < row_limit) & (cols[None, :] < col_limit),
                           other=0.0)
        else:
            tile = tl.load(ptrs, mask=rows[:, None] < row_limit, other=0.0)
    else:
        if CHECK_COLS:
            tile = tl.load(ptrs, mask=cols[None, :] < col_limit, other=0.0)
        else:
            tile = tl.load(ptrs)
    return tile


@triton.jit
def _store_tile(base, tile, rows, cols, stride_row, stride_col, row_limit, col_limit,
                CHECK_ROWS: tl.constexpr, CHECK_COLS: tl.constexpr):
    ptrs = base + rows[:, None] * stride_row + cols[None, :] * stride_col
    if CHECK_ROWS:
        if CHECK_COLS:
            tl.store(ptrs, tile, mask=(rows[:, None] < row_limit) & (cols[None, :] < col_limit))
        else:
            tl.store(ptrs, tile, mask=rows[:, None] < row_limit)
    else:
        if CHECK_COLS:
            tl.store(ptrs, tile, mask=cols[None, :] < col_limit)
        else:
            tl.store(ptrs, tile)


@triton.jit
def _aligned(stride_batch, stride_head, stride_row, ROW_ALIGN: tl.constexpr):
    """A tensor's batch, head and row strides, rounded down to a multiple of ROW_ALIGN where it is
    more than 1: no change (the launcher saw ROW_ALIGN divide them, _row_align), and what proves
    16-byte rows to Triton, which tl.multiple_of on a run-time argument did not (see
    _backward_delta_kernel)."""
    if ROW_ALIGN > 1:
        stride_batch = stride_batch // ROW_ALIGN * ROW_ALIGN
        stride_head = stride_head // ROW_ALIGN * ROW_ALIGN
        stride_row = stride_row // ROW_ALIGN * ROW_ALIGN
    return stride_batch, stride_head, stride_row


@triton.jit
def _aligned_head_dim(head_dim, ROW_ALIGN: tl.constexpr):
    """head_dim (a run-time argument: one compiled kernel serves every head_dim padded to the same
    width; a multiple of 8, validate_inputs) as _aligned proves it, so that the column masks are 8
    elements wide; with ROW_ALIGN 1 (Triton's own specialization proves 16-byte rows, or nothing
    does) the hint the kernels always had, so their PTX is what it was."""
    if ROW_ALIGN > 1:
        head_dim = head_dim // ROW_ALIGN * ROW_ALIGN
    else:
        head_dim = tl.multiple_of(head_dim, 8)
    return head_dim


# Loads and stores (TMA): 0 through pointers (masked where a tile can cross the sequence end
# or head_dim); 1 through tensor descriptors built on the device, one per program and tensor
# over that head's rows; 2 through tensor descriptors built on the host over the whole (batch,
# heads, seq, head_dim) tensor, passed as kernel parameters. On both descriptor paths Hopper's
# copy engine zero-fills what a block reads past the sequence end or head_dim and clips what it
# writes, so they need no masks and no zero-padded copies of the inputs.
POINTERS, DEVICE_DESCRIPTORS, HOST_DESCRIPTORS = 0, 1, 2


@triton.jit
def _descriptor(base, rows, stride_row, head_dim, BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr):
    """A device-side tensor descriptor over one head's (rows x head_dim) matrix."""
    return tl.make_tensor_descriptor(base, shape=[rows, head_dim], strides=[stride_row, 1],
                                     block_shape=[BLOCK_ROWS, BLOCK_COLS])


@triton.jit
def _row_sources(base, MAIN_DESC, TAIL_DESC, batch, head, rows, stride_row, head_dim,
                 BLOCK_ROWS: tl.constexpr, D_MAIN: tl.constexpr, D_TAIL: tl.constexpr,
                 HAS_TAIL: tl.constexpr, TMA: tl.constexpr):
    """(main, tail): where one head's two column slices of a tensor are loaded from or stored
    to, in the form _load_rows and _store_rows take for the TMA mode: the host descriptor with
    the (batch, head) it is indexed by (2), a descriptor built here over the head's rows (1), or
    the head's base pointer (0). Without a tail, the tail is the main one (never read)."""
    if TMA == 2:
        main = (MAIN_DESC, batch, head)
        tail = (TAIL_DESC, batch, head)
    elif TMA == 1:
        main = _descriptor(base, rows, stride_row, head_dim, BLOCK_ROWS, D_MAIN)
        if HAS_TAIL:
            tail = _descriptor(base, rows, stride_row, head_dim, BLOCK_ROWS, D_TAIL)
        else:
            tail = main
    else:
        main = base
        tail = base
    return main, tail


@triton.jit
def _load_rows(src, row0, col0, rows, cols, stride_row, stride_col, row_limit, col_limit,
               CHECK_ROWS: tl.constexpr, CHECK_COLS: tl.constexpr, TMA: tl.constexpr):
    """The tile at (row0, col0) of one head. ``src``: the head's base pointer (TMA 0, with
    ``rows``/``cols`` the tile's indices), a descriptor from _descriptor (1), or a tuple
    (descriptor over the whole tensor, batch, head) (2)."""
    if TMA == 2:
        tile = src[0].load([src[1], src[2], row0, col0])
        tile = tile.reshape(tile.shape[2], tile.shape[3])
    elif TMA == 1:
        tile = src.load([row0, col0])
    else:
        tile = _load_tile(src, rows, cols, stride_row, stride_col, row_limit, col_limit,
                          CHECK_ROWS, CHECK_COLS)
    return tile


@triton.jit
def _store_rows(dst, tile, row0, col0, rows, cols, stride_row, stride_col, row_limit, col_limit,
                CHECK_ROWS: tl.constexpr, CHECK_COLS: tl.constexpr, TMA: tl.constexpr):
    if TMA == 2:
        dst[0].store([dst[1], dst[2], row0, col0], tile.reshape(1, 1, tile.shape[0], tile.shape[1]))
    elif TMA == 1:
        dst.store([row0, col0], tile)
    else:
        _store_tile(dst, tile, rows, cols, stride_row, stride_col, row_limit, col_limit,
                    CHECK_ROWS, CHECK_COLS)


@triton.jit
def _accumulate_rows(dst, tile, row0, col0, rows, cols, stride_row, row_limit, col_limit,
                     CHECK_ROWS: tl.constexpr, CHECK_COLS: tl.constexpr, TMA_REDUCE: tl.constexpr):
    """dst[rows, cols] += tile (float32): one bulk reduce-add of the whole tile through the copy
    engine (TMA_REDUCE; dst a descriptor), else element atomics (dst a pointer). Relaxed: only
    atomicity matters, the kernel's end orders the sums before anyone reads them."""
    if TMA_REDUCE:
        dst.atomic_add([row0, col0], tile)
    else:
        ptrs = dst + rows[:, None] * stride_row + cols[None, :]
        if CHECK_ROWS:
            if CHECK_COLS:
                tl.atomic_add(ptrs, tile, mask=(rows[:, None] < row_limit) & (cols[None, :] < col_limit),
                              sem="relaxed")
            else:
                tl.atomic_add(ptrs, tile, mask=rows[:, None] < row_limit, sem="relaxed")
        else:
            if CHECK_COLS:
                tl.atomic_add(ptrs, tile, mask=cols[None, :] < col_limit, sem="relaxed")
            else:
                tl.atomic_add(ptrs, tile, sem="relaxed")


# ----------------------------------------------------------------------------------------------
# Forward
# ----------------------------------------------------------------------------------------------


@triton.jit
def _forward_key_block(
    acc_main, acc_tail, row_sum, row_max, q_main, q_tail,
    k_main_src, k_tail_src, v_main_src, v_tail_src,
    stride_kn, stride_kd, stride_vn, stride_vd,
    offs_m, offs_n, offs_d_main, offs_d_tail, start_n, seq_k, qk_scale,
    head_dim, D_MAIN: tl.constexpr, MAIN_PADDED: tl.constexpr, HAS_TAIL: tl.constexpr,
    TAIL_PADDED: tl.constexpr, CAUSAL_MASK: tl.constexpr, KEY_END_MASK: tl.constexpr,
    TMA: tl.constexpr,
):
    """One key block of the online softmax: update the running max, sum and accumulators."""
    cols = start_n + offs_n
    k_main = _load_rows(k_main_src, start_n, 0, cols, offs_d_main, stride_kn, stride_kd, seq_k,
                        head_dim, KEY_END_MASK, MAIN_PADDED, TMA)
    scores = tl.dot(q_main, tl.trans(k_main))
    if HAS_TAIL:
        k_tail = _load_rows(k_tail_src, start_n, D_MAIN, cols, offs_d_tail, stride_kn, stride_kd,
                            seq_k, head_dim, KEY_END_MASK, TAIL_PADDED, TMA)
        scores = tl.dot(q_tail, tl.trans(k_tail), scores)
    if CAUSAL_MASK or KEY_END_MASK:
        if CAUSAL_MASK:
            keep = offs_m[:, None] >= cols[None, :]
            if KEY_END_MASK:
                keep = keep & (cols[None, :] < seq_k)
        else:
            keep = (cols[None, :] < seq_k) & (offs_m[:, None] >= 0)
        # A large finite negative rather than -inf: exp2 of it is 0, and (max - max) never
        # becomes inf - inf = NaN. Every real row meets an unmasked key in its first block.
        scores = scores * qk_scale + tl.where(keep, 0.0, -1.0e6)
        new_max = tl.maximum(row_max, tl.max(scores, 1))
        scores = scores - new_max[:, None]
    else:
        new_max = tl.maximum(row_max, tl.max(scores, 1) * qk_scale)
        scores = scores * qk_scale - new_max[:, None]
    probs = tl.math.exp2(scores)
    correction = tl.math.exp2(row_max - new_max)
    row_sum = row_sum * correction + tl.sum(probs, 1)
    acc_main = acc_main * correction[:, None]
    v_main = _load_rows(v_main_src, start_n, 0, cols, offs_d_main, stride_vn, stride_vd, seq_k,
                        head_dim, KEY_END_MASK, MAIN_PADDED, TMA)
    probs_lowp = probs.to(v_main.dtype)
    acc_main = tl.dot(probs_lowp, v_main, acc_main)
    if HAS_TAIL:
        acc_tail = acc_tail * correction[:, None]
        v_tail = _load_rows(v_tail_src, start_n, D_MAIN, cols, offs_d_tail, stride_vn, stride_vd,
                            seq_k, head_dim, KEY_END_MASK, TAIL_PADDED, TMA)
        acc_tail = tl.dot(probs_lowp, v_tail, acc_tail)
    return acc_main, acc_tail, row_sum, new_max


@triton.jit
def _forward_key_blocks(
    acc_main, acc_tail, row_sum, row_max, q_main, q_tail,
    k_main_src, k_tail_src, v_main_src, v_tail_src,
    stride_kn, stride_kd, stride_vn, stride_vd,
    offs_m, offs_n, offs_d_main, offs_d_tail, key_lo, key_hi, seq_k, qk_scale,
    head_dim, D_MAIN: tl.constexpr, MAIN_PADDED: tl.constexpr, HAS_TAIL: tl.constexpr,
    TAIL_PADDED: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL_MASK: tl.constexpr,
    KEY_END_MASK: tl.constexpr, INTERPRETED: tl.constexpr, TMA: tl.constexpr,
):
    if INTERPRETED:
        # Triton 3.6's interpreter turns range() bounds into int(1-element array), which
        # NumPy >= 2.4 refuses; a while loop only needs bool(), which still works.
        start_n = key_lo
        while start_n < key_hi:
            acc_main, acc_tail, row_sum, row_max = _forward_key_block(
                acc_main, acc_tail, row_sum, row_max, q_main, q_tail,
                k_main_src, k_tail_src, v_main_src, v_tail_src,
                stride_kn, stride_kd, stride_vn, stride_vd, offs_m, offs_n, offs_d_main,
                offs_d_tail, start_n, seq_k, qk_scale, head_dim, D_MAIN, MAIN_PADDED, HAS_TAIL,
                TAIL_PADDED, CAUSAL_MASK, KEY_END_MASK, TMA)
            start_n += BLOCK_N
    else:
        # A for loop, so that Triton software-pipelines the K/V loads (num_stages).
        for start_n in range(key_lo, key_hi, BLOCK_N):
            start_n = tl.multiple_of(start_n, BLOCK_N)
            acc_main, acc_tail, row_sum, row_max = _forward_key_block(
                acc_main, acc_tail, row_sum, row_max, q_main, q_tail,
                k_main_src, k_tail_src, v_main_src, v_tail_src,
                stride_kn, stride_kd, stride_vn, stride_vd, offs_m, offs_n, offs_d_main,
                offs_d_tail, start_n, seq_k, qk_scale, head_dim, D_MAIN, MAIN_PADDED, HAS_TAIL,
                TAIL_PADDED, CAUSAL_MASK, KEY_END_MASK, TMA)
    return acc_main, acc_tail, row_sum, row_max


@triton.jit
def _attention_forward_kernel(
    Q, K, V, O, LSE,
    Q_MAIN_DESC, Q_TAIL_DESC, K_MAIN_DESC, K_TAIL_DESC, V_MAIN_DESC, V_TAIL_DESC,
    O_MAIN_DESC, O_TAIL_DESC,
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_ob, stride_oh, stride_om, stride_od,
    num_heads, kv_group_size, seq_q, seq_k, qk_scale,
    head_dim, D_MAIN: tl.constexpr, D_TAIL: tl.constexpr,
    MAIN_PADDED: tl.constexpr, HAS_TAIL: tl.constexpr, TAIL_PADDED: tl.constexpr,
    CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CHECK_M: tl.constexpr, CHECK_N: tl.constexpr, INTERPRETED: tl.constexpr,
    TMA: tl.constexpr, ROW_ALIGN: tl.constexpr,
):
    # 16-byte pointer loads at head dims off multiples of 16 (see _backward_delta_kernel)
    head_dim = _aligned_head_dim(head_dim, ROW_ALIGN)
    stride_qb, stride_qh, stride_qm = _aligned(stride_qb, stride_qh, stride_qm, ROW_ALIGN)
    stride_kb, stride_kh, stride_kn = _aligned(stride_kb, stride_kh, stride_kn, ROW_ALIGN)
    stride_vb, stride_vh, stride_vn = _aligned(stride_vb, stride_vh, stride_vn, ROW_ALIGN)
    stride_ob, stride_oh, stride_om = _aligned(stride_ob, stride_oh, stride_om, ROW_ALIGN)
    if CAUSAL:
        # Longest first: the last query block of a head sees the most keys. Blocks run roughly
        # in launch order, so the short ones fill the tail of the grid instead of the long ones.
        start_m = (tl.num_programs(0) - 1 - tl.program_id(0)) * BLOCK_M
    else:
        start_m = tl.program_id(0) * BLOCK_M
    batch_head = tl.program_id(1)
    batch = batch_head // num_heads
    head = batch_head % num_heads
    kv_head = head // kv_group_size
    # int64 offsets: batch * stride overflows int32 at long sequences times many heads.
    q_base = Q + batch.to(tl.int64) * stride_qb + head.to(tl.int64) * stride_qh
    k_base = K + batch.to(tl.int64) * stride_kb + kv_head.to(tl.int64) * stride_kh
    v_base = V + batch.to(tl.int64) * stride_vb + kv_head.to(tl.int64) * stride_vh
    o_base = O + batch.to(tl.int64) * stride_ob + head.to(tl.int64) * stride_oh
    q_main_src, q_tail_src = _row_sources(q_base, Q_MAIN_DESC, Q_TAIL_DESC, batch, head, seq_q, stride_qm,
                                          head_dim, BLOCK_M, D_MAIN, D_TAIL, HAS_TAIL, TMA)
    k_main_src, k_tail_src = _row_sources(k_base, K_MAIN_DESC, K_TAIL_DESC, batch, kv_head, seq_k, stride_kn,
                                          head_dim, BLOCK_N, D_MAIN, D_TAIL, HAS_TAIL, TMA)
    v_main_src, v_tail_src = _row_sources(v_base, V_MAIN_DESC, V_TAIL_DESC, batch, kv_head, seq_k, stride_vn,
                                          head_dim, BLOCK_N, D_MAIN, D_TAIL, HAS_TAIL, TMA)
    o_main_src, o_tail_src = _row_sources(o_base, O_MAIN_DESC, O_TAIL_DESC, batch, head, seq_q, stride_om,
                                          head_dim, BLOCK_M, D_MAIN, D_TAIL, HAS_TAIL, TMA)

    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d_main = tl.arange(0, D_MAIN)
    offs_d_tail = D_MAIN + tl.arange(0, D_TAIL)

    q_main = _load_rows(q_main_src, start_m, 0, offs_m, offs_d_main, stride_qm, stride_qd, seq_q,
                        head_dim, CHECK_M, MAIN_PADDED, TMA)
    if HAS_TAIL:
        q_tail = _load_rows(q_tail_src, start_m, D_MAIN, offs_m, offs_d_tail, stride_qm, stride_qd,
                            seq_q, head_dim, CHECK_M, TAIL_PADDED, TMA)
    else:
        q_tail = q_main  # never read: the tail code is compiled out
    acc_main = tl.zeros([BLOCK_M, D_MAIN], dtype=tl.float32)
    acc_tail = tl.zeros([BLOCK_M, D_TAIL], dtype=tl.float32)
    row_sum = tl.zeros([BLOCK_M], dtype=tl.float32)
    row_max = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")

    if CAUSAL:
        # Keys left of this query block are visible to every row: no mask in that loop.
        acc_main, acc_tail, row_sum, row_max = _forward_key_blocks(
            acc_main, acc_tail, row_sum, row_max, q_main, q_tail,
            k_main_src, k_tail_src, v_main_src, v_tail_src,
            stride_kn, stride_kd, stride_vn, stride_vd, offs_m, offs_n, offs_d_main, offs_d_tail,
            0, start_m, seq_k, qk_scale, head_dim, D_MAIN, MAIN_PADDED, HAS_TAIL, TAIL_PADDED,
            BLOCK_N, False, False, INTERPRETED, TMA)
        acc_main, acc_tail, row_sum, row_max = _forward_key_blocks(
            acc_main, acc_tail, row_sum, row_max, q_main, q_tail,
            k_main_src, k_tail_src, v_main_src, v_tail_src,
            stride_kn, stride_kd, stride_vn, stride_vd, offs_m, offs_n, offs_d_main, offs_d_tail,
            start_m, tl.minimum(start_m + BLOCK_M, seq_k), seq_k, qk_scale, head_dim, D_MAIN,
            MAIN_PADDED, HAS_TAIL, TAIL_PADDED, BLOCK_N, True, CHECK_N, INTERPRETED, TMA)
    else:
        full_key_end = (seq_k // BLOCK_N) * BLOCK_N
        acc_main, acc_tail, row_sum, row_max = _forward_key_blocks(
            acc_main, acc_tail, row_sum, row_max, q_main, q_tail,
            k_main_src, k_tail_src, v_main_src, v_tail_src,
            stride_kn, stride_kd, stride_vn, stride_vd, offs_m, offs_n, offs_d_main, offs_d_tail,
            0, full_key_end, seq_k, qk_scale, head_dim, D_MAIN, MAIN_PADDED, HAS_TAIL, TAIL_PADDED,
            BLOCK_N, False, False, INTERPRETED, TMA)
        if CHECK_N:
            acc_main, acc_tail, row_sum, row_max = _forward_key_blocks(
                acc_main, acc_tail, row_sum, row_max, q_main, q_tail,
                k_main_src, k_tail_src, v_main_src, v_tail_src,
                stride_kn, stride_kd, stride_vn, stride_vd, offs_m, offs_n, offs_d_main,
                offs_d_tail, full_key_end, seq_k, seq_k, qk_scale, head_dim, D_MAIN, MAIN_PADDED,
                HAS_TAIL, TAIL_PADDED, BLOCK_N, False, True, INTERPRETED, TMA)

    out_main = acc_main / row_sum[:, None]
    _store_rows(o_main_src, out_main.to(O.dtype.element_ty), start_m, 0, offs_m, offs_d_main,
                stride_om, stride_od, seq_q, head_dim, CHECK_M, MAIN_PADDED, TMA)
    if HAS_TAIL:
        out_tail = acc_tail / row_sum[:, None]
        _store_rows(o_tail_src, out_tail.to(O.dtype.element_ty), start_m, D_MAIN, offs_m,
                    offs_d_tail, stride_om, stride_od, seq_q, head_dim, CHECK_M, TAIL_PADDED, TMA)
    # Base-2 log-sum-exp of the scaled scores; the backward recomputes P = exp2(S*scale - lse).
    lse_ptrs = LSE + batch_head.to(tl.int64) * seq_q + offs_m
    lse = row_max + tl.math.log2(row_sum)
    if CHECK_M:
        tl.store(lse_ptrs, lse, mask=offs_m < seq_q)
    else:
        tl.store(lse_ptrs, lse)


# ----------------------------------------------------------------------------------------------
# Backward
# ----------------------------------------------------------------------------------------------


@triton.jit
def _backward_delta_kernel(
    O, DO, DELTA, DQ_SUM,
    stride_ob, stride_oh, stride_om, stride_od,
    stride_dob, stride_doh, stride_dom, stride_dod,
    num_heads, seq_q,
    head_dim, D_PADDED: tl.constexpr, BLOCK_M: tl.constexpr, ROW_ALIGN: tl.constexpr,
    ZERO_DQ_SUM: tl.constexpr,
):
    """delta = rowsum(o * do), the term that softmax's Jacobian subtracts from dP; and where
    ZERO_DQ_SUM, zeros over the same rows of DQ_SUM (the contiguous float32 (batch * heads *
    seq_q, head_dim) buffer the dK/dV kernel then sums dQ into), instead of a fill kernel of its
    own. ROW_ALIGN: a number of elements that divides every stride but the last of O and DO."""
    # Triton vectorizes a row's loads only where it can prove the row's address and the head_dim
    # mask 16-byte aligned: from integer arguments divisible by 16 (its specialization), not from
    # tl.multiple_of on them (Triton 3.6, sm90 PTX). At head_dim 40, 56, 72, ... (multiples of 8,
    # not 16) this kernel loaded 2 bytes at a time (ld.global.b16) and took 107 µs at hd72 against
    # 67 at hd128 (docs/benchmarks.md, twenty-eighth session). Rounding down to a multiple of 8
    # changes none of these values (validate_inputs: head_dim; _row_align: ROW_ALIGN) and proves
    # it (_aligned). The other Triton kernels round theirs alike.
    head_dim = _aligned_head_dim(head_dim, ROW_ALIGN)
    stride_ob, stride_oh, stride_om = _aligned(stride_ob, stride_oh, stride_om, ROW_ALIGN)
    stride_dob, stride_doh, stride_dom = _aligned(stride_dob, stride_doh, stride_dom, ROW_ALIGN)
    batch_head = tl.program_id(1)
    batch = batch_head // num_heads
    head = batch_head % num_heads
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D_PADDED)
    o = _load_tile(O + batch.to(tl.int64) * stride_ob + head.to(tl.int64) * stride_oh,
                   offs_m, offs_d, stride_om, stride_od, seq_q, head_dim, True, True)
    do = _load_tile(DO + batch.to(tl.int64) * stride_dob + head.to(tl.int64) * stride_doh,
                    offs_m, offs_d, stride_dom, stride_dod, seq_q, head_dim, True, True)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), axis=1)
    tl.store(DELTA + batch_head.to(tl.int64) * seq_q + offs_m, delta, mask=offs_m < seq_q)
    if ZERO_DQ_SUM:
        _store_tile(DQ_SUM + batch_head.to(tl.int64) * seq_q * head_dim,
                    tl.zeros([BLOCK_M, D_PADDED], dtype=tl.float32), offs_m, offs_d, head_dim, 1,
                    seq_q, head_dim, True, True)


@triton.jit
def _delta_rows(o_base, do_main, do_tail, rows, offs_d_main, offs_d_tail, stride_om, stride_od,
                seq_q, head_dim, ROW_MASK: tl.constexpr, MAIN_PADDED: tl.constexpr,
                HAS_TAIL: tl.constexpr, TAIL_PADDED: tl.constexpr):
    """delta = rowsum(o * do) of the query rows whose dO tiles the caller holds, from O's tiles
    loaded here (through pointers whatever the other loads use: the dQ kernel loads one tile per
    program, off its loop)."""
    o_main = _load_tile(o_base, rows, offs_d_main, stride_om, stride_od, seq_q, head_dim,
                        ROW_MASK, MAIN_PADDED)
    delta = tl.sum(o_main.to(tl.float32) * do_main.to(tl.float32), axis=1)
    if HAS_TAIL:
        o_tail = _load_tile(o_base, rows, offs_d_tail, stride_om, stride_od, seq_q, head_dim,
                            ROW_MASK, TAIL_PADDED)
        delta += tl.sum(o_tail.to(tl.float32) * do_tail.to(tl.float32), axis=1)
    return delta


@triton.jit
def _backward_dkdv_query_block(
    dk_main, dk_tail, dv_main, dv_tail, k_main, k_tail, v_main, v_tail,
    q_main_src, q_tail_src, do_main_src, do_tail_src, dq_main_dst, dq_tail_dst,
    lse_base, delta_base, o_base,
    stride_qm, stride_qd, stride_dom, stride_dod, stride_om, stride_od,
    offs_n, offs_m_in_block, offs_d_main, offs_d_tail, start_m, seq_q, qk_scale, softmax_scale,
    head_dim, D_MAIN: tl.constexpr, MAIN_PADDED: tl.constexpr, HAS_TAIL: tl.constexpr,
    TAIL_PADDED: tl.constexpr, CAUSAL_MASK: tl.constexpr, QUERY_END_MASK: tl.constexpr,
    TMA: tl.constexpr, ATOMIC_DQ: tl.constexpr, TMA_REDUCE: tl.constexpr,
    DELTA_FROM_O: tl.constexpr,
):
    rows = start_m + offs_m_in_block
    q_main = _load_rows(q_main_src, start_m, 0, rows, offs_d_main, stride_qm, stride_qd, seq_q,
                        head_dim, QUERY_END_MASK, MAIN_PADDED, TMA)
    do_main = _load_rows(do_main_src, start_m, 0, rows, offs_d_main, stride_dom, stride_dod, seq_q,
                         head_dim, QUERY_END_MASK, MAIN_PADDED, TMA)
    if QUERY_END_MASK:
        # lse = +inf makes P^T exactly 0 for rows past the end of the sequence.
        lse = tl.load(lse_base + rows, mask=rows < seq_q, other=float("inf"))
        if not DELTA_FROM_O:
            delta = tl.load(delta_base + rows, mask=rows < seq_q, other=0.0)
    else:
        lse = tl.load(lse_base + rows)
        if not DELTA_FROM_O:
            delta = tl.load(delta_base + rows)
    scores_t = tl.dot(k_main, tl.trans(q_main))
    if HAS_TAIL:
        q_tail = _load_rows(q_tail_src, start_m, D_MAIN, rows, offs_d_tail, stride_qm, stride_qd,
                            seq_q, head_dim, QUERY_END_MASK, TAIL_PADDED, TMA)
        do_tail = _load_rows(do_tail_src, start_m, D_MAIN, rows, offs_d_tail, stride_dom,
                             stride_dod, seq_q, head_dim, QUERY_END_MASK, TAIL_PADDED, TMA)
        scores_t = tl.dot(k_tail, tl.trans(q_tail), scores_t)
    else:
        do_tail = do_main  # never read
    if DELTA_FROM_O:
        delta = _delta_rows(o_base, do_main, do_tail, rows, offs_d_main, offs_d_tail, stride_om,
                            stride_od, seq_q, head_dim, QUERY_END_MASK, MAIN_PADDED, HAS_TAIL,
                            TAIL_PADDED)
    probs_t = tl.math.exp2(scores_t * qk_scale - lse[None, :])
    if CAUSAL_MASK:
        probs_t = tl.where(rows[None, :] >= offs_n[:, None], probs_t, 0.0)
    probs_t_lowp = probs_t.to(do_main.dtype)
    dv_main = tl.dot(probs_t_lowp, do_main, dv_main)
    dprobs_t = tl.dot(v_main, tl.trans(do_main))
    if HAS_TAIL:
        dv_tail = tl.dot(probs_t_lowp, do_tail, dv_tail)
        dprobs_t = tl.dot(v_tail, tl.trans(do_tail), dprobs_t)
    dscores_t = (probs_t * (dprobs_t - delta[None, :])).to(q_main.dtype)
    dk_main = tl.dot(dscores_t, q_main, dk_main)
    if HAS_TAIL:
        dk_tail = tl.dot(dscores_t, q_tail, dk_tail)
    if ATOMIC_DQ:
        # dQ's share of this (key block, query block) pair, summed across key blocks in
        # float32 by the copy engine (or atomics): 5 matrix products per pair instead of the
        # 7 that a separate dQ kernel needs (it recomputes S and dP).
        dscores = tl.trans(dscores_t)
        dq_main = tl.dot(dscores, k_main) * softmax_scale
        _accumulate_rows(dq_main_dst, dq_main, start_m, 0, rows, offs_d_main, head_dim, seq_q,
                         head_dim, QUERY_END_MASK, MAIN_PADDED, TMA_REDUCE)
        if HAS_TAIL:
            dq_tail = tl.dot(dscores, k_tail) * softmax_scale
            _accumulate_rows(dq_tail_dst, dq_tail, start_m, D_MAIN, rows, offs_d_tail, head_dim,
                             seq_q, head_dim, QUERY_END_MASK, TAIL_PADDED, TMA_REDUCE)
    return dk_main, dk_tail, dv_main, dv_tail


@triton.jit
def _backward_dkdv_query_blocks(
    dk_main, dk_tail, dv_main, dv_tail, k_main, k_tail, v_main, v_tail,
    q_main_src, q_tail_src, do_main_src, do_tail_src, dq_main_dst, dq_tail_dst,
    lse_base, delta_base, o_base,
    stride_qm, stride_qd, stride_dom, stride_dod, stride_om, stride_od,
    offs_n, offs_m_in_block, offs_d_main, offs_d_tail, query_lo, query_hi, seq_q, qk_scale,
    softmax_scale, head_dim, D_MAIN: tl.constexpr, MAIN_PADDED: tl.constexpr,
    HAS_TAIL: tl.constexpr, TAIL_PADDED: tl.constexpr, BLOCK_M: tl.constexpr,
    CAUSAL_MASK: tl.constexpr, QUERY_END_MASK: tl.constexpr, INTERPRETED: tl.constexpr,
    TMA: tl.constexpr, ATOMIC_DQ: tl.constexpr, TMA_REDUCE: tl.constexpr,
    DELTA_FROM_O: tl.constexpr,
):
    if INTERPRETED:  # see _forward_key_blocks
        start_m = query_lo
        while start_m < query_hi:
            dk_main, dk_tail, dv_main, dv_tail = _backward_dkdv_query_block(
                dk_main, dk_tail, dv_main, dv_tail, k_main, k_tail, v_main, v_tail,
                q_main_src, q_tail_src, do_main_src, do_tail_src, dq_main_dst, dq_tail_dst,
                lse_base, delta_base, o_base, stride_qm, stride_qd, stride_dom, stride_dod,
                stride_om, stride_od, offs_n, offs_m_in_block, offs_d_main, offs_d_tail, start_m,
                seq_q, qk_scale, softmax_scale, head_dim, D_MAIN, MAIN_PADDED, HAS_TAIL,
                TAIL_PADDED, CAUSAL_MASK, QUERY_END_MASK, TMA, ATOMIC_DQ, TMA_REDUCE, DELTA_FROM_O)
            start_m += BLOCK_M
    else:
        for start_m in range(query_lo, query_hi, BLOCK_M):
            start_m = tl.multiple_of(start_m, BLOCK_M)
            dk_main, dk_tail, dv_main, dv_tail = _backward_dkdv_query_block(
                dk_main, dk_tail, dv_main, dv_tail, k_main, k_tail, v_main, v_tail,
                q_main_src, q_tail_src, do_main_src, do_tail_src, dq_main_dst, dq_tail_dst,
                lse_base, delta_base, o_base, stride_qm, stride_qd, stride_dom, stride_dod,
                stride_om, stride_od, offs_n, offs_m_in_block, offs_d_main, offs_d_tail, start_m,
                seq_q, qk_scale, softmax_scale, head_dim, D_MAIN, MAIN_PADDED, HAS_TAIL,
                TAIL_PADDED, CAUSAL_MASK, QUERY_END_MASK, TMA, ATOMIC_DQ, TMA_REDUCE, DELTA_FROM_O)
    return dk_main, dk_tail, dv_main, dv_tail


@triton.jit
def _attention_backward_dkdv_kernel(
    Q, K, V, DO, DK, DV, DQ_ACC, LSE, DELTA,
    Q_MAIN_DESC, Q_TAIL_DESC, K_MAIN_DESC, K_TAIL_DESC, V_MAIN_DESC, V_TAIL_DESC,
    DO_MAIN_DESC, DO_TAIL_DESC, DK_MAIN_DESC, DK_TAIL_DESC, DV_MAIN_DESC, DV_TAIL_DESC,
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_dob, stride_doh, stride_dom, stride_dod,
    stride_dkb, stride_dkh, stride_dkn, stride_dkd,
    stride_dvb, stride_dvh, stride_dvn, stride_dvd,
    num_heads, num_kv_heads, kv_group_size, seq_q, seq_k, qk_scale, softmax_scale,
    head_dim, D_MAIN: tl.constexpr, D_TAIL: tl.constexpr,
    MAIN_PADDED: tl.constexpr, HAS_TAIL: tl.constexpr, TAIL_PADDED: tl.constexpr,
    CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CHECK_M: tl.constexpr, CHECK_N: tl.constexpr, INTERPRETED: tl.constexpr,
    TMA: tl.constexpr, ATOMIC_DQ: tl.constexpr, TMA_REDUCE: tl.constexpr, ROW_ALIGN: tl.constexpr,
):
    """One program owns one key block of one KV head and sums over every query head that
    shares it, so dK/dV need neither atomics nor a second reduction pass. With ATOMIC_DQ it
    also adds each pair's dQ share into DQ_ACC (float32, contiguous (batch, heads, seq_q,
    head_dim), zeroed by the launcher); without, the dQ kernel computes dQ on its own."""
    _dkdv_program(
        0, 0,  # FROM_GRID
        Q, K, V, DO, DO, DK, DV, DQ_ACC, LSE, DELTA,
        Q_MAIN_DESC, Q_TAIL_DESC, K_MAIN_DESC, K_TAIL_DESC, V_MAIN_DESC, V_TAIL_DESC,
        DO_MAIN_DESC, DO_TAIL_DESC, DK_MAIN_DESC, DK_TAIL_DESC, DV_MAIN_DESC, DV_TAIL_DESC,
        stride_qb, stride_qh, stride_qm, stride_qd,
        stride_kb, stride_kh, stride_kn, stride_kd,
        stride_vb, stride_vh, stride_vn, stride_vd,
        stride_dob, stride_doh, stride_dom, stride_dod,  # O's: never read (no DELTA_FROM_O)
        stride_dob, stride_doh, stride_dom, stride_dod,
        stride_dkb, stride_dkh, stride_dkn, stride_dkd,
        stride_dvb, stride_dvh, stride_dvn, stride_dvd,
        num_heads, num_kv_heads, kv_group_size, seq_q, seq_k, qk_scale, softmax_scale,
        head_dim, D_MAIN, D_TAIL, MAIN_PADDED, HAS_TAIL, TAIL_PADDED, CAUSAL, BLOCK_M, BLOCK_N,
        CHECK_M, CHECK_N, INTERPRETED, TMA, ATOMIC_DQ, TMA_REDUCE, False, True, ROW_ALIGN)


@triton.jit
def _dkdv_program(
    key_block, batch_kv_head,
    Q, K, V, O, DO, DK, DV, DQ_ACC, LSE, DELTA,
    Q_MAIN_DESC, Q_TAIL_DESC, K_MAIN_DESC, K_TAIL_DESC, V_MAIN_DESC, V_TAIL_DESC,
    DO_MAIN_DESC, DO_TAIL_DESC, DK_MAIN_DESC, DK_TAIL_DESC, DV_MAIN_DESC, DV_TAIL_DESC,
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_ob, stride_oh, stride_om, stride_od,
    stride_dob, stride_doh, stride_dom, stride_dod,
    stride_dkb, stride_dkh, stride_dkn, stride_dkd,
    stride_dvb, stride_dvh, stride_dvn, stride_dvd,
    num_heads, num_kv_heads, kv_group_size, seq_q, seq_k, qk_scale, softmax_scale,
    head_dim, D_MAIN: tl.constexpr, D_TAIL: tl.constexpr,
    MAIN_PADDED: tl.constexpr, HAS_TAIL: tl.constexpr, TAIL_PADDED: tl.constexpr,
    CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CHECK_M: tl.constexpr, CHECK_N: tl.constexpr, INTERPRETED: tl.constexpr,
    TMA: tl.constexpr, ATOMIC_DQ: tl.constexpr, TMA_REDUCE: tl.constexpr,
    DELTA_FROM_O: tl.constexpr, FROM_GRID: tl.constexpr, ROW_ALIGN: tl.constexpr,
):
    """dK and dV of key block ``key_block`` of one KV head (``batch_kv_head``), or with FROM_GRID
    of this program's place in the dK/dV kernel's grid; see _attention_backward_dkdv_kernel.
    DELTA_FROM_O: delta = rowsum(o * do) computed here for each query block from O (no DELTA
    buffer, no separate pass; one O tile more per block)."""
    # (see _attention_forward_kernel)
    head_dim = _aligned_head_dim(head_dim, ROW_ALIGN)
    stride_qb, stride_qh, stride_qm = _aligned(stride_qb, stride_qh, stride_qm, ROW_ALIGN)
    stride_kb, stride_kh, stride_kn = _aligned(stride_kb, stride_kh, stride_kn, ROW_ALIGN)
    stride_vb, stride_vh, stride_vn = _aligned(stride_vb, stride_vh, stride_vn, ROW_ALIGN)
    stride_ob, stride_oh, stride_om = _aligned(stride_ob, stride_oh, stride_om, ROW_ALIGN)
    stride_dob, stride_doh, stride_dom = _aligned(stride_dob, stride_doh, stride_dom, ROW_ALIGN)
    stride_dkb, stride_dkh, stride_dkn = _aligned(stride_dkb, stride_dkh, stride_dkn, ROW_ALIGN)
    stride_dvb, stride_dvh, stride_dvn = _aligned(stride_dvb, stride_dvh, stride_dvn, ROW_ALIGN)
    # The grid position is read here, not by the caller: the dK/dV kernel then compiles to the
    # very PTX it did before the fused kernel shared this body (bench/attention_ptx_digest.py).
    if FROM_GRID:
        start_n = tl.program_id(0) * BLOCK_N
        batch_kv_head = tl.program_id(1)
    else:
        start_n = key_block * BLOCK_N
    batch = batch_kv_head // num_kv_heads
    kv_head = batch_kv_head % num_kv_heads

    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_m_in_block = tl.arange(0, BLOCK_M)
    offs_d_main = tl.arange(0, D_MAIN)
    offs_d_tail = D_MAIN + tl.arange(0, D_TAIL)

    k_base = K + batch.to(tl.int64) * stride_kb + kv_head.to(tl.int64) * stride_kh
    v_base = V + batch.to(tl.int64) * stride_vb + kv_head.to(tl.int64) * stride_vh
    dk_base = DK + batch.to(tl.int64) * stride_dkb + kv_head.to(tl.int64) * stride_dkh
    dv_base = DV + batch.to(tl.int64) * stride_dvb + kv_head.to(tl.int64) * stride_dvh
    k_main_src, k_tail_src = _row_sources(k_base, K_MAIN_DESC, K_TAIL_DESC, batch, kv_head, seq_k, stride_kn,
                                          head_dim, BLOCK_N, D_MAIN, D_TAIL, HAS_TAIL, TMA)
    v_main_src, v_tail_src = _row_sources(v_base, V_MAIN_DESC, V_TAIL_DESC, batch, kv_head, seq_k, stride_vn,
                                          head_dim, BLOCK_N, D_MAIN, D_TAIL, HAS_TAIL, TMA)
    dk_main_dst, dk_tail_dst = _row_sources(dk_base, DK_MAIN_DESC, DK_TAIL_DESC, batch, kv_head, seq_k,
                                            stride_dkn, head_dim, BLOCK_N, D_MAIN, D_TAIL, HAS_TAIL, TMA)
    dv_main_dst, dv_tail_dst = _row_sources(dv_base, DV_MAIN_DESC, DV_TAIL_DESC, batch, kv_head, seq_k,
                                            stride_dvn, head_dim, BLOCK_N, D_MAIN, D_TAIL, HAS_TAIL, TMA)

    k_main = _load_rows(k_main_src, start_n, 0, offs_n, offs_d_main, stride_kn, stride_kd, seq_k,
                        head_dim, CHECK_N, MAIN_PADDED, TMA)
    v_main = _load_rows(v_main_src, start_n, 0, offs_n, offs_d_main, stride_vn, stride_vd, seq_k,
                        head_dim, CHECK_N, MAIN_PADDED, TMA)
    if HAS_TAIL:
        k_tail = _load_rows(k_tail_src, start_n, D_MAIN, offs_n, offs_d_tail, stride_kn, stride_kd,
                            seq_k, head_dim, CHECK_N, TAIL_PADDED, TMA)
        v_tail = _load_rows(v_tail_src, start_n, D_MAIN, offs_n, offs_d_tail, stride_vn, stride_vd,
                            seq_k, head_dim, CHECK_N, TAIL_PADDED, TMA)
    else:
        k_tail = k_main  # never read
        v_tail = v_main
    dk_main = tl.zeros([BLOCK_N, D_MAIN], dtype=tl.float32)
    dv_main = tl.zeros([BLOCK_N, D_MAIN], dtype=tl.float32)
    dk_tail = tl.zeros([BLOCK_N, D_TAIL], dtype=tl.float32)
    dv_tail = tl.zeros([BLOCK_N, D_TAIL], dtype=tl.float32)

    full_query_end = (seq_q // BLOCK_M) * BLOCK_M
    # A while loop: the interpreter cannot run range() over a runtime bound (see
    # _forward_key_blocks), and this outer loop has nothing to software-pipeline anyway.
    group_index = 0
    while group_index < kv_group_size:
        head = kv_head * kv_group_size + group_index
        group_index += 1
        q_base = Q + batch.to(tl.int64) * stride_qb + head.to(tl.int64) * stride_qh
        do_base = DO + batch.to(tl.int64) * stride_dob + head.to(tl.int64) * stride_doh
        if DELTA_FROM_O:
            o_base = O + batch.to(tl.int64) * stride_ob + head.to(tl.int64) * stride_oh
        else:
            o_base = DO  # never read
        row_base = (batch * num_heads + head).to(tl.int64) * seq_q
        # DQ_ACC is contiguous: this head's rows start at row_base and are head_dim apart.
        dq_base = DQ_ACC + row_base * head_dim
        q_main_src, q_tail_src = _row_sources(q_base, Q_MAIN_DESC, Q_TAIL_DESC, batch, head, seq_q, stride_qm,
                                              head_dim, BLOCK_M, D_MAIN, D_TAIL, HAS_TAIL, TMA)
        do_main_src, do_tail_src = _row_sources(do_base, DO_MAIN_DESC, DO_TAIL_DESC, batch, head, seq_q,
                                                stride_dom, head_dim, BLOCK_M, D_MAIN, D_TAIL, HAS_TAIL, TMA)
        if TMA_REDUCE:
            dq_main_dst = _descriptor(dq_base, seq_q, head_dim, head_dim, BLOCK_M, D_MAIN)
            if HAS_TAIL:
                dq_tail_dst = _descriptor(dq_base, seq_q, head_dim, head_dim, BLOCK_M, D_TAIL)
            else:
                dq_tail_dst = dq_main_dst
        else:
            dq_main_dst, dq_tail_dst = dq_base, dq_base
        if CAUSAL:
            # Query blocks on the diagonal of this key block need the causal mask; the ones
            # below it see every key of the block.
            diagonal_end = tl.minimum(start_n + BLOCK_N, seq_q)
            dk_main, dk_tail, dv_main, dv_tail = _backward_dkdv_query_blocks(
                dk_main, dk_tail, dv_main, dv_tail, k_main, k_tail, v_main, v_tail,
                q_main_src, q_tail_src, do_main_src, do_tail_src, dq_main_dst, dq_tail_dst,
                LSE + row_base, DELTA + row_base, o_base, stride_qm, stride_qd, stride_dom,
                stride_dod, stride_om, stride_od,
                offs_n, offs_m_in_block, offs_d_main, offs_d_tail, start_n, diagonal_end,
                seq_q, qk_scale, softmax_scale, head_dim, D_MAIN, MAIN_PADDED, HAS_TAIL,
                TAIL_PADDED, BLOCK_M, True, CHECK_M, INTERPRETED, TMA, ATOMIC_DQ, TMA_REDUCE,
                DELTA_FROM_O)
            below_start = start_n + BLOCK_N
        else:
            below_start = 0
        dk_main, dk_tail, dv_main, dv_tail = _backward_dkdv_query_blocks(
            dk_main, dk_tail, dv_main, dv_tail, k_main, k_tail, v_main, v_tail,
            q_main_src, q_tail_src, do_main_src, do_tail_src, dq_main_dst, dq_tail_dst,
            LSE + row_base, DELTA + row_base, o_base, stride_qm, stride_qd, stride_dom, stride_dod,
            stride_om, stride_od,
            offs_n, offs_m_in_block, offs_d_main, offs_d_tail, below_start, full_query_end,
            seq_q, qk_scale, softmax_scale, head_dim, D_MAIN, MAIN_PADDED, HAS_TAIL, TAIL_PADDED,
            BLOCK_M, False, False, INTERPRETED, TMA, ATOMIC_DQ, TMA_REDUCE, DELTA_FROM_O)
        if CHECK_M:
            dk_main, dk_tail, dv_main, dv_tail = _backward_dkdv_query_blocks(
                dk_main, dk_tail, dv_main, dv_tail, k_main, k_tail, v_main, v_tail,
                q_main_src, q_tail_src, do_main_src, do_tail_src, dq_main_dst, dq_tail_dst,
                LSE + row_base, DELTA + row_base, o_base, stride_qm, stride_qd, stride_dom,
                stride_dod, stride_om, stride_od,
                offs_n, offs_m_in_block, offs_d_main, offs_d_tail,
                tl.maximum(below_start, full_query_end), seq_q, seq_q, qk_scale, softmax_scale,
                head_dim, D_MAIN, MAIN_PADDED, HAS_TAIL, TAIL_PADDED, BLOCK_M, False, True,
                INTERPRETED, TMA, ATOMIC_DQ, TMA_REDUCE, DELTA_FROM_O)

    _store_rows(dk_main_dst, (dk_main * softmax_scale).to(DK.dtype.element_ty), start_n, 0, offs_n,
                offs_d_main, stride_dkn, stride_dkd, seq_k, head_dim, CHECK_N, MAIN_PADDED, TMA)
    _store_rows(dv_main_dst, dv_main.to(DV.dtype.element_ty), start_n, 0, offs_n, offs_d_main,
                stride_dvn, stride_dvd, seq_k, head_dim, CHECK_N, MAIN_PADDED, TMA)
    if HAS_TAIL:
        _store_rows(dk_tail_dst, (dk_tail * softmax_scale).to(DK.dtype.element_ty), start_n, D_MAIN,
                    offs_n, offs_d_tail, stride_dkn, stride_dkd, seq_k, head_dim, CHECK_N,
                    TAIL_PADDED, TMA)
        _store_rows(dv_tail_dst, dv_tail.to(DV.dtype.element_ty), start_n, D_MAIN, offs_n,
                    offs_d_tail, stride_dvn, stride_dvd, seq_k, head_dim, CHECK_N, TAIL_PADDED,
                    TMA)


@triton.jit
def _backward_dq_key_block(
    dq_main, dq_tail, q_main, q_tail, do_main, do_tail, lse, delta,
    k_main_src, k_tail_src, v_main_src, v_tail_src,
    stride_kn, stride_kd, stride_vn, stride_vd,
    offs_m, offs_n_in_block, offs_d_main, offs_d_tail, start_n, seq_k, qk_scale,
    head_dim, D_MAIN: tl.constexpr, MAIN_PADDED: tl.constexpr, HAS_TAIL: tl.constexpr,
    TAIL_PADDED: tl.constexpr, CAUSAL_MASK: tl.constexpr, KEY_END_MASK: tl.constexpr,
    TMA: tl.constexpr,
):
    cols = start_n + offs_n_in_block
    k_main = _load_rows(k_main_src, start_n, 0, cols, offs_d_main, stride_kn, stride_kd, seq_k,
                        head_dim, KEY_END_MASK, MAIN_PADDED, TMA)
    v_main = _load_rows(v_main_src, start_n, 0, cols, offs_d_main, stride_vn, stride_vd, seq_k,
                        head_dim, KEY_END_MASK, MAIN_PADDED, TMA)
    scores = tl.dot(q_main, tl.trans(k_main))
    dprobs = tl.dot(do_main, tl.trans(v_main))
    if HAS_TAIL:
        k_tail = _load_rows(k_tail_src, start_n, D_MAIN, cols, offs_d_tail, stride_kn, stride_kd,
                            seq_k, head_dim, KEY_END_MASK, TAIL_PADDED, TMA)
        v_tail = _load_rows(v_tail_src, start_n, D_MAIN, cols, offs_d_tail, stride_vn, stride_vd,
                            seq_k, head_dim, KEY_END_MASK, TAIL_PADDED, TMA)
        scores = tl.dot(q_tail, tl.trans(k_tail), scores)
        dprobs = tl.dot(do_tail, tl.trans(v_tail), dprobs)
    probs = tl.math.exp2(scores * qk_scale - lse[:, None])
    if CAUSAL_MASK:
        probs = tl.where(offs_m[:, None] >= cols[None, :], probs, 0.0)
    if KEY_END_MASK:
        probs = tl.where(cols[None, :] < seq_k, probs, 0.0)
    dscores = (probs * (dprobs - delta[:, None])).to(k_main.dtype)
    dq_main = tl.dot(dscores, k_main, dq_main)
    if HAS_TAIL:
        dq_tail = tl.dot(dscores, k_tail, dq_tail)
    return dq_main, dq_tail


@triton.jit
def _backward_dq_key_blocks(
    dq_main, dq_tail, q_main, q_tail, do_main, do_tail, lse, delta,
    k_main_src, k_tail_src, v_main_src, v_tail_src,
    stride_kn, stride_kd, stride_vn, stride_vd,
    offs_m, offs_n_in_block, offs_d_main, offs_d_tail, key_lo, key_hi, seq_k, qk_scale,
    head_dim, D_MAIN: tl.constexpr, MAIN_PADDED: tl.constexpr, HAS_TAIL: tl.constexpr,
    TAIL_PADDED: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL_MASK: tl.constexpr,
    KEY_END_MASK: tl.constexpr, INTERPRETED: tl.constexpr, TMA: tl.constexpr,
):
    if INTERPRETED:  # see _forward_key_blocks
        start_n = key_lo
        while start_n < key_hi:
            dq_main, dq_tail = _backward_dq_key_block(
                dq_main, dq_tail, q_main, q_tail, do_main, do_tail, lse, delta,
                k_main_src, k_tail_src, v_main_src, v_tail_src,
                stride_kn, stride_kd, stride_vn, stride_vd, offs_m, offs_n_in_block,
                offs_d_main, offs_d_tail, start_n, seq_k, qk_scale, head_dim, D_MAIN, MAIN_PADDED,
                HAS_TAIL, TAIL_PADDED, CAUSAL_MASK, KEY_END_MASK, TMA)
            start_n += BLOCK_N
    else:
        for start_n in range(key_lo, key_hi, BLOCK_N):
            start_n = tl.multiple_of(start_n, BLOCK_N)
            dq_main, dq_tail = _backward_dq_key_block(
                dq_main, dq_tail, q_main, q_tail, do_main, do_tail, lse, delta,
                k_main_src, k_tail_src, v_main_src, v_tail_src,
                stride_kn, stride_kd, stride_vn, stride_vd, offs_m, offs_n_in_block,
                offs_d_main, offs_d_tail, start_n, seq_k, qk_scale, head_dim, D_MAIN, MAIN_PADDED,
                HAS_TAIL, TAIL_PADDED, CAUSAL_MASK, KEY_END_MASK, TMA)
    return dq_main, dq_tail


@triton.jit
def _attention_backward_dq_kernel(
    Q, K, V, DO, DQ, LSE, DELTA, O,
    Q_MAIN_DESC, Q_TAIL_DESC, K_MAIN_DESC, K_TAIL_DESC, V_MAIN_DESC, V_TAIL_DESC,
    DO_MAIN_DESC, DO_TAIL_DESC, DQ_MAIN_DESC, DQ_TAIL_DESC,
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_dob, stride_doh, stride_dom, stride_dod,
    stride_dqb, stride_dqh, stride_dqm, stride_dqd,
    stride_ob, stride_oh, stride_om, stride_od,
    num_heads, kv_group_size, seq_q, seq_k, qk_scale, softmax_scale,
    head_dim, D_MAIN: tl.constexpr, D_TAIL: tl.constexpr,
    MAIN_PADDED: tl.constexpr, HAS_TAIL: tl.constexpr, TAIL_PADDED: tl.constexpr,
    CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CHECK_M: tl.constexpr, CHECK_N: tl.constexpr, INTERPRETED: tl.constexpr,
    TMA: tl.constexpr, COMPUTE_DELTA: tl.constexpr, ROW_ALIGN: tl.constexpr,
):
    """dQ in its own kernel, one program per query block: no atomics, deterministic. With
    COMPUTE_DELTA it also computes this block's delta = rowsum(o * do) from the dO tile it
    loads anyway (one O tile more) and stores it for the dK/dV kernel, which then runs after
    it: no separate delta pass (one launch and one read of dO fewer)."""
    _dq_program(
        0, 0, 0,  # FROM_GRID
        Q, K, V, DO, DQ, LSE, DELTA, O, Q_MAIN_DESC, Q_TAIL_DESC, K_MAIN_DESC, K_TAIL_DESC,
        V_MAIN_DESC, V_TAIL_DESC, DO_MAIN_DESC, DO_TAIL_DESC, DQ_MAIN_DESC, DQ_TAIL_DESC,
        stride_qb, stride_qh, stride_qm, stride_qd, stride_kb, stride_kh, stride_kn, stride_kd,
        stride_vb, stride_vh, stride_vn, stride_vd, stride_dob, stride_doh, stride_dom,
        stride_dod, stride_dqb, stride_dqh, stride_dqm, stride_dqd, stride_ob, stride_oh,
        stride_om, stride_od, num_heads, kv_group_size, seq_q, seq_k, qk_scale, softmax_scale,
        head_dim, D_MAIN, D_TAIL, MAIN_PADDED, HAS_TAIL, TAIL_PADDED, CAUSAL, BLOCK_M, BLOCK_N,
        CHECK_M, CHECK_N, INTERPRETED, TMA, COMPUTE_DELTA, COMPUTE_DELTA, True, ROW_ALIGN)


@triton.jit
def _dq_program(
    query_slot, query_slots, batch_head,
    Q, K, V, DO, DQ, LSE, DELTA, O,
    Q_MAIN_DESC, Q_TAIL_DESC, K_MAIN_DESC, K_TAIL_DESC, V_MAIN_DESC, V_TAIL_DESC,
    DO_MAIN_DESC, DO_TAIL_DESC, DQ_MAIN_DESC, DQ_TAIL_DESC,
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_dob, stride_doh, stride_dom, stride_dod,
    stride_dqb, stride_dqh, stride_dqm, stride_dqd,
    stride_ob, stride_oh, stride_om, stride_od,
    num_heads, kv_group_size, seq_q, seq_k, qk_scale, softmax_scale,
    head_dim, D_MAIN: tl.constexpr, D_TAIL: tl.constexpr,
    MAIN_PADDED: tl.constexpr, HAS_TAIL: tl.constexpr, TAIL_PADDED: tl.constexpr,
    CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CHECK_M: tl.constexpr, CHECK_N: tl.constexpr, INTERPRETED: tl.constexpr,
    TMA: tl.constexpr, COMPUTE_DELTA: tl.constexpr, STORE_DELTA: tl.constexpr,
    FROM_GRID: tl.constexpr, ROW_ALIGN: tl.constexpr,
):
    """dQ of one query block of one head (``batch_head``): slot ``query_slot`` of
    ``query_slots``, the longest first when causal, or with FROM_GRID this program's place in
    the dQ kernel's grid; see _attention_backward_dq_kernel. COMPUTE_DELTA: delta = rowsum(o *
    do) from this block's O tile, stored for the dK/dV kernel with STORE_DELTA."""
    # (see _attention_forward_kernel)
    head_dim = _aligned_head_dim(head_dim, ROW_ALIGN)
    stride_qb, stride_qh, stride_qm = _aligned(stride_qb, stride_qh, stride_qm, ROW_ALIGN)
    stride_kb, stride_kh, stride_kn = _aligned(stride_kb, stride_kh, stride_kn, ROW_ALIGN)
    stride_vb, stride_vh, stride_vn = _aligned(stride_vb, stride_vh, stride_vn, ROW_ALIGN)
    stride_dob, stride_doh, stride_dom = _aligned(stride_dob, stride_doh, stride_dom, ROW_ALIGN)
    stride_dqb, stride_dqh, stride_dqm = _aligned(stride_dqb, stride_dqh, stride_dqm, ROW_ALIGN)
    stride_ob, stride_oh, stride_om = _aligned(stride_ob, stride_oh, stride_om, ROW_ALIGN)
    if FROM_GRID:  # read here, in the order the dQ kernel always did (see _dkdv_program)
        if CAUSAL:  # longest first (see _attention_forward_kernel)
            start_m = (tl.num_programs(0) - 1 - tl.program_id(0)) * BLOCK_M
        else:
            start_m = tl.program_id(0) * BLOCK_M
        batch_head = tl.program_id(1)
    elif CAUSAL:
        start_m = (query_slots - 1 - query_slot) * BLOCK_M
    else:
        start_m = query_slot * BLOCK_M
    batch = batch_head // num_heads
    head = batch_head % num_heads
    kv_head = head // kv_group_size

    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_n_in_block = tl.arange(0, BLOCK_N)
    offs_d_main = tl.arange(0, D_MAIN)
    offs_d_tail = D_MAIN + tl.arange(0, D_TAIL)

    q_base = Q + batch.to(tl.int64) * stride_qb + head.to(tl.int64) * stride_qh
    do_base = DO + batch.to(tl.int64) * stride_dob + head.to(tl.int64) * stride_doh
    k_base = K + batch.to(tl.int64) * stride_kb + kv_head.to(tl.int64) * stride_kh
    v_base = V + batch.to(tl.int64) * stride_vb + kv_head.to(tl.int64) * stride_vh
    dq_base = DQ + batch.to(tl.int64) * stride_dqb + head.to(tl.int64) * stride_dqh
    q_main_src, q_tail_src = _row_sources(q_base, Q_MAIN_DESC, Q_TAIL_DESC, batch, head, seq_q, stride_qm,
                                          head_dim, BLOCK_M, D_MAIN, D_TAIL, HAS_TAIL, TMA)
    do_main_src, do_tail_src = _row_sources(do_base, DO_MAIN_DESC, DO_TAIL_DESC, batch, head, seq_q, stride_dom,
                                            head_dim, BLOCK_M, D_MAIN, D_TAIL, HAS_TAIL, TMA)
    k_main_src, k_tail_src = _row_sources(k_base, K_MAIN_DESC, K_TAIL_DESC, batch, kv_head, seq_k, stride_kn,
                                          head_dim, BLOCK_N, D_MAIN, D_TAIL, HAS_TAIL, TMA)
    v_main_src, v_tail_src = _row_sources(v_base, V_MAIN_DESC, V_TAIL_DESC, batch, kv_head, seq_k, stride_vn,
                                          head_dim, BLOCK_N, D_MAIN, D_TAIL, HAS_TAIL, TMA)
    dq_main_dst, dq_tail_dst = _row_sources(dq_base, DQ_MAIN_DESC, DQ_TAIL_DESC, batch, head, seq_q, stride_dqm,
                                            head_dim, BLOCK_M, D_MAIN, D_TAIL, HAS_TAIL, TMA)

    q_main = _load_rows(q_main_src, start_m, 0, offs_m, offs_d_main, stride_qm, stride_qd, seq_q,
                        head_dim, CHECK_M, MAIN_PADDED, TMA)
    do_main = _load_rows(do_main_src, start_m, 0, offs_m, offs_d_main, stride_dom, stride_dod, seq_q,
                         head_dim, CHECK_M, MAIN_PADDED, TMA)
    if HAS_TAIL:
        q_tail = _load_rows(q_tail_src, start_m, D_MAIN, offs_m, offs_d_tail, stride_qm, stride_qd,
                            seq_q, head_dim, CHECK_M, TAIL_PADDED, TMA)
        do_tail = _load_rows(do_tail_src, start_m, D_MAIN, offs_m, offs_d_tail, stride_dom,
                             stride_dod, seq_q, head_dim, CHECK_M, TAIL_PADDED, TMA)
    else:
        q_tail = q_main  # never read
        do_tail = do_main
    row_ptrs = batch_head.to(tl.int64) * seq_q + offs_m
    if COMPUTE_DELTA:
        o_base = O + batch.to(tl.int64) * stride_ob + head.to(tl.int64) * stride_oh
        delta = _delta_rows(o_base, do_main, do_tail, offs_m, offs_d_main, offs_d_tail, stride_om,
                            stride_od, seq_q, head_dim, CHECK_M, MAIN_PADDED, HAS_TAIL, TAIL_PADDED)
        if STORE_DELTA:
            if CHECK_M:
                tl.store(DELTA + row_ptrs, delta, mask=offs_m < seq_q)
            else:
                tl.store(DELTA + row_ptrs, delta)
    if CHECK_M:
        lse = tl.load(LSE + row_ptrs, mask=offs_m < seq_q, other=0.0)
        if not COMPUTE_DELTA:
            delta = tl.load(DELTA + row_ptrs, mask=offs_m < seq_q, other=0.0)
    else:
        lse = tl.load(LSE + row_ptrs)
        if not COMPUTE_DELTA:
            delta = tl.load(DELTA + row_ptrs)
    dq_main = tl.zeros([BLOCK_M, D_MAIN], dtype=tl.float32)
    dq_tail = tl.zeros([BLOCK_M, D_TAIL], dtype=tl.float32)

    if CAUSAL:
        dq_main, dq_tail = _backward_dq_key_blocks(
            dq_main, dq_tail, q_main, q_tail, do_main, do_tail, lse, delta,
            k_main_src, k_tail_src, v_main_src, v_tail_src, stride_kn, stride_kd, stride_vn, stride_vd,
            offs_m, offs_n_in_block, offs_d_main, offs_d_tail, 0, start_m, seq_k, qk_scale,
            head_dim, D_MAIN, MAIN_PADDED, HAS_TAIL, TAIL_PADDED, BLOCK_N, False, False,
            INTERPRETED, TMA)
        dq_main, dq_tail = _backward_dq_key_blocks(
            dq_main, dq_tail, q_main, q_tail, do_main, do_tail, lse, delta,
            k_main_src, k_tail_src, v_main_src, v_tail_src, stride_kn, stride_kd, stride_vn, stride_vd,
            offs_m, offs_n_in_block, offs_d_main, offs_d_tail,
            start_m, tl.minimum(start_m + BLOCK_M, seq_k), seq_k, qk_scale,
            head_dim, D_MAIN, MAIN_PADDED, HAS_TAIL, TAIL_PADDED, BLOCK_N, True, CHECK_N,
            INTERPRETED, TMA)
    else:
        full_key_end = (seq_k // BLOCK_N) * BLOCK_N
        dq_main, dq_tail = _backward_dq_key_blocks(
            dq_main, dq_tail, q_main, q_tail, do_main, do_tail, lse, delta,
            k_main_src, k_tail_src, v_main_src, v_tail_src, stride_kn, stride_kd, stride_vn, stride_vd,
            offs_m, offs_n_in_block, offs_d_main, offs_d_tail, 0, full_key_end, seq_k, qk_scale,
            head_dim, D_MAIN, MAIN_PADDED, HAS_TAIL, TAIL_PADDED, BLOCK_N, False, False,
            INTERPRETED, TMA)
        if CHECK_N:
            dq_main, dq_tail = _backward_dq_key_blocks(
                dq_main, dq_tail, q_main, q_tail, do_main, do_tail, lse, delta,
                k_main_src, k_tail_src, v_main_src, v_tail_src, stride_kn, stride_kd, stride_vn,
                stride_vd, offs_m, offs_n_in_block, offs_d_main, offs_d_tail, full_key_end, seq_k,
                seq_k, qk_scale, head_dim, D_MAIN, MAIN_PADDED, HAS_TAIL, TAIL_PADDED, BLOCK_N,
                False, True, INTERPRETED, TMA)

    _store_rows(dq_main_dst, (dq_main * softmax_scale).to(DQ.dtype.element_ty), start_m, 0, offs_m,
                offs_d_main, stride_dqm, stride_dqd, seq_q, head_dim, CHECK_M, MAIN_PADDED, TMA)
    if HAS_TAIL:
        _store_rows(dq_tail_dst, (dq_tail * softmax_scale).to(DQ.dtype.element_ty), start_m, D_MAIN,
                    offs_m, offs_d_tail, stride_dqm, stride_dqd, seq_q, head_dim, CHECK_M,
                    TAIL_PADDED, TMA)


@triton.jit
def _attention_backward_fused_kernel(
    Q, K, V, O, DO, DQ, DK, DV, LSE,
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_ob, stride_oh, stride_om, stride_od,
    stride_dob, stride_doh, stride_dom, stride_dod,
    stride_dqb, stride_dqh, stride_dqm, stride_dqd,
    stride_dkb, stride_dkh, stride_dkn, stride_dkd,
    stride_dvb, stride_dvh, stride_dvn, stride_dvd,
    num_heads, num_kv_heads, kv_group_size, seq_q, seq_k, qk_scale, softmax_scale,
    key_blocks, query_blocks, dkdv_programs,
    head_dim, D_MAIN: tl.constexpr, D_TAIL: tl.constexpr,
    MAIN_PADDED: tl.constexpr, HAS_TAIL: tl.constexpr, TAIL_PADDED: tl.constexpr,
    CAUSAL: tl.constexpr, DKDV_BLOCK_M: tl.constexpr, DKDV_BLOCK_N: tl.constexpr,
    DQ_BLOCK_M: tl.constexpr, DQ_BLOCK_N: tl.constexpr,
    DKDV_CHECK_M: tl.constexpr, DKDV_CHECK_N: tl.constexpr,
    DQ_CHECK_M: tl.constexpr, DQ_CHECK_N: tl.constexpr, INTERPRETED: tl.constexpr, ROW_ALIGN: tl.constexpr,
):
    """The whole backward in one launch, for calls so small that launches cost more host time
    than the GPU spends (the training pass's shape: docs/benchmarks.md). Programs
    [0, dkdv_programs) are the dK/dV kernel's (key block, KV head) programs, the rest the dQ
    kernel's (query block, head) programs; each computes the delta = rowsum(o * do) it needs
    from O instead of reading a delta pass's output, since no program may wait for another.
    Pointer loads only (the descriptor kernels run at long sequences)."""
    program = tl.program_id(0)
    if program < dkdv_programs:
        _dkdv_program(
            program % key_blocks, program // key_blocks,
            Q, K, V, O, DO, DK, DV, DK, LSE, LSE,
            None, None, None, None, None, None, None, None, None, None, None, None,
            stride_qb, stride_qh, stride_qm, stride_qd, stride_kb, stride_kh, stride_kn, stride_kd,
            stride_vb, stride_vh, stride_vn, stride_vd, stride_ob, stride_oh, stride_om, stride_od,
            stride_dob, stride_doh, stride_dom, stride_dod,
            stride_dkb, stride_dkh, stride_dkn, stride_dkd,
            stride_dvb, stride_dvh, stride_dvn, stride_dvd,
            num_heads, num_kv_heads, kv_group_size, seq_q, seq_k, qk_scale, softmax_scale,
            head_dim, D_MAIN, D_TAIL, MAIN_PADDED, HAS_TAIL, TAIL_PADDED, CAUSAL,
            DKDV_BLOCK_M, DKDV_BLOCK_N, DKDV_CHECK_M, DKDV_CHECK_N, INTERPRETED, 0, False, False,
            True, False, ROW_ALIGN)
    else:
        program -= dkdv_programs
        _dq_program(
            program % query_blocks, query_blocks, program // query_blocks,
            Q, K, V, DO, DQ, LSE, LSE, O,
            None, None, None, None, None, None, None, None, None, None,
            stride_qb, stride_qh, stride_qm, stride_qd, stride_kb, stride_kh, stride_kn, stride_kd,
            stride_vb, stride_vh, stride_vn, stride_vd, stride_dob, stride_doh, stride_dom,
            stride_dod, stride_dqb, stride_dqh, stride_dqm, stride_dqd,
            stride_ob, stride_oh, stride_om, stride_od,
            num_heads, kv_group_size, seq_q, seq_k, qk_scale, softmax_scale,
            head_dim, D_MAIN, D_TAIL, MAIN_PADDED, HAS_TAIL, TAIL_PADDED, CAUSAL,
            DQ_BLOCK_M, DQ_BLOCK_N, DQ_CHECK_M, DQ_CHECK_N, INTERPRETED, 0, True, False, False, ROW_ALIGN)


# ----------------------------------------------------------------------------------------------
# Configurations per architecture and head_dim
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KernelTiles:
    """Tile shape and pipelining of one kernel. block_m runs over queries, block_n over keys."""

    block_m: int
    block_n: int
    num_warps: int
    num_stages: int


@dataclass(frozen=True)
class AttentionConfig:
    """How one attention call runs: the tiles of each kernel and the variants chosen for this GPU
    and head_dim (``select_config``, or the cached autotune of an unmeasured architecture)."""

    forward: KernelTiles
    # dK/dV: one program per key block (block_n), walking query blocks of block_m.
    backward_dkdv: KernelTiles
    # dQ: one program per query block (block_m), walking key blocks of block_n.
    backward_dq: KernelTiles
    # Compute a non-power-of-two head_dim as main + tail slices instead of padding it.
    split_head_dim: bool = True
    # Loads and stores: POINTERS, DEVICE_DESCRIPTORS or HOST_DESCRIPTORS (Hopper's TMA copy
    # engine; also Triton's interpreter). Descriptors are used only where
    # tensor_descriptors_usable() holds; elsewhere the pointer kernels run instead.
    tma: int = POINTERS
    # Backward with deterministic=False: dQ summed in float32 by the dK/dV kernel (TMA
    # reduce-add, or atomics) instead of a separate dQ kernel; 5 matrix products per block pair
    # instead of 7, not bitwise reproducible.
    atomic_dq: bool = False
    # Backward: delta = rowsum(o * do) computed by the dQ kernel (launched before the dK/dV
    # kernel) instead of a separate pass. Ignored with atomic_dq (no dQ kernel then).
    delta_in_dq: bool = False
    # Backward in one launch (_attention_backward_fused_kernel): the dK/dV and dQ programs side
    # by side, each computing its own delta; on the backward_dkdv tiles' warps and stages.
    # Pointer kernels only; ignored with atomic_dq or descriptors (those run at long sequences).
    fused_backward: bool = False
    # Forward on Hopper through the warp-specialized Gluon kernel (attention_gluon.py) where its
    # inputs allow (TMA-readable layouts, Triton with Gluon); the Triton forward otherwise.
    gluon_forward: bool = False
    # Backward on Hopper: dK/dV through the warp-specialized Gluon kernel
    # (attention_gluon_backward.py) where its inputs allow; dQ (unless gluon_atomic_dq sums it
    # there) and delta stay with the Triton kernels. fused_backward, where set, wins; where the
    # Gluon kernel runs, atomic_dq (the Triton dK/dV kernel's) does not apply.
    gluon_backward: bool = False
    # With deterministic=False, whether or not gluon_backward: the Gluon kernel computes dK/dV
    # and sums dQ in float32 (TMA reduce-adds) where its inputs allow, instead of the Triton dQ
    # kernel: five matrix products per block pair instead of seven, not bitwise reproducible.
    gluon_atomic_dq: bool = False


def _tiles(block_m, block_n, num_warps, num_stages):
    return KernelTiles(block_m, block_n, num_warps, num_stages)


# Interpreter: smallest legal tiles, so that the CPU tests stay fast and exercise the block edges.
_INTERPRETER_CONFIG = AttentionConfig(_tiles(16, 16, 4, 1), _tiles(16, 16, 4, 1),
                                      _tiles(16, 16, 4, 1))

# Keyed by compute-capability family, then by head_dim bucket (<= 64, [<= 96,] <= 128, <= 256).
# Shared memory per block: sm75 64 KB, sm86/sm89 ~100 KB, sm80 ~164 KB, sm90 ~227 KB. The
# forward keeps Q resident plus num_stages buffers of (K, V) tiles; those two terms are sized
# under each limit below. sm90's entries were picked from a tile sweep on an H200 (seq 4096,
# causal, bf16; docs/benchmarks.md): e.g. hd64 forward 128x64 ran at 389 TFLOP/s against 322
# for 128x128, and a 32x128 dK/dV tile on 4 warps at hd128 ran at 165 against 360 for 64x128
# on 8 warps.
# The other architectures are sized from the shared-memory budget and not measured (no such GPU);
# on those GPUs flash_attention times these tiles and two neighbours at first use and keeps the
# fastest (attention_autotune.py).
_ARCH_CONFIGS: dict[str, dict[int, AttentionConfig]] = {
    "sm90": {
        64: AttentionConfig(_tiles(128, 64, 8, 3), _tiles(64, 64, 4, 3), _tiles(128, 32, 4, 5)),
        96: AttentionConfig(_tiles(128, 64, 4, 3), _tiles(64, 64, 4, 3), _tiles(128, 32, 8, 4)),
        128: AttentionConfig(_tiles(128, 128, 8, 3), _tiles(64, 128, 8, 3), _tiles(128, 64, 8, 3)),
        # From the issue-18 sweep (b4 h32 s4096 causal bf16, one sample each,
        # bench/results/attention-sweep-h200-first-run.txt): forward 128x64 on 8 warps 2.30 ms
        # against 64x64 on 8 warps 4.32; dQ 128x32 16.5 ms. Together: forward+backward 14.6 ms
        # against 21.3 with the previous tiles (attention-sweep-h200.json, the next run).
        # dK/dV 64x64 on 8 warps with two stages, not one (rounds s3/s4 on the H200, 2026-11-23,
        # b4 h32 s4096 causal bf16, host descriptors): forward+backward 13.06-13.22 ms against
        # 14.30-14.40 for one stage, in four runs (bench/results/attention-h200-2026-11-23-s4-*).
        256: AttentionConfig(_tiles(128, 64, 8, 2), _tiles(64, 64, 8, 2), _tiles(128, 32, 8, 2)),
    },
    "sm80": {
        64: AttentionConfig(_tiles(128, 64, 4, 3), _tiles(32, 128, 4, 3), _tiles(128, 32, 4, 3)),
        128: AttentionConfig(_tiles(128, 64, 8, 3), _tiles(32, 128, 8, 2), _tiles(128, 32, 8, 2)),
        256: AttentionConfig(_tiles(64, 32, 4, 2), _tiles(32, 32, 4, 2), _tiles(64, 32, 8, 2)),
    },
    "sm86": {  # also sm89: ~100 KB of shared memory per block
        64: AttentionConfig(_tiles(128, 64, 4, 2), _tiles(32, 64, 4, 2), _tiles(64, 32, 4, 2)),
        128: AttentionConfig(_tiles(64, 64, 4, 2), _tiles(32, 64, 4, 2), _tiles(64, 32, 4, 2)),
        256: AttentionConfig(_tiles(64, 32, 4, 1), _tiles(16, 32, 4, 1), _tiles(32, 32, 4, 1)),
    },
    "sm100": {  # sm100, sm120, ...: the sm86 tiles (see _architecture_family)
        64: AttentionConfig(_tiles(128, 64, 4, 2), _tiles(32, 64, 4, 2), _tiles(64, 32, 4, 2)),
        128: AttentionConfig(_tiles(64, 64, 4, 2), _tiles(32, 64, 4, 2), _tiles(64, 32, 4, 2)),
        256: AttentionConfig(_tiles(64, 32, 4, 1), _tiles(16, 32, 4, 1), _tiles(32, 32, 4, 1)),
    },
    "sm75": {  # Turing: 64 KB of shared memory, no cp.async (so one stage), fp16 only
        64: AttentionConfig(_tiles(64, 64, 4, 1), _tiles(32, 64, 4, 1), _tiles(64, 32, 4, 1)),
        128: AttentionConfig(_tiles(64, 32, 4, 1), _tiles(16, 32, 4, 1), _tiles(32, 32, 4, 1)),
        256: AttentionConfig(_tiles(32, 32, 4, 1), _tiles(16, 16, 4, 1), _tiles(32, 16, 4, 1)),
    },
}


def _architecture_family(capability: tuple[int, int]) -> str:
    major, minor = capability
    if major == 9:
        return "sm90"
    if major >= 10:
        # Blackwell and later were never measured here, and sm120 (RTX 50xx) has only ~100 KB
        # of shared memory per block: the sm86 tiles fit every one of them, and the first-use
        # autotune (attention_autotune.py) picks among them and their neighbours.
        return "sm100"
    if (major, minor) == (8, 0):
        return "sm80"
    if major == 8:
        return "sm86"
    return "sm75"


# sm90: the descriptor kernels (host-side descriptors) where they measured faster than the
# pointer kernels on the H200 (docs/benchmarks.md, 2026-11-23, seq 4096, fwd / fwd+bwd ms):
# - head dims the pointer kernels run on zero-padded copies (40, 56, 72, 88, 104, 112, 120,
#   136, ...), which the copy engine reads unpadded and zero-fills, split into narrower slices
#   where that pays (72 = 64+16, see head_dim_slices): hd40 0.75 / 2.99 vs 0.98 / 3.25, hd72
#   0.95 / 3.94 vs 2.20 / 6.87, hd112 2.33 / 9.59 (and 2.31 / 9.09 for the same config timed
#   again) vs 2.71 / 9.93;
# - head_dim 256: 2.29 / 14.32 vs 2.42 / 14.51.
# Elsewhere (64, 80, 128, ...) the pointer kernels stayed as fast or faster. Below
# DESCRIPTOR_MIN_SEQ keys the host-side descriptors' set-up dominates (the training pass's
# shape, seq 256: 0.099 ms forward against 0.019); the threshold itself was not swept.
DESCRIPTOR_MIN_SEQ = 1024
# And from this many keys outside the one-launch backward's small calls: there the GPU's work
# outweighs the set-up, and the pointer kernels' zero-padded copies cost more than the kernels
# (thirteenth session, b32 h32 s512 causal bf16, forward+backward through flash_attention, fastest
# of three rounds taking turns, ms, pointers / descriptors, both with the shipped Gluon kernels;
# cuDNN): hd40 1.309 / 0.816 (0.677), hd72 2.086 / 1.103 (0.990), hd112 2.458 / 1.203 (1.169), not
# causal 2.681 / 1.435 (1.477), hd256 3.236 / 3.144 (2.730).
DESCRIPTOR_MIN_SEQ_LARGE_CALLS = 512
# sm90: the whole backward in one launch (fused_backward) for calls whose attention matrices
# (batch x heads x seq_q x seq_k elements) are at most this big, where a step is host-bound (two
# launches, a delta buffer and their Python fewer). Measured on the H200 (docs/benchmarks.md,
# eighth session; bench/results/attention-h200-2026-11-23-s8-*; batch 4, 32 heads, causal, bf16,
# forward+backward ms against the three-launch backward in the same run, on the dK/dV tiles'
# stages): seq 256 hd64 0.598 vs 0.709, hd80 0.440 vs 0.513, hd128 0.591 vs 0.813; seq 512 (this
# limit) 0.560 vs 0.667, 0.469 vs 0.583, 0.608 vs 0.866; seq 1024 1.34x / 1.22x but 0.96x at
# hd128; seq 2048 0.93-0.97x: past the limit the GPU's work dominates and the fused kernel does
# more of it (each dK/dV program recomputes delta). The same work at another batch trades about
# the same way (batch 16 at 4x the limit: 0.99-1.27x; GQA, non-causal, fp16, hd96/256 under the
# limit: 1.09-1.90x). Longer sequences with few heads stay under the size limit but were never
# timed fused, hence also FUSED_BACKWARD_MAX_SEQ. (Where _long_path_from_256_keys says so, from 256
# keys, small calls run the long calls' path instead: padded head dims, and from head_dim 96 in
# 2^24 scores or more, where the Gluon kernels have since beaten it; twenty-ninth session.)
# Not on one pipeline stage (ptxas spills none of
# the 472 bytes three stages spill at hd80): on the H200 (Triton 3.6) the one-stage kernel
# returned wrong dQ at hd96 and "an illegal memory access" at other shapes (GPU suite, eighth
# session), while the same kernel on the table's stages passed.
FUSED_BACKWARD_MAX_SCORES = 4 * 32 * 512 * 512
FUSED_BACKWARD_MAX_SEQ = 1024
# And up to four times that many scores in calls that will run a backward (flash_attention with
# gradients) at these head dims: there the Triton forward and the one-launch backward, both
# replayed by a plan (attention_plan.py), took less than the Gluon forward with the three-launch
# backward (fourteenth session, bench/attention.py --fused-sweep 4x, four rounds taking turns,
# forward+backward do_bench ms, shipped before / this / cuDNN): hd64 b4 s1024 0.492 / 0.269 /
# 0.252, b16 s512 0.504 / 0.334 / 0.332, GQA 8:1 b4 s1024 0.748 / 0.293 / 0.348; hd80 b4 s1024
# 0.360 / 0.353 / 0.340, b16 s512 0.426 / 0.439 / 0.431, not causal 0.942 / 0.530 / 0.481. Not
# at hd96 (0.373 / 0.394 and 0.496 / 0.505) nor hd128 (0.478 / 0.471, 0.580 / 0.636); other head
# dims not measured. Forward-only calls keep the Gluon forward (faster on the GPU). Since the
# sixteenth session these calls (past FUSED_BACKWARD_MAX_SCORES) take the Gluon forward too, which a
# plan replays since the fifteenth (bench/attention_mid_calls.py --cases small, H200, three rounds,
# do_bench ms and device µs, causal bf16 unless said; Triton forward / Gluon forward, both with the
# one-launch backward; cuDNN): hd64 b4 s1024 0.269 / 0.259 and 268 / 257 (0.251, 246), not causal
# 0.404 / 0.401 and 395 / 386 (0.336, 328); hd80 b4 s1024 0.355 / 0.349 and 358 / 345 (0.340,
# 340), not causal 0.565 / 0.542 and 556 / 519 (0.490, 480); level at b16 s512 (hd64 0.335 / 0.334
# and 348 / 333, hd80 0.445 / 0.446 and 445 / 442).
FUSED_BACKWARD_MAX_SCORES_WITH_GRAD = 4 * FUSED_BACKWARD_MAX_SCORES
FUSED_BACKWARD_WITH_GRAD_HEAD_DIMS = (64, 80)
# sm90: the warp-specialized Gluon forward (attention_gluon.py, persistent) from this head_dim and
# GLUON_FORWARD_MIN_SEQ keys, outside the one-launch backward's small calls (but in those of
# FUSED_BACKWARD_MAX_SCORES_WITH_GRAD's band). Measured on the H200
# (docs/benchmarks.md, thirteenth session; bench/attention_gluon_persistent.py, three rounds
# taking turns, causal bf16 unless said, forward ms, Triton / Gluon / cuDNN):
# hd128 s512 (b32 h32) 0.323 / 0.215 / 0.194, s1024 (b16) 0.442 / 0.309 / 0.316, not causal
# 0.596 / 0.475 / 0.486, s4096 (b4) 1.220 / 0.990 / 1.023, GQA 8:1 s4096 1.201 / 1.007 / 1.013;
# hd112 s1024 not causal 0.631 / 0.495 / 0.499; hd96 s1024 0.325 / 0.290 / 0.304; hd88 s4096
# 1.016 / 0.964 / 1.018; hd80 s1024 0.303 / 0.291 / 0.300, s4096 0.920 / 0.895 / 0.971; hd72
# s1024 0.316 / 0.295 / 0.307; hd64 s512 0.159 / 0.150 / 0.131, s1024 0.233 / 0.210 / 0.204,
# s4096 0.702 / 0.645 / 0.646; hd48 s1024 0.232 / 0.210 / 0.202; hd40 s4096 0.732 / 0.648 /
# 0.646; hd160 s1024 0.681 / 0.562 / 0.454; hd192 s4096 2.007 / 1.773 / 1.436; hd256 s1024 0.756
# / 0.620 / 0.577, s4096 2.223 / 1.894 / 1.807. Not hd32 (width 32): s1024 0.189 / 0.187 / 0.200,
# s4096 0.554 / 0.592 / 0.623. Not at 256 keys (b4 h32: the training pass's shape), where the
# forward alone is level (hd80 0.018 / 0.017 / 0.018) but forward+backward was slower (0.175 /
# 0.221 ms at hd80, 0.249 / 0.269 at hd128): those calls are host-bound; 512 keys was measured at
# hd64, 96, 128 and 256 only (hd96 0.219 / 0.207 / 0.193, hd256 b16 0.274 / 0.210 / 0.191), the
# other head dims from 1024. (From 256 keys where _long_path_from_256_keys says so: padded head
# dims, and from 96 in 2^24 scores; twenty-eighth and twenty-ninth sessions.)
GLUON_FORWARD_MIN_HEAD_DIM = 40
GLUON_FORWARD_MIN_SEQ = 512
# sm90: the warp-specialized Gluon dK/dV kernel (attention_gluon_backward.py) for these buckets
# from GLUON_MIN_SEQ keys. Measured on the H200 (docs/benchmarks.md, tenth session;
# bench/attention_gluon_backward_probe.py, b4 h32 bf16, ms, Triton dK/dV / Gluon in the same run):
# backward alone s4096 hd128 causal 3.760 / 3.518, not causal 6.750 / 6.237, GQA 4:1 3.768 /
# 3.471, hd112 not causal 6.683 / 6.139; s2048 hd128 causal 1.093 / 0.992. Not in the other
# buckets: hd96 3.067 / 3.123, hd80 2.735 / 2.822 (the kernel computed them at width 128 then,
# on 96 columns since the thirty-first session; the Triton one as 64 + 32 and 64 + 16), hd64
# 2.144 / 2.142. hd256 (head_dim 136-256) runs
# attention_gluon_backward_wide's kernel (twelfth session, same probe and batch): backward alone
# s4096 causal 10.854 / 8.701, not causal 20.735 / 16.360, GQA 4:1 10.781 / 8.459, s2048 3.074 /
# 2.488, s16k (b1 h16) 20.421 / 16.960, s1024 0.939 / 0.770 (from GLUON_WIDE_MIN_SEQ there).
GLUON_BACKWARD_BUCKETS = (128, 256)
# But in the 256 bucket from this head_dim: the wide kernel computed every head_dim at width 256
# then (twelfth session; head_dim 136-192 on 160 or 192 columns since the twenty-fourth, not
# measured against this routing, which is deterministic=True's only),
# the Triton kernels 136-160 as 128 + a power-of-two tail (same probe, s4096 causal, backward ms,
# Triton / Gluon with the Triton dQ): hd136 8.958 / 9.051, hd160 8.676 / 8.507, hd192 9.223 /
# 8.235, hd224 11.218 / 9.546; forward+backward taking turns (--alternate 3, fastest ms, Gluon
# forward with the Triton backward / with the Gluon one and the Triton dQ): hd144 10.264 /
# 10.277, hd152 11.379 / 11.495.
GLUON_BACKWARD_MIN_WIDE_HEAD_DIM = 160
# sm90, deterministic=False: the Gluon kernel summing dQ in float32 (gluon_atomic_dq) from
# GLUON_MIN_SEQ keys at these head dims. Measured on the H200 (docs/benchmarks.md, eleventh
# session; bench/attention_gluon_backward_probe.py --alternate 3, b4 h32 s4096 bf16 causal unless
# said, forward+backward ms, fastest of three rounds, Triton only / Gluon summing dQ / cuDNN):
# hd128 5.077 / 4.326 / 4.285, not causal 9.232 / 7.477 / 7.537, GQA 4:1 5.194 / 4.384 / 4.263,
# hd112 not causal 9.035 / 7.348 / 7.351, hd96 4.190 / 4.009 / 3.996, hd64 2.880 / 2.762 / 2.593,
# hd64 not causal 5.100 / 4.943 / 4.605, hd40 2.870 / 2.740 / 2.528, s2048 1.552 / 1.315 /
# 1.254, s16k (b1 h16) 8.884 / 7.292 / 7.386. 48, 56, 104 and 120 are not measured: taken
# because they run at the same kernel width as their measured neighbours (64, 128; hd48 in causal
# calls on 48 of width 64's columns since the thirty-first session, attention_gluon_backward.columns). hd72 and hd88
# too (twelfth session, the same alternation, Triton only / Gluon summing dQ with the Triton
# forward / cuDNN): hd72 3.933 / 3.860 / 3.770, not causal 7.147 / 6.687 / 6.775, hd88 4.385 /
# 4.108 / 4.024, not causal 7.898 / 7.096 / 7.046; faster than Triton only in every round but one
# (hd72 not causal: 6.687, 7.666, 7.063 against 7.147-7.155). hd80 was level or slower in both
# sessions while the kernel computed it at width 128 (the Triton one as 64 + 16): 3.795 / 3.848
# (eleventh), 3.564 / 3.756 and not causal 6.678 / 6.636 (twelfth); on 96 columns
# (attention_gluon_backward.NARROW_COLUMNS, thirty-first session, run 1,
# bench/attention_gluon_backward_narrow.py, forward+backward device µs, settings taking turns,
# Triton backward / Gluon summing dQ): causal GQA 8:1 fp16 s8192 7181 / 6617 (0.96 -> 1.05x cuDNN),
# s4096 not causal 6419 / 6103, causal GQA 4:1 s512 (2^28 scores) 795 / 752, causal s2048 1933 /
# 1932. hd32 (width 32) is unmeasured.
GLUON_SUMMED_DQ_HEAD_DIMS = (40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128)
# And the whole 256 bucket (head_dim 136-256), where attention_gluon_backward_wide sums it (twelfth
# session, same probe without alternation, b4 h32 s4096 causal unless said, backward alone ms,
# Gluon dK/dV with the Triton dQ / summing dQ): 8.671 / 8.098, not causal 16.596 / 14.974, GQA
# 4:1 8.430 / 8.182, s2048 2.463 / 2.266, s1024 0.763 / 0.707, s1024 not causal 1.231 / 1.118,
# s16k (b1 h16) 16.918 / 14.808; and against the Triton backward (Triton / summing): hd136 8.958 /
# 6.741, hd160 8.676 / 6.849, hd192 9.223 / 7.215, hd224 11.218 / 7.898. Forward+backward, three
# rounds taking turns (fastest, Gluon dK/dV / summing / cuDNN): hd256 11.089 / 10.756 / 10.301,
# not causal 20.168 / 19.013 / 18.271, hd192 10.270 / 9.535 / 8.651.
GLUON_SUMMED_DQ_BUCKETS = (256,)
# The Gluon dK/dV kernels from this many keys (the 256 bucket's from GLUON_WIDE_MIN_SEQ, below).
# Forward+backward through flash_attention, hd128 causal b4 h32, five rounds taking turns (tenth
# session, before the forward was persistent; ms, Triton only / Gluon forward / Gluon forward and dK/dV): s1024 0.554-0.619 / 0.597-0.852 /
# 0.832-1.049: slower with either, though each kernel alone is faster there (cause not found: the
# host's time per backward call is 44 us with the Gluon kernel against 33); s2048 1.570-1.738 /
# 1.538-1.598 / 1.426-1.513; s4096 5.134-5.300 / 4.998-5.162 / 4.788-5.095; s16k (b1 h16)
# 8.951-9.150 / 8.761-8.769 / 8.299-8.634.
GLUON_MIN_SEQ = 2048
# And from GLUON_MANY_SCORES_MIN_SEQ keys in calls of at least GLUON_MANY_SCORES scores (batch x
# heads x seq_q x seq_k), where the GPU's work outweighs the host's (thirteenth session, the
# persistent Gluon forward throughout, bench/attention_gluon_backward_probe.py --alternate 3,
# causal bf16 unless said, forward+backward ms over three rounds, Gluon forward with the Triton
# backward / with the Gluon one summing dQ / cuDNN): hd128 s1024 b16 h32 (2^29 scores) 1.900-1.915
# / 1.675-1.693 / 1.669-1.964, not causal 2.679-2.715 / 2.295-2.424 / 2.311-2.679; s512 b32 (2^28)
# 1.391-1.460 / 1.274-1.288 / 1.241-1.409; hd64 s1024 b16 1.060-1.171 / 1.055-1.058 /
# 1.026-1.038. At b4 (2^27) the Gluon backward stays slower: hd128 s1024 0.514-0.570 /
# 0.507-0.737, hd64 0.305-0.635 / 0.595-0.722 (host-bound rounds that vary twofold). At b32 h32
# s512 (2^28; flash_attention on descriptors, DESCRIPTOR_MIN_SEQ_LARGE_CALLS; fastest of three
# rounds, Triton backward / Gluon summing dQ; cuDNN): hd40 0.950 / 0.748 (0.677), hd72 1.144 /
# 1.103 (0.990), hd112 1.343 / 1.203 (1.169), hd128 1.387 / 1.272 (1.236); but not hd64, which the
# Triton kernels run unpadded and unsplit (0.769-0.774 / 0.794-0.795 (0.773-0.779), not causal
# 0.930 / 0.982 (0.932)): GLUON_MANY_SCORES_NOT until the seventeenth session, at 1024 keys too
# (level there, above); from 1024 keys then, from 512 since the thirty-sixth (GLUON_MANY_SCORES_MIN_SEQ_AT).
# From 2^26 since the sixteenth session, by device time (torch.profiler, the sum of a
# forward+backward's kernels; bench/attention_mid_calls.py --cases routing, H200, b h32 causal
# bf16, µs, Triton backward / Gluon summing dQ / cuDNN): hd128 b2 s1024 246 / 206 / 210, b4 s1024
# 435 / 375 / 365, not causal 612 / 522 / 505, b16 s512 575 / 509 / 491; hd112 b2 s1024 244 / 201
# / 205, b4 s1024 440 / 372 / 358, b16 s512 578 / 497 / 471; hd96 b2 s1024 206 / 195 / 198, b4
# s1024 366 / 352 / 343, b16 s512 474 / 471 / 445; hd72 b4 s1024 386 / 367 / 344; hd56 b4 s1024
# 276 / 263 / 248; hd48 254 / 243 / 238; hd40 273 / 253 / 238. The hosts of that run were slow
# enough that cuDNN itself was host-bound (0.17-0.45 ms of host time per call): do_bench there
# measures the host, where the two paths took alike within its noise (0.4-0.8 ms).
GLUON_MANY_SCORES = 2 ** 26
GLUON_MANY_SCORES_MIN_SEQ = 512
# But hd64 from 1024 keys, since the seventeenth session's 128-query blocks at width 64
# (attention_gluon_backward.QUERY_ROWS; before, not at all: GLUON_MANY_SCORES_NOT, the 512-key
# figures above). By device time (bench/attention_mid_calls.py --cases wide64, H200, b h32 bf16,
# µs, Triton backward / Gluon summing dQ / cuDNN; do_bench ms alike): b8 s1024 causal 477 / 466 /
# 456 (0.482 / 0.493 / 0.465), not causal 709 / 670 / 644 (0.708 / 0.678 / 0.686); b16 s1024
# causal 936 / 895 / 885 (0.937 / 0.901 / 0.907), not causal 1494 / 1295 / 1261 (1.482 / 1.318 /
# 1.315). At 512 keys still slower (b32 s512 causal 623 / 650 / 629). Since the thirty-sixth
# session hd64 from GLUON_MANY_SCORES_MIN_SEQ too, as every head_dim: the Gluon kernel has gained
# since, and ragged lengths under 1024 (a job's padded batches) took the Triton backward
# (bench/attention_gluon_backward_short.py, run 1, H200, forward+backward device µs, settings
# taking turns, from 1024 / 768 / 512 keys, x cuDNN from 1024 -> 512): b8 s1000 causal 555.0 /
# 434.0 / 433.5 (0.84 -> 1.08x), not causal 784.7 / 642.9 / 641.0 (0.89 -> 1.08), GQA 4:1 causal
# fp16 581.9 / 421.7 / 422.7 (0.85 -> 1.17); s896 causal 389.2 / 366.4 / 365.9; b16 s768 causal
# 587.5 / 560.6 / 557.4, not causal 834.4 / 775.9 / 770.4 (0.93 -> 1.01); s640 causal 441.5 / 440.4
# / 433.3; fp16 s600 not causal 682.3 / 687.0 / 569.1 (0.88 -> 1.05); b32 s512 causal 616.8 /
# 616.3 / 612.4 (1.02x either way). Empty: no head_dim waits for more keys (the bench's A/B sets it).
GLUON_MANY_SCORES_MIN_SEQ_AT: dict[int, int] = {}
# But the 256 bucket's backward from this many keys: GLUON_BACKWARD_BUCKETS' and
# GLUON_SUMMED_DQ_BUCKETS' measurements at s1024 above, and forward+backward at s1024 taking
# turns (twelfth session, --alternate 5, b4 h32, fastest ms, Triton forward / Gluon forward, both
# with the summing backward; cuDNN): hd256 causal 1.054 / 0.999 (0.954), not causal 1.563 /
# 1.477 (1.488), hd192 causal 0.932 / 0.887 (0.822). At 512 keys the one-launch Triton backward
# runs at b4 h32; nothing smaller was measured.
# And from GLUON_MANY_SCORES_MIN_SEQ keys in calls of GLUON_MANY_SCORES (many_scores), as the
# other buckets: at 512 keys, 2^26 and 2^28 scores, forward+backward took 0.98-1.07x cuDNN's
# time with the wide kernel summing dQ against 0.82-0.89x with the Triton backward (eighteenth
# session, bench/attention_mid_calls.py --cases wide512, H200, b8/b32 h32 bf16, do_bench ms,
# Triton backward / wide Gluon / cuDNN): hd256 b32 causal 2.645 / 2.236 / 2.230, not causal 3.862
# / 3.128 / 3.331, b8 causal 0.710 / 0.582 / 0.580; hd192 b32 causal 2.225 / 1.843 / 1.906, b8
# not causal 0.870 / 0.702 / 0.727; hd160 b32 not causal 3.067 / 2.477 / 2.657; hd144 b32 causal
# 1.937 / 1.690 / 1.715. (deterministic=True there, the wide kernel with the Triton dQ, was not
# measured at 512 keys.)
GLUON_WIDE_MIN_SEQ = 1024
# sm90: head dims the pointer kernels pad to a power of two (_pads_on_pointers) take, from this many
# keys in calls of every size, the path of long or large calls: descriptors (TMA reads them
# unpadded), the Gluon forward and the Gluon backward (summing dQ where deterministic=False, as
# GLUON_SUMMED_DQ_HEAD_DIMS and _BUCKETS say), instead of the one-launch backward and the Triton
# forward on copies padded to 64, 128 or 256 columns. Measured on the H200 (docs/benchmarks.md,
# twenty-eighth session; bench/attention_mid_calls.py --cases smallodd, three rounds, bf16 causal
# unless said, forward+backward device µs and do_bench ms (host-bound there), shipped before /
# this path ("gluon-all") / the Triton kernels on descriptors / cuDNN): hd72 b4 h32 s512 401 / 130 /
# 151 / 133 µs and 0.891 / 0.547 / 1.054 / 0.308 ms; b1 130 / 50 / 56 / 46 and 1.031 / 0.611 / 1.218
# / 0.500; hd40 b4 s512 185 / 92 / 110 / 92 and 0.745 / 0.462 / 0.965 / 0.331; hd104 not causal 399
# / 169 / 215 / 171 and 1.031 / 0.707 / 1.358 / 0.455; hd56 b4 s256 101 / 45 / 46 / 44 and 0.948 /
# 0.574 / 1.353 / 0.415; hd88 b8 s256 366 / 110 / 124 / 106 and 1.012 / 0.700 / 1.508 / 0.475;
# hd136 b4 s512 723 / 232 / 345 / 258 and 1.267 / 0.740 / 1.308 / 0.631. Calls under 256 keys were
# not measured, nor deterministic=True (the Gluon dK/dV kernel with the Triton dQ at head_dim
# 104-120 and from 168, which no plan replays; the Triton kernels on descriptors at 40-88, 136 and
# 152: faster on the device than the padded one-launch backward in the figures above, mixed with
# do_bench).
UNPADDED_GLUON_MIN_SEQ = 256
# sm90: from UNPADDED_GLUON_MIN_SEQ keys, head dims from this one take that path too in small calls
# (FUSED_BACKWARD_MAX_SCORES, FUSED_BACKWARD_MAX_SEQ) of SMALL_CALLS_LONG_PATH_MIN_SCORES scores or
# more, which ran the Triton forward and the one-launch backward; and from
# SHORT_CALLS_LONG_PATH_MIN_HEAD_DIM so do larger calls under FUSED_BACKWARD_MAX_SEQ keys, which ran
# the Triton kernels on pointers at 256-511 keys and the Triton backward at 512-1023 keys in
# 2^25-2^26 scores. Only where deterministic=False: with True the Gluon dK/dV kernel would run
# beside the Triton dQ, a backward no plan replays, and that was not timed here (a review's two
# quick runs saw it slower with the host, faster on the device). Measured on the H200
# (twenty-ninth session, bench/attention_mid_calls.py
# --cases smallpow, bf16, three rounds, b4 h32 s512 causal / not causal and b8 h32 s256 causal,
# device µs, the one-launch path / this one / cuDNN): forward+backward hd96 148 / 133 / 137, 179 /
# 156 / 156, 114 / 106 / 104; hd128 178 / 144 / 148, 211 / 169 / 171, 143 / 120 / 120; hd144 318 /
# 225 / 250; hd160 347 / 230 / 257; hd192 383 / 247 / 264, 527 / 332 / 369; hd256 460 / 309 / 305,
# 635 / 424 / 436, 325 / 244 / 246; forward alone (the Triton forward / the Gluon one / cuDNN) hd96
# 37 / 29 / 32, hd128 49 / 32 / 32, 39 / 27 / 23, hd256 82 / 53 / 54. Its cost is the host's: the
# Gluon backward's replay (attention_plan._SummingGluonBackward: two launches, seven descriptors,
# dQ converted) took about 100 µs more host time a forward+backward than the one-launch backward's
# (hd96-128: 344-434 µs against 225-283, cuDNN's 244-335), so in fewer scores, where a call is all
# host time, the one-launch path stays. Below 96 the one-launch path was level or faster on the
# device (hd32 1.28-1.39x cuDNN against 1.15-1.26; hd48 0.92-1.03 against 0.95-1.00; hd64 and 80
# level causal, 0.94 against 0.99-1.01 not causal; the training pass's call, hd80 b4 s256 causal,
# 51 against 56 µs) and cheaper on the host. Larger calls (--cases smallpow2, before / this path
# / cuDNN): hd128 b32 h32 s256 causal 506 / 413 / 410 µs, hd256 1063 / 868 / 879, hd128 b6 s512
# causal 235 / 208 / 206; but hd96 b64 s256 not causal 747 / 786 / 768 (its Triton backward on the
# 64 + 32 split stays there), and calls from 1024 keys past the small ones were not measured.
# At 2^27 scores and 256 keys (--cases smallpow3, two rounds, before / this path / cuDNN): hd128 b64
# causal 984 / 793 / 794, not causal 1053 / 881 / 878, hd192 causal 1720 / 1300 / 1470, hd256 not
# causal 2603 / 2016 / 2142; more scores than that there by extension.
SMALL_CALLS_LONG_PATH_MIN_HEAD_DIM = 96
SMALL_CALLS_LONG_PATH_MIN_SCORES = 2 ** 24
SHORT_CALLS_LONG_PATH_MIN_HEAD_DIM = 128
# The Triton kernels take rows as 16-byte aligned where every stride of their tensors but the
# last is a multiple of this many elements (_row_align, _aligned); the delta kernel zeros dQ's
# float32 sums wherever a backward sums dQ (attention_backward), instead of a fill kernel before
# it. 1 and False: the kernels as before the twenty-eighth session (benches' A/B,
# bench/attention_aligned_rows.py).
ALIGNED_ROW_ELEMENTS = 8
DELTA_ZEROES_DQ_SUM = True


def select_config(capability: tuple[int, int] | None, head_dim: int, seq_k: int | None = None,
                  scores: int | None = None, backward: bool = False, deterministic: bool = False) -> AttentionConfig:
    """The tiles for a GPU of ``capability`` (None: Triton's CPU interpreter) and ``head_dim``;
    ``seq_k`` (keys per head; None: long) picks the descriptor kernels and the Gluon ones or not on
    sm90, and with ``scores`` (batch x heads x seq_q x seq_k; None: large) the one-launch backward
    or not, and the Gluon backward below GLUON_MIN_SEQ keys or not (but from UNPADDED_GLUON_MIN_SEQ
    keys head dims the pointer kernels would pad take the long calls' path whatever ``scores``, and
    wider ones from SMALL_CALLS_LONG_PATH_MIN_SCORES unless ``deterministic``: _long_path_from_256_keys);
    ``backward``: the call will run a backward (FUSED_BACKWARD_MAX_SCORES_WITH_GRAD)."""
    limit = (FUSED_BACKWARD_MAX_SCORES_WITH_GRAD if backward and head_dim in FUSED_BACKWARD_WITH_GRAD_HEAD_DIMS
             else FUSED_BACKWARD_MAX_SCORES)
    small_call = (scores is not None and scores <= limit
                  and seq_k is not None and seq_k <= FUSED_BACKWARD_MAX_SEQ)
    if (seq_k is not None and seq_k >= UNPADDED_GLUON_MIN_SEQ
            and _long_path_from_256_keys(capability, head_dim, seq_k, scores, small_call, deterministic)):
        return _select_config(capability, head_dim, True, False, True, True, True)
    many_scores = (seq_k is not None and seq_k >= GLUON_MANY_SCORES_MIN_SEQ_AT.get(head_dim, GLUON_MANY_SCORES_MIN_SEQ)
                   and (scores is None or scores >= GLUON_MANY_SCORES))
    # The Gluon forward outside the small calls proper (FUSED_BACKWARD_MAX_SCORES_WITH_GRAD's band
    # included).
    small_forward = small_call and scores <= FUSED_BACKWARD_MAX_SCORES
    return _select_config(capability, head_dim,
                          seq_k is None or seq_k >= DESCRIPTOR_MIN_SEQ
                          or (seq_k >= DESCRIPTOR_MIN_SEQ_LARGE_CALLS and not small_call),
                          small_call, seq_k is None or seq_k >= GLUON_MIN_SEQ or many_scores,
                          seq_k is None or seq_k >= GLUON_WIDE_MIN_SEQ or many_scores,
                          seq_k is None or (seq_k >= GLUON_FORWARD_MIN_SEQ and not small_forward))


_OF_Q = object()  # config_for's default capability: q's GPU's


def config_for(q: torch.Tensor, k: torch.Tensor, capability=_OF_Q, backward: bool = False,
               deterministic: bool = False) -> AttentionConfig:
    """select_config for these inputs ((batch, heads, seq, head_dim) q, k); ``capability``
    defaults to q's GPU's (remembered per device, as every call asks; None on the CPU)."""
    if capability is _OF_Q:
        capability = _device_capability(q)
    return select_config(capability, q.shape[-1], k.shape[2], q.shape[0] * q.shape[1] * q.shape[2] * k.shape[2],
                         backward, deterministic)


def _long_path_from_256_keys(capability, head_dim: int, seq_k: int, scores: int | None, small_call: bool,
                             deterministic: bool = False) -> bool:
    """Whether a call of ``seq_k`` keys (at least UNPADDED_GLUON_MIN_SEQ) and ``scores`` (None:
    many) takes the path of long calls whatever its size: at head dims the pointer kernels pad;
    and on sm90 with ``deterministic`` False, in 2^24 scores or more (SMALL_CALLS_LONG_PATH_MIN_SCORES),
    ``small_call``s (select_config's: the one-launch backward's calls) from head_dim 96 and larger
    calls under FUSED_BACKWARD_MAX_SEQ keys from 128."""
    if _pads_on_pointers(capability, head_dim):
        return True
    if (deterministic or capability is None or _architecture_family(capability) != "sm90"
            or head_dim < SMALL_CALLS_LONG_PATH_MIN_HEAD_DIM
            or (scores is not None and scores < SMALL_CALLS_LONG_PATH_MIN_SCORES)):
        return False
    return small_call or (head_dim >= SHORT_CALLS_LONG_PATH_MIN_HEAD_DIM and seq_k < FUSED_BACKWARD_MAX_SEQ)


@functools.lru_cache(maxsize=None)
def _pads_on_pointers(capability, head_dim: int) -> bool:
    """Whether head_dim runs zero-padded to a power of two on the pointer kernels (40, 72, 136, ...:
    head_dim_slices) on a Hopper GPU of ``capability``; False elsewhere (None: the interpreter)."""
    if capability is None or _architecture_family(capability) != "sm90":
        return False
    return padded_width(head_dim, _ARCH_CONFIGS["sm90"][_bucket(capability, head_dim)]) != head_dim


@functools.lru_cache(maxsize=None)
def _select_config(capability, head_dim: int, long_sequence: bool, small_call: bool = False,
                   gluon_sequence: bool = False, wide_sequence: bool = False,
                   forward_sequence: bool = False) -> AttentionConfig:
    # Remembered: asked on every call (configs are frozen, so sharing them is safe).
    if capability is None:
        return _INTERPRETER_CONFIG
    family = _architecture_family(capability)
    bucket = _bucket(capability, head_dim)
    config = _ARCH_CONFIGS[family][bucket]
    if (family == "sm90" and long_sequence
            and (padded_width(head_dim, config) != head_dim or head_dim == 256)):
        config = dataclasses.replace(config, tma=HOST_DESCRIPTORS)
    if family == "sm90" and small_call:
        config = dataclasses.replace(config, fused_backward=True)
    if family == "sm90" and forward_sequence and head_dim >= GLUON_FORWARD_MIN_HEAD_DIM:
        config = dataclasses.replace(config, gluon_forward=True)
    # The 256 bucket's Gluon backward from GLUON_WIDE_MIN_SEQ keys, the others' from GLUON_MIN_SEQ
    # (both from GLUON_MANY_SCORES_MIN_SEQ in calls of GLUON_MANY_SCORES scores).
    if family == "sm90" and (wide_sequence if bucket == 256 else gluon_sequence):
        if bucket in GLUON_BACKWARD_BUCKETS and (bucket != 256 or head_dim >= GLUON_BACKWARD_MIN_WIDE_HEAD_DIM):
            config = dataclasses.replace(config, gluon_backward=True)
        if head_dim in GLUON_SUMMED_DQ_HEAD_DIMS or bucket in GLUON_SUMMED_DQ_BUCKETS:
            config = dataclasses.replace(config, gluon_atomic_dq=True)
    return config


def _bucket(capability: tuple[int, int], head_dim: int) -> int:
    by_width = _ARCH_CONFIGS[_architecture_family(capability)]
    # The 64+16 / 64+32 split head dims (80, 96) do less work per tile than 128 and were
    # measured to want other tiles on sm90; elsewhere they share the <= 128 entry.
    return 64 if head_dim <= 64 else 96 if head_dim <= 96 and 96 in by_width else \
        128 if head_dim <= 128 else 256


def _autotuned_or_guessed(q, k, v, causal: bool, softmax_scale: float, capability, head_dim: int,
                          backward: bool = False, deterministic: bool = False) -> AttentionConfig:
    """The table's tiles; on a GPU family never measured here, the fastest of them and a few
    neighbours, tuned at first use and cached (attention_autotune.py)."""
    guess = config_for(q, k, capability, backward, deterministic)
    if capability is None:
        return guess
    from . import attention_autotune as autotune

    if (_architecture_family(capability) in autotune.MEASURED_FAMILIES or not autotune.enabled()
            or torch.cuda.is_current_stream_capturing()):
        return guess
    key = autotune.cache_key(torch.cuda.get_device_name(q.device), capability, triton.__version__,
                             _bucket(capability, head_dim), q.dtype, causal, q.shape[1] != k.shape[1])
    with torch.enable_grad():
        return autotune.tuned(key, guess, autotune.timer_for(q, k, v, causal, softmax_scale))


def _next_power_of_2(value: int) -> int:
    return 1 << (value - 1).bit_length()


def head_dim_slices(head_dim: int, split: bool = True, tma: bool = False) -> tuple[int, int, bool]:
    """(main width, tail width, has tail); without a tail, main is head_dim padded to the next
    power of two (its extra columns masked, or zero-filled by the copy engine).

    Pointer kernels split only when the remainder after the largest power of two is itself a
    power of two of at least 16 (the smallest tl.dot width), so that neither slice needs a
    column mask: 48 = 32+16, 80 = 64+16, 96 = 64+32, 144 = 128+16, 160 = 128+32, 192 = 128+64.
    A partially masked tail (40 = 32+16 with 8 columns masked, also 72, 88, 136, 152) was seen
    on an H200 with Triton 3.6 to make the compiled forward read shared memory out of bounds
    (compute-sanitizer: invalid __shared__ read inside a reduction) or return wrong values,
    while the padded form of the same head dims passed; so those head dims are padded.

    Through tensor descriptors (``tma``) a partial tail needs no mask at all (the copy engine
    zero-fills the columns past head_dim), so the tail is the remainder rounded up to a power of
    two whenever that is narrower than padding and the main slice is at least 64 wide: 72 =
    64+16 (80 wide instead of 128), 88 = 64+32, 136 = 128+16, 152 = 128+32, 168..184 = 128+64
    (192 instead of 256). Measured on the H200 (docs/benchmarks.md, 2026-11-23): hd72 split ran
    forward+backward in 4.42 ms against 6.23 zero-filled to 128; hd40 as 32+16 took 3.51 ms
    against 3.01 zero-filled to 64 (32- and 16-wide products waste the tensor cores).
    """
    padded = _next_power_of_2(head_dim)
    main = padded if padded == head_dim else padded // 2
    remainder = head_dim - main
    if main == head_dim or not split:
        return padded, MIN_DOT_WIDTH, False
    if tma:
        tail = max(MIN_DOT_WIDTH, _next_power_of_2(remainder))
        if main >= SPLIT_MIN_MAIN and main + tail < padded:
            return main, tail, True
        return padded, MIN_DOT_WIDTH, False
    if remainder >= MIN_DOT_WIDTH and remainder == _next_power_of_2(remainder):
        return main, remainder, True
    return padded, MIN_DOT_WIDTH, False


# ----------------------------------------------------------------------------------------------
# Validation
# ----------------------------------------------------------------------------------------------


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


_CAPABILITIES: dict[int, tuple[int, int]] = {}


def _capability(device: torch.device) -> tuple[int, int]:
    """torch.cuda.get_device_capability, remembered per device: it is asked on every call, and
    at the training pass's small shape every microsecond of host time shows."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _CAPABILITIES:
        _CAPABILITIES[index] = torch.cuda.get_device_capability(index)
    return _CAPABILITIES[index]


def _device_capability(tensor: torch.Tensor) -> tuple[int, int] | None:
    if tensor.device.type == "cuda":
        return _capability(tensor.device)
    return None


def validate_inputs(q, k, v, causal: bool, softmax_scale) -> None:
    """Raise TypeError/ValueError with a message that names the problem, before any launch."""
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"flash_attention: {name} must be a torch.Tensor, got {type(tensor).__name__}")
        if tensor.dim() != 4:
            raise ValueError(f"flash_attention: {name} must be 4-D (batch, heads, seq, head_dim), "
                             f"got shape {tuple(tensor.shape)}")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"flash_attention: q, k, v must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if q.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"flash_attention: dtype {q.dtype} is not supported; use torch.float16 "
                        f"or torch.bfloat16")
    if not (q.device == k.device == v.device):
        raise ValueError(f"flash_attention: q, k, v are on different devices "
                         f"({q.device}, {k.device}, {v.device})")
    if q.device.type == "cuda":
        capability = _capability(q.device)
        if capability < (7, 5):
            raise ValueError(f"flash_attention: compute capability {capability[0]}.{capability[1]} "
                             f"is not supported; it needs sm75 (Turing) or newer")
        if q.dtype == torch.bfloat16 and capability < (8, 0):
            raise TypeError(f"flash_attention: bfloat16 needs compute capability 8.0 (Ampere) or "
                            f"newer; this GPU is sm{capability[0]}{capability[1]}. Use float16.")
    elif not _interpreting():
        raise ValueError(f"flash_attention: tensors must be on a CUDA device (got {q.device}); "
                         f"on the CPU only Triton's interpreter (TRITON_INTERPRET=1) can run it")
    batch, num_heads, seq_q, head_dim = q.shape
    if k.shape != v.shape:
        raise ValueError(f"flash_attention: k and v shapes differ: {tuple(k.shape)} vs {tuple(v.shape)}")
    kv_batch, num_kv_heads, seq_k, kv_head_dim = k.shape
    if kv_batch != batch:
        raise ValueError(f"flash_attention: batch of q ({batch}) and k/v ({kv_batch}) differ")
    if kv_head_dim != head_dim:
        raise ValueError(f"flash_attention: head_dim of q ({head_dim}) and k/v ({kv_head_dim}) differ")
    if head_dim % 8 != 0 or not MIN_HEAD_DIM <= head_dim <= MAX_HEAD_DIM:
        raise ValueError(f"flash_attention: head_dim {head_dim} is not supported; it must be a "
                         f"multiple of 8 from {MIN_HEAD_DIM} to {MAX_HEAD_DIM}")
    if num_kv_heads == 0 or num_heads % num_kv_heads != 0:
        raise ValueError(f"flash_attention: the {num_kv_heads} key/value heads must divide the "
                         f"{num_heads} query heads (grouped-query attention)")
    if batch == 0 or num_heads == 0 or seq_q == 0 or seq_k == 0:
        raise ValueError(f"flash_attention: empty input, q {tuple(q.shape)}, k {tuple(k.shape)}")
    if causal and seq_q != seq_k:
        raise ValueError(f"flash_attention: causal attention needs q and k of the same length "
                         f"(got {seq_q} and {seq_k}); pass causal=False for cross-attention")
    if softmax_scale is not None and not (isinstance(softmax_scale, (int, float))
                                          and math.isfinite(softmax_scale) and softmax_scale > 0):
        raise ValueError(f"flash_attention: softmax_scale must be a positive finite number, "
                         f"got {softmax_scale!r}")


# ----------------------------------------------------------------------------------------------
# Launchers
# ----------------------------------------------------------------------------------------------


def _slice_constants(head_dim: int, config: AttentionConfig) -> dict:
    d_main, d_tail, has_tail = head_dim_slices(head_dim, config.split_head_dim, config.tma != POINTERS)
    return dict(head_dim=head_dim, D_MAIN=d_main, D_TAIL=d_tail, MAIN_PADDED=d_main > head_dim,
                HAS_TAIL=has_tail, TAIL_PADDED=has_tail and d_main + d_tail > head_dim)


def _descriptor_ready(tensor: torch.Tensor) -> bool:
    """The copy engine needs a 16-byte aligned base, 16-byte multiples between rows (and between
    the batches and heads a descriptor's base moves by) and a contiguous last dimension."""
    if tensor.stride(-1) != 1 or tensor.data_ptr() % 16:
        return False
    itemsize = tensor.element_size()
    return all(size == 1 or (stride * itemsize) % 16 == 0
               for size, stride in zip(tensor.shape[:-1], tensor.stride()[:-1]))


def tensor_descriptors_usable(mode: int, *tensors: torch.Tensor) -> bool:
    """Whether the descriptor kernels (``mode``: DEVICE_ or HOST_DESCRIPTORS) can run on these
    tensors here: Hopper (sm90; later architectures were never run here) or Triton's
    interpreter, a Triton that has that kind of descriptor (3.4+), descriptor-ready layouts."""
    if mode == DEVICE_DESCRIPTORS and not hasattr(tl, "make_tensor_descriptor"):
        return False
    if mode == HOST_DESCRIPTORS and _HostDescriptor is None:
        return False
    first = tensors[0]
    if first.device.type == "cuda":
        if _interpreting() or _capability(first.device)[0] != 9:
            return False
    elif not _interpreting():
        return False
    return all(_descriptor_ready(tensor) for tensor in tensors)


def usable_config(config: AttentionConfig, *tensors: torch.Tensor) -> AttentionConfig:
    """``config``, or the same tiles on the pointer kernels where descriptors cannot be used."""
    if config.tma != POINTERS and not tensor_descriptors_usable(config.tma, *tensors):
        return dataclasses.replace(config, tma=POINTERS)
    return config


def _host_descriptors(tensor: torch.Tensor, block_rows: int, d_main: int, d_tail: int,
                      has_tail: bool) -> tuple:
    """(main, tail) host-side descriptors over a (batch, heads, seq, head_dim) tensor, blocks of
    one head's block_rows rows. A size-1 dimension's stride is never stepped, but the copy
    engine still wants it 16-byte aligned: it gets the contiguous one."""
    shape, strides = list(tensor.shape), list(tensor.stride())
    for dim in (2, 1, 0):
        if shape[dim] == 1:
            strides[dim] = strides[dim + 1] * shape[dim + 1]
    main = _HostDescriptor(tensor, shape, strides, [1, 1, block_rows, d_main])
    tail = _HostDescriptor(tensor, shape, strides, [1, 1, block_rows, d_tail]) if has_tail else main
    return main, tail


def _descriptor_arguments(config: AttentionConfig, head_dim: int, *tensor_rows) -> list:
    """The kernels' *_MAIN_DESC, *_TAIL_DESC arguments for (tensor, block rows) pairs: host
    descriptors, or None where the kernel does not read them. (Separate arguments: Triton 3.6's
    launcher cannot pass descriptors inside a tuple, seen failing on the H200.)"""
    if config.tma != HOST_DESCRIPTORS:
        return [None] * (2 * len(tensor_rows))
    d_main, d_tail, has_tail = head_dim_slices(head_dim, config.split_head_dim, True)
    arguments = []
    for tensor, block_rows in tensor_rows:
        arguments.extend(_host_descriptors(tensor, block_rows, d_main, d_tail, has_tail))
    return arguments


def _readable(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor``, or a contiguous copy of it where its layout is one the kernels were seen to
    fault on. On the H200 (Triton 3.6, 2026-11-23, bench/results/attention-h200-2026-11-23-s6-
    layouts.json) hd80 fp16 inputs ended in "an illegal memory access", which leaves the CUDA
    context unusable, when their data started 2 or 8 bytes past a 16-byte boundary (a view at an
    odd offset into a larger buffer) and when their rows were 84 or 88 elements apart (a slice
    ``x[..., :80]`` of a wider last dimension), while (batch, seq, heads, head_dim) views
    transposed to (batch, heads, seq, head_dim) and a transposed last dimension ran right. The
    cause inside the kernels was not found; the rule copies what is not (16-byte aligned start,
    contiguous head_dim, rows a multiple of 16 elements apart), so the copied transposed layout
    costs one read of the input. Only for the pointer kernels (the descriptor kernels run only on
    descriptor-ready layouts, e.g. contiguous hd72 rows 144 bytes apart, which must not be
    copied at every call). Contiguous inputs never copy: every head_dim the pointer kernels take
    unpadded (32, 48, 64, 80, 96, 128, 144, ...) is a multiple of 16, the others are padded."""
    if tensor.data_ptr() % 16 or tensor.stride(-1) != 1 or (tensor.shape[-2] > 1 and tensor.stride(-2) % 16):
        return tensor.clone(memory_format=torch.contiguous_format)
    return tensor


def _elsewhere(tensor: torch.Tensor) -> bool:
    """On a GPU other than the current one. Triton launches on the current device, so tensors
    on cuda:1 while cuda:0 is current (a model moved with .to("cuda:1"), no set_device) would be
    read through pointers of another device; SDPA and every aten op switch devices for the
    caller, and so do the launchers here."""
    return tensor.is_cuda and tensor.device.index != torch.cuda.current_device()


def _cdiv(a: int, b: int) -> int:
    # Not triton.cdiv: it is a @triton.jit function, called from Python through
    # JITFunction.__call__ (2 µs a call on the CPU box, 10 µs under cProfile on the H200).
    return -(-a // b)


def _prepare(config: AttentionConfig, tensor: torch.Tensor) -> None:
    if config.tma == DEVICE_DESCRIPTORS and tensor.device.type == "cuda":
        use_torch_scratch()  # their global scratch (the interpreter needs none)


def attention_forward(q, k, v, causal: bool, softmax_scale: float, config: AttentionConfig):
    """Launch the forward; returns (out, lse) where lse is the base-2 log-sum-exp of the scaled
    scores, float32, shape (batch * heads, seq_q)."""
    if _elsewhere(q):
        with torch.cuda.device(q.device):
            return attention_forward(q, k, v, causal, softmax_scale, config)
    batch, num_heads, seq_q, head_dim = q.shape
    num_kv_heads, seq_k = k.shape[1], k.shape[2]
    # Decided on the inputs alone: the outputs allocated below are contiguous and aligned, hence
    # descriptor-ready whenever the inputs are (head_dim is a multiple of 8: rows of 16 bytes).
    if config.gluon_forward and _gluon_runs(q, k, v):
        return attention_gluon.attention_forward(q, k, v, causal, softmax_scale)
    config = usable_config(config, q, k, v)
    if config.tma == POINTERS:  # the descriptor kernels take only descriptor-ready layouts
        q, k, v = _readable(q), _readable(k), _readable(v)
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    lse = torch.empty((batch * num_heads, seq_q), device=q.device, dtype=torch.float32)
    _prepare(config, q)
    tiles = config.forward
    grid = (_cdiv(seq_q, tiles.block_m), batch * num_heads)
    fast(_attention_forward_kernel)[grid](
        q, k, v, out, lse,
        *_descriptor_arguments(config, head_dim, (q, tiles.block_m), (k, tiles.block_n),
                               (v, tiles.block_n), (out, tiles.block_m)),
        *q.stride(), *k.stride(), *v.stride(), *out.stride(),
        num_heads, num_heads // num_kv_heads, seq_q, seq_k, softmax_scale * LOG2_E,
        CAUSAL=causal, BLOCK_M=tiles.block_m, BLOCK_N=tiles.block_n,
        CHECK_M=seq_q % tiles.block_m != 0, CHECK_N=seq_k % tiles.block_n != 0,
        INTERPRETED=_interpreting(), TMA=config.tma, ROW_ALIGN=_row_align(q, k, v, out),
        num_warps=tiles.num_warps, num_stages=tiles.num_stages,
        **_slice_constants(head_dim, config),
    )
    return out, lse


def _gluon_runs(q, k, v) -> bool:
    """The Gluon forward can run these inputs here: a Hopper GPU, not the interpreter, layouts
    TMA reads in place."""
    return _gluon_device(q) and attention_gluon.usable(q, k, v)


def _gluon_backward_runs(grad_out, q, k, v) -> bool:
    """The Gluon dK/dV kernel can run these inputs here (see _gluon_runs)."""
    return _gluon_device(q) and attention_gluon_backward.usable(q, k, v, grad_out)


def _gluon_device(q) -> bool:
    # Gluon's kernels are written for sm90 and have no interpreter.
    return q.is_cuda and not _interpreting() and _capability(q.device)[0] == 9


def attention_backward(grad_out, q, k, v, out, lse, causal: bool, softmax_scale: float,
                       config: AttentionConfig, deterministic: bool = True):
    """(dq, dk, dv). ``deterministic=False`` lets a config with ``atomic_dq`` (the Triton dK/dV
    kernel) or ``gluon_atomic_dq`` (the Gluon one, where it runs) sum dQ in float32 inside the
    dK/dV kernel (the sums' order, hence the last bits, vary run to run)."""
    if _elsewhere(q):
        with torch.cuda.device(q.device):
            return attention_backward(grad_out, q, k, v, out, lse, causal, softmax_scale, config, deterministic)
    batch, num_heads, seq_q, head_dim = q.shape
    num_kv_heads, seq_k = k.shape[1], k.shape[2]
    kv_group_size = num_heads // num_kv_heads
    grad_out = grad_out.contiguous()
    config = usable_config(config, q, k, v, grad_out, out)  # dk, dv below: as in attention_forward
    if config.tma == POINTERS:  # the descriptor kernels take only descriptor-ready layouts
        grad_out, q, k, v, out = _readable(grad_out), _readable(q), _readable(k), _readable(v), _readable(out)
    qk_scale = softmax_scale * LOG2_E
    # Which kernels run: the one-launch backward where its config says so (not with atomic_dq);
    # else the Gluon kernel where it runs, summing dQ (gluon_atomic_dq, deterministic=False) or
    # not (gluon_backward); else the Triton one.
    fused = config.fused_backward and not (config.atomic_dq and not deterministic) and config.tma == POINTERS
    may_sum_dq = config.gluon_atomic_dq and not deterministic and attention_gluon_backward.sums_dq(head_dim)
    gluon_backward = not fused and (config.gluon_backward or may_sum_dq) and _gluon_backward_runs(grad_out, q, k, v)
    gluon_dq = may_sum_dq and gluon_backward
    atomic_dq = config.atomic_dq and not deterministic and not gluon_backward
    interpreted = _interpreting()
    # The dQ sums go through device-side descriptors on Hopper whatever the loads use
    # (Triton's interpreter has no descriptor reduce-add: element atomics there).
    tma_reduce = atomic_dq and config.tma != POINTERS and not interpreted
    _prepare(dataclasses.replace(config, tma=DEVICE_DESCRIPTORS) if tma_reduce else config, q)
    slices = _slice_constants(head_dim, config)
    # dQ's float32 sums are zeroed by the delta kernel, which runs first wherever they are summed
    # (delta_in_dq is not taken then).
    zeroed_by_delta = DELTA_ZEROES_DQ_SUM and (atomic_dq or gluon_dq)
    if atomic_dq:
        dq_sum = (torch.empty if zeroed_by_delta else torch.zeros)((batch, num_heads, seq_q, head_dim),
                                                                   device=q.device, dtype=torch.float32)
    elif gluon_dq:
        dq_sum = attention_gluon_backward.dq_sum_buffer(q, zeroed=not zeroed_by_delta)
    else:
        dq = torch.empty_like(q, memory_format=torch.contiguous_format)

    if fused:
        dk = torch.empty_like(k, memory_format=torch.contiguous_format)
        dv = torch.empty_like(v, memory_format=torch.contiguous_format)
        _launch_fused_backward(config, grad_out, q, k, v, out, lse, dq, dk, dv, causal, qk_scale,
                               softmax_scale, interpreted, slices)
        return dq, dk, dv
    delta = torch.empty_like(lse)
    declare_scratch(delta)  # written whole by the delta kernel or the dQ kernel first (plans)
    delta_in_dq = config.delta_in_dq and not atomic_dq and not gluon_dq
    if delta_in_dq:
        dq = _launch_dq(config, grad_out, q, k, v, out, lse, delta, dq, causal, qk_scale,
                        softmax_scale, interpreted, slices, compute_delta=True)
    else:
        launch_delta(out, grad_out, delta, dq_sum if zeroed_by_delta else None)
    if gluon_backward:
        dk, dv = attention_gluon_backward.backward_dkdv(grad_out, q, k, v, lse, delta, causal, softmax_scale,
                                                        dq_sum if gluon_dq else None)
        if gluon_dq:
            return dq_sum.view(q.shape).to(q.dtype), dk, dv
        if not delta_in_dq:
            dq = _launch_dq(config, grad_out, q, k, v, out, lse, delta, dq, causal, qk_scale,
                            softmax_scale, interpreted, slices, compute_delta=False)
        return dq, dk, dv
    dk = torch.empty_like(k, memory_format=torch.contiguous_format)
    dv = torch.empty_like(v, memory_format=torch.contiguous_format)
    tiles = config.backward_dkdv
    fast(_attention_backward_dkdv_kernel)[(_cdiv(seq_k, tiles.block_n), batch * num_kv_heads)](
        q, k, v, grad_out, dk, dv, dq_sum if atomic_dq else dk, lse, delta,
        *_descriptor_arguments(config, head_dim, (q, tiles.block_m), (k, tiles.block_n),
                               (v, tiles.block_n), (grad_out, tiles.block_m), (dk, tiles.block_n),
                               (dv, tiles.block_n)),
        *q.stride(), *k.stride(), *v.stride(), *grad_out.stride(), *dk.stride(), *dv.stride(),
        num_heads, num_kv_heads, kv_group_size, seq_q, seq_k, qk_scale, softmax_scale,
        CAUSAL=causal, BLOCK_M=tiles.block_m, BLOCK_N=tiles.block_n,
        CHECK_M=seq_q % tiles.block_m != 0, CHECK_N=seq_k % tiles.block_n != 0,
        INTERPRETED=interpreted, TMA=config.tma, ATOMIC_DQ=atomic_dq, TMA_REDUCE=tma_reduce,
        ROW_ALIGN=_row_align(q, k, v, grad_out, dk, dv),
        num_warps=tiles.num_warps, num_stages=tiles.num_stages, **slices,
    )
    if atomic_dq:
        return dq_sum.to(q.dtype), dk, dv
    if not delta_in_dq:
        dq = _launch_dq(config, grad_out, q, k, v, out, lse, delta, dq, causal, qk_scale,
                        softmax_scale, interpreted, slices, compute_delta=False)
    return dq, dk, dv


def _row_align(*tensors: torch.Tensor) -> int:
    """The Triton kernels' ROW_ALIGN for a launch on these (..., head_dim) tensors: 1 where head_dim
    and every stride but the last are multiples of 16 (Triton's specialization proves 16-byte
    rows itself: the kernels compile as they did before ROW_ALIGN) or where ALIGNED_ROW_ELEMENTS
    does not divide them all (nothing to prove); else ALIGNED_ROW_ELEMENTS."""
    values = [tensors[0].shape[-1]] + [stride for tensor in tensors for stride in tensor.stride()[:-1]]
    if all(value % 16 == 0 for value in values):
        return 1
    return ALIGNED_ROW_ELEMENTS if all(value % ALIGNED_ROW_ELEMENTS == 0 for value in values) else 1


def launch_delta(out: torch.Tensor, grad_out: torch.Tensor, delta: torch.Tensor,
                 dq_sum: torch.Tensor | None = None) -> None:
    """delta = rowsum(out * grad_out) into ``delta`` (lse's shape), one launch; zeros into
    ``dq_sum`` too where given (contiguous float32, q's number of elements: the sums the dK/dV
    kernel adds dQ into)."""
    batch, num_heads, seq_q, head_dim = out.shape
    if head_dim % 8:  # the kernel takes head_dim as a multiple of 8 (validate_inputs' rule)
        raise ValueError(f"head_dim must be a multiple of 8, got {head_dim}")
    block = 64 if out.is_cuda else 16
    fast(_backward_delta_kernel)[(_cdiv(seq_q, block), batch * num_heads)](
        out, grad_out, delta, delta if dq_sum is None else dq_sum, *out.stride(), *grad_out.stride(),
        num_heads, seq_q, head_dim=head_dim, D_PADDED=_next_power_of_2(head_dim), BLOCK_M=block,
        ROW_ALIGN=_row_align(out, grad_out), ZERO_DQ_SUM=dq_sum is not None,
    )


def _launch_fused_backward(config, grad_out, q, k, v, out, lse, dq, dk, dv, causal, qk_scale,
                           softmax_scale, interpreted, slices):
    """dq, dk and dv filled by one launch of the fused backward kernel."""
    batch, num_heads, seq_q, _ = q.shape
    num_kv_heads, seq_k = k.shape[1], k.shape[2]
    dkdv, dq_tiles = config.backward_dkdv, config.backward_dq
    key_blocks = _cdiv(seq_k, dkdv.block_n)
    query_blocks = _cdiv(seq_q, dq_tiles.block_m)
    dkdv_programs = key_blocks * batch * num_kv_heads
    fast(_attention_backward_fused_kernel)[(dkdv_programs + query_blocks * batch * num_heads,)](
        q, k, v, out, grad_out, dq, dk, dv, lse,
        *q.stride(), *k.stride(), *v.stride(), *out.stride(), *grad_out.stride(), *dq.stride(),
        *dk.stride(), *dv.stride(),
        num_heads, num_kv_heads, num_heads // num_kv_heads, seq_q, seq_k, qk_scale, softmax_scale,
        key_blocks, query_blocks, dkdv_programs,
        CAUSAL=causal, DKDV_BLOCK_M=dkdv.block_m, DKDV_BLOCK_N=dkdv.block_n,
        DQ_BLOCK_M=dq_tiles.block_m, DQ_BLOCK_N=dq_tiles.block_n,
        DKDV_CHECK_M=seq_q % dkdv.block_m != 0, DKDV_CHECK_N=seq_k % dkdv.block_n != 0,
        DQ_CHECK_M=seq_q % dq_tiles.block_m != 0, DQ_CHECK_N=seq_k % dq_tiles.block_n != 0,
        INTERPRETED=interpreted, ROW_ALIGN=_row_align(q, k, v, out, grad_out, dq, dk, dv),
        num_warps=dkdv.num_warps, num_stages=dkdv.num_stages, **slices,
    )


def _launch_dq(config, grad_out, q, k, v, out, lse, delta, dq, causal, qk_scale, softmax_scale,
               interpreted, slices, compute_delta):
    """The dQ kernel; with ``compute_delta`` it also writes ``delta`` (read, else)."""
    batch, num_heads, seq_q, head_dim = q.shape
    num_kv_heads, seq_k = k.shape[1], k.shape[2]
    tiles = config.backward_dq
    fast(_attention_backward_dq_kernel)[(_cdiv(seq_q, tiles.block_m), batch * num_heads)](
        q, k, v, grad_out, dq, lse, delta, out,
        *_descriptor_arguments(config, head_dim, (q, tiles.block_m), (k, tiles.block_n),
                               (v, tiles.block_n), (grad_out, tiles.block_m), (dq, tiles.block_m)),
        *q.stride(), *k.stride(), *v.stride(), *grad_out.stride(), *dq.stride(), *out.stride(),
        num_heads, num_heads // num_kv_heads, seq_q, seq_k, qk_scale, softmax_scale,
        CAUSAL=causal, BLOCK_M=tiles.block_m, BLOCK_N=tiles.block_n,
        CHECK_M=seq_q % tiles.block_m != 0, CHECK_N=seq_k % tiles.block_n != 0,
        INTERPRETED=interpreted, TMA=config.tma, COMPUTE_DELTA=compute_delta,
        ROW_ALIGN=_row_align(q, k, v, grad_out, dq, out),
        num_warps=tiles.num_warps, num_stages=tiles.num_stages, **slices,
    )
    return dq


def padded_width(head_dim: int, config: AttentionConfig) -> int:
    """The head_dim the kernels run at: head_dim itself when it is a power of two, splits into
    main + tail slices or runs on descriptors (which zero-fill), else the next power of two (the
    inputs are zero-padded to it)."""
    d_main, _, has_tail = head_dim_slices(head_dim, config.split_head_dim, config.tma != POINTERS)
    return head_dim if has_tail or config.tma != POINTERS else d_main


def _pad_head_dim(tensor: torch.Tensor, width: int) -> torch.Tensor:
    return torch.nn.functional.pad(tensor, (0, width - tensor.shape[-1]))


def _padded_forward(q, k, v, causal: bool, softmax_scale: float, config: AttentionConfig):
    """(q, k, v as the kernels ran them, out, lse, out cut back to head_dim). The Gluon forward
    reads every head_dim unpadded (TMA zero-fills past it): padding there only cost copies (hd40
    at 512 keys, b32 h32: 0.46 ms forward through flash_attention against 0.15 for the kernel on
    the unpadded inputs, thirteenth session)."""
    head_dim = q.shape[-1]
    width = head_dim if config.gluon_forward and _gluon_runs(q, k, v) else padded_width(head_dim, config)
    if width != head_dim:
        q, k, v = (_pad_head_dim(t, width) for t in (q, k, v))
    out, lse = attention_forward(q, k, v, causal, softmax_scale, config)
    return q, k, v, out, lse, (out if width == head_dim else out[..., :head_dim].contiguous())


class _Call:
    """One flash_attention call's decisions on the general path: the options and the config.
    ``forward`` runs the forward (pointer kernels: on inputs zero-padded where they need it),
    ``backward`` the backward; attention_plan.Plan, remembered per signature of the inputs, has
    the same two methods and replays what this one launched."""

    __slots__ = ("causal", "softmax_scale", "config", "deterministic", "head_dim")

    def __init__(self, causal: bool, softmax_scale: float, config: AttentionConfig, deterministic: bool,
                 head_dim: int):
        self.causal, self.softmax_scale, self.config = causal, softmax_scale, config
        self.deterministic, self.head_dim = deterministic, head_dim

    def forward(self, q, k, v):
        """(the tensors the backward needs: q, k, v as the kernels ran them, out, lse; the
        output at head_dim)."""
        q, k, v, out, lse, result = _padded_forward(q, k, v, self.causal, self.softmax_scale, self.config)
        return (q, k, v, out, lse), result

    def backward(self, grad_out, q, k, v, out, lse):
        """(dq, dk, dv) at head_dim. On the pointer kernels, head dims that neither are a power
        of two nor split (40, 72, 112, 136, ...) run zero-padded to the next power of two: zero
        columns add nothing to q k^T, and the extra gradient columns (zeros) are cut off. After
        the Gluon forward, which read them unpadded, they are padded here. Measured on the H200
        (issue 18): the in-kernel column mask (``MAIN_PADDED``) ran hd40 at 104 TFLOP/s
        forward+backward against 337 for hd64, so the copies cost far less than the masked
        loads. The descriptor kernels need neither: the copy engine zero-fills past head_dim."""
        width = padded_width(self.head_dim, self.config)
        if q.shape[-1] != width:  # the forward ran unpadded (Gluon); the pointer kernels' column masks are slow
            q, k, v, out = (_pad_head_dim(t, width) for t in (q, k, v, out))
        if q.shape[-1] != self.head_dim:
            grad_out = _pad_head_dim(grad_out, q.shape[-1])
        dq, dk, dv = attention_backward(grad_out, q, k, v, out, lse, self.causal,
                                        self.softmax_scale, self.config, self.deterministic)
        if q.shape[-1] != self.head_dim:
            dq, dk, dv = (t[..., :self.head_dim] for t in (dq, dk, dv))
        return dq, dk, dv


class _FlashAttentionFunction(torch.autograd.Function):
    """The autograd node: ``call`` (a _Call, or a remembered attention_plan.Plan) does the work."""

    @staticmethod
    def forward(ctx, q, k, v, call):
        saved, result = call.forward(q, k, v)
        ctx.save_for_backward(*saved)
        ctx.call = call
        return result

    @staticmethod
    def backward(ctx, grad_out):
        return (*ctx.call.backward(grad_out, *ctx.saved_tensors), None)


def _needs_grad(q, k, v) -> bool:
    return torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)


def _run(call, q, k, v, needs_grad: bool) -> torch.Tensor:
    if needs_grad:
        return _FlashAttentionFunction.apply(q, k, v, call)
    # Nothing to differentiate: no autograd node (its set-up is a tenth of a small call's host
    # time, and small calls are host-bound: docs/benchmarks.md).
    return call.forward(q, k, v)[1]


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True,
                    softmax_scale: float | None = None, deterministic: bool = False,
                    config: AttentionConfig | None = None) -> torch.Tensor:
    """softmax(q k^T * softmax_scale [+ causal mask]) v, differentiable in q, k and v.

    q: (batch, heads, seq_q, head_dim); k, v: (batch, kv_heads, seq_k, head_dim) with kv_heads
    dividing heads. head_dim: a multiple of 8 from 32 to 256. dtype: float16, or bfloat16 on
    sm80+. Causal attention needs seq_q == seq_k. softmax_scale defaults to 1/sqrt(head_dim).

    ``deterministic``: as in FlashAttention. True: the backward never uses atomics (dQ has its
    own programs, in its own kernel or beside dK/dV's in one, and dK/dV sum their query heads
    inside one program or in a fixed order after it), so it is bitwise reproducible. False (the default): where the
    configuration says so, dQ is summed in float32 by atomic adds inside the dK/dV kernel
    (``atomic_dq``; on Hopper from 2048 keys at head_dim 40-128 in multiples of 8, from 512 in calls
    of 2^26 scores or more (at 64 from 1024), and from 1024 keys at 136-256, the Gluon kernels' TMA
    reduce-adds: ``gluon_atomic_dq``; from 256 keys in calls of every size at the head dims the
    pointer kernels would pad, UNPADDED_GLUON_MIN_SEQ; from 256 keys in small calls of 2^24
    scores or more from head_dim 96, and in every call of 2^24 scores or more under 1024 keys from
    128, SMALL_CALLS_LONG_PATH_MIN_HEAD_DIM), which saves two of the
    backward's seven matrix products per block pair; its last bits then vary from run to run.
    ``config`` overrides the per-architecture tiles (benchmarks and tuning only).

    A call whose inputs have the signature of an earlier call (shapes, strides, dtypes, devices,
    alignment, options, config) replays the direct launches that call made on its own tensors
    (attention_plan.py; a backward only where the tensors it is handed keep their layout): small
    and mid-size calls are host-bound.
    """
    key = attention_plan.signature(q, k, v, causal, softmax_scale, deterministic, config)
    if key is not None:  # plain tensors (else validate_inputs says what is wrong, or no plan)
        needs_grad = _needs_grad(q, k, v)
        key = (key, needs_grad)  # calls that will run a backward may take other kernels
        plan = attention_plan.find(key)
        if plan is not None:
            return _run(plan, q, k, v, needs_grad)
    validate_inputs(q, k, v, causal, softmax_scale)
    if key is None:
        needs_grad = _needs_grad(q, k, v)
    head_dim = q.shape[-1]
    if softmax_scale is None:
        softmax_scale = 1.0 / math.sqrt(head_dim)
    if config is None:
        config = _autotuned_or_guessed(q, k, v, bool(causal), float(softmax_scale), _device_capability(q), head_dim,
                                       needs_grad, bool(deterministic))
    # Decided here, before padding: the pointer kernels need padded inputs where the
    # descriptor kernels do not.
    config = usable_config(config, q, k, v)
    call = _Call(bool(causal), float(softmax_scale), config, bool(deterministic), head_dim)
    # (A kernel making device-side descriptors is replayed too: launch.Replay sets Triton's
    # allocator for its scratch on the replaying thread.)
    if key is None or not q.is_cuda or not fast_launch_enabled() or attention_plan.seen(key):
        return _run(call, q, k, v, needs_grad)
    with recording() as launches:
        result = _run(call, q, k, v, needs_grad)
    attention_plan.remember(key, call, launches, q, k, v, result)
    return result


def reference_attention(q, k, v, causal: bool = True, softmax_scale: float | None = None,
                        dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Plain softmax attention in ``dtype`` (default float64), the ground truth for tests."""
    head_dim = q.shape[-1]
    if softmax_scale is None:
        softmax_scale = 1.0 / math.sqrt(head_dim)
    group = q.shape[1] // k.shape[1]
    q, k, v = (t.to(dtype) for t in (q, k, v))
    if group > 1:
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
    scores = (q @ k.transpose(-1, -2)) * softmax_scale
    if causal:
        seq_q, seq_k = scores.shape[-2:]
        visible = torch.ones(seq_q, seq_k, dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~visible, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


__all__ = ["AttentionConfig", "KernelTiles", "flash_attention", "reference_attention",
           "select_config", "config_for", "head_dim_slices", "padded_width", "validate_inputs",
           "attention_forward", "attention_backward", "tensor_descriptors_usable", "usable_config",
           "POINTERS", "DEVICE_DESCRIPTORS", "HOST_DESCRIPTORS"]
