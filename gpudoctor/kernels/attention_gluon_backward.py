"""The attention backward's dK/dV on Hopper (sm90) in Gluon, warp-specialized as the forward
(attention_gluon.py) and as FlashAttention-3's backward.

Why: the Triton dK/dV kernel is most of the backward, and its compiler waits for each tensor-core
product as soon as it issues it, as in the forward (attention_gluon.py's docstring). Each program
here owns 128 key rows of one KV head and walks every query block of every query head sharing it
(so dK/dV need no atomics and the result is reproducible, as the Triton kernel's):

- two consumer warpgroups of 64 key rows each, K and V resident in shared memory, dK and dV
  accumulated in registers. Per query block: Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ issued together;
  Pᵀ = exp2(Sᵀ·scale − lse) once the first is done; dV += Pᵀ·dO issued while dPᵀ finishes;
  dSᵀ = Pᵀ∘(dPᵀ − delta); dK += dSᵀ·Q. Pᵀ and dSᵀ stay in registers as the A operands;
- one producer warp: Q and dO blocks into two-slot rings by TMA, a slot refilled once both
  consumers have arrived on its "empty" barrier. Blocks are 64 queries, 128 at width 64
  (QUERY_ROWS). The consumers synchronise only through these
  barriers, so one's exponentials can run while the other's products do.

delta comes from a Triton kernel (attention.py) run first, dQ from the Triton dQ kernel, or with
``dq_sum`` from this kernel, split as FlashAttention-3 splits it: each warpgroup stores its dSᵀ
into one shared [128 keys x the block's queries] tile per block (dK's A operand then comes from
there, not registers), and once both halves are there computes half of dQ's columns over all 128
keys and adds them by one TMA reduce-add. The two consumers then meet at every block (the tile's
"full"/"empty" barriers) instead of running independently; where DQ_SHARE_LAG says, a block's
share is computed in the next block's step, so that each finds the other's half already there.
Loads and stores use attention_gluon's 4-D TMA descriptors: rows past a sequence's end are
zero-filled (their lse is read as +inf, so their Pᵀ is 0) and dK/dV rows past seq_k are clipped on
store.
"""

from __future__ import annotations

import functools

import torch
import triton

from . import attention_gluon
from .launch import fast

if attention_gluon.available():  # Gluon's Hopper modules, as attention_gluon imported them
    from .attention_gluon import (
        TensorDescriptor,
        fence_async_shared,
        gl,
        gluon,
        mbarrier,
        tma,
        warpgroup_mma,
        warpgroup_mma_wait,
    )

# Summing dQ in the kernel (backward_dkdv's dq_sum) goes through Triton 3.6 internals: a Triton
# without them runs the kernel without it (attention.py asks sums_dq before routing there).
try:
    from triton._C.libtriton import gluon_ir as _gluon_ir
    from triton._C.libtriton import ir as _ir
    from triton.experimental.gluon.language._core import builtin as _builtin

    SUMS_DQ = attention_gluon.available() and hasattr(_gluon_ir.GluonOpBuilder, "create_async_tma_reduce")
except ImportError:  # pragma: no cover - a Triton without Gluon, or with other internals
    SUMS_DQ = False

if SUMS_DQ:
    @_builtin
    def _tma_reduce_add(tensor_desc, coord, src, _semantic=None):
        # TMA's reduce-add of a shared-memory tile into global memory (cp.reduce.async.bulk.tensor),
        # which Gluon 3.6's hopper.tma module does not expose; its builder has the op.
        coord = _semantic._convert_to_ir_values(coord, require_i64=False)
        _semantic.builder.create_async_tma_reduce(_ir.DESCRIPTOR_REDUCE_KIND.ADD, tensor_desc.handle, coord,
                                                  src.handle)

BLOCK_N = 128  # key rows per program: two consumer warpgroups of 64
CONSUMER_ROWS = 64
BLOCK_M = 64  # query rows per block of the inner loop, but QUERY_ROWS at these widths
# Width 64 (head_dim 40-64) walks 128-query blocks, as FlashAttention-3 tiles its head_dim 64
# backward (128 x 128): Sᵀ and dPᵀ are [64 keys x 128 queries] per warpgroup (64 + 64 float32
# registers, as [64 x 64] with dK and dV of width 128), so each block's waits, barriers and
# lse/delta loads serve twice the products, and the score products run at N = 128. ptxas spills a
# few scalars in the loop there (tests/kernels/test_attention_gluon_backward.py). Measured on the
# H200 (docs/benchmarks.md, seventeenth session; bench/attention_gluon_backward_rows.py, bf16, the
# two taking turns, device µs of the dK/dV kernel with 64 / 128 rows, without and summing dQ):
# hd64 b4 h32 s1024 causal 110.7 / 97.8 and 158.9 / 155.3, not causal 168.9 / 138.6 and 248.3 /
# 221.6; s4096 causal 1199.9 / 975.6 and 1832.7 / 1749.2, not causal 2232.9 / 1745.7 and 3468.7 /
# 3084.7; GQA 4:1 1139.7 / 953.8 and 1804.3 / 1705.3; hd40 s4096 causal 1198.8 / 1015.1 and
# 1817.2 / 1758.8; hd48 b32 s512 not causal 379.1 / 328.0 and 548.8 / 503.3; level only at hd64
# b16 s512 causal (138.6 / 133.0 and 195.4 / 196.1). dK, dV and dQ came out bitwise the same.
QUERY_ROWS = {64: 128}
# Widths (head_dim rounded up to a power of two) this kernel compiles at without spills: dK and
# dV of 64 key rows at 256 would take all of a warpgroup's registers, so backward_dkdv hands width
# 256 to attention_gluon_backward_wide. Both kernels can sum dQ.
WIDTHS = (32, 64, 128)
WIDE_WIDTH = 256
# Head dims computed on fewer of a width's columns (columns: the fewest that hold head_dim): 72-96
# on 96 of width 128's (the score products contract over 64 + 32 columns, dK and dV are two
# accumulators a warpgroup, of 64 and 32 columns; dQ's shares stay 64 columns each, past head_dim
# zeros clipped on the reduce-add); 40-48 on 48 of width 64's (32 + 16) in causal calls
# (NARROW_CAUSAL_ONLY). The loads
# and tiles stay at the width, zero-filled past head_dim, so dK and dV are those of the whole
# width. As the forward's widths 48 and 96 (attention_gluon.SPLIT) and the wide kernel's
# NARROW_COLUMNS. Measured on the H200 (thirty-first session, bench/attention_gluon_backward_narrow.py,
# forward+backward device µs, settings taking turns; 128 -> 96 columns, runs 1 / 3): hd96 GQA 8:1
# s16384 -8.6 / -7.2 % (1.00 -> 1.09x cuDNN), hd72 GQA 8:1 s2048 -6.8 / -6.0 %, hd96 causal GQA 4:1
# s4096 -5.4 / -5.7 %, hd88 GQA 4:1 s512 -5.3 / -5.6 %, hd96 causal s2048 -4.9 / -5.2 %, hd88 causal
# s1024 -4.2 / -3.6 %, hd88 s8192 -4.1 / -3.5 %, hd96 causal s512 -3.6 / -3.5 %, hd72 s4096 -2.7 /
# -5.6 %, hd72 causal GQA 8:1 s16384 -2.5 / -4.6 %. 64 -> 48 columns (runs 4 / 5): causal hd48
# s2048 -3.7 / -2.7 %, hd48 s8192 -2.8 / -3.6 %, hd40 s4096 (run 5) -3.1 %, hd40 GQA 8:1 s16384
# -1.1 / -0.2 %, hd48 GQA 8:1 s512 level / level, hd48 GQA 4:1 s1024 (run 5) +0.4 %; not causal
# level (run 4: hd48 s4096 +0.4 %, hd40 GQA 8:1 s8192 and GQA 4:1 s512 -0.1 / -0.3 %). And 104-112
# on 112 of width 128's (thirty-fourth session): the score products contract over 64 + 32 + 16
# columns, dK and dV stay whole (gradient_parts). 128 -> 112 (runs 2 / 3, forward+backward device
# µs, settings taking turns): hd104 causal s16384 -3.9 / -2.6 %, hd112 GQA 4:1 s16384 -2.4 / -0.6 %
# (0.96 -> 0.99x cuDNN in run 2), hd112 causal s512 -1.8 / -1.5 %, hd112 causal s2048 +0.5 / -2.8 %,
# hd104 s8192 -3.3 / +0.4 %, hd104 GQA 8:1 s1024 +2.2 / -2.3 %, hd112 causal GQA 8:1 s8192 +0.2 /
# -1.8 %, hd112 GQA 4:1 s4096 level / -0.7 %: 1.0 / 1.5 % faster on average. With dK and dV on 112
# too (a third product 16 columns wide, run 1) it was 0.1-4.2 % slower in six of eight. Empty:
# every head_dim at its width (benches' A/B).
NARROW_COLUMNS = {64: (48,), 128: (96, 112)}
# Widths whose NARROW_COLUMNS only causal calls take (benches' A/B empty it).
NARROW_CAUSAL_ONLY = {64}
# As attention_gluon: 12 warps x 32 x 168 fit the SM's 64 K registers; setmaxnreg then moves them
# to the consumers (CONSUMER_REGISTERS) from the producer (24).
MAX_REGISTERS = 168
CONSUMER_REGISTERS = 240

