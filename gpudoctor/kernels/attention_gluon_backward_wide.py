"""The attention backward's dK/dV on Hopper (sm90) in Gluon at width 256 (head_dim 136-256), tiled
as FlashAttention-3 tiles its head_dim 256 backward; head_dim 136-160 computed on 160 of the 256
columns, 168-192 on 192, 200-224 on 224 (columns).

Why a second kernel: attention_gluon_backward gives each consumer warpgroup 64 key rows and
their whole dK and dV, which at width 256 is 256 float32 registers per thread before anything
else (and the Triton dK/dV kernel spills 288 bytes per thread there, docs/benchmarks.md). Here a
program owns 64 key rows of one KV head and its two consumer warpgroups split the work the other
way (FlashAttention-3's hd256 configuration: the score products split by keys, dK/dV by
columns; since the thirty-second session the score products by role, SCORE_ROLES):

- scores: warpgroup w computes S and dP for its 32 keys and a block of 64 queries (Q·Kᵀ,
  dO·Vᵀ, 16 registers each), then P = exp2(S·scale − lse) and dS = P∘(dP − delta), and stores
  Pᵀ and dSᵀ into its half of two shared [64 keys x 64 queries] tiles; or (SCORE_ROLES,
  shipped) split by warpgroup instead: warpgroup 0 computes S for all 64 keys (32
  registers) and stores Pᵀ, warpgroup 1 dP, reads P back from that tile and stores dSᵀ, so each
  score product reads Q or dO once instead of twice (a third fewer shared-memory bytes there);
- once both halves (or P and dS) are there ("full" barrier), it accumulates dV[:, its 128 columns] += Pᵀ·dO
  and dK[:, its 128 columns] += dSᵀ·Q (64 + 64 registers), reading both tiles from shared memory
  (on 160 or 192 columns: warpgroup 0 dV's first 128 and dK's last 32 or 64, warpgroup 1 the
  other way round).

The next block's S and dP (by role: warpgroup 0's S; summing dQ, warpgroup 1's dP only once
the next dO is in, after them) are issued before this block's dV and dK products, so the
exponentials run while the products do; warpgroup 1 reads Q and warpgroup 0 dO only after the
other has waited for them (their "full" barriers) and published through the tiles' "full"
barrier. Tiles and Q/dO slots are two-slot rings; a slot is
reused once both warpgroups have arrived on its "empty" barrier. The producer warp is
attention_gluon_backward's (Q, dO, lse and delta per block). dQ comes from the Triton dQ kernel,
and the result is reproducible run to run (no atomics); or, with ``dq_sum``, from this kernel:

- each warpgroup computes dQ's 128 columns of its half (dS·K, dS from the shared tile) in two
  64-column chunks (on 160 or 192 columns one chunk each and the third in turns, block by block)
  and adds each into dQ's float32 sums by a TMA reduce-add, through a 16 KB staging tile. The 227
  KB of shared memory are full, so the staging tiles take dO's second slot: dO has one, its
  product (dV's) goes first in a block and the slot is handed back when it is done, so the next dO
  loads while the block's other products run. The next block's dP is issued once the dQ chunks are
  on their way. dK and dV are bit-identical to the kernel's without dQ (GPU tests on the H200),
  dQ's last bits vary run to run.

With several query heads a KV head, a program walks every head's blocks; causal calls of 8 or
more heads a KV head from 8192 keys walk them in chunks of 16 blocks, each head's part in turn
(walk), so that the programs running at once stay on the same blocks in L2. Below 8192 keys those
calls split each program's heads over several programs of at most 4 (splits), each storing its
float32 dK and dV, which sum_splits then adds in a fixed order (still reproducible run to run).

Measured on the H200 (docs/benchmarks.md, twelfth session; b4 h32 s4096 causal): the backward
8.67 ms with the Triton dQ kernel and 8.10 summing dQ, against the Triton backward's 10.83.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from . import attention_gluon, attention_gluon_backward
from .launch import fast

if attention_gluon.available():  # Gluon's Hopper modules, as attention_gluon imported them
    from .attention_gluon import (
        fence_async_shared,
        gl,
        gluon,
        mbarrier,
        tma,
        warpgroup_mma,
        warpgroup_mma_wait,
    )

WIDTH = attention_gluon_backward.WIDE_WIDTH
BLOCK_N = 64  # key rows per program: 32 per consumer warpgroup for the scores by keys, 64 by role
BLOCK_M = 64  # query rows per block of the inner loop
DQ_CHUNK = 64  # dQ columns per TMA reduce-add: two chunks of a warpgroup's 128
MAX_REGISTERS = attention_gluon_backward.MAX_REGISTERS
# Causal programs in launch order (attention_gluon_backward.LONGEST_FIRST_HEADS): heaviest first in
# groups of 8 KV heads was slower here summing dQ (H200, twelfth session, b4 h32 s4096 causal,
# kernel ms, launch order / groups of 8 / of 2: 7.767 / 7.892 / 7.700, GQA 8:1 8.546 / 8.781 /
# 8.622), though faster without (GQA 8:1 5.131 / 4.869 / 4.846). Again with the chunked walk below
# (twenty-second session, run 9, forward+backward device time x cuDNN, launch order / groups of 8):
# GQA 8:1 hd256 s4096 0.90 / 0.85, hd248 s16384 0.92 / 0.82, MHA hd256 s4096 0.96 / 0.94.
LONGEST_FIRST_HEADS = 0
# The order of a program's blocks in grouped-query calls (attention_gluon_backward._walk: 0 each
# query head's blocks in turn; 1 every head of the group at each block; 2 that from the last block;
# 3-5 chunks of 8, 16, 32 blocks from the program's first, each head's part of a chunk in turn).
# Programs running at once read the same Q and dO blocks and add into the same dQ rows (128 KB a
# block at width 256) from L2 only while their walks stay close: walking each head's blocks in
# turn, causal programs of one KV head, whose walks differ in length, drift apart by a block per
# head walked, and at 8 query heads a KV head and 8192 keys or more their blocks outgrow L2;
# chunks of 16 bound that drift. Measured on the H200 (twenty-second session,
# bench/attention_gluon_backward_walk.py, forward+backward device time x cuDNN, three rounds taking
# turns, runs 4-5; walk 0 / 4): causal GQA 8:1 hd192 s8192 0.91 / 0.93, hd176 s8192 0.91 / 0.94,
# hd256 s8192 0.89 / 0.93, hd248 s16384 0.85 / 0.92 and 0.85 / 0.91, hd200 s16384 0.88 / 0.95,
# GQA 16:1 hd256 s8192 0.84 / 0.88; but at 2048-4096 keys -1 to +4 % (hd160 s2048 0.97 / 0.96,
# hd256 s4096 0.91 / 0.91, hd232 s4096 0.92 / 0.90), GQA 4:1 2-3 % slower (hd224 s8192 0.97 /
# 0.94-0.95), not causal level or slower. Walk 2 won at GQA 8:1 hd256 s2048 (0.92 / 0.98-1.02)
# but lost at lower head dims there (hd160 0.91) and from 8192 keys; walk 1 lost everywhere (hd256
# s4096 0.74).
CHUNKED_WALK = 4
CHUNKED_WALK_MIN_GROUP = 8
CHUNKED_WALK_MIN_KEYS = 8192
WALK: int | None = None  # a walk for every grouped-query call instead (benches' A/B, tests)
# Head dims computed on fewer of the tiles' 256 columns: the narrowest of these that holds them
# (136-160 on 160, 168-192 on 192, 200-224 on 224). The score products contract over 128 + 32,
# 128 + 64 or 128 + 64 + 32 columns (column_parts), each warpgroup's dK and dV are one 128-column
# product and one 32- or 64-column one, or on 224 two (64 + 32) (_gradient_columns), and summing
# dQ its third 64-column chunk is taken by the warpgroups in turn (on 160 columns its columns past
# head_dim are zeros, clipped on the reduce-add; on 224 each warpgroup takes two chunks, as at
# 256). dK and dV are bitwise those of 256
# columns (the columns left out are zeros in every operand). The loads and tiles stay 256 wide,
# zero-filled past head_dim. Measured on the H200 (twenty-fourth session,
# bench/attention_gluon_backward_columns.py, forward+backward device time, 2^28-2^29 scores,
# settings taking turns; run 5, 256 -> 192 -> 160 columns): hd160 causal s2048 -3.0 / -9.2 %
# (0.97 -> 1.07x cuDNN), hd152 GQA 4:1 s8192 -4.0 / -8.0 % (0.94 -> 1.02), hd144 causal s512
# -1.6 / -7.7 %, hd144 causal s2048 -0.1 / -7.2 %, hd136 causal GQA 8:1 s4096 -0.1 / -6.5 % (0.94
# -> 1.00), hd136 causal s1024 +1.9 / -6.0 %; on 192 columns hd192 causal GQA 8:1 s8192 -7.0 %
# (0.93 -> 0.99), hd184 s8192 -6.0 % (0.90 -> 0.96), hd168 GQA 4:1 s8192 -5.6 %, hd176 causal GQA
# 4:1 s16384 -4.7 %, hd192 causal s4096 -4.3 %, hd176 causal GQA 8:1 s2048 -3.9 % (run 2 alike:
# -2.6 to -7.0 % from 2048 keys); head dims 200 and 256 (256 columns in every setting) within
# 2 %. Three 64-column products a warpgroup for dK and dV instead (as many operand bytes read from
# shared memory as at 256) gained less (run 1: hd184 -5.7 %, hd168 -3.1 %, hd176 s2048 level) and
# lost 4.8 % at hd136 s1024. 224 columns (twenty-sixth session, runs 2-4, 256 -> 224, K's and V's
# operands in each block in both, kv_each_block): causal GQA 8:1 hd216 s4096 (split) -3.0 %, hd200
# s1024 (split) -2.7 %, hd224 causal s2048 -3.4 %, hd224 causal GQA 4:1 s8192 -3.2 %, hd224 s4096
# not causal -3.2 %, hd208 causal s512 -2.5 %, hd216 causal s16384 -1.3 %; hd200 s8192 not
# causal level; hd216 GQA 8:1 s2048 not causal +1.1 %. With the operands hoisted (as the kernel was), 224
# columns had been 2-14 % slower than 256 (run 1): ptxas spilled 175 scalars in the loop there.
# Empty: every head_dim at 256 (benches' A/B).
NARROW_COLUMNS = (160, 192, 224)
# Causal grouped-query calls: a program walks every query head of its KV head, so with 8 query
# heads a KV head its walk is 8 times an MHA program's, and the longest programs, launched last
# for the last KV heads, run on while the other SMs idle (the twenty-second session's Nsight
# Compute put the SMs 11-12 % apart at hd256 s4096 causal GQA 8:1). In causal calls of
# SPLIT_MIN_GROUP or more query heads a KV head and fewer than SPLIT_MAX_KEYS keys, each (KV head,
# 64 keys) is split over ``splits`` programs of at most SPLIT_HEADS query heads each; each program
# stores its float32 dK and dV, and sum_splits adds them in a fixed order (dK and dV stay
# reproducible run to run). Measured on the H200 (twenty-fifth session,
# bench/attention_gluon_backward_split.py, forward+backward device µs, settings taking turns, run
# 3; unsplit -> 4 / 2 heads a program): causal GQA 8:1 hd256 s4096 11047 -> 10240 / 10249 (0.92 ->
# 0.99x cuDNN), hd256 s2048 6282 -> 5987 / 5839, hd256 s512 2430 -> 2291 / 2316 (0.95 -> 1.01),
# hd232 s4096 -3.0 / -1.6 %, hd216 s1024 -2.5 / -0.9 %; run 2 alike (hd136 s4096 on 160 columns
# -3.1 %); but from 8192 keys, where the unsplit programs walk chunks of 16 blocks (CHUNKED_WALK),
# slower: hd200 s8192 +6.5 / +4.3 % (+6.4 % walking chunks too, run 2), hd248 s16384 +1.4 / -0.9 %;
# and at GQA 4:1 two heads a program was 5.6 % slower (hd224 s4096, run 2). Before the sums were
# one pass (sum_splits), torch's sum and conversion took back most of the gain at 512-1024 keys
# (run 2: hd256 s512 -0.7 %, hd216 s1024 -0.8 %). A proxy first (K and V repeated to 2 and 4
# times the KV heads: the kernel's work split, without the sums;
# bench/results/attention-gluon-backward-split-proxy-*-s25-*): 6-17 % at 4 heads a program.
SPLIT_MIN_GROUP = 8
SPLIT_MAX_KEYS = CHUNKED_WALK_MIN_KEYS
SPLIT_HEADS = 4
SPLIT: int | None = None  # query heads a split program walks in every causal grouped-query call instead (benches' A/B)
# Summing dQ, K's and V's operands are worked out in each block rather than hoisted out of the
# loop (_summing_step) where hoisted they made ptxas spill tens of scalars in it and that was
# measured slower: on 192 and 224 columns, and on 256 in split and chunked-walk programs (on 160
# columns ptxas spilled at most 6; at 256 otherwise 23-58 and hoisting measured faster). Measured
# on the H200 (twenty-sixth session, bench/attention_gluon_backward_columns.py, forward+backward
# device µs, settings taking turns, runs 1-4 and 7; hoisted -> each block): on 224 columns hoisted
# was 7-16 % slower (hd208 causal GQA 4:1 s2048 6009 -> 5201); on 192 hd192 causal s4096 -3.4 /
# -3.8 %, hd176 causal GQA 8:1 s2048 (split) +1.1 / +1.6 / +0.8 %, hd168 GQA 4:1 s8192 level; on
# 256 causal GQA 8:1 hd248 s16384 (chunked walk) -4.2 %, hd256 s512 (split) -2.6 %, hd232 s4096
# (split) +0.7 / +0.8 %, but causal GQA 4:1 hd248 s1024 +5.3 %, hd232 s1024 +4.3 %, hd248 s4096
# +1.2 / +4.2 %, hd240 s4096 not causal +1.3 %; on 160 hd136 causal GQA 8:1 s4096 (split) +2.3 /
# +2.6 %. HOISTED_KV (benches' A/B): True hoists them everywhere, False works them out everywhere.
HOISTED_KV: bool | None = None


# The score products by warpgroup instead of by keys (ROLES): warpgroup 0 computes S
# and P for all 64 keys, warpgroup 1 dP and dS (P read back from the Pᵀ tile), each a [64 x 64]
# product reading Q or dO once and K or V whole, where by keys each warpgroup reads all of Q and
# dO for 32 keys: the score products read a third fewer shared-memory bytes (128 KB a block at 256
# columns against 192). dS is then P∘(dP − delta) with P in Q's dtype (as the dV product reads it)
# rather than float32. Measured on the H200 (thirty-second session,
# bench/attention_gluon_backward_roles.py, forward+backward device µs, settings taking turns, runs
# 1-3; by keys -> roles): summing dQ, faster in all 12 calls in all three runs, 512-16384 keys,
# 160-256 columns, split, chunked walk: run 1 1.5-11.6 %, run 2 1.2-11.6 %, run 3 0.8-14.4 % (hd232
# causal GQA 8:1 s4096 11175 -> 9881, -11.6 % in each run, 0.95 -> 1.07x cuDNN; hd240 s4096 not
# causal 0.95 -> 1.05; hd168 GQA 4:1 s8192 -10.5 / -10.9 / -11.5 %; hd248 causal GQA 8:1 s16384
# -1.5 / -1.2 / -0.8 %); with the Triton dQ instead (deterministic=True) 0.7-16.1 % (run 3; hd248
# causal GQA 8:1 s16384 47407 -> 39787). Two identical settings were up to 2.3 % apart (runs 1-2).
# False: by keys (benches' A/B).
SCORE_ROLES = True


def kv_each_block(columns: int, split: int = 1, walk: int = 0) -> bool:
    """Whether the kernel summing dQ on ``columns``, with ``split`` programs a (KV head, 64 keys)
    and block order ``walk``, works out K's and V's operands in each block."""
    if HOISTED_KV is not None:
        return not HOISTED_KV
    return columns in (192, 224) or (columns == WIDTH and (split > 1 or walk != 0))


column_parts = attention_gluon_backward.column_parts


def columns(head_dim: int) -> int:
    """The head_dim columns the kernel computes on for this head_dim (its tiles are WIDTH wide)."""
    return min((width for width in NARROW_COLUMNS if head_dim <= width), default=WIDTH)


def splits(causal: bool, group: int, seq_k: int) -> int:
    """Programs each (KV head, 64 keys) is split over (each walking group / splits query
    heads): the fewest that leave at most SPLIT_HEADS heads a program, in causal calls of
    SPLIT_MIN_GROUP or more query heads a KV head and fewer than SPLIT_MAX_KEYS keys (SPLIT,
    where set, in every causal grouped-query call); else 1."""
    heads = SPLIT_HEADS if SPLIT is None else SPLIT
    if not causal or group == 1 or (SPLIT is None and (group < SPLIT_MIN_GROUP or seq_k >= SPLIT_MAX_KEYS)):
        return 1
    return next(count for count in range(1, group + 1) if group % count == 0 and group // count <= heads)


def walk(causal: bool, group: int, seq_k: int) -> int:
    """The block order of a call with ``group`` query heads per KV head (the narrow kernel's rule,
    attention_gluon_backward.chunked_walk, with this module's tables)."""
    return attention_gluon_backward.chunked_walk(causal, group, seq_k, WALK,
                                                 (CHUNKED_WALK, CHUNKED_WALK_MIN_GROUP, CHUNKED_WALK_MIN_KEYS))


if attention_gluon.available():
    _tile = attention_gluon._tile
    _zero_gradient = attention_gluon_backward._zero_gradient
    _accumulate = attention_gluon_backward._accumulate
    _product_over_columns = attention_gluon_backward._product_over_columns

    @gluon.constexpr_function
    def _score_groups(columns):
        """How many wgmma groups _scores_product issues on ``columns``."""
        return 1 if int(columns) == 256 else len(column_parts(0, columns))

    @gluon.jit
    def _scores_product(a, b, COLUMNS: gl.constexpr, s_layout: gl.constexpr):
        """a·bᵀ over the first COLUMNS columns of two shared [rows, 256] tiles (Q and this
        warpgroup's keys, or dO and its values: 32, or all 64 with ROLES), issued, not waited for:
        one product at 256, one a part on fewer columns (128 + 32 or 64, or 128 + 64 + 32:
        column_parts)."""
        KEYS: gl.constexpr = s_layout.instr_shape[1]
        return _product_over_columns(a, b, gl.zeros([64, KEYS], gl.float32, s_layout), COLUMNS)

    @gluon.jit
    def _issue_scores(q, do, my_k, my_v, COLUMNS: gl.constexpr, s_layout: gl.constexpr):
        """S = Q·Kᵀ and dP = dO·Vᵀ for this warpgroup's 32 keys, issued, not waited for."""
        return _scores_product(q, my_k, COLUMNS, s_layout), _scores_product(do, my_v, COLUMNS, s_layout)

    @gluon.jit
    def _probs(scores, lse_row, qk_scale, start_m, my_keys, CAUSAL: gl.constexpr, s_layout: gl.constexpr):
        """P (float32) of this warpgroup's keys from my_keys (32, or all 64 with ROLES) for the
        block of queries from start_m."""
        rows: gl.constexpr = gl.SliceLayout(1, s_layout)
        probs = gl.exp2(scores * qk_scale - lse_row.load(rows)[:, None])
        if CAUSAL:  # query i sees keys up to i (aligned top-left, as the other kernels)
            queries = start_m + gl.arange(0, 64, layout=rows)
            KEYS: gl.constexpr = s_layout.instr_shape[1]
            keys = my_keys + gl.arange(0, KEYS, layout=gl.SliceLayout(0, s_layout))
            probs = gl.where(queries[:, None] >= keys[None, :], probs, 0.0)
        return probs

    @gluon.jit
    def _store_tiles(probs, dprobs, delta_row, tiles, slot, phase, WARPGROUP: gl.constexpr,
                     s_layout: gl.constexpr):
        """dS = P∘(dP − delta); Pᵀ and dSᵀ into this warpgroup's half of the slot's shared tiles
        once both warpgroups' products have read them two blocks ago; then an arrival on the
        tiles' "full" barrier."""
        probs_t, dscores_t, full, empty = tiles
        dscores = probs * (dprobs - delta_row.load(gl.SliceLayout(1, s_layout))[:, None])
        mbarrier.wait(empty.index(slot), phase ^ 1)
        dtype: gl.constexpr = probs_t.dtype
        probs_t.index(slot).slice(WARPGROUP * 32, 32, dim=0).permute((1, 0)).store(probs.to(dtype))
        dscores_t.index(slot).slice(WARPGROUP * 32, 32, dim=0).permute((1, 0)).store(dscores.to(dtype))
        fence_async_shared()
        gl.thread_barrier()  # every lane's stores before the arrival
        mbarrier.arrive(full.index(slot), count=1)

    @gluon.jit
    def _publish(scores, dprobs, lse_row, delta_row, qk_scale, start_m, my_keys, tiles, slot, phase,
                 WARPGROUP: gl.constexpr, CAUSAL: gl.constexpr, PENDING: gl.constexpr, COLUMNS: gl.constexpr,
                 s_layout: gl.constexpr):
        """P and dS from the issued S and dP (waiting for them, PENDING later products may stay
        running) into the block's shared tiles (_store_tiles)."""
        scores = warpgroup_mma_wait(PENDING + _score_groups(COLUMNS), deps=(scores,))
        probs = _probs(scores, lse_row, qk_scale, start_m, my_keys, CAUSAL, s_layout)
        dprobs = warpgroup_mma_wait(PENDING, deps=(dprobs,))
        _store_tiles(probs, dprobs, delta_row, tiles, slot, phase, WARPGROUP, s_layout)

    @gluon.constexpr_function
    def _score_keys(roles):
        """Keys a warpgroup's score product covers: all 64 with ROLES (warpgroup 0 S, warpgroup 1
        dP), else its own 32 (S and dP both)."""
        return 64 if roles else 32

    @gluon.jit
    def _score_operands(keys, values, WARPGROUP: gl.constexpr, ROLES: gl.constexpr):
        """The K and V rows this warpgroup's S and dP products read: all 64 with ROLES, else its 32."""
        if ROLES:
            operands = (keys, values)
        else:
            operands = (keys.slice(WARPGROUP * 32, 32, dim=0), values.slice(WARPGROUP * 32, 32, dim=0))
        return operands

    @gluon.jit
    def _publish_probs(probs, tiles, probs_full, slot, phase):
        """ROLES, warpgroup 0: the block's whole Pᵀ into the slot's tile once both warpgroups'
        products have read it two blocks ago; then arrivals on probs_full (for warpgroup 1's dS)
        and on the tiles' "full" barrier."""
        probs_t, dscores_t, full, empty = tiles
        mbarrier.wait(empty.index(slot), phase ^ 1)
        probs_t.index(slot).permute((1, 0)).store(probs.to(probs_t.dtype))
        fence_async_shared()
        gl.thread_barrier()  # every lane's stores before the arrivals
        mbarrier.arrive(probs_full.index(slot), count=1)
        mbarrier.arrive(full.index(slot), count=1)

    @gluon.jit
    def _publish_dscores(dprobs, delta_row, tiles, probs_full, slot, phase, s_layout: gl.constexpr):
        """ROLES, warpgroup 1: dS = P∘(dP − delta), P read back from the Pᵀ tile warpgroup 0
        wrote (in Q's dtype, as the dV product reads it), into the slot's dSᵀ tile; then an
        arrival on the tiles' "full" barrier."""
        probs_t, dscores_t, full, empty = tiles
        mbarrier.wait(probs_full.index(slot), phase)
        probs = probs_t.index(slot).permute((1, 0)).load(s_layout).to(gl.float32)
        dscores = probs * (dprobs - delta_row.load(gl.SliceLayout(1, s_layout))[:, None])
        mbarrier.wait(empty.index(slot), phase ^ 1)
        dscores_t.index(slot).permute((1, 0)).store(dscores.to(dscores_t.dtype))
        fence_async_shared()
        gl.thread_barrier()
        mbarrier.arrive(full.index(slot), count=1)

    @gluon.jit
    def _publish_next(issued, block, scalars, lse_row, delta_row, my_keys, tiles, probs_full, slot, phase,
                      WARPGROUP: gl.constexpr, CAUSAL: gl.constexpr, PENDING: gl.constexpr, COLUMNS: gl.constexpr,
                      s_layout: gl.constexpr, ROLES: gl.constexpr, WALK: gl.constexpr):
        """The next block's issued score products (by keys (S, dP), by role (S,) in warpgroup 0 and
        (dP,) in warpgroup 1), waited for (PENDING later products may stay running) and published
        into the slot's tiles: by keys P and dS (_publish), by role P (warpgroup 0) or dS
        (warpgroup 1). ``block``: the program's block index of those queries."""
        batch, kv_head, num_heads, group, seq_q, start_n, first_block, query_blocks, qk_scale, softmax_scale = scalars
        if not ROLES:
            _publish(issued[0], issued[1], lse_row, delta_row, qk_scale, _block(block, scalars, WALK)[1], my_keys,
                     tiles, slot, phase, WARPGROUP, CAUSAL, PENDING, COLUMNS, s_layout)
        elif WARPGROUP == 0:
            scores = warpgroup_mma_wait(PENDING, deps=issued)
            _publish_probs(_probs(scores, lse_row, qk_scale, _block(block, scalars, WALK)[1], my_keys, CAUSAL,
                                  s_layout), tiles, probs_full, slot, phase)
        else:
            dprobs = warpgroup_mma_wait(PENDING, deps=issued)
            _publish_dscores(dprobs, delta_row, tiles, probs_full, slot, phase, s_layout)

    @gluon.constexpr_function
    def _gradient_columns(gradient, warpgroup, columns):
        """The (first column, width) parts of dV (gradient "dv") or dK ("dk") that this warpgroup
        accumulates, an accumulator a part: at 256 its 128 of each; on fewer columns, warpgroup 0
        dV's first 128 and dK's rest (32 or 64; on 224 64 + 32), warpgroup 1 the other way round,
        so that each makes one 128-column product a block and narrower ones, reading fewer operand
        bytes from shared memory than 64-column products would (NARROW_COLUMNS says what each
        measured)."""
        warpgroup, columns = int(warpgroup), int(columns)
        if columns == 256:
            return ((warpgroup * 128, 128),)
        wide_first = warpgroup == (0 if gradient == "dv" else 1)
        return ((0, 128),) if wide_first else column_parts(128, columns)

    @gluon.jit
    def _wait_for_both(dk, dv):
        """dK's and dV's parts (or any two tuples of accumulators), once every product has
        finished."""
        waited = warpgroup_mma_wait(0, deps=dk + dv)
        return waited[:len(dk)], waited[len(dk):]

    @gluon.jit
    def _wait_for(gradient, PENDING: gl.constexpr):
        """The gradient's parts, once at most PENDING later products still run."""
        if len(gradient) == 1:
            gradient = (warpgroup_mma_wait(PENDING, deps=gradient),)
        else:
            gradient = warpgroup_mma_wait(PENDING, deps=gradient)
        return gradient

    @gluon.jit
    def _issue_products(dk, dv, q, do, tiles, slot, phase, WARPGROUP: gl.constexpr, COLUMNS: gl.constexpr):
        """dV += Pᵀ·dO and dK += dSᵀ·Q on this warpgroup's columns, once both halves of the
        block's tiles are there; issued, not waited for."""
        probs_t, dscores_t, full, empty = tiles
        mbarrier.wait(full.index(slot), phase)
        dv = _accumulate(dv, probs_t.index(slot), do, _gradient_columns("dv", WARPGROUP, COLUMNS))
        dk = _accumulate(dk, dscores_t.index(slot), q, _gradient_columns("dk", WARPGROUP, COLUMNS))
        return dk, dv

    @gluon.jit
    def _reduce_dq(chunk, dq_parts, column):
        """One [64 queries x 64 columns] float32 chunk of dQ added into dQ's sums by a TMA
        reduce-add, through this warpgroup's staging tile once its previous reduce has read it."""
        dq_smem, dq_desc, dq_row, softmax_scale = dq_parts
        tma.store_wait(pendings=0)
        gl.thread_barrier()
        dq_smem.store(chunk * softmax_scale)
        fence_async_shared()
        gl.thread_barrier()
        attention_gluon_backward._tma_reduce_add(dq_desc, [dq_row, column], dq_smem)

    @gluon.jit
    def _block(i, scalars, WALK: gl.constexpr):
        """(query head, first query row) of the program's block i (attention_gluon_backward._walk)."""
        batch, kv_head, num_heads, group, seq_q, start_n, first_block, query_blocks, qk_scale, softmax_scale = scalars
        return attention_gluon_backward._walk(i, kv_head, group, first_block, query_blocks, 64, WALK)

    @gluon.jit
    def _dq_parts(i, dq_smem, dq_desc, scalars, WARPGROUP: gl.constexpr, WALK: gl.constexpr):
        """What _reduce_dq needs for block i: the staging tile, the descriptor, the block's first
        row in dQ's (batch * heads * seq_q, head_dim) sums, the scale."""
        batch, kv_head, num_heads, group, seq_q, start_n, first_block, query_blocks, qk_scale, softmax_scale = scalars
        head, start_m = _block(i, scalars, WALK)
        return (dq_smem.index(WARPGROUP), dq_desc, (batch * num_heads + head) * seq_q + start_m, softmax_scale)

    @gluon.jit
    def _last_dq_chunk(dscores, keys, zero_chunk, dq_parts, tiles_empty, q_empty, slot, COLUMN: gl.constexpr):
        """The block's dQ chunk at COLUMN (dS·K), then the block's tiles and Q slot handed back
        (both products that read them are done), then the chunk's reduce-add."""
        chunk = warpgroup_mma(dscores, keys.slice(COLUMN, 64, dim=1), zero_chunk, use_acc=False, is_async=True)
        chunk = warpgroup_mma_wait(0, deps=(chunk,))
        mbarrier.arrive(tiles_empty.index(slot), count=1)
        mbarrier.arrive(q_empty.index(slot), count=1)
        _reduce_dq(chunk, dq_parts, COLUMN)

    @gluon.jit
    def _summing_step(dk, dv, i, next_start_m, k_smem, v_smem, q_smem, do_smem, lse_smem, delta_smem, tiles,
                      barriers, dq_parts, qk_scale, my_keys, probs_full, WARPGROUP: gl.constexpr,
                      HEAD_DIM: gl.constexpr, CAUSAL: gl.constexpr, HAS_NEXT: gl.constexpr, COLUMNS: gl.constexpr,
                      s_layout: gl.constexpr, KV_EACH_BLOCK: gl.constexpr, ROLES: gl.constexpr):
        """Block i's dV, dK and this warpgroup's share of its dQ columns (64-column chunks, each
        added by a TMA reduce-add: at 256 the two of its 128 columns; on fewer, chunk WARPGROUP,
        and chunk 2 in every second block, the warpgroups taking turns), and with HAS_NEXT block i + 1's
        P and dS published (with ROLES, warpgroup 0 its P, warpgroup 1 its dS). dO has one slot
        here (shared memory holds the dQ staging instead), so dV's product goes first and its slot
        is handed back as soon as that is done: the next dO then loads while the next S, dK and
        dQ's products run."""
        probs_t, dscores_t, tiles_full, tiles_empty = tiles
        kv_bars, q_full, q_empty, do_full, do_empty, _, _ = barriers
        DV: gl.constexpr = _gradient_columns("dv", WARPGROUP, COLUMNS)
        DK: gl.constexpr = _gradient_columns("dk", WARPGROUP, COLUMNS)
        # Whether this warpgroup computes the next block's S (issued early, under this block's
        # products) and its dP (once the next dO is in, after them)
        NEXT_S: gl.constexpr = HAS_NEXT and (not ROLES or WARPGROUP == 0)
        NEXT_DP: gl.constexpr = HAS_NEXT and (not ROLES or WARPGROUP == 1)
        # dQ's 64-column chunks: two a warpgroup on more than 192 columns, else one each and the
        # third in turns; the first at CHUNK * WARPGROUP
        CHUNK: gl.constexpr = 128 if COLUMNS > 192 else 64
        slot = i % 2
        phase = (i // 2) & 1
        # K's and V's one slot, indexed by a value ptxas cannot hoist out of the loop (KV_EACH_BLOCK):
        # i >> 30 is 0 (a program walks fewer than 2^30 blocks; i >> 31 the compiler folds).
        # Hoisted, the shared-memory descriptor of each 16-column step of their products stays
        # live through the loop, and ptxas spilled scalars there: summing dQ at 256 columns 58
        # distinct accesses (6 this way), split 152 (27), on 192 64 (none), on 224 175 (none)
        # (CPU-compiled SASS); this way a block works them out again, a few integer adds.
        if KV_EACH_BLOCK:
            kv_slot = i >> 30
        else:
            kv_slot = 0
        keys = _tile(k_smem, kv_slot, 64, HEAD_DIM)
        score_k, score_v = _score_operands(keys, _tile(v_smem, kv_slot, 64, HEAD_DIM), WARPGROUP, ROLES)
        q = _tile(q_smem, slot, 64, HEAD_DIM)
        do = _tile(do_smem, 0, 64, HEAD_DIM)
        chunk_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                               instr_shape=[16, 64, 16])
        zero_chunk = gl.zeros([64, 64], gl.float32, chunk_layout)
        mbarrier.wait(tiles_full.index(slot), phase)
        dv = _accumulate(dv, probs_t.index(slot), do, DV)
        if HAS_NEXT:
            next_slot = (i + 1) % 2
            next_phase = ((i + 1) // 2) & 1
        if NEXT_S:
            mbarrier.wait(q_full.index(next_slot), next_phase)
            scores = _scores_product(_tile(q_smem, next_slot, 64, HEAD_DIM), score_k, COLUMNS, s_layout)
        dk = _accumulate(dk, dscores_t.index(slot), q, DK)
        dscores = dscores_t.index(slot).permute((1, 0))
        first = warpgroup_mma(dscores, keys.slice(WARPGROUP * CHUNK, 64, dim=1), zero_chunk, use_acc=False,
                              is_async=True)
        dv = _wait_for(dv, (_score_groups(COLUMNS) if NEXT_S else 0) + len(DK) + 1)
        mbarrier.arrive(do_empty.index(0), count=1)
        if NEXT_S:
            scores = warpgroup_mma_wait(len(DK) + 1, deps=(scores,))  # after it: dK's parts, the first dQ chunk
            probs = _probs(scores, lse_smem.index(next_slot), qk_scale, next_start_m, my_keys, CAUSAL, s_layout)
            if ROLES:  # out at once, for warpgroup 1's dS
                _publish_probs(probs, tiles, probs_full, next_slot, next_phase)
        dk, first = _wait_for_both(dk, (first,))
        _reduce_dq(first[0], dq_parts, WARPGROUP * CHUNK)
        if COLUMNS > 192:
            _last_dq_chunk(dscores, keys, zero_chunk, dq_parts, tiles_empty, q_empty, slot, WARPGROUP * 128 + 64)
        elif i % 2 == WARPGROUP:  # chunk 2 (columns 128-191): the warpgroups take turns
            _last_dq_chunk(dscores, keys, zero_chunk, dq_parts, tiles_empty, q_empty, slot, 128)
        else:
            mbarrier.arrive(tiles_empty.index(slot), count=1)
            mbarrier.arrive(q_empty.index(slot), count=1)
        if NEXT_DP:
            mbarrier.wait(do_full.index(0), (i + 1) & 1)
            dprobs = _scores_product(do, score_v, COLUMNS, s_layout)
            dprobs = warpgroup_mma_wait(0, deps=(dprobs,))
            if ROLES:
                _publish_dscores(dprobs, delta_smem.index(next_slot), tiles, probs_full, next_slot, next_phase,
                                 s_layout)
            else:
                _store_tiles(probs, dprobs, delta_smem.index(next_slot), tiles, next_slot, next_phase, WARPGROUP,
                             s_layout)
        return dk, dv

    @gluon.jit
    def _wide_consumer(descs, buffers, barriers, scalars, WARPGROUP: gl.constexpr, HEAD_DIM: gl.constexpr,
                       CAUSAL: gl.constexpr, ATOMIC_DQ: gl.constexpr, WALK: gl.constexpr, COLUMNS: gl.constexpr,
                       SPLIT: gl.constexpr, KV_EACH_BLOCK: gl.constexpr, ROLES: gl.constexpr):
        q_desc, k_desc, v_desc, do_desc, dk_desc, dv_desc, LSE, DELTA, dq_desc = descs
        k_smem, v_smem, q_smem, do_smem, lse_smem, delta_smem, tile_pair, dq_smem = buffers
        probs_t, dscores_t, probs_full = tile_pair
        kv_bars, q_full, q_empty, do_full, do_empty, tiles_full, tiles_empty = barriers
        batch, walk_head, num_heads, group, seq_q, start_n, first_block, query_blocks, qk_scale, softmax_scale = scalars
        kv_head = walk_head // SPLIT  # walk_head: this program's part of its KV head's query heads
        s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, _score_keys(ROLES), 16])
        tiles = (probs_t, dscores_t, tiles_full, tiles_empty)
        keys = _tile(k_smem, 0, 64, HEAD_DIM)
        values = _tile(v_smem, 0, 64, HEAD_DIM)
        my_k, my_v = _score_operands(keys, values, WARPGROUP, ROLES)
        if ROLES:
            my_keys = start_n
        else:
            my_keys = start_n + WARPGROUP * 32
        if WARPGROUP == 0:
            mbarrier.expect(kv_bars.index(0), 2 * k_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(k_desc, [batch, kv_head, start_n, 0], kv_bars.index(0),
                                            k_smem.index(0))
            tma.async_copy_global_to_shared(v_desc, [batch, kv_head, start_n, 0], kv_bars.index(0),
                                            v_smem.index(0))
        DV: gl.constexpr = _gradient_columns("dv", WARPGROUP, COLUMNS)
        DK: gl.constexpr = _gradient_columns("dk", WARPGROUP, COLUMNS)
        dk = _zero_gradient(DK)
        dv = _zero_gradient(DV)
        mbarrier.wait(kv_bars.index(0), 0)

        blocks = group * query_blocks
        if blocks > 0:
            # Block 0's P and dS; then each step issues block i + 1's scores before block i's
            # products, and publishes i + 1 while those run.
            if not ROLES:
                mbarrier.wait(q_full.index(0), 0)
                mbarrier.wait(do_full.index(0), 0)
                issued = _issue_scores(_tile(q_smem, 0, 64, HEAD_DIM), _tile(do_smem, 0, 64, HEAD_DIM), my_k, my_v,
                                       COLUMNS, s_layout)
            elif WARPGROUP == 0:
                mbarrier.wait(q_full.index(0), 0)
                issued = (_scores_product(_tile(q_smem, 0, 64, HEAD_DIM), my_k, COLUMNS, s_layout),)
            else:
                mbarrier.wait(do_full.index(0), 0)
                issued = (_scores_product(_tile(do_smem, 0, 64, HEAD_DIM), my_v, COLUMNS, s_layout),)
            _publish_next(issued, 0, scalars, lse_smem.index(0), delta_smem.index(0), my_keys, tiles, probs_full, 0, 0,
                          WARPGROUP, CAUSAL, 0, COLUMNS, s_layout, ROLES, WALK)
            last = blocks - 1
            if ATOMIC_DQ:
                for i in range(last):
                    dk, dv = _summing_step(dk, dv, i, _block(i + 1, scalars, WALK)[1], k_smem, v_smem,
                                           q_smem, do_smem, lse_smem, delta_smem, tiles, barriers,
                                           _dq_parts(i, dq_smem, dq_desc, scalars, WARPGROUP, WALK), qk_scale, my_keys,
                                           probs_full, WARPGROUP, HEAD_DIM, CAUSAL, True, COLUMNS, s_layout,
                                           KV_EACH_BLOCK, ROLES)
                dk, dv = _summing_step(dk, dv, last, 0, k_smem, v_smem, q_smem, do_smem, lse_smem, delta_smem,
                                       tiles, barriers, _dq_parts(last, dq_smem, dq_desc, scalars, WARPGROUP, WALK),
                                       qk_scale, my_keys, probs_full, WARPGROUP, HEAD_DIM, CAUSAL, False, COLUMNS,
                                       s_layout, KV_EACH_BLOCK, ROLES)
            else:
                for i in range(last):
                    slot = i % 2
                    phase = (i // 2) & 1
                    next_slot = (i + 1) % 2
                    next_phase = ((i + 1) // 2) & 1
                    next_q = _tile(q_smem, next_slot, 64, HEAD_DIM)
                    next_do = _tile(do_smem, next_slot, 64, HEAD_DIM)
                    if not ROLES:
                        mbarrier.wait(q_full.index(next_slot), next_phase)
                        mbarrier.wait(do_full.index(next_slot), next_phase)
                        issued = _issue_scores(next_q, next_do, my_k, my_v, COLUMNS, s_layout)
                    elif WARPGROUP == 0:
                        mbarrier.wait(q_full.index(next_slot), next_phase)
                        issued = (_scores_product(next_q, my_k, COLUMNS, s_layout),)
                    else:
                        mbarrier.wait(do_full.index(next_slot), next_phase)
                        issued = (_scores_product(next_do, my_v, COLUMNS, s_layout),)
                    dk, dv = _issue_products(dk, dv, _tile(q_smem, slot, 64, HEAD_DIM),
                                             _tile(do_smem, slot, 64, HEAD_DIM), tiles, slot, phase, WARPGROUP,
                                             COLUMNS)
                    _publish_next(issued, i + 1, scalars, lse_smem.index(next_slot), delta_smem.index(next_slot),
                                  my_keys, tiles, probs_full, next_slot, next_phase, WARPGROUP, CAUSAL,
                                  len(DK) + len(DV), COLUMNS, s_layout, ROLES, WALK)
                    dk, dv = _wait_for_both(dk, dv)
                    mbarrier.arrive(tiles_empty.index(slot), count=1)
                    mbarrier.arrive(q_empty.index(slot), count=1)
                    mbarrier.arrive(do_empty.index(slot), count=1)
                dk, dv = _issue_products(dk, dv, _tile(q_smem, last % 2, 64, HEAD_DIM),
                                         _tile(do_smem, last % 2, 64, HEAD_DIM), tiles, last % 2, (last // 2) & 1,
                                         WARPGROUP, COLUMNS)
                dk, dv = _wait_for_both(dk, dv)
                mbarrier.arrive(tiles_empty.index(last % 2), count=1)
                mbarrier.arrive(q_empty.index(last % 2), count=1)
                mbarrier.arrive(do_empty.index(last % 2), count=1)
            # Both warpgroups' scores read K and V (by role, one K, the other V), and both store
            # into them: wait for the other's last products
            # (its last scores came before them) before K's and V's slots take dK and dV, or Q's
            # the split's partial sums. (The dQ chunks read only this warpgroup's columns of K.)
            mbarrier.wait(tiles_empty.index(last % 2), (last // 2) & 1)
        if SPLIT == 1:
            dtype: gl.constexpr = q_desc.dtype
            for part in gl.static_range(len(DK)):
                keys.slice(DK[part][0], DK[part][1], dim=1).store((dk[part] * softmax_scale).to(dtype))
            for part in gl.static_range(len(DV)):
                values.slice(DV[part][0], DV[part][1], dim=1).store(dv[part].to(dtype))
            fence_async_shared()
            gl.thread_barrier()
            mbarrier.arrive(kv_bars.index(1), count=1)
            if WARPGROUP == 0:  # one store of the whole rows once both halves are there
                mbarrier.wait(kv_bars.index(1), 0)
                tma.async_copy_shared_to_global(dk_desc, [batch, walk_head, start_n, 0], k_smem.index(0))
                tma.async_copy_shared_to_global(dv_desc, [batch, walk_head, start_n, 0], v_smem.index(0))
                tma.store_wait(pendings=0)
        else:  # a split's float32 share, through this warpgroup's Q slot (free now)
            where = (batch, walk_head, start_n)
            staging = q_smem.index(WARPGROUP)
            for part in gl.static_range(len(DV)):
                _store_partial(dv[part], dv_desc, staging, where, DV[part][0], DV[part][1])
            for part in gl.static_range(len(DK)):
                _store_partial(dk[part] * softmax_scale, dk_desc, staging, where, DK[part][0], DK[part][1])
            tma.store_wait(pendings=0)
        if ATOMIC_DQ:
            tma.store_wait(pendings=0)  # this warpgroup's last dQ reduce-add has left

    @gluon.constexpr_function
    def _staged_columns(width):
        """Columns of float32 staging an accumulator of ``width`` takes: whole TMA boxes of 64."""
        return max(int(width), 64)

    @gluon.jit
    def _store_partial(gradient, desc, staging, where, FIRST: gl.constexpr, WIDTH: gl.constexpr):
        """A float32 [64, WIDTH] accumulator, columns FIRST.., into a split's partial sums (desc:
        (batch, KV heads x splits, seq_k, head_dim) float32) by TMA stores of 64 columns, through
        ``staging`` (a free 32 KB slot) once the previous store has read it. Columns past head_dim
        (a 32-column accumulator's box runs 32 past it) and rows past seq_k are clipped."""
        batch, walk_head, start_n = where
        STAGED: gl.constexpr = _staged_columns(WIDTH)
        tma.store_wait(pendings=0)
        gl.thread_barrier()
        tile = staging._reinterpret(gl.float32, [1, 1, 64, STAGED], desc.layout)
        tile.reshape([64, STAGED]).slice(0, WIDTH, dim=1).store(gradient)
        fence_async_shared()
        gl.thread_barrier()
        for box in gl.static_range(STAGED // 64):
            tma.async_copy_shared_to_global(desc, [batch, walk_head, start_n, FIRST + box * 64],
                                            tile.slice(box * 64, 64, dim=3))

    @gluon.jit
    def _wide_second_consumer(descs, buffers, barriers, scalars, HEAD_DIM: gl.constexpr, CAUSAL: gl.constexpr,
                              ATOMIC_DQ: gl.constexpr, WALK: gl.constexpr, COLUMNS: gl.constexpr,
                              SPLIT: gl.constexpr, KV_EACH_BLOCK: gl.constexpr, ROLES: gl.constexpr):
        _wide_consumer(descs, buffers, barriers, scalars, 1, HEAD_DIM, CAUSAL, ATOMIC_DQ, WALK, COLUMNS, SPLIT,
                       KV_EACH_BLOCK, ROLES)

    @gluon.jit(do_not_specialize=attention_gluon_backward.SHAPE_FREE_INTEGERS)
    def _attention_backward_dkdv_wide_kernel(q_desc, k_desc, v_desc, do_desc, dk_desc, dv_desc, LSE, DELTA,
                                             dq_desc, seq_q, seq_k, num_heads, num_kv_heads, group, qk_scale,
                                             softmax_scale, HEAD_DIM: gl.constexpr, CAUSAL: gl.constexpr,
                                             ATOMIC_DQ: gl.constexpr, HEAD_GROUP: gl.constexpr,
                                             WALK: gl.constexpr, COLUMNS: gl.constexpr, SPLIT: gl.constexpr,
                                             KV_EACH_BLOCK: gl.constexpr, ROLES: gl.constexpr,
                                             num_warps: gl.constexpr):
        dtype: gl.constexpr = q_desc.dtype
        # Split (SPLIT > 1), a program walks group / SPLIT of its KV head's query heads: as a
        # program of num_kv_heads * SPLIT KV heads of that many query heads each (walk_head).
        start_n, batch, walk_head, first_block, query_blocks = attention_gluon_backward._program_keys(
            num_kv_heads * SPLIT, seq_q, 64, CAUSAL, HEAD_GROUP, 64)

        k_smem = gl.allocate_shared_memory(dtype, [1, 1, 1, 64, HEAD_DIM], k_desc.layout)
        v_smem = gl.allocate_shared_memory(dtype, [1, 1, 1, 64, HEAD_DIM], v_desc.layout)
        q_smem = gl.allocate_shared_memory(dtype, [2, 1, 1, 64, HEAD_DIM], q_desc.layout)
        row_layout: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [0])
        lse_smem = gl.allocate_shared_memory(gl.float32, [2, 64], row_layout)
        delta_smem = gl.allocate_shared_memory(gl.float32, [2, 64], row_layout)
        # Summing dQ, dO has one slot: its second one's 32 KB hold the warpgroups' float32 dQ
        # staging tiles instead (sm90's 227 KB are full otherwise).
        DO_STAGES: gl.constexpr = 1 if ATOMIC_DQ else 2
        do_smem = gl.allocate_shared_memory(dtype, [DO_STAGES, 1, 1, 64, HEAD_DIM], do_desc.layout)
        if ATOMIC_DQ:
            dq_smem = gl.allocate_shared_memory(gl.float32, [2, 64, 64], dq_desc.layout)
        else:  # never touched
            dq_smem = lse_smem
        # Pᵀ and dSᵀ of a block, [64 keys x 64 queries], rows 32w.. written by warpgroup w (by role:
        # Pᵀ by warpgroup 0, dSᵀ by warpgroup 1).
        tile_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([64, 64], dtype)
        probs_t = gl.allocate_shared_memory(dtype, [2, 64, 64], tile_layout)
        dscores_t = gl.allocate_shared_memory(dtype, [2, 64, 64], tile_layout)
        # kv_bars: 0 K and V loaded, 1 both halves of dK and dV in their slots.
        kv_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        q_full = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        q_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        do_full = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        do_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        tiles_full = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        tiles_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        if ROLES:  # Pᵀ written (warpgroup 0), for warpgroup 1's dS
            probs_full = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
            for i in gl.static_range(2):
                mbarrier.init(probs_full.index(i), count=1)
        else:  # never touched
            probs_full = tiles_full
        mbarrier.init(kv_bars.index(0), count=1)
        mbarrier.init(kv_bars.index(1), count=2)
        for i in gl.static_range(2):
            mbarrier.init(q_full.index(i), count=1)
            mbarrier.init(q_empty.index(i), count=2)  # both consumers
            mbarrier.init(do_full.index(i), count=1)
            mbarrier.init(do_empty.index(i), count=2)
            mbarrier.init(tiles_full.index(i), count=2)  # both halves written
            mbarrier.init(tiles_empty.index(i), count=2)  # both warpgroups' products done

        # In attention_gluon_backward's order, for its producer (which uses the rings only).
        descs = (q_desc, k_desc, v_desc, do_desc, dk_desc, dv_desc, LSE, DELTA, dq_desc)
        buffers = (k_smem, v_smem, q_smem, do_smem, lse_smem, delta_smem, (probs_t, dscores_t, probs_full), dq_smem)
        barriers = (kv_bars, q_full, q_empty, do_full, do_empty, tiles_full, tiles_empty)
        scalars = (batch, walk_head, num_heads, group // SPLIT, seq_q, start_n, first_block, query_blocks, qk_scale,
                   softmax_scale)
        gl.warp_specialize([
            (_wide_consumer, (descs, buffers, barriers, scalars, 0, HEAD_DIM, CAUSAL, ATOMIC_DQ, WALK, COLUMNS,
                              SPLIT, KV_EACH_BLOCK, ROLES)),
            (_wide_second_consumer, (descs, buffers, barriers, scalars, HEAD_DIM, CAUSAL, ATOMIC_DQ, WALK, COLUMNS,
                                     SPLIT, KV_EACH_BLOCK, ROLES)),
            (attention_gluon_backward._dkdv_producer,
             (descs, buffers, barriers, scalars, HEAD_DIM, CAUSAL, ATOMIC_DQ, DO_STAGES, WALK)),
        ], [4, 1], [240, 24])  # registers of the second consumer and the producer


def backward_dkdv(grad_out: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lse: torch.Tensor,
                  delta: torch.Tensor, causal: bool, softmax_scale: float,
                  dq_sum: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(dk, dv) as attention_gluon_backward.backward_dkdv, at width 256 (on ``columns``); with
    ``dq_sum`` (attention_gluon_backward.dq_sum_buffer) dQ is also added into it by TMA
    reduce-adds, in an order that varies from run to run. Inputs pass
    attention_gluon_backward.usable; q's GPU is the current one."""
    batch, num_heads, seq_q, head_dim = q.shape
    num_kv_heads, seq_k = k.shape[1], k.shape[2]
    group = num_heads // num_kv_heads
    split = splits(causal, group, seq_k)
    if batch * num_kv_heads * split > MAX_GRID_Y:  # more programs than a grid holds: unsplit
        split = 1
    descriptor = attention_gluon._descriptor
    if split == 1:
        dk = torch.empty_like(k, memory_format=torch.contiguous_format)
        dv = torch.empty_like(v, memory_format=torch.contiguous_format)
        dk_desc, dv_desc = descriptor(dk, BLOCK_N, WIDTH), descriptor(dv, BLOCK_N, WIDTH)
    else:  # each program's dK and dV, as (batch, KV heads x splits, seq_k, head_dim) each
        partials = torch.empty((2, batch, num_kv_heads * split, seq_k, head_dim), device=q.device,
                               dtype=torch.float32)
        dk_desc, dv_desc = (_partials_descriptor(part) for part in partials)
    # Rows of (batch * heads * seq_q, head_dim), as attention_gluon_backward's: a block past a
    # head's seq_q adds zeros to the next head's rows, columns past head_dim are clipped.
    sums = attention_gluon_backward._placeholder(q.device, 128) if dq_sum is None else dq_sum
    dq_desc = attention_gluon_backward._dq_descriptor(sums, DQ_CHUNK)
    order, computed = walk(causal, group // split, seq_k), columns(head_dim)
    grid = (-(-seq_k // BLOCK_N), batch * num_kv_heads * split)
    fast(_attention_backward_dkdv_wide_kernel)[grid](
        descriptor(q, BLOCK_M, WIDTH), descriptor(k, BLOCK_N, WIDTH), descriptor(v, BLOCK_N, WIDTH),
        descriptor(grad_out, BLOCK_M, WIDTH), dk_desc, dv_desc,
        lse, delta, dq_desc, seq_q, seq_k, num_heads, num_kv_heads, group,
        softmax_scale * attention_gluon.LOG2_E, softmax_scale, HEAD_DIM=WIDTH, CAUSAL=causal,
        ATOMIC_DQ=dq_sum is not None, HEAD_GROUP=LONGEST_FIRST_HEADS, WALK=order,
        COLUMNS=computed, SPLIT=split, KV_EACH_BLOCK=kv_each_block(computed, split, order),
        ROLES=SCORE_ROLES, num_warps=4, maxnreg=MAX_REGISTERS)
    if split == 1:
        return dk, dv
    return sum_splits(partials, split, k.dtype)


MAX_GRID_Y = 65535  # CUDA's limit on a grid's second dimension


SUM_BLOCK = 2048  # elements of a row a program of _sum_splits_kernel sums


@triton.jit
def _sum_splits_kernel(PARTIALS, OUT, row_length, SPLIT: tl.constexpr, BLOCK: tl.constexpr):
    # Row r of OUT (row_length elements) = the sum of rows r * SPLIT .. r * SPLIT + SPLIT - 1 of
    # PARTIALS (float32), in that order, in OUT's dtype. Rows on the grid's first dimension (its
    # second holds at most 65535).
    row = tl.program_id(0).to(tl.int64)
    offsets = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < row_length
    first = PARTIALS + row * SPLIT * row_length
    total = tl.load(first + offsets, mask=inside, other=0.0)
    for part in tl.static_range(1, SPLIT):
        total += tl.load(first + part * row_length + offsets, mask=inside, other=0.0)
    tl.store(OUT + row * row_length + offsets, total.to(OUT.dtype.element_ty), mask=inside)


def sum_splits(partials: torch.Tensor, split: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(dk, dv) from the kernel's float32 partials ((2, batch, KV heads x split, seq_k, head_dim),
    the splits of a KV head side by side): each element's splits summed in order, split 0 first
    (the same bits every run), in one pass that reads each partial once: 85 µs at hd256 s4096
    b4 GQA 8:1 split 2 on the H200 (4.0 TB/s), where torch's sum then conversion took 198
    (twenty-fifth session, run 4)."""
    two, batch, heads, seq_k, head_dim = partials.shape
    out = torch.empty((two, batch, heads // split, seq_k, head_dim), device=partials.device, dtype=dtype)
    row_length = seq_k * head_dim
    grid = (two * batch * heads // split, triton.cdiv(row_length, SUM_BLOCK))
    fast(_sum_splits_kernel)[grid](partials, out, row_length, SPLIT=split, BLOCK=SUM_BLOCK, num_warps=4)
    dk, dv = out.unbind(0)
    return dk, dv


def _partials_layout():
    return gl.NVMMASharedLayout.get_default_for([1, 1, BLOCK_N, 64], gl.float32)


def _partials_descriptor(part: torch.Tensor):
    # A split's float32 dK or dV, stored 64 columns a box (the kernel's _store_partial).
    return attention_gluon.TensorDescriptor(part, list(part.shape), list(part.stride()), [1, 1, BLOCK_N, 64],
                                            _partials_layout())


def compile_sm90(causal: bool, atomic_dq: bool = False, dtype: torch.dtype = torch.bfloat16, walk: int = 0,
                 columns: int = WIDTH, split: int = 1, each_block: bool | None = None, roles: bool | None = None):
    """The kernel compiled for sm90 without a GPU, as attention_gluon.compile_sm90, computing on
    ``columns`` (160, 192, 224 or 256), each (KV head, 64 keys) over ``split`` programs (splits),
    summing dQ with K's and V's operands worked out in each block where ``each_block`` (None: as
    kv_each_block routes it) and the score products by warpgroup where ``roles`` (None: as
    SCORE_ROLES)."""
    roles = SCORE_ROLES if roles is None else roles
    return attention_gluon_backward.compile_dkdv_kernel(
        _attention_backward_dkdv_wide_kernel, WIDTH, causal, atomic_dq, dtype, DQ_CHUNK, LONGEST_FIRST_HEADS,
        walk=walk, columns=columns, split=split, roles=roles,
        kv_each_block=kv_each_block(columns, split, walk) if each_block is None else each_block,
        partials=f"tensordesc<fp32[1, 1, {BLOCK_N}, 64], {_partials_layout()!r}>" if split > 1 else None)


__all__ = ["backward_dkdv", "compile_sm90", "sum_splits", "WIDTH"]