# Causal programs in the order of their work, heaviest first, within groups of this many KV heads
# (0: launch order). A causal program's key block sees every query block from its diagonal on, so
# key block 0 has the most; in launch order (key blocks fastest, then heads) the last heads'
# heaviest programs start last and the GPU idles waiting for them, most with grouped-query
# attention (fewer, longer programs). Groups keep the heads in flight few. Measured on the H200
# (docs/benchmarks.md, twelfth session; bench/attention_gluon_backward_order.py, b4 h32 s4096
# causal bf16, kernel ms, fastest of 3 taking turns, launch order / groups of 8, summing dQ and
# not): hd128 2.839 / 2.827 and 1.888 / 1.873, GQA 4:1 3.016 / 2.894 and 1.887 / 1.732, GQA 8:1
# 3.499 / 3.287 and 2.104 / 1.894, hd64 1.826 / 1.815 and 1.233 / 1.190, hd64 GQA 8:1 2.138 /
# 1.839 and 1.436 / 1.190; hd128 s16k (b1 h16) 5.345 / 5.426 and 3.589 / 3.598. The wide kernel
# keeps the launch order (attention_gluon_backward_wide.LONGEST_FIRST_HEADS).
LONGEST_FIRST_HEADS = 8
# The order of a program's query blocks in grouped-query calls (_walk's, which the wide kernel's
# walk routes too): each query head's blocks in turn (0), but in causal calls of CHUNKED_WALK_MIN_GROUP
# or more query heads a KV head from CHUNKED_WALK_MIN_KEYS keys at CHUNKED_WALK_WIDTHS, chunks of 8
# blocks, each head's part of a chunk in turn (CHUNKED_WALK: 3), so that the programs running at once
# read fewer distinct Q and dO rows. Measured on the H200 (thirty-sixth session,
# bench/attention_gluon_backward_narrow_walk.py, run 6, forward+backward device µs, settings taking
# turns; walk 0 / 1 / 3 / 4 / 5 / 0 again): hd128 causal GQA 8:1 s2048 2405 / 2296 / 2248 / 2301 /
# 2443 / 2356, s4096 fp16 4403 / 4428 / 4145 / 4122 / 4144 / 4246, s8000 7541 / 7661 / 7332 / 7518 /
# 7486 / 7418, s16384 15138 / 15607 / 14712 / 14793 / 14977 / 15097; but not at width 64 (hd64
# causal GQA 8:1 s8192 4569 / 4584 / 4573 / 4615 / 4719 / 4443, s16384 fp16 8843 / 9009 / 9065 /
# 8989 / 9041 / 8874), GQA 4:1 (hd128 causal s16384 14401 / 15393 / 14672 / 14696 / 15108 / 14428)
# or not causal (hd128 GQA 8:1 s8192 14182 / 14585 / 14345 / 14382 / 14623 / 14235). Run 7 (walk 0
# / 3 / as routed / 0 again): hd128 causal GQA 8:1 s4096 fp16 4481 / 4096 / 4146 / 4545, s8000 7580
# / 7198 / 7419 / 7500, GQA 16:1 s4096 4542 / 4021 / 4046 / 4481, hd96 GQA 8:1 s8192 6851 / 6520 /
# 6637 / 6728, hd112 GQA 8:1 s4096 fp16 4133 / 4025 / 4065 / 4213, hd80 GQA 8:1 s16384 12580 /
# 12392 / 12361 / 12470. None: as routed (walk); a number: that order in every grouped-query call
# (benches' A/B, tests).
WALK: int | None = None
CHUNKED_WALK = 3
CHUNKED_WALK_MIN_GROUP = 8
CHUNKED_WALK_MIN_KEYS = 2048
CHUNKED_WALK_WIDTHS = (128,)
# Summing dQ, by width (causal calls, calls not causal): each warpgroup computes its dQ share of
# block i (_dq_share) in block i + 1's step, after that block's dK product, instead of in block
# i's own. The share waits for the other warpgroup's half of dSᵀ, which then had a whole block's
# time to arrive, so the two consumers need not meet at every block. dS's two-slot ring already
# keeps a block's tile until both shares of it are done. dK and dV are unchanged (the same
# products, bitwise: GPU test); dQ's sums come in another order. ptxas spills more scalars in the
# loop (tests/kernels/test_attention_gluon_backward.py). Measured on the H200 (thirty-third
# session, bench/attention_gluon_backward_lag.py, forward+backward device µs, settings taking
# turns, runs 1 / 2 / 5; same -> lag): at width 64 (head_dim 40-64) faster in every call in both
# runs, hd48 s4096 not causal -5.2 / -5.8 % (0.99 -> 1.04-1.05x cuDNN), hd40 GQA 4:1 s512 -5.7 %
# (run 2), hd48 GQA 8:1 s1024 -4.8 %, hd56 s512 -2.9 / -4.0 % (0.96-0.99 -> 1.00-1.02), hd64
# s2048 -3.6 %, hd64 s16384 -2.3 / -3.6 %, hd40 causal s4096 -1.2 / -3.5 %. At width 128 (head_dim
# 72-128) causal a little faster: hd104 s16384 -0.3 / -2.4 / -2.2 %, hd128 GQA 4:1 s8192 -1.9 /
# -0.8 / -1.5 %, hd128 s512 -1.0 / -0.9 / -0.7 %, hd112 s512 -0.2 / -0.7 / -0.6 %, hd80 GQA 8:1
# s8192 -1.2 / -0.8 / +0.2 %, hd88 s1024 level; not causal hd128 s4096 +0.6 / +1.3 / +1.2 % slower
# in all three runs (hd72 GQA 4:1 s8192 -3.0 / +0.8 %, hd120 GQA 8:1 s8192 -2.3 / -1.2 %). Two
# identical settings were up to 1.6 % apart in runs 2 and 5 (3.7 % in run 1). Empty: each
# block's share in its own step everywhere (benches' A/B).
DQ_SHARE_LAG = {64: (True, True), 128: (True, False)}
# The swizzle of the float32 tile each dQ share is staged in for its TMA reduce-add (also the wide
# kernel's): None, NVMMASharedLayout's default (128 bytes from width 64 on). A wgmma accumulator
# stores 8 bytes a lane, 4 lanes a row, 8 rows a warp; a half-warp (the unit of a 64-bit shared
# store) covers 4 rows, whose 32 bytes each this swizzle maps onto the same 4 of its 8 16-byte
# chunks, so every store takes twice the wavefronts it needs. Nsight Compute (thirty-fourth session,
# runs 2 and 4, hd128 s4096 not causal, b4 h32 bf16, the dK/dV kernel): 135.3 M shared wavefronts of
# an ideal 68.2 M, 16.7 % of the kernel's (the products' operand reads: 70.5 %). The 32-byte swizzle
# maps the 4 rows onto distinct chunks (bank conflicts 68.1 M -> 1.2 M, the kernel's cycles -1.7 %)
# but needs 8-column TMA boxes, 8 reduce-adds a share instead of 2, and measured slower
# (bench/attention_gluon_backward_dq_swizzle.py, forward+backward device µs, 128 / 32 / 128 again
# taking turns, run 6): at width 256 by 8.6-14.8 % (hd256 causal s4096 9224 / 10502 / 9078, hd176
# GQA 4:1 s8192 27847 / 31118 / 28029), at 64-128 by 0.7-3.6 % in six of nine calls (hd64 s16384
# 16605 / 17103 / 16422, hd128 causal s512 966 / 991 / 969), 0.9-1.6 % faster at hd48 and hd112
# (against the two 128s' mean); and ptxas spills more scalars with it
# in the wide kernel (summing dQ at 256 columns, causal: 12 -> 15 in the loop). 32: benches' A/B.
DQ_SWIZZLE_BYTES: int | None = None
# The dK/dV kernels' integer arguments (this module's and the wide one's), taken unspecialized as
# the forward's (attention_gluon.SHAPE_FREE_INTEGERS): one compile a constexpr setting whatever the
# lengths and head counts (their descriptors carry the tensors' shapes and strides at run time).
SHAPE_FREE_INTEGERS = ("seq_q", "seq_k", "num_heads", "num_kv_heads", "group")


@triton.constexpr_function
def column_parts(first, end) -> tuple:
    """Columns first..end (multiples of 16) as (first, width) parts of 128, 64, 32 and 16, widest
    first: Gluon's operands and accumulators have power-of-two shapes. (A constexpr function: the
    kernels' helpers call it while compiling.)"""
    parts, first, end = [], int(first), int(end)
    for width in (128, 64, 32, 16):
        if end - first >= width:
            parts.append((first, width))
            first += width
    return tuple(parts)


@triton.constexpr_function
def gradient_parts(columns, width) -> tuple:
    """The column parts of dK's and dV's products computing on ``columns`` of ``width``: those of
    the fewest columns from ``columns`` on that column_parts splits in at most two (on 112 columns
    all 128: a third product 16 columns wide measured slower than the columns it saves). The
    score products contract over ``columns`` all the same."""
    columns = int(columns)
    while len(column_parts(0, columns)) > 2 and columns < int(width):
        columns += 16
    return column_parts(0, columns)


def walk(width: int, causal: bool, group: int, seq_k: int) -> int:
    """The block order (_walk) at this kernel width of a call with ``group`` query heads per KV head."""
    return chunked_walk(causal and width in CHUNKED_WALK_WIDTHS, group, seq_k, WALK,
                        (CHUNKED_WALK, CHUNKED_WALK_MIN_GROUP, CHUNKED_WALK_MIN_KEYS))


def chunked_walk(causal: bool, group: int, seq_k: int, forced: int | None, rule: tuple[int, int, int]) -> int:
    """The rule both dK/dV kernels' walk() follow with their own tables: one query head a KV head, 0
    (every order is the same, and 0 is the plainest); else ``forced`` where given (the module's
    WALK); else ``rule``'s chunked walk (walk, least group, least keys) in causal calls of that many
    query heads a KV head and keys, and 0 elsewhere."""
    if group == 1:
        return 0
    if forced is not None:
        return forced
    chunked, least_group, least_keys = rule
    return chunked if causal and group >= least_group and seq_k >= least_keys else 0


def lags_dq_share(width: int, causal: bool) -> bool:
    """Whether the kernel summing dQ at this width computes each dQ share a block late (DQ_SHARE_LAG)."""
    return DQ_SHARE_LAG.get(width, (False, False))[0 if causal else 1]


def columns(head_dim: int, causal: bool) -> int:
    """The columns this kernel computes on at this head_dim (its tiles are kernel_width wide): the
    fewest of the width's NARROW_COLUMNS that hold head_dim (where the call is causal, if
    NARROW_CAUSAL_ONLY names the width), else the width."""
    width = attention_gluon.kernel_width(head_dim)
    if not causal and width in NARROW_CAUSAL_ONLY:
        return width
    return min((narrow for narrow in NARROW_COLUMNS.get(width, ()) if head_dim <= narrow), default=width)


if attention_gluon.available():
    _tile = attention_gluon._tile

    @gluon.jit
    def _zero_accumulator(WIDTH: gl.constexpr):
        layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                         instr_shape=[16, WIDTH, 16])
        return gl.zeros([64, WIDTH], gl.float32, layout)

    @gluon.jit
    def _zero_gradient(PARTS: gl.constexpr):
        """A [64 rows x width] zero accumulator for each (first column, width) part (one or two:
        _accumulate and _accumulate_registers take no more)."""
        gl.static_assert(len(PARTS) <= 2, "a gradient of at most two column parts")
        if len(PARTS) == 1:
            gradient = (_zero_accumulator(PARTS[0][1]),)
        else:
            gradient = (_zero_accumulator(PARTS[0][1]), _zero_accumulator(PARTS[1][1]))
        return gradient

    @gluon.jit
    def _columns_of(b, FIRST: gl.constexpr, WIDTH: gl.constexpr):
        """Columns FIRST.. of a shared tile, WIDTH of them (the tile itself where that is all of it)."""
        if WIDTH == b.shape[1]:
            columns = b
        else:
            columns = b.slice(FIRST, WIDTH, dim=1)
        return columns

    @gluon.jit
    def _accumulate(gradient, a, b, PARTS: gl.constexpr):
        """gradient[p] += a·b[:, part p's columns] for each part (a in shared memory), issued, not
        waited for."""
        first = warpgroup_mma(a, _columns_of(b, PARTS[0][0], PARTS[0][1]), gradient[0], is_async=True)
        if len(PARTS) == 1:
            gradient = (first,)
        else:
            gradient = (first, warpgroup_mma(a, _columns_of(b, PARTS[1][0], PARTS[1][1]), gradient[1],
                                             is_async=True))
        return gradient

    @gluon.jit
    def _as_operand(values, WIDTH: gl.constexpr):
        """values (registers, Q's dtype) as the A operand of a product into a [64, WIDTH] accumulator."""
        accumulator: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                              instr_shape=[16, WIDTH, 16])
        return gl.convert_layout(values, gl.DotOperandLayout(operand_index=0, parent=accumulator, k_width=2))

    @gluon.jit
    def _accumulate_registers(gradient, values, b, PARTS: gl.constexpr):
        """As _accumulate with the A operand in registers (this warpgroup's Pᵀ or dSᵀ, Q's dtype) in
        each part's operand layout; (gradient, the operands: keep them alive until the products are
        waited for)."""
        first = _as_operand(values, PARTS[0][1])
        if len(PARTS) == 1:
            gradient = (warpgroup_mma(first, _columns_of(b, PARTS[0][0], PARTS[0][1]), gradient[0], is_async=True),)
            operands = (first,)
        else:
            second = _as_operand(values, PARTS[1][1])
            gradient = (warpgroup_mma(first, _columns_of(b, PARTS[0][0], PARTS[0][1]), gradient[0], is_async=True),
                        warpgroup_mma(second, _columns_of(b, PARTS[1][0], PARTS[1][1]), gradient[1], is_async=True))
            operands = (first, second)
        return gradient, operands

    @gluon.jit
    def _product_over_columns(a, b, zero, COLUMNS: gl.constexpr):
        """a·bᵀ over the first COLUMNS columns of two shared tiles (here Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ;
        in the wide kernel S and dP), issued, not waited for: one product where COLUMNS is the
        tiles' width, else one a part of column_parts (one wgmma group each)."""
        if COLUMNS == a.shape[1]:
            acc = warpgroup_mma(a, b.permute((1, 0)), zero, use_acc=False, is_async=True)
        else:
            PARTS: gl.constexpr = column_parts(0, COLUMNS)
            acc = warpgroup_mma(a.slice(0, PARTS[0][1], dim=1), b.slice(0, PARTS[0][1], dim=1).permute((1, 0)), zero,
                                use_acc=False, is_async=True)
            for part in gl.static_range(1, len(PARTS)):
                acc = warpgroup_mma(a.slice(PARTS[part][0], PARTS[part][1], dim=1),
                                    b.slice(PARTS[part][0], PARTS[part][1], dim=1).permute((1, 0)), acc,
                                    is_async=True)
        return acc

    @gluon.jit
    def _store_gradient(tile, gradient, scale, PARTS: gl.constexpr):
        """A gradient's parts (float32), times scale unless it is None, into their columns of a
        shared tile, in the tile's dtype."""
        for part in gl.static_range(len(PARTS)):
            values = gradient[part]
            if scale is not None:
                values = values * scale
            _columns_of(tile, PARTS[part][0], PARTS[part][1]).store(values.to(tile.dtype))

    @gluon.jit
    def _program_keys(num_kv_heads, seq_q, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr,
                      HEAD_GROUP: gl.constexpr, BLOCK_M: gl.constexpr):
        """(first key row, batch, KV head, first query block, query blocks per query head) of this
        program: a grid of (key blocks, batch * KV heads), causal programs heaviest first within
        groups of HEAD_GROUP KV heads (LONGEST_FIRST_HEADS); query blocks are BLOCK_M rows."""
        start_n = gl.program_id(0) * BLOCK_N
        batch_kv_head = gl.program_id(1)
        if CAUSAL and HEAD_GROUP > 0:
            key_blocks = gl.num_programs(0)
            linear = gl.program_id(1) * key_blocks + gl.program_id(0)  # the launch order
            group = linear // (HEAD_GROUP * key_blocks)
            first_head = group * HEAD_GROUP
            heads_here = gl.minimum(gl.num_programs(1) - first_head, HEAD_GROUP)
            within = linear - group * HEAD_GROUP * key_blocks
            start_n = (within // heads_here) * BLOCK_N
            batch_kv_head = first_head + within % heads_here
        if CAUSAL:
            # Query blocks above this key block's diagonal see none of its keys (causal masks are
            # aligned top-left, as the other kernels'); past seq_q there is nothing to walk.
            first_block = start_n // BLOCK_M
        else:
            first_block = 0
        query_blocks = gl.maximum(gl.cdiv(seq_q, BLOCK_M) - first_block, 0)
        return start_n, batch_kv_head // num_kv_heads, batch_kv_head % num_kv_heads, first_block, query_blocks

    @gluon.jit
    def _walk(i, kv_head, group, first_block, query_blocks, BLOCK_M: gl.constexpr, WALK: gl.constexpr):
        """(query head, first query row) of the program's block i, of BLOCK_M rows. WALK 0: every
        query head of the KV head in turn, each head's blocks in order; 1: each query block for every
        head of the group, then the next block; 2: as 1, the blocks from the last; 3-5: chunks of
        8, 16 or 32 blocks from the program's first, in each chunk every head's blocks in turn
        (the comment on attention_gluon_backward_wide.CHUNKED_WALK says why)."""
        if WALK == 0:
            head_in_group = i // query_blocks
            block = i % query_blocks
        elif WALK <= 2:
            head_in_group = i % group
            block = i // group
            if WALK == 2:
                block = query_blocks - 1 - block
        else:  # chunks of CHUNK blocks from the program's first, each head's part of a chunk in turn
            CHUNK: gl.constexpr = 4 << (WALK - 2)
            chunk = i // (group * CHUNK)
            length = gl.minimum(query_blocks - chunk * CHUNK, CHUNK)
            within = i - chunk * (group * CHUNK)
            head_in_group = within // length
            block = chunk * CHUNK + within - head_in_group * length
        return kv_head * group + head_in_group, (first_block + block) * BLOCK_M

    @gluon.jit
    def _publish_ds(dscores_t, dq_parts, WARPGROUP: gl.constexpr):
        """This warpgroup's dSᵀ (64 keys x a block of queries) into its half of the block's shared
        [128 keys x queries] tile, then an arrival on the tile's "full" barrier; the half."""
        ds_smem, slot, ds_full, ds_empty, phase, k_smem, dq_smem, dq_desc, dq_row, softmax_scale = dq_parts
        my_ds = ds_smem.index(2 * slot + WARPGROUP)
        # The tile of two blocks ago (two-slot, as the Q/dO ring) read by both dQ shares.
        mbarrier.wait(ds_empty, phase ^ 1)
        my_ds.store(dscores_t)
        fence_async_shared()
        gl.thread_barrier()  # every lane's store before the arrival
        mbarrier.arrive(ds_full, count=1)
        return my_ds

    @gluon.jit
    def _dq_share(dq_parts, HEAD_DIM: gl.constexpr, WARPGROUP: gl.constexpr, BLOCK_M: gl.constexpr):
        """This warpgroup's half of dQ's columns for one block of BLOCK_M queries over the
        program's 128 keys (dS·K, both halves of the shared dS tile: FlashAttention-3's split),
        added into dQ's float32 sums by one TMA reduce-add. Waits for every product issued before
        it."""
        ds_smem, slot, ds_full, ds_empty, phase, k_smem, dq_smem, dq_desc, dq_row, softmax_scale = dq_parts
        COLUMNS: gl.constexpr = HEAD_DIM // 2
        layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                         instr_shape=[16, COLUMNS, 16])
        first_keys = _tile(k_smem, 0, 64, HEAD_DIM).slice(WARPGROUP * COLUMNS, COLUMNS, dim=1)
        second_keys = _tile(k_smem, 1, 64, HEAD_DIM).slice(WARPGROUP * COLUMNS, COLUMNS, dim=1)
        mbarrier.wait(ds_full, phase)  # the other warpgroup's half is there too
        tma.store_wait(pendings=0)  # this warpgroup's previous share has left dq_smem
        gl.thread_barrier()
        share = warpgroup_mma(ds_smem.index(2 * slot).permute((1, 0)), first_keys,
                              gl.zeros([BLOCK_M, COLUMNS], gl.float32, layout), use_acc=False, is_async=True)
        share = warpgroup_mma(ds_smem.index(2 * slot + 1).permute((1, 0)), second_keys, share, is_async=True)
        share = warpgroup_mma_wait(0, deps=(share,))
        mbarrier.arrive(ds_empty, count=1)
        dq_smem.store(share * softmax_scale)
        fence_async_shared()
        gl.thread_barrier()
        _tma_reduce_add(dq_desc, [dq_row, WARPGROUP * COLUMNS], dq_smem)

    @gluon.jit
    def _dq_parts(i, descs, buffers, barriers, scalars, WARPGROUP: gl.constexpr, BLOCK_M: gl.constexpr,
                  WALK: gl.constexpr):
        """What _publish_ds and _dq_share take for the program's block i: its slot of the dS tiles,
        their barriers and phase, this warpgroup's dQ staging tile, and dQ's first row."""
        dq_desc = descs[8]
        k_smem, v_smem, q_smem, do_smem, lse_smem, delta_smem, ds_smem, dq_smem = buffers
        kv_bars, q_full, q_empty, do_full, do_empty, ds_full, ds_empty = barriers
        batch, kv_head, num_heads, group, seq_q, start_n, first_block, query_blocks, qk_scale, softmax_scale = scalars
        head, start_m = _walk(i, kv_head, group, first_block, query_blocks, BLOCK_M, WALK)
        slot = i % 2
        return (ds_smem, slot, ds_full.index(slot), ds_empty.index(slot), (i // 2) & 1, k_smem,
                dq_smem.index(WARPGROUP), dq_desc, (batch * num_heads + head) * seq_q + start_m, softmax_scale)

    @gluon.jit
    def _causal_mask(probs_t, diagonal, BLOCK_M: gl.constexpr, s_layout: gl.constexpr):
        """Pᵀ ([64 keys x BLOCK_M queries]) with 0 where query i of the block does not see the
        key: past i + diagonal."""
        queries = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, s_layout))
        keys = gl.arange(0, 64, layout=gl.SliceLayout(1, s_layout))
        return gl.where(queries[None, :] + diagonal >= keys[:, None], probs_t, 0.0)

    @gluon.jit
    def _dkdv_block(dk, dv, my_k, my_v, q, do, lse_row, delta_row, qk_scale, dq_parts, diagonal, lagging, lags,
                    WARPGROUP: gl.constexpr, DIAGONAL: gl.constexpr, ATOMIC_DQ: gl.constexpr,
                    s_layout: gl.constexpr, COLUMNS: gl.constexpr, LAG: gl.constexpr, WALK: gl.constexpr):
        """dK and dV (their parts: gradient_parts of COLUMNS) of one warpgroup's 64 key rows plus one
        block of queries' share. DIAGONAL: query i of the block sees its keys up to i + diagonal
        (causal: the block's first query row less the warpgroup's first key row). Summing dQ, the
        warpgroup's dQ share of this block (dq_parts), or with LAG of the block before where there
        is one (``lags``: not in a program's first block; ``lagging``: the program's descriptors,
        buffers, barriers and scalars, and that block's index, as _dq_parts takes them)."""
        dtype: gl.constexpr = q.dtype
        BLOCK_M: gl.constexpr = q.shape[0]
        PARTS: gl.constexpr = gradient_parts(COLUMNS, q.shape[1])
        column_layout: gl.constexpr = gl.SliceLayout(0, s_layout)
        zero_scores = gl.zeros([64, BLOCK_M], gl.float32, s_layout)
        scores_t = _product_over_columns(my_k, q, zero_scores, COLUMNS)
        dprobs_t = _product_over_columns(my_v, do, zero_scores, COLUMNS)
        # dPᵀ's products (a wgmma group a part of the columns) still run
        scores_t = warpgroup_mma_wait(len(column_parts(0, COLUMNS)), deps=(scores_t,))
        probs_t = gl.exp2(scores_t * qk_scale - lse_row.load(column_layout)[None, :])
        if DIAGONAL and ATOMIC_DQ:
            # Summing dQ, causal, every block comes here (_dkdv_consumer), but only those crossing
            # the diagonal (with 128 rows the first, with 64 the first two) need the mask: the
            # rest skip it. Measured on the H200 (seventeenth session, bf16 causal, device µs of
            # the kernel, masking every block / this, two rounds each taking turns;
            # bench/attention_gluon_backward_rows.py at width 64): hd64 b4 h32 s4096 1742-1779 /
            # 1653-1658, GQA 4:1 1711-1716 / 1568-1570, s1024 155 / 151; hd40 s4096 1751-1770 /
            # 1668-1676; level at b16 s512 (195 / 195); at width 128
            # (bench/attention_gluon_backward_launch.py) hd128 b4 s1024 230.4-230.7 / 226.7-228.0,
            # hd96 b2 s1024 123.3-123.4 / 119.6-119.7, hd112 b16 s512 283.7-284.0 / 281.0-281.9,
            # hd128 s4096 2795-2846 / 2745-2781. ptxas spills fewer scalars in the loop so at
            # width 64, more at 128 (tests/kernels/test_attention_gluon_backward.py).
            if diagonal < 64:
                probs_t = _causal_mask(probs_t, diagonal, BLOCK_M, s_layout)
        elif DIAGONAL:
            probs_t = _causal_mask(probs_t, diagonal, BLOCK_M, s_layout)
        dv, probs_operands = _accumulate_registers(dv, probs_t.to(dtype), do, PARTS)
        # dPᵀ was issued before dV's products: waiting for all but those leaves them running.
        dprobs_t = warpgroup_mma_wait(len(PARTS), deps=(dprobs_t,))
        dscores_t = probs_t * (dprobs_t - delta_row.load(column_layout)[None, :])
        if ATOMIC_DQ:
            # dSᵀ into this warpgroup's half of the block's shared [128 keys x queries] tile:
            # dK's A operand as it is, and with the other half dQ's (dS·K) transposed.
            my_ds = _publish_ds(dscores_t.to(dtype), dq_parts, WARPGROUP)
            dk = _accumulate(dk, my_ds, q, PARTS)
            if not LAG:
                _dq_share(dq_parts, q.shape[1], WARPGROUP, BLOCK_M)  # waits for every product, dK's and dV's too
            elif lags:
                descs, buffers, barriers, scalars, previous = lagging
                _dq_share(_dq_parts(previous, descs, buffers, barriers, scalars, WARPGROUP, BLOCK_M, WALK), q.shape[1],
                          WARPGROUP, BLOCK_M)  # as above
            # Nothing is left running where a share waited for all: else this waits.
            waited = warpgroup_mma_wait(0, deps=dk + dv + probs_operands)
        else:
            dk, dscores_operands = _accumulate_registers(dk, dscores_t.to(dtype), q, PARTS)
            waited = warpgroup_mma_wait(0, deps=dk + dv + probs_operands + dscores_operands)
        return waited[:len(PARTS)], waited[len(PARTS):2 * len(PARTS)]

    @gluon.jit
    def _dkdv_consumer(descs, buffers, barriers, scalars, WARPGROUP: gl.constexpr, HEAD_DIM: gl.constexpr,
                       CAUSAL: gl.constexpr, ATOMIC_DQ: gl.constexpr, COLUMNS: gl.constexpr, LAG: gl.constexpr,
                       WALK: gl.constexpr):
        q_desc, k_desc, v_desc, do_desc, dk_desc, dv_desc, LSE, DELTA, dq_desc = descs
        k_smem, v_smem, q_smem, do_smem, lse_smem, delta_smem, ds_smem, dq_smem = buffers
        kv_bars, q_full, q_empty, do_full, do_empty, ds_full, ds_empty = barriers
        batch, kv_head, num_heads, group, seq_q, start_n, first_block, query_blocks, qk_scale, softmax_scale = scalars
        ROWS: gl.constexpr = 64
        BLOCK_M: gl.constexpr = q_desc.block_type.shape[2]
        s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, BLOCK_M, 16])
        PARTS: gl.constexpr = gradient_parts(COLUMNS, HEAD_DIM)

        my_start = start_n + WARPGROUP * ROWS
        my_k = _tile(k_smem, WARPGROUP, ROWS, HEAD_DIM)
        my_v = _tile(v_smem, WARPGROUP, ROWS, HEAD_DIM)
        mbarrier.expect(kv_bars.index(WARPGROUP), 2 * k_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(k_desc, [batch, kv_head, my_start, 0], kv_bars.index(WARPGROUP),
                                        k_smem.index(WARPGROUP))
        tma.async_copy_global_to_shared(v_desc, [batch, kv_head, my_start, 0], kv_bars.index(WARPGROUP),
                                        v_smem.index(WARPGROUP))
        dk = _zero_gradient(PARTS)
        dv = _zero_gradient(PARTS)
        mbarrier.wait(kv_bars.index(WARPGROUP), 0)

        for i in range(group * query_blocks):
            slot = i % 2
            phase = (i // 2) & 1
            head, start_m = _walk(i, kv_head, group, first_block, query_blocks, BLOCK_M, WALK)
            q = _tile(q_smem, slot, BLOCK_M, HEAD_DIM)
            do = _tile(do_smem, slot, BLOCK_M, HEAD_DIM)
            mbarrier.wait(q_full.index(slot), phase)
            mbarrier.wait(do_full.index(slot), phase)
            dq_parts = _dq_parts(i, descs, buffers, barriers, scalars, WARPGROUP, BLOCK_M, WALK)
            # Block i - 1, whose dQ share this step computes with LAG (none in block 0): its parts
            # are worked out only there, so that they hold no registers through the block.
            lagging = (descs, buffers, barriers, scalars, i - 1)
            lags = i > 0
            if CAUSAL and ATOMIC_DQ:
                # One path for every block (three, as below, would not fit 240 registers): each
                # block's dQ share needs both warpgroups' dS, so the second warpgroup's first block,
                # wholly masked, runs too and adds zeros to dK and dV.
                dk, dv = _dkdv_block(dk, dv, my_k, my_v, q, do, lse_smem.index(slot), delta_smem.index(slot),
                                     qk_scale, dq_parts, start_m - my_start, lagging, lags, WARPGROUP, True, True,
                                     s_layout, COLUMNS, LAG, WALK)
            elif CAUSAL and BLOCK_M == ROWS:
                # Query blocks as tall as a warpgroup's key rows: a block is either on this
                # warpgroup's diagonal (start_m == my_start), wholly above its keys (the second
                # warpgroup's first block: nothing to add) or wholly below them. (The taller
                # blocks' test below would do here too, but ptxas then keeps a scalar in local
                # memory in the width-128 loop: compiled for sm90, seventeenth session.)
                if start_m == my_start:
                    dk, dv = _dkdv_block(dk, dv, my_k, my_v, q, do, lse_smem.index(slot), delta_smem.index(slot),
                                         qk_scale, dq_parts, 0, lagging, lags, WARPGROUP, True, False, s_layout,
                                         COLUMNS, LAG, WALK)
                elif start_m > my_start:
                    dk, dv = _dkdv_block(dk, dv, my_k, my_v, q, do, lse_smem.index(slot), delta_smem.index(slot),
                                         qk_scale, dq_parts, 0, lagging, lags, WARPGROUP, False, False, s_layout,
                                         COLUMNS, LAG, WALK)
            elif CAUSAL:
                # Taller query blocks (QUERY_ROWS): a block crossing this warpgroup's diagonal
                # (with 128 rows the program's first, from the second warpgroup's 65th query), or
                # wholly below it. (Tested as "across, else wholly below": ptxas then spills
                # fewer scalars in the loop than for "the first block, else".)
                if start_m < my_start + ROWS and start_m + BLOCK_M > my_start:
                    dk, dv = _dkdv_block(dk, dv, my_k, my_v, q, do, lse_smem.index(slot), delta_smem.index(slot),
                                         qk_scale, dq_parts, start_m - my_start, lagging, lags, WARPGROUP, True,
                                         False, s_layout, COLUMNS, LAG, WALK)
                elif start_m >= my_start + ROWS:
                    dk, dv = _dkdv_block(dk, dv, my_k, my_v, q, do, lse_smem.index(slot), delta_smem.index(slot),
                                         qk_scale, dq_parts, 0, lagging, lags, WARPGROUP, False, False, s_layout,
                                         COLUMNS, LAG, WALK)
            else:
                dk, dv = _dkdv_block(dk, dv, my_k, my_v, q, do, lse_smem.index(slot), delta_smem.index(slot),
                                     qk_scale, dq_parts, 0, lagging, lags, WARPGROUP, False, ATOMIC_DQ, s_layout,
                                     COLUMNS, LAG, WALK)
            mbarrier.arrive(q_empty.index(slot), count=1)
            mbarrier.arrive(do_empty.index(slot), count=1)

        # K and V of this warpgroup are read by no product any more: their slots take dK and dV.
        # Summing dQ, the other warpgroup's dQ shares read this K too: wait for its last one.
        blocks = group * query_blocks
        if ATOMIC_DQ and LAG and blocks > 0:  # the last block's share
            _dq_share(_dq_parts(blocks - 1, descs, buffers, barriers, scalars, WARPGROUP, BLOCK_M, WALK), HEAD_DIM,
                      WARPGROUP, BLOCK_M)
        if ATOMIC_DQ and blocks > 0:
            mbarrier.wait(ds_empty.index((blocks - 1) % 2), ((blocks - 1) // 2) & 1)
        _store_gradient(my_k, dk, softmax_scale, PARTS)
        _store_gradient(my_v, dv, None, PARTS)
        fence_async_shared()
        tma.async_copy_shared_to_global(dk_desc, [batch, kv_head, my_start, 0], k_smem.index(WARPGROUP))
        tma.async_copy_shared_to_global(dv_desc, [batch, kv_head, my_start, 0], v_smem.index(WARPGROUP))
        tma.store_wait(pendings=0)

    @gluon.jit
    def _dkdv_second_consumer(descs, buffers, barriers, scalars, HEAD_DIM: gl.constexpr, CAUSAL: gl.constexpr,
                              ATOMIC_DQ: gl.constexpr, COLUMNS: gl.constexpr, LAG: gl.constexpr,
                              WALK: gl.constexpr):
        _dkdv_consumer(descs, buffers, barriers, scalars, 1, HEAD_DIM, CAUSAL, ATOMIC_DQ, COLUMNS, LAG, WALK)

    @gluon.jit
    def _dkdv_producer(descs, buffers, barriers, scalars, HEAD_DIM: gl.constexpr, CAUSAL: gl.constexpr,
                       ATOMIC_DQ: gl.constexpr, DO_STAGES: gl.constexpr, WALK: gl.constexpr):
        q_desc, k_desc, v_desc, do_desc, dk_desc, dv_desc, LSE, DELTA, dq_desc = descs
        k_smem, v_smem, q_smem, do_smem, lse_smem, delta_smem, ds_smem, dq_smem = buffers
        kv_bars, q_full, q_empty, do_full, do_empty, ds_full, ds_empty = barriers
        batch, kv_head, num_heads, group, seq_q, start_n, first_block, query_blocks, qk_scale, softmax_scale = scalars
        # lse and delta go through registers, not TMA: a flat (batch * heads * seq_q) row starts
        # 16-byte aligned only when seq_q is a multiple of 4 (an odd seq_q stopped the H200 with
        # "an illegal instruction"), and a 2-D descriptor would need the same of its stride.
        BLOCK_M: gl.constexpr = q_desc.block_type.shape[2]
        row_layout: gl.constexpr = gl.BlockedLayout([BLOCK_M // 32], [32], [1], [0])
        offsets = gl.arange(0, BLOCK_M, layout=row_layout)
        for i in range(group * query_blocks):
            slot = i % 2
            # A new barrier counts as phase 1 complete: each slot's first fill does not wait.
            phase = ((i // 2) & 1) ^ 1
            head, start_m = _walk(i, kv_head, group, first_block, query_blocks, BLOCK_M, WALK)
            queries = start_m + offsets
            rows = (batch * num_heads + head).to(gl.int64) * seq_q
            # lse = +inf past seq_q: those queries' Pᵀ is exactly 0 (their Q and dO are zero-filled).
            lse = gl.load(LSE + rows + queries, mask=queries < seq_q, other=float("inf"))
            delta = gl.load(DELTA + rows + queries, mask=queries < seq_q, other=0.0)
            mbarrier.wait(q_empty.index(slot), phase)
            lse_smem.index(slot).store(lse)
            gl.thread_barrier()  # every lane's store before the arrival (expect) that publishes them
            mbarrier.expect(q_full.index(slot), q_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(q_desc, [batch, head, start_m, 0], q_full.index(slot),
                                            q_smem.index(slot))
            # dO's ring may have one slot (the wide kernel summing dQ); delta keeps two, as lse: a
            # block's delta is written once its dO slot is free, after the block two back is done.
            do_slot = i % DO_STAGES
            mbarrier.wait(do_empty.index(do_slot), ((i // DO_STAGES) & 1) ^ 1)
            delta_smem.index(slot).store(delta)
            gl.thread_barrier()
            mbarrier.expect(do_full.index(do_slot), do_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(do_desc, [batch, head, start_m, 0], do_full.index(do_slot),
                                            do_smem.index(do_slot))

    @gluon.jit(do_not_specialize=SHAPE_FREE_INTEGERS)
    def _attention_backward_dkdv_ws_kernel(q_desc, k_desc, v_desc, do_desc, dk_desc, dv_desc, LSE, DELTA, dq_desc,
                                           seq_q, seq_k, num_heads, num_kv_heads, group, qk_scale, softmax_scale,
                                           HEAD_DIM: gl.constexpr, CAUSAL: gl.constexpr, ATOMIC_DQ: gl.constexpr,
                                           HEAD_GROUP: gl.constexpr, COLUMNS: gl.constexpr, LAG: gl.constexpr,
                                           WALK: gl.constexpr, num_warps: gl.constexpr):
        dtype: gl.constexpr = q_desc.dtype
        BLOCK_M: gl.constexpr = q_desc.block_type.shape[2]  # query_rows(HEAD_DIM)
        start_n, batch, kv_head, first_block, query_blocks = _program_keys(num_kv_heads, seq_q, 128, CAUSAL,
                                                                           HEAD_GROUP, BLOCK_M)

        k_smem = gl.allocate_shared_memory(dtype, [2, 1, 1, 64, HEAD_DIM], k_desc.layout)
        v_smem = gl.allocate_shared_memory(dtype, [2, 1, 1, 64, HEAD_DIM], v_desc.layout)
        q_smem = gl.allocate_shared_memory(dtype, [2, 1, 1, BLOCK_M, HEAD_DIM], q_desc.layout)
        do_smem = gl.allocate_shared_memory(dtype, [2, 1, 1, BLOCK_M, HEAD_DIM], do_desc.layout)
        row_layout: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [0])
        lse_smem = gl.allocate_shared_memory(gl.float32, [2, BLOCK_M], row_layout)
        delta_smem = gl.allocate_shared_memory(gl.float32, [2, BLOCK_M], row_layout)
        if ATOMIC_DQ:
            # dSᵀ of both warpgroups per block for two blocks (2 * slot + warpgroup); each
            # warpgroup's dQ share.
            ds_smem = gl.allocate_shared_memory(dtype, [4, 64, BLOCK_M],
                                                gl.NVMMASharedLayout.get_default_for([64, BLOCK_M], dtype))
            dq_smem = gl.allocate_shared_memory(gl.float32, [2, BLOCK_M, HEAD_DIM // 2], dq_desc.layout)
        else:  # never touched
            ds_smem = lse_smem
            dq_smem = lse_smem
        kv_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        q_full = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        q_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        do_full = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        do_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(2):
            mbarrier.init(kv_bars.index(i), count=1)
            mbarrier.init(q_full.index(i), count=1)
            mbarrier.init(q_empty.index(i), count=2)  # both consumers
            mbarrier.init(do_full.index(i), count=1)
            mbarrier.init(do_empty.index(i), count=2)
        if ATOMIC_DQ:
            ds_full = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
            ds_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
            for i in gl.static_range(2):
                mbarrier.init(ds_full.index(i), count=2)  # both halves written
                mbarrier.init(ds_empty.index(i), count=2)  # both dQ shares read them
        else:  # never touched
            ds_full = kv_bars
            ds_empty = kv_bars

        descs = (q_desc, k_desc, v_desc, do_desc, dk_desc, dv_desc, LSE, DELTA, dq_desc)
        buffers = (k_smem, v_smem, q_smem, do_smem, lse_smem, delta_smem, ds_smem, dq_smem)
        barriers = (kv_bars, q_full, q_empty, do_full, do_empty, ds_full, ds_empty)
        scalars = (batch, kv_head, num_heads, group, seq_q, start_n, first_block, query_blocks, qk_scale,
                   softmax_scale)
        gl.warp_specialize([
            (_dkdv_consumer, (descs, buffers, barriers, scalars, 0, HEAD_DIM, CAUSAL, ATOMIC_DQ, COLUMNS, LAG,
                              WALK)),
            (_dkdv_second_consumer, (descs, buffers, barriers, scalars, HEAD_DIM, CAUSAL, ATOMIC_DQ, COLUMNS, LAG,
                                     WALK)),
            (_dkdv_producer, (descs, buffers, barriers, scalars, HEAD_DIM, CAUSAL, ATOMIC_DQ, 2, WALK)),
        ], [4, 1], [240, 24])  # registers of the second consumer and the producer (CONSUMER_REGISTERS)


def usable(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, grad_out: torch.Tensor) -> bool:
    """backward_dkdv can run these inputs (the caller has checked they are on an sm90 GPU): this
    kernel's widths or the wide kernel's."""
    return (attention_gluon.available() and attention_gluon.kernel_width(q.shape[-1]) in WIDTHS + (WIDE_WIDTH,)
            and q.dtype == k.dtype == v.dtype == grad_out.dtype
            and all(attention_gluon.descriptor_ready(tensor) for tensor in (q, k, v, grad_out)))


def sums_dq(head_dim: int) -> bool:
    """backward_dkdv takes a ``dq_sum`` at this head_dim (in a Triton that has what it needs)."""
    return SUMS_DQ and attention_gluon.kernel_width(head_dim) in WIDTHS + (WIDE_WIDTH,)


def query_rows(width: int) -> int:
    """Query rows per block of the inner loop at this width."""
    return QUERY_ROWS.get(width, BLOCK_M)


def _dq_layout(rows: int, columns: int):
    # One reduce-add's box: a block's rows of ``columns`` (here a warpgroup's share, half of dQ's
    # columns: _dq_share; in the wide kernel a 64-column chunk), swizzled as DQ_SWIZZLE_BYTES says
    # now (a bench switches it between calls).
    return _swizzled_dq_layout(rows, columns, DQ_SWIZZLE_BYTES)


@functools.lru_cache(maxsize=None)
def _swizzled_dq_layout(rows: int, columns: int, swizzle: int | None):
    if swizzle is None:
        return gl.NVMMASharedLayout.get_default_for([rows, columns], gl.float32)
    return gl.NVMMASharedLayout(swizzle_byte_width=swizzle, element_bitwidth=32, rank=2)


def _dq_descriptor(dq_sum: torch.Tensor, columns: int, rows: int = BLOCK_M):
    # Rows of (batch * heads * seq_q, head_dim): a block running past a head's seq_q adds exact
    # zeros to the next head's first rows (those queries' dS is 0: their lse reads +inf), and a
    # box's columns past head_dim are clipped.
    return TensorDescriptor(dq_sum, list(dq_sum.shape), list(dq_sum.stride()), [rows, columns],
                            _dq_layout(rows, columns))


@functools.lru_cache(maxsize=None)
def _placeholder(device: torch.device, width: int) -> torch.Tensor:
    # The dQ descriptor's tensor when the kernel does not sum dQ (the argument is never read); as
    # tall as the tallest box.
    return torch.zeros(max(BLOCK_M, *QUERY_ROWS.values()), width, device=device, dtype=torch.float32)


def dq_sum_buffer(q: torch.Tensor, zeroed: bool = True) -> torch.Tensor:
    """The float32 (batch * heads * seq_q, head_dim) buffer ``backward_dkdv`` sums dQ into
    (scaled: dQ itself, seen as q's shape); zeroed, unless the caller zeros it (attention.py's
    delta kernel does)."""
    batch, num_heads, seq_q, head_dim = q.shape
    return (torch.zeros if zeroed else torch.empty)(batch * num_heads * seq_q, head_dim, device=q.device,
                                                    dtype=torch.float32)


def backward_dkdv(grad_out: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lse: torch.Tensor,
                  delta: torch.Tensor, causal: bool, softmax_scale: float,
                  dq_sum: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(dk, dv), contiguous like k and v, from the forward's base-2 lse and delta = rowsum(o * do)
    (both float32, (batch * heads, seq_q)). With ``dq_sum`` (``dq_sum_buffer``) the kernel also
    adds each block's share of dQ into it by TMA reduce-adds: five matrix products per block
    instead of the seven that a separate dQ kernel makes it, in an order that varies from run to
    run. Width 256 runs attention_gluon_backward_wide's kernel. Inputs pass ``usable``; q's GPU
    is the current one."""
    batch, num_heads, seq_q, head_dim = q.shape
    num_kv_heads, seq_k = k.shape[1], k.shape[2]
    width = attention_gluon.kernel_width(head_dim)
    if width == WIDE_WIDTH:
        return attention_gluon_backward_wide.backward_dkdv(grad_out, q, k, v, lse, delta, causal, softmax_scale,
                                                           dq_sum)
    if width not in WIDTHS:
        raise ValueError(f"no Gluon backward at head_dim {head_dim}")
    dk = torch.empty_like(k, memory_format=torch.contiguous_format)
    dv = torch.empty_like(v, memory_format=torch.contiguous_format)
    descriptor = attention_gluon._descriptor
    rows = query_rows(width)
    grid = (-(-seq_k // BLOCK_N), batch * num_kv_heads)
    fast(_attention_backward_dkdv_ws_kernel)[grid](
        descriptor(q, rows, width), descriptor(k, CONSUMER_ROWS, width), descriptor(v, CONSUMER_ROWS, width),
        descriptor(grad_out, rows, width), descriptor(dk, CONSUMER_ROWS, width),
        descriptor(dv, CONSUMER_ROWS, width), lse, delta,
        _dq_descriptor(_placeholder(q.device, width) if dq_sum is None else dq_sum, width // 2, rows),
        seq_q, seq_k, num_heads, num_kv_heads, num_heads // num_kv_heads, softmax_scale * attention_gluon.LOG2_E,
        softmax_scale, HEAD_DIM=width, CAUSAL=causal, ATOMIC_DQ=dq_sum is not None, HEAD_GROUP=LONGEST_FIRST_HEADS,
        COLUMNS=columns(head_dim, causal), LAG=dq_sum is not None and lags_dq_share(width, causal),
        WALK=walk(width, causal, num_heads // num_kv_heads, seq_k), num_warps=4, maxnreg=MAX_REGISTERS)
    return dk, dv


def compile_sm90(width: int, causal: bool, atomic_dq: bool = False, dtype: torch.dtype = torch.bfloat16,
                 on_columns: int | None = None, lag: bool | None = None, walk: int = 0):
    """The kernel backward_dkdv runs at this width (computing on ``on_columns`` of it, by default
    all; summing dQ, its shares ``lag``-ging a block behind where DQ_SHARE_LAG says by default;
    query blocks in ``walk``'s order, _walk) compiled for sm90 without a GPU, as
    attention_gluon.compile_sm90."""
    if width == WIDE_WIDTH:
        return attention_gluon_backward_wide.compile_sm90(causal, atomic_dq, dtype, columns=on_columns or WIDE_WIDTH)
    return compile_dkdv_kernel(_attention_backward_dkdv_ws_kernel, width, causal, atomic_dq, dtype, width // 2,
                               LONGEST_FIRST_HEADS, query_rows(width), columns=on_columns or width,
                               lag=atomic_dq and (lags_dq_share(width, causal) if lag is None else lag), walk=walk)


def compile_dkdv_kernel(kernel, width: int, causal: bool, atomic_dq: bool, dtype: torch.dtype, dq_columns: int,
                        head_group: int, rows: int = BLOCK_M, walk: int | None = None, columns: int | None = None,
                        split: int | None = None, partials: str | None = None, kv_each_block: bool | None = None,
                        roles: bool | None = None, lag: bool | None = None):
    """A dK/dV kernel, this module's (computing on ``columns``, with ``lag`` and ``walk``) or the wide
    one's (with its ``walk``, ``columns``, ``split``, ``kv_each_block`` and ``roles``), compiled for
    sm90 as backward_dkdv launches it: 64-row boxes of K, V, dK and dV at ``width`` (or dK's and
    dV's descriptors of type ``partials``), ``rows``-row boxes of Q and dO, dQ reduce-adds of
    ``dq_columns``. Every argument not typed here is a constexpr (the kernel's own argument names)."""
    name = "bf16" if dtype == torch.bfloat16 else "fp16"

    def block(box_rows: int) -> str:
        return (f"tensordesc<{name}[1, 1, {box_rows}, {width}], "
                f"{attention_gluon._shared_layout(box_rows, width, dtype)!r}>")

    keys, queries = block(64), block(rows)
    types = {"q_desc": queries, "k_desc": keys, "v_desc": keys, "do_desc": queries, "dk_desc": partials or keys,
             "dv_desc": partials or keys, "LSE": "*fp32", "DELTA": "*fp32",
             "dq_desc": f"tensordesc<fp32[{rows}, {dq_columns}], {_dq_layout(rows, dq_columns)!r}>",
             **dict.fromkeys(SHAPE_FREE_INTEGERS, "i32"), "qk_scale": "fp32", "softmax_scale": "fp32"}
    signature = {parameter: types.get(parameter, "constexpr") for parameter in kernel.arg_names}
    constexprs = {"HEAD_DIM": width, "CAUSAL": causal, "ATOMIC_DQ": atomic_dq, "HEAD_GROUP": head_group,
                  "num_warps": 4}
    # the constexprs of one kernel or the other (COLUMNS: both), where given
    for constexpr, value in (("WALK", walk), ("COLUMNS", columns), ("SPLIT", split),
                             ("KV_EACH_BLOCK", kv_each_block), ("ROLES", roles), ("LAG", lag)):
        if value is not None:
            constexprs[constexpr] = value
    return attention_gluon.compile_for_sm90(kernel, signature, constexprs, MAX_REGISTERS)


# Last: the wide kernel reuses this module's producer warp.
from . import attention_gluon_backward_wide  # noqa: E402

__all__ = ["usable", "sums_dq", "backward_dkdv", "compile_sm90", "WIDTHS"]
