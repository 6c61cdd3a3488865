"""The attention forward on Hopper (sm90) in Gluon, Triton's lower-level language: warp-specialized
as in FlashAttention-3.

Why not Triton's own language: there the compiler schedules the tensor-core products and waits for
Q·Kᵀ at once, so the tensor cores idle while the softmax runs (ncu on the H200: 51 % tensor-pipe
activity for the Triton forward against cuDNN's 68 %), and Triton 3.6's automatic warp
specialization gave at most 8 % with wrong results at three stages (docs/benchmarks.md). Here
each program works through tiles of 128 query rows of one head, in three partitions:

- two consumer warpgroups of 64 query rows each: the online softmax and both products, Q·K_jᵀ
  issued together with P_{j-1}·V_{j-1} and waited for alone, so the second runs on the tensor
  cores during block j's softmax; P stays in registers as the product's A operand;
- one producer warp: each tile's Q, and K and V blocks into rings of two slots (three at widths
  32-64 in short calls: kv_stages), in shared memory by TMA, each slot refilled once both
  consumers have arrived on its "empty" barrier.

It is persistent: one program per SM (PERSISTENT), each looping over items of a static schedule
(attention_schedule), so that the next tile's Q and first K/V blocks load while the last tile
finishes, instead of a program's start and end leaving the SM idle (at 1024 keys a causal tile
holds four key blocks on average). Causal, items pair a head's query blocks i and last-i (or, with
an odd number of query blocks, two heads' middle blocks), so that they hold the same work, and a
head's are consecutive, so programs running at once share its K and V in L2; with an odd number,
the last rounds' items are single tiles, largest first. In a causal tile's last key block the first consumer's 64 rows see at most the
block's first 64 keys: it skips the rest (the whole block at widths 160-256, whose blocks are 64
keys; half of it at 32/64), where that measured faster (short_diagonal). Q has two slots where they fit (width < 256):
the output goes out through the slot its tile's Q held, which the producer refills for the tile
after next once that store has drained.

Loads and stores go through 4-D TMA descriptors over (batch, heads, seq, head_dim): rows past a
sequence's end and columns past head_dim are zero-filled on load and clipped on store, so ragged
lengths and head dims that are not a power of two need no copies; the key columns past seq_k are
masked in the last block, but in causal calls with no more queries than keys, where the causal
mask hides them from every stored row (checks_seq_k). Each partition makes the descriptors it
uses at its start, in the kernel (make_tensor_descriptor), so the launch takes plain tensors
and integers: built on the host, four
descriptors (eight at widths 48, 160 and 192) cost a call about 25 µs more host time than the Triton forward's
launch (59 against 36 µs on the H200's host), which made the forward host-bound in mid-size calls
(do_bench 0.21 ms against 0.11 ms of kernel time at hd128, b16 h32 s512), and kept it out of
attention_plan's replays (fifteenth session, bench/attention_mid_calls.py). It writes the base-2 log-sum-exp the backward
kernels read (attention.py), in their layout.

Measured on the H200 (docs/benchmarks.md): one program per tile, 1.19-1.22x the Triton forward at
head_dim 128 and 256 (ninth session); persistent, 0.96-1.09x cuDNN at head_dim 40-128 from 1024
keys and 0.86-0.93x causal at 512 (thirteenth session; 0.60-0.94x for the Triton forward there). FlashAttention-3's ping-pong
between the consumers (taking turns to issue their products) made no difference in the one-tile
kernel of the ninth session; in this one it gains 1-6 % at width 128 and runs there (pingpong).
"""

from __future__ import annotations

import functools

import torch

from . import attention_schedule
from .launch import fast, sm_count, use_torch_scratch

try:  # Gluon's Hopper modules: Triton >= 3.5
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (
        fence_async_shared,
        mbarrier,
        tma,
        warpgroup_mma,
        warpgroup_mma_wait,
    )
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
except ImportError:  # pragma: no cover - an older Triton: the Triton kernels run instead
    gluon = None

LOG2_E = 1.4426950408889634
BLOCK_M = 128  # query rows per tile: two consumer warpgroups of 64
CONSUMER_ROWS = 64
# Key rows per block, by the head_dim the kernel computes at (forward_width): sized so that Q
# (q_slots tiles of 128 rows) and two slots each of K and V fit sm90's 227 KB of shared memory and
# one consumer's registers (scores, P and the output accumulators) fit 240.
BLOCK_N = {32: 128, 48: 128, 64: 128, 96: 128, 128: 128, 160: 64, 192: 64, 256: 64}
# Width 192 (head_dim 161-192; 136-160 too before width 160) runs as 128 columns and a 64-column
# tail, each an operand of its own (Triton's tensors and TMA boxes have power-of-two shapes): a
# quarter fewer products than at 256, where it ran before (hd192 forward 0.76-0.81x cuDNN,
# thirteenth session). Width 160 (head_dim 136-160) as 128 + 32 columns, a sixth fewer products
# than at 192 (thirtieth session, run 8: 3-12 % faster in every call measured, 512-16384 keys,
# causal or not, GQA 4:1 and 8:1; x cuDNN 0.97-1.05 -> 1.06-1.15). Width 48 (head_dim 40-48;
# 33-39 run the Triton forward) likewise as 32 + 16 columns instead of 64: a quarter fewer
# products and K/V bytes in shared memory, but two P·V products a block. The tables by width
# below give 48 what they give 64 and 160 what they give 192, but half a diagonal block
# (_half_diagonal_block has no tail operand). Width 96 (head_dim 72-96) as 64 + 32 instead of 128,
# a quarter fewer products (run 10: 7-10 % faster in every call measured, 512-16384 keys, causal or
# not, GQA 4:1 and 8:1; x cuDNN 1.00-1.09 -> 1.09-1.18); the tables give it what they give 128.
# Empty: those head dims at the next power of two again (benches' A/B).
SPLIT = {48: (32, 16), 96: (64, 32), 160: (128, 32), 192: (128, 64)}
# Where SPLIT's widths run, by width: (causal calls from, calls not causal from) this many keys,
# None never; a width not here runs everywhere. Measured on the H200 (thirtieth session,
# bench/attention_gluon_split_widths.py, forward device time, 2^28 scores, settings taking turns, runs
# 1-4): width 48 against 64 not causal 3-5.5 % faster from 4096 keys (hd40 GQA 8:1 s8192 0.96-0.97
# -> 1.00-1.01x cuDNN, hd48 s4096 0.99-1.00 -> 1.04-1.05, hd48 s16384 1.00-1.01 -> 1.05-1.06) but
# 1-9 % slower at 512-3072; causal 1.6-5.6 % slower at 512-1024 and 8192-16384 keys, within 2 %
# at 2048-4096. Why it loses there is not known (at 1024 keys causal it also lacks the half diagonal
# block width 64 skips: short_diagonal); with the softmax under the last P·V in every call
# (softmax_under_pv, run 3) it went 7 % either way by shape (hd48 GQA 4:1 s8192 causal faster, hd40
# s16384 causal slower), not shipped.
SPLIT_MIN_KEYS = {48: (None, 4096)}
# Registers: 12 warps x 32 threads x 168 = the SM's 64 K; setmaxnreg then gives each consumer
# warpgroup 240 and the producer 24 (the kernel's warp_specialize call).
MAX_REGISTERS = 168
DTYPES = (torch.float16, torch.bfloat16)
# One program per SM, each looping over its units of work (_unit), the next tile's Q and first K/V
# blocks loading while the last one finishes; False: one program per unit (benches' A/B).
PERSISTENT = True
# Causal tiles: the first consumer warpgroup skips the keys of the tile's last block that are right
# of all of its 64 rows (_consumer_tile), half a block by width up to this many queries. Measured
# on the H200 (eighteenth session, bench/attention_gluon_short_diagonal.py, forward device time, causal, 2^28
# scores, two runs): at 64 keys a block (widths 192, 256: the whole block skipped) 2-12 % faster
# at 512-4096 keys; with half the block skipped, at width 64 0-5 % faster at 512 keys, 0-1 % at
# 1024, level at 2048 and 0.3-1.4 % slower at 4096, at width 32 2 % faster at 512 (the one length
# measured), and at width 128 (hd96/128) 1-9 % slower but once (hd128 s1024, 1.5 % faster): not
# there (why half a block costs more than it saves at width 128 is not known). At 64 keys a block
# (widths 160-256, and narrow_key_blocks) it skips the whole block at every length.
SHORT_DIAGONAL_MAX_QUERIES = {32: 512, 64: 1024}
SHORT_DIAGONAL = True  # False: never (benches' A/B)
# Causal calls up to this many keys, by width: the forward's key blocks of 64 rows (as at widths
# 160-256) instead of BLOCK_N's 128, so that a tile's pipeline fills and drains on half a block
# and the first consumer skips all of a tile's last block (SHORT_DIAGONAL). With them the K/V
# rings hold NARROW_KEY_BLOCK_SLOTS times kv_stages' slots (2: the same bytes). Measured on the
# H200 (twenty-seventh session, bench/attention_gluon_key_blocks.py, forward device time, 2^28
# scores, settings taking turns, runs 1, 2, 5 and 6): at 512 keys 5-15 % faster (x cuDNN hd64 0.84
# -> 0.95, hd40 0.85 -> 0.94, hd48 GQA 8:1 0.87 -> 0.96, hd96 0.86 -> 1.01, hd128 0.90 -> 1.01, the
# training pass's 256 keys 14.1 -> 13.1-13.3 µs), hd96 GQA 4:1 at 640 keys 8-13 %, at 768 hd40
# 2-4 % faster and hd64/hd128 level (-2.5 to +2.5 %), but 3-6 % slower at 1024 keys and 9-13 %
# from 2048. One slot per 128-key slot's bytes was level to 3.5 % slower; the consumers' turns
# (PINGPONG) level at width 64, 2-3 % slower at 128. Empty: BLOCK_N everywhere (benches' A/B).
NARROW_KEY_BLOCKS_MAX_KEYS = {32: 768, 48: 768, 64: 768, 96: 768, 128: 768}
NARROW_KEY_BLOCK_SLOTS = 2
# Slots of the K and V rings by width, up to KV_STAGES_MAX_KEYS[width] keys and from
# KV_STAGES_MIN_HEAD_DIM (two elsewhere): a third lets the producer load two blocks ahead, so that
# a tile's first blocks (the next head's, from HBM) are on their way while the tile before it
# ends. Measured on the H200 (nineteenth session, bench/attention_gluon_kv_stages.py, forward
# device time, 2^28 scores, settings taking turns, three runs): hd32 s512 causal 2-8 % faster,
# hd64 s512 causal 1-6 %, hd64 and hd48 s1024 causal 1.5-2.5 %, hd64 s512 and s1024 not causal
# 0.5-1 %; level at 2048 keys, 0.5-1.3 % slower at 4096 at width 32 and hd64 s16384; hd40 s512
# causal 4 % and 9 % slower in two runs of three (1.7 % faster in the other), though 2 % faster
# not causal. Four slots were no better than three. Widths 128-256 have no room for a third.
KV_STAGES = {32: 3, 48: 3, 64: 3}
KV_STAGES_MAX_KEYS = {32: 512, 48: 1024, 64: 1024}
KV_STAGES_MIN_HEAD_DIM = 48
# FlashAttention-3's ping-pong: the two consumers take turns to issue their products (a turn
# barrier each), so that one's softmax runs while the other's products keep the tensor cores
# busy, also across a tile's start and end. By width, from this many keys (causal calls and
# others). Measured on the H200 (twentieth session, bench/attention_gluon_pingpong.py, forward
# device time, 2^28 scores, settings taking turns, four runs): at width 128 (hd72-128) 3-6 %
# faster at 2048-16384 keys causal (GQA 8:1 included), 3-5 % at 512 not causal, 0-2 % at 1024,
# level at 4096 not causal; but at 512 keys causal level at hd128 and 2-7 % slower at hd80/96
# (4 % faster at the training pass's 256). At widths 32-64 level to 3.5 % slower (hd32 s512
# causal, hd64 s1024 causal), at 192-256 level.
PINGPONG_MIN_KEYS = {96: 0, 128: 0}
PINGPONG_CAUSAL_MIN_KEYS = {96: 1024, 128: 1024}
# FlashAttention-4's software exp2 (_exp2): by width, one score of every n exponentiated by a cubic on
# the FMA pipes instead of the SFU. Empty: none. Measured on the H200 (twenty-third session, run 1,
# forward, wait first): one in four 6 % faster at hd32 s4096, level at hd48, 1-22 % slower at
# hd64-128 (hd64 s512 causal 0.87 -> 0.68x cuDNN); one in two slower everywhere: the SFU is only
# half busy, so the instructions it adds cost more than the exp2s it saves (benches' A/B).
EXP2_POLY = {}
# Calls not causal, by width, from this many keys: the key loop's softmax of block j runs under
# P_{j-1}·V_{j-1}, whose wait ptxas otherwise moves above the exp2s (_consumer_tile: K_j's slot
# released after the softmax, under a branch). Measured on the H200 (twenty-third session,
# bench/attention_gluon_softmax.py, forward device time x cuDNN, 2^28 scores, settings taking
# turns, runs 3-4): not causal at widths 32-64 from 4096 keys 2-9 % faster (hd32 s4096 1.07 ->
# 1.18, hd48 s4096 0.93 -> 0.97, hd56 GQA 4:1 s8192 0.95 -> 0.99, hd64 s4096 0.95-0.97 -> 0.98,
# hd64 s16384 0.96 -> 1.00, hd64 GQA 8:1 s8192 0.97 -> 0.99), but at 512 keys level (hd32, hd64)
# or 11 % slower (hd40); at width 128 -3 to +6 % (hd72 GQA 4:1 s2048 slower, hd128 s4096
# faster), at 192-256 level to 3.5 % slower; causal 2-5 % slower at 512-4096 keys. The lengths
# between were measured in the thirty-seventh session (same bench, run 2, device µs, wait first /
# under P·V / wait first again): hd64 s1536 489 / 458 / 478, s2048 649 / 629 / 660, s3072 914 /
# 880 / 922, s1024 340 / 334 / 331, GQA 8:1 s1024 326 / 327 / 328; hd56 s1024 358 / 347 / 352,
# s512 fp16 195 / 188 / 191, GQA 4:1 s2048 665 / 664 / 656; hd48 s2048 651 / 621 / 645, GQA 8:1
# s1024 fp16 337 / 328 / 335; hd32 s1024 fp16 280 / 264 / 282, s2048 540 / 497 / 541; but hd40
# (width 64 below 4096 keys) s1024 332 / 363 / 335 and GQA 4:1 s2048 fp16 665 / 689 / 653. So
# from 1024 keys at widths 32 and 64, and at width 64 from SOFTMAX_UNDER_PV_MIN_HEAD_DIM (hd40
# is also the head_dim where a third K/V slot lost: KV_STAGES_MIN_HEAD_DIM). Empty: the wait
# before the softmax everywhere, as shipped before the twenty-third session.
SOFTMAX_UNDER_PV_MIN_KEYS = {32: 1024, 48: 4096, 64: 1024}
SOFTMAX_UNDER_PV_MIN_HEAD_DIM = {64: 48}
# Whether the key loop of causal calls runs the blocks no mask reaches (left of a warpgroup's
# first row, before a ragged seq_k's last block) apart from the masked ones at a tile's end:
# ptxas turns the masks' branches into selects over every score of every block (at width 64, 578
# instructions a key block causal, 740 causal and ragged, 421 with neither). Thirty-fifth
# session (bench/attention_gluon_masked_last.py, run 7, forward device µs, two parts / one /
# two again): causal ragged hd64 s1000 122.3 / 151.7 / 121.6, hd96 s1000 182.1 / 190.2 / 181.4,
# hd128 s1000 188.2 / 198.9 / 189.5, hd192 s2000 394.8 / 439.4 / 395.7; causal whole hd256 s4096
# 1789 / 1854 / 1842, hd128 GQA 4:1 s8192 1875 / 1903 / 1889, hd128 s4096 967 / 972 / 942, but
# hd64 s1024 110.7 / 106.3 / 109.1 and hd64 s16384 2478 / 2463 / 2495 (hd48 s2048 level); not
# causal, ragged: hd128 s1000 level, hd64 s4000 1263 / 1225 / 1253. Bitwise the same output.
# So: causal calls that mask a ragged seq_k (since the thirty-sixth session only those with more
# queries than keys: checks_seq_k), and the other causal calls at MASKED_BLOCKS_LAST_WIDTHS. Those
# were every width from 96 in the thirty-fifth session, but without the seq_k mask two parts ran
# slower at width 192 (thirty-sixth session, run 2, forward device µs, two parts / one loop /
# two parts with the seq_k mask forced on): hd192 causal s4096 1711 / 1487 / 1488, s2048 444 / 394
# / 415, s2000 435 / 391 / 395, GQA 4:1 s1000 239 / 218 / 227; hd160 s2000 level (360 / 350 /
# 354), hd128 s2000 level (258 / 257), hd256 s2000 487 / 509 / 486. Run 3 (bench/
# attention_gluon_masked_last.py, two parts at 256 only / one loop / two parts from 96 / the first
# again): hd128 s1000 162.1 / 154.8 / 161.5 / 161.4, s4096 948.6 / 961.6 / 960.7 / 950.1, GQA 4:1
# s8192 level; hd96 s1000 149.8 / 149.3 / 161.4; hd192 s4096 1492 / 1468 / 1624, GQA 8:1 s16384
# 5547 / 5436 / 6102; hd256 s4096 1764 / 1849 / 1765 / 1729, s2000 484 / 511 / 511 / 504, hd232
# GQA 8:1 s8192 3570 / 3648 / 3566 / 3552. False: one loop, every block through the masks,
# everywhere (benches' A/B).
MASKED_BLOCKS_LAST = True
MASKED_BLOCKS_LAST_WIDTHS = (256,)
# Whether causal calls whose queries are no more than their keys (self-attention) skip the mask of
# the keys past a ragged seq_k (CHECK_N): every query row below seq_q <= seq_k sees keys up to its
# own index only, so the causal mask hides those keys already; only the rows past seq_q, whose
# output and log-sum-exp are never stored (clipped by TMA, masked), see them, as zeros (K and V
# zero-filled by TMA). The key loop then has one mask's selects instead of two (thirty-sixth
# session, bench/attention_gluon_causal_covers.py). False: masked wherever seq_k is ragged
# (benches' A/B).
CAUSAL_MASK_COVERS_SEQ_K = True
# Causal calls with an even number of query blocks, by width, from this many keys: the persistent
# schedule's tail (attention_schedule: the last heads' tiles one by one, largest first, after the
# units of two tiles) instead of units alone, whose last round leaves about half of the SMs idle
# for a unit's time (thirty-seventh session, run 1: hd64 s512 causal, 990 / 1024 / 1056 heads,
# 1980 / 2048 / 2112 units on 132 SMs, took 127.1 / 133.9 / 134.1 µs: the 68 units past 15 rounds
# cost as much as 132). Measured on the H200 (bench/attention_gluon_schedule.py, forward device
# µs, units / tail taking turns, runs 9 and 10): at width 64 faster from 2048 keys, hd64 s16384
# 2470 / 2342 and 2475 / 2328, GQA 8:1 s16384 2442 / 2330, s8192 fp16 1296 / 1274, s2048 354.8 /
# 349.5 and 354.4 / 351.2, hd40 s8192 1239 / 1228, hd48 s4096 fp16 671.5 / 667.5; but slower at
# 512-1024 keys (hd64 s1024 203.9 / 209.7 and 205.5 / 212.4, s512 133.8 / 134.7, hd40 s512 135.8 /
# 137.0), where the general walk over the items costs more than the tail wins (twenty-first
# session), and mixed at width 128 (hd128 s8192 1866 / 1923, s4096 985.6 / 964.3 and 972.7 /
# 1010.4, s16384 3549 / 3544; hd96, on width 96, s16384 3051 / 3004). Run 11: width 32 hd32 s2048 322.0 / 310.5, s8192 1130 / 1067;
# width 256 at 16384 keys hd256 6613 / 6327 and 6668 / 6384, hd224 6781 / 6167, hd240 GQA 8:1 fp16
# 6863 / 6563, but at 8192 hd256 3408 / 3444 (GQA 4:1 s4096 1814 / 1757; s512 398.1 / 400.9).
# Runs 12 and 14, at 16384 keys: width 96 hd96 3198 / 3074 and 3113 / 2984, hd72 GQA 4:1 fp16 3196
# / 3150, hd88 GQA 4:1 3229 / 3112; width 160 hd144 GQA 8:1 4937 / 4722, hd152 GQA 8:1 4936 / 4816,
# hd160 4841 / 4844; width 192 hd192 5501 / 5276 and 5443 / 5335, hd176 GQA 4:1 fp16 5733 / 5535,
# hd184 GQA 4:1 5846 / 5466; width 128 about level (hd128 3601 / 3539, hd112 fp16 3737 / 3701,
# hd128 GQA 4:1 fp16 3607 / 3654), at 8192 slower (hd128 1866 / 1923, hd192 2799 / 2821). Empty:
# units alone at every even count (benches' A/B).
EVEN_TAIL_MIN_KEYS = {32: 2048, 64: 2048, 96: 16384, 160: 16384, 192: 16384, 256: 16384}


def _exp2_asm(elements: int) -> str:
    """PTX for inline_asm_elementwise's pack of ``elements`` float32s ($0.. out, $elements.. in,
    as 32-bit registers): the last by _exp2's cubic, the others by ex2.approx.ftz (as gl.exp2)."""
    lines = [f"ex2.approx.ftz.f32 ${i}, ${elements + i};" for i in range(elements - 1)]
    out, x = f"${elements - 1}", f"${2 * elements - 1}"
    lines += [
        "{", ".reg .b32 x, t, n, f, p, e;",
        f"max.ftz.f32 x, {x}, 0fC2FC0000;",  # -126
        "add.rn.f32 t, x, 0f4B400000;",  # 1.5 * 2^23: t's low bits are round(x)
        "sub.rn.f32 n, t, 0f4B400000;",
        "sub.rn.f32 f, x, n;",
        # 2^f on [-0.5, 0.5]: a cubic fitted for relative error (7.5e-5 at most)
        "fma.rn.ftz.f32 p, f, 0f3D61FBAB, 0f3E786F0E;",
        "fma.rn.ftz.f32 p, p, f, 0f3F31798D;",
        "fma.rn.ftz.f32 p, p, f, 0f3F7FFB49;",
        "shl.b32 e, t, 23;",  # round(x) << 23: the magic number's own bits shift out
        f"add.s32 {out}, p, e;", "}",
    ]
    return "\n".join(lines)


# The forward kernel's integer arguments (all but the pointers, the float and the constexprs),
# which it takes unspecialized: one compile a constexpr setting whatever the shapes (measured no
# slower on the H200: docs/benchmarks.md, thirty-fifth session).
SHAPE_FREE_INTEGERS = (
    "stride_qb", "stride_qh", "stride_qs", "stride_kb", "stride_kh", "stride_ks", "stride_vb", "stride_vh",
    "stride_vs", "stride_ob", "stride_oh", "stride_os", "batch", "seq_q", "seq_k", "num_heads", "num_kv_heads",
    "head_dim", "items", "head_units", "tail_heads", "query_blocks")


if gluon is not None:
    _EXP2_ONE_OF_2 = gl.constexpr(_exp2_asm(2))
    _EXP2_ONE_OF_4 = gl.constexpr(_exp2_asm(4))

    @gluon.jit
    def _exp2(x, EXP2_POLY: gl.constexpr):
        """2^x elementwise (x <= 0, or -inf), float32: by the SFU's ex2 (MUFU, 16 a clock an SM on
        sm90), but with EXP2_POLY = n one element of every n in each thread's registers by a
        cubic on the FMA pipes instead (FlashAttention-4's software exp2): n = round(x), then
        2^(x - n), x - n in [-0.5, 0.5], by the cubic (relative error 7.5e-5 against a bf16
        probability's 3.9e-3 and fp16's 4.9e-4 ulp), n added to its exponent bits. x is clamped at -126
        first (masked scores: -inf), below which the result is below float32's normal range and
        treated as 0 as the ftz MUFU result is."""
        if EXP2_POLY == 2:
            return gl.inline_asm_elementwise(_EXP2_ONE_OF_2, "=r,=r,r,r", [x], dtype=gl.float32, is_pure=True,
                                             pack=2)
        elif EXP2_POLY == 4:
            return gl.inline_asm_elementwise(_EXP2_ONE_OF_4, "=r,=r,=r,=r,r,r,r,r", [x], dtype=gl.float32,
                                             is_pure=True, pack=4)
        else:
            return gl.exp2(x)

    @gluon.jit
    def _masked_softmax(s, row_max, row_sum, start_m, start_n, seq_k, qk_scale,
                        ROWS: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr,
                        CHECK_N: gl.constexpr, FIRST: gl.constexpr, s_layout: gl.constexpr,
                        EXP2_POLY: gl.constexpr = 0):
        """Block ``start_n``'s probabilities (float32, relative to the new running max), the new
        max, the correction of what was summed before, and the new running sum."""
        cols = start_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        if CAUSAL:
            if start_n + BLOCK_N > start_m:  # a block on the diagonal: no key right of its query
                rows = start_m + gl.arange(0, ROWS, layout=gl.SliceLayout(1, s_layout))
                s = gl.where(rows[:, None] >= cols[None, :], s, float("-inf"))
        if CHECK_N:
            if start_n + BLOCK_N > seq_k:  # the last block: its rows past seq_k are zero-filled
                s = gl.where(cols[None, :] < seq_k, s, float("-inf"))
        block_max = gl.max(s, 1) * qk_scale
        if FIRST:
            new_max = block_max  # key 0 is visible to every row, so this is finite
        else:
            new_max = gl.maximum(row_max, block_max)
        probs = _exp2(s * qk_scale - new_max[:, None], EXP2_POLY)
        if FIRST:
            correction = gl.full_like(new_max, 1.0)
            row_sum = gl.sum(probs, 1)
        else:
            correction = gl.exp2(row_max - new_max)
            row_sum = row_sum * correction + gl.sum(probs, 1)
        return probs, new_max, correction, row_sum

    @gluon.jit
    def _key_blocks(start_m, seq_k, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr):
        """Key blocks the query block from row ``start_m`` visits (at least one: key 0)."""
        if CAUSAL:
            key_end = gl.minimum(start_m + BLOCK_M, seq_k)
        else:
            key_end = seq_k
        return gl.cdiv(key_end, BLOCK_N)

    @gluon.jit
    def _schedule_order(items, head_units, tail_heads, batch_heads, query_blocks):
        """What the walk over the schedule's items needs, worked out once before it: (items, head
        part's units, tail's heads (at least 1), their first head, its first round, units of a
        group of the head part, query blocks)."""
        pairs = query_blocks // 2
        odd = query_blocks % 2
        return (items, head_units, gl.maximum(tail_heads, 1), batch_heads - tail_heads,
                head_units // gl.num_programs(0), (1 + odd) * pairs + odd, query_blocks)

    @gluon.jit
    def _item_position(round_, order):
        """The position in the schedule's list of this program's item in one round
        (attention_schedule): round-robin, but from the round after the tail's first on, every
        second round taken from the other end (a snake). Not for SIMPLE schedules, whose walk is
        a strided range (_consumer)."""
        first_tail_round = order[4]
        programs = gl.num_programs(0)
        position = round_ * programs + gl.program_id(0)
        if (round_ > first_tail_round) & ((round_ - first_tail_round) % 2 == 1):
            position = round_ * programs + programs - 1 - gl.program_id(0)
        return position

    @gluon.jit
    def _item(position, order, CAUSAL: gl.constexpr, SIMPLE: gl.constexpr):
        """(batch x head and query block of the item's first tile, of its second, tiles: 0-2) of
        the item at ``position`` (attention_schedule). Causal, the head part's units pair a head's
        query blocks i and last-i, or (an odd number of them) the middle blocks of two heads; the
        tail's tiles come one by one, largest first. SIMPLE (pairs of one head, no tail) decodes
        with one division and nothing else: the code between tiles costs (twenty-first session,
        the general decode here 7-15 % slower at 512 keys causal on the same items, though not
        from its instructions, which a version working them out during the tile's first Q·Kᵀ did
        not win back: ncu put the SMs 14 % apart instead of 6 %)."""
        items, head_units, tail_heads, first_tail_head, first_tail_round, per_group, query_blocks = order
        count = (position < items).to(gl.int32)
        if CAUSAL and SIMPLE:
            head = position // per_group
            pair = position - head * per_group
            block = query_blocks - 1 - pair
            second_head = head
            second_block = pair
            count = count + count
        elif CAUSAL:
            pairs = query_blocks // 2
            if position < head_units:
                group = position // per_group
                within = position - group * per_group
                second = (within >= pairs).to(gl.int32)  # odd query blocks: the group's second head
                head = group * (1 + query_blocks % 2) + second
                pair = within - second * pairs
                block = query_blocks - 1 - pair
                second_head = head
                second_block = pair
                if within == 2 * pairs:  # odd query blocks: the middles of the group's two heads
                    head = group * 2
                    block = pairs
                    second_head = head + 1
                    second_block = pairs
                count = count + count
            else:
                tail = position - head_units
                rank = tail // tail_heads
                head = first_tail_head + tail - rank * tail_heads
                block = query_blocks - 1 - rank
                second_head = head
                second_block = block
        else:
            head = position // query_blocks
            block = position - head * query_blocks
            second_head = head
            second_block = block
        return head, block, second_head, second_block, count

    @gluon.jit
    def _query_tile(batch_head, block, num_heads, kv_group_size, seq_k, BLOCK_N: gl.constexpr,
                    CAUSAL: gl.constexpr):
        """(batch, head, KV head, first query row, key blocks) of query block ``block`` of a head."""
        start_m = block * 128  # BLOCK_M
        return (batch_head // num_heads, batch_head % num_heads, (batch_head % num_heads) // kv_group_size,
                start_m, _key_blocks(start_m, seq_k, 128, BLOCK_N, CAUSAL))

    @gluon.jit
    def _tma_descriptor(base, shape, strides, ROWS: gl.constexpr, COLUMNS: gl.constexpr):
        """A TMA descriptor over one (batch, heads, seq, head_dim) tensor: ``shape`` and its first
        three ``strides`` (head_dim's is 1), boxes of one head's ROWS rows and COLUMNS columns."""
        dtype: gl.constexpr = base.dtype.element_ty
        layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([1, 1, ROWS, COLUMNS], dtype)
        return tma.make_tensor_descriptor(base, shape, [strides[0], strides[1], strides[2], 1],
                                          [1, 1, ROWS, COLUMNS], layout)

    @gluon.jit
    def _tma_descriptors(base, shape, strides, ROWS: gl.constexpr, HEAD_DIM: gl.constexpr, TAIL: gl.constexpr):
        """(main, tail) descriptors of one tensor: its first HEAD_DIM columns and, with a TAIL, the
        TAIL columns from HEAD_DIM on (the tail is the main one where there is none)."""
        main = _tma_descriptor(base, shape, strides, ROWS, HEAD_DIM)
        if TAIL > 0:
            tail = _tma_descriptor(base, shape, strides, ROWS, TAIL)
        else:
            tail = main
        return main, tail

    @gluon.jit
    def _tile(ring, slot, ROWS: gl.constexpr, HEAD_DIM: gl.constexpr):
        # A 4-D (1, 1, rows, head_dim) TMA box as the 2-D operand the tensor cores read.
        return ring.index(slot).reshape([ROWS, HEAD_DIM])

    @gluon.jit
    def _pass_block(k_full, k_empty, v_full, v_empty, index):
        """Releases K/V block ``index`` unread: waiting for it to arrive first, so that this
        arrival counts toward its own phase of the "empty" barriers, not the one before."""
        STAGES: gl.constexpr = k_full.shape[0]
        mbarrier.wait(k_full.index(index % STAGES), (index // STAGES) & 1)
        mbarrier.arrive(k_empty.index(index % STAGES), count=1)
        mbarrier.wait(v_full.index(index % STAGES), (index // STAGES) & 1)
        mbarrier.arrive(v_empty.index(index % STAGES), count=1)

    @gluon.jit
    def _take_turn(turns, turn, WARPGROUP: gl.constexpr, PINGPONG: gl.constexpr):
        """With PINGPONG, waits for this consumer's turn ``turn`` (counted over its tiles) to issue
        products: the first consumer's turn k follows the second's turn k-1, the second's follows
        the first's turn k. A new barrier counts as phase 1 complete: the first's turn 0 is free."""
        if PINGPONG:
            mbarrier.wait(turns.index(WARPGROUP), (turn & 1) ^ (1 - WARPGROUP))

    @gluon.jit
    def _end_turn(turns, WARPGROUP: gl.constexpr, PINGPONG: gl.constexpr):
        """Hands the turn to the other consumer, once this one's products of the turn are issued."""
        if PINGPONG:
            mbarrier.arrive(turns.index(1 - WARPGROUP), count=1)

    @gluon.jit
    def _half_diagonal_block(my_q, probs, row_max, row_sum, acc, buffers, barriers, last, my_start, start_n,
                             seq_k, qk_scale, turns, turn, HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr,
                             CHECK_N: gl.constexpr, s_layout: gl.constexpr, o_layout: gl.constexpr,
                             PINGPONG: gl.constexpr, EXP2_POLY: gl.constexpr):
        """The first consumer's end of a causal tile at 128 keys a block: the last block's first
        64 keys (the rest are right of its rows) after block ``last``'s P·V, pipelined as the key
        loop is (Q·Kᵀ issued first, its softmax under P·V), in the tile's last two turns (``turn``
        the last). Returns (row max, row sum, output accumulator), the first two in the output's
        row layout. No tail operand: never at SPLIT's widths (short_diagonal)."""
        q_smem, k_smem, v_smem, q_tail_smem, k_tail_smem, v_tail_smem = buffers
        q_full, q_empty, k_full, k_empty, v_full, v_empty = barriers
        STAGES: gl.constexpr = k_full.shape[0]  # slots of the K/V rings
        KEYS: gl.constexpr = 64
        dtype: gl.constexpr = my_q.dtype
        h_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, KEYS, 16])
        h_rows: gl.constexpr = gl.SliceLayout(1, h_layout)
        o_rows: gl.constexpr = gl.SliceLayout(1, o_layout)
        p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
        index = last + 1
        slot = index % STAGES
        mbarrier.wait(k_full.index(slot), (index // STAGES) & 1)
        _take_turn(turns, turn - 1, 0, PINGPONG)
        s = warpgroup_mma(my_q, _tile(k_smem, slot, BLOCK_N, HEAD_DIM).slice(0, KEYS, dim=0).permute((1, 0)),
                          gl.zeros([64, KEYS], gl.float32, h_layout), use_acc=False, is_async=True)
        mbarrier.wait(v_full.index(last % STAGES), (last // STAGES) & 1)
        acc = warpgroup_mma(gl.convert_layout(probs.to(dtype), p_layout),
                            _tile(v_smem, last % STAGES, BLOCK_N, HEAD_DIM), acc, is_async=True)
        _end_turn(turns, 0, PINGPONG)
        s = warpgroup_mma_wait(1, deps=(s,))
        mbarrier.arrive(k_empty.index(slot), count=1)
        probs, row_max, correction, row_sum = _masked_softmax(
            s, gl.convert_layout(row_max, h_rows), gl.convert_layout(row_sum, h_rows), my_start, start_n, seq_k,
            qk_scale, 64, KEYS, True, CHECK_N, False, h_layout, EXP2_POLY)
        acc = warpgroup_mma_wait(0, deps=(acc,))
        mbarrier.arrive(v_empty.index(last % STAGES), count=1)
        acc = acc * gl.convert_layout(correction, o_rows)[:, None]
        mbarrier.wait(v_full.index(slot), (index // STAGES) & 1)
        p = gl.convert_layout(probs.to(dtype), p_layout)
        _take_turn(turns, turn, 0, PINGPONG)
        acc = warpgroup_mma(p, _tile(v_smem, slot, BLOCK_N, HEAD_DIM).slice(0, KEYS, dim=0), acc, is_async=True)
        _end_turn(turns, 0, PINGPONG)
        acc = warpgroup_mma_wait(0, deps=(acc,))
        mbarrier.arrive(v_empty.index(slot), count=1)
        return gl.convert_layout(row_max, o_rows), gl.convert_layout(row_sum, o_rows), acc

    @gluon.jit
    def _consumer_tile(descs, buffers, barriers, turns, tile, WARPGROUP: gl.constexpr, HEAD_DIM: gl.constexpr,
                       BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr, CHECK_N: gl.constexpr,
                       Q_SLOTS: gl.constexpr, TAIL: gl.constexpr, SHORT_DIAGONAL: gl.constexpr,
                       PINGPONG: gl.constexpr, EXP2_POLY: gl.constexpr, UNDER_PV: gl.constexpr,
                       MASKED_LAST: gl.constexpr):
        """One warpgroup's 64 query rows of one tile; ``tile`` is (batch, head, batch x head,
        first query row, key blocks, key blocks consumed before, tiles done before). With a
        TAIL, the head_dim columns from HEAD_DIM on are a second operand of each product. With
        PINGPONG, the products are issued in turns (_take_turn), blocks + 1 a tile for either
        consumer: the first Q·Kᵀ, one per later key block, the last P·V."""
        o_desc, LSE, seq_q, seq_k, qk_scale, o_tail_desc = descs
        q_smem, k_smem, v_smem, q_tail_smem, k_tail_smem, v_tail_smem = buffers
        q_full, q_empty, k_full, k_empty, v_full, v_empty = barriers
        STAGES: gl.constexpr = k_full.shape[0]  # slots of the K/V rings
        batch, head, batch_head, start_m, blocks, it, done = tile
        ROWS: gl.constexpr = 64
        dtype: gl.constexpr = o_desc.dtype
        s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, BLOCK_N, 16])
        o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, HEAD_DIM, 16])
        p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
        o_rows: gl.constexpr = gl.SliceLayout(1, o_layout)
        my_start = start_m + WARPGROUP * ROWS
        # The first warpgroup's 64 rows end 64 before the tile's, so in a causal tile's last key block
        # the keys from my_start + 64 on are masked for all of them: it skips that block's second
        # half at 128 keys a block, the whole block at 64 (SHORT_DIAGONAL). Not in a tile's only
        # block (the first query block's), which the pipeline below needs whole.
        # half a block (128 keys a block) has no tail operand: never at SPLIT's widths (_diagonal_skippable)
        gl.static_assert(not (CAUSAL and SHORT_DIAGONAL and BLOCK_N == 128 and TAIL > 0),
                         "the first consumer's half diagonal block has no tail operand")
        if CAUSAL and SHORT_DIAGONAL and WARPGROUP == 0:
            short = ((blocks > 1) & (gl.minimum(my_start + ROWS, seq_k) - (blocks - 1) * BLOCK_N
                                     <= BLOCK_N - ROWS)).to(gl.int32)
        else:
            short = 0
        q_slot = done % Q_SLOTS
        my_slot = q_slot * 2 + WARPGROUP
        my_q = _tile(q_smem, my_slot, ROWS, HEAD_DIM)
        zero_scores = gl.zeros([ROWS, BLOCK_N], gl.float32, s_layout)
        acc = gl.zeros([ROWS, HEAD_DIM], gl.float32, o_layout)
        if TAIL > 0:
            t_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                               instr_shape=[16, TAIL, 16])
            pt_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=t_layout, k_width=2)
            my_q_tail = _tile(q_tail_smem, my_slot, ROWS, TAIL)
            acc_tail = gl.zeros([ROWS, TAIL], gl.float32, t_layout)
        mbarrier.wait(q_full.index(q_slot), (done // Q_SLOTS) & 1)

        turn = it + done  # the tile's first turn
        mbarrier.wait(k_full.index(it % STAGES), (it // STAGES) & 1)
        _take_turn(turns, turn, WARPGROUP, PINGPONG)
        s = warpgroup_mma(my_q, _tile(k_smem, it % STAGES, BLOCK_N, HEAD_DIM).permute((1, 0)), zero_scores,
                          use_acc=False, is_async=True)
        if TAIL > 0:
            s = warpgroup_mma(my_q_tail, _tile(k_tail_smem, it % STAGES, BLOCK_N, TAIL).permute((1, 0)), s,
                              is_async=True)
        _end_turn(turns, WARPGROUP, PINGPONG)
        if Q_SLOTS > 1:
            # The previous tile's output store has had this product's time to drain: its slot
            # goes back to the producer for the tile after this one.
            if done > 0:
                tma.store_wait(pendings=0)
                mbarrier.arrive(q_empty.index((done - 1) % Q_SLOTS), count=1)
        s = warpgroup_mma_wait(0, deps=(s,))
        mbarrier.arrive(k_empty.index(it % STAGES), count=1)
        probs, row_max, correction, row_sum = _masked_softmax(
            s, 0.0, 0.0, my_start, 0, seq_k, qk_scale, ROWS, BLOCK_N, CAUSAL, CHECK_N, True, s_layout, EXP2_POLY)
        # The masks (CAUSAL: keys right of a row's query; CHECK_N: keys past seq_k) change only a
        # tile's last blocks, but ptxas turns each into selects over every score of every block (at
        # width 64 the key loop took 578 instructions a block causal, 740 causal with a ragged last
        # block, 421 with neither: thirty-fifth session). So where routed (masked_last) the loop runs
        # in two parts, first the blocks no mask reaches: left of this warpgroup's first row, before
        # seq_k's partial block.
        PARTS: gl.constexpr = 2 if MASKED_LAST else 1
        unmasked = blocks - short
        if PARTS == 2:
            if CAUSAL:
                unmasked = gl.minimum(unmasked, my_start // BLOCK_N)
            if CHECK_N:
                unmasked = gl.minimum(unmasked, seq_k // BLOCK_N)
            unmasked = gl.maximum(unmasked, 1)
        for part in gl.static_range(PARTS):
            if part == 0:
                first = 1
                end = unmasked
            else:
                first = unmasked
                end = blocks - short
            for j in range(first, end):
                slot = (it + j) % STAGES
                previous = (it + j - 1) % STAGES
                mbarrier.wait(k_full.index(slot), ((it + j) // STAGES) & 1)
                _take_turn(turns, turn + j, WARPGROUP, PINGPONG)
                s = warpgroup_mma(my_q, _tile(k_smem, slot, BLOCK_N, HEAD_DIM).permute((1, 0)), zero_scores,
                                  use_acc=False, is_async=True)
                if TAIL > 0:
                    s = warpgroup_mma(my_q_tail, _tile(k_tail_smem, slot, BLOCK_N, TAIL).permute((1, 0)), s,
                                      is_async=True)
                mbarrier.wait(v_full.index(previous), ((it + j - 1) // STAGES) & 1)
                p = gl.convert_layout(probs.to(dtype), p_layout)
                acc = warpgroup_mma(p, _tile(v_smem, previous, BLOCK_N, HEAD_DIM), acc, is_async=True)
                # Q·K_jᵀ was issued first: waiting for all but the P_{j-1}·V_{j-1} product(s) leaves
                # them on the tensor cores while block j's softmax runs.
                if TAIL > 0:
                    acc_tail = warpgroup_mma(gl.convert_layout(probs.to(dtype), pt_layout),
                                             _tile(v_tail_smem, previous, BLOCK_N, TAIL), acc_tail, is_async=True)
                    _end_turn(turns, WARPGROUP, PINGPONG)
                    s = warpgroup_mma_wait(2, deps=(s,))
                else:
                    _end_turn(turns, WARPGROUP, PINGPONG)
                    s = warpgroup_mma_wait(1, deps=(s,))
                if not UNDER_PV:
                    mbarrier.arrive(k_empty.index(slot), count=1)
                probs, row_max, correction, row_sum = _masked_softmax(
                    s, row_max, row_sum, my_start, j * BLOCK_N, seq_k, qk_scale, ROWS, BLOCK_N,
                    CAUSAL and part == PARTS - 1, CHECK_N and part == PARTS - 1, False, s_layout, EXP2_POLY)
                if UNDER_PV:
                    # K_j's slot released after the softmax, under a branch (seq_k > 0: always taken, but
                    # not known to the compilers): ptxas moves a wgmma wait up to the start of its basic
                    # block, so without one the wait for P_{j-1}·V_{j-1} below comes before the exp2s.
                    if seq_k > 0:
                        mbarrier.arrive(k_empty.index(slot), count=1)
                if TAIL > 0:
                    acc, acc_tail = warpgroup_mma_wait(0, deps=(acc, acc_tail))
                    acc_tail = acc_tail * gl.convert_layout(correction, gl.SliceLayout(1, t_layout))[:, None]
                else:
                    acc = warpgroup_mma_wait(0, deps=(acc,))
                mbarrier.arrive(v_empty.index(previous), count=1)
                acc = acc * gl.convert_layout(correction, o_rows)[:, None]
        last = it + blocks - 1 - short
        half = 0
        if BLOCK_N == 128:
            half = short
        if half:
            final_max, final_sum, acc = _half_diagonal_block(
                my_q, probs, row_max, row_sum, acc, buffers, barriers, last, my_start, (blocks - 1) * BLOCK_N,
                seq_k, qk_scale, turns, turn + blocks, HEAD_DIM, BLOCK_N, CHECK_N, s_layout, o_layout, PINGPONG,
                EXP2_POLY)
        else:
            if short:  # the skipped block's turn, taken empty
                _take_turn(turns, turn + blocks - 1, WARPGROUP, PINGPONG)
                _end_turn(turns, WARPGROUP, PINGPONG)
            mbarrier.wait(v_full.index(last % STAGES), (last // STAGES) & 1)
            p = gl.convert_layout(probs.to(dtype), p_layout)
            _take_turn(turns, turn + blocks, WARPGROUP, PINGPONG)
            acc = warpgroup_mma(p, _tile(v_smem, last % STAGES, BLOCK_N, HEAD_DIM), acc, is_async=True)
            if TAIL > 0:
                acc_tail = warpgroup_mma(gl.convert_layout(probs.to(dtype), pt_layout),
                                         _tile(v_tail_smem, last % STAGES, BLOCK_N, TAIL), acc_tail, is_async=True)
                _end_turn(turns, WARPGROUP, PINGPONG)
                acc, acc_tail = warpgroup_mma_wait(0, deps=(acc, acc_tail))
            else:
                _end_turn(turns, WARPGROUP, PINGPONG)
                acc = warpgroup_mma_wait(0, deps=(acc,))
            mbarrier.arrive(v_empty.index(last % STAGES), count=1)
            if short:  # 64 keys a block: the tile's last block is right of all of this warpgroup's rows
                _pass_block(k_full, k_empty, v_full, v_empty, last + 1)
            final_max = gl.convert_layout(row_max, o_rows)
            final_sum = gl.convert_layout(row_sum, o_rows)
        out = acc / final_sum[:, None]
        my_q.store(out.to(dtype))  # this warpgroup's Q slot is free: its last Q·Kᵀ is done
        if TAIL > 0:
            my_q_tail.store((acc_tail / gl.convert_layout(final_sum, gl.SliceLayout(1, t_layout))[:, None]).to(dtype))
        fence_async_shared()
        tma.async_copy_shared_to_global(o_desc, [batch, head, my_start, 0], q_smem.index(my_slot))
        if TAIL > 0:
            tma.async_copy_shared_to_global(o_tail_desc, [batch, head, my_start, HEAD_DIM],
                                            q_tail_smem.index(my_slot))
        rows = my_start + gl.arange(0, ROWS, layout=o_rows)
        gl.store(LSE + batch_head.to(gl.int64) * seq_q + rows, final_max + gl.log2(final_sum), mask=rows < seq_q)
        if Q_SLOTS == 1:  # the next tile's Q waits for this store
            tma.store_wait(pendings=0)
            mbarrier.arrive(q_empty.index(0), count=1)

    @gluon.jit
    def _consumer(io, buffers, barriers, turns, schedule, WARPGROUP: gl.constexpr, HEAD_DIM: gl.constexpr,
                  BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr, CHECK_N: gl.constexpr, Q_SLOTS: gl.constexpr,
                  TAIL: gl.constexpr, SHORT_DIAGONAL: gl.constexpr, PINGPONG: gl.constexpr, SIMPLE: gl.constexpr,
                  EXP2_POLY: gl.constexpr, UNDER_PV: gl.constexpr, MASKED_LAST: gl.constexpr):
        items, head_units, tail_heads, batch_heads, query_blocks, num_heads, kv_group_size = schedule
        Q, K, V, O, LSE, seq_q, seq_k, qk_scale, q_shape, kv_shape, q_strides, k_strides, v_strides, o_strides = io
        o_desc, o_tail_desc = _tma_descriptors(O, q_shape, o_strides, 64, HEAD_DIM, TAIL)
        descs = (o_desc, LSE, seq_q, seq_k, qk_scale, o_tail_desc)
        it = 0  # key blocks consumed: the K/V rings' position
        done = 0  # tiles done: the Q ring's
        order = _schedule_order(items, head_units, tail_heads, batch_heads, query_blocks)
        heads = (num_heads, kv_group_size, seq_k)
        # SIMPLE: the program's items as a strided range, as before the general walk (with the
        # rounds' loop instead, 5-8 % slower at hd40/64 s512 causal, twenty-first session run 7).
        if SIMPLE:
            for position in range(gl.program_id(0), items, gl.num_programs(0)):
                it, done = _consumer_item(position, order, heads, descs, buffers, barriers, turns, it, done, WARPGROUP,
                                          HEAD_DIM, BLOCK_N, CAUSAL, CHECK_N, Q_SLOTS, TAIL, SHORT_DIAGONAL, PINGPONG,
                                          SIMPLE, EXP2_POLY, UNDER_PV, MASKED_LAST)
        else:
            for round_ in range(0, gl.cdiv(items, gl.num_programs(0))):
                it, done = _consumer_item(_item_position(round_, order), order, heads, descs, buffers,
                                          barriers, turns, it, done, WARPGROUP, HEAD_DIM, BLOCK_N, CAUSAL, CHECK_N,
                                          Q_SLOTS, TAIL, SHORT_DIAGONAL, PINGPONG, SIMPLE, EXP2_POLY, UNDER_PV,
                                          MASKED_LAST)
        tma.store_wait(pendings=0)

    @gluon.jit
    def _consumer_item(position, order, heads, descs, buffers, barriers, turns, it, done, WARPGROUP: gl.constexpr,
                       HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr, CHECK_N: gl.constexpr,
                       Q_SLOTS: gl.constexpr, TAIL: gl.constexpr, SHORT_DIAGONAL: gl.constexpr,
                       PINGPONG: gl.constexpr, SIMPLE: gl.constexpr, EXP2_POLY: gl.constexpr, UNDER_PV: gl.constexpr,
                       MASKED_LAST: gl.constexpr):
        """One warpgroup's part of the item at ``position``: its tiles (_consumer_tile) in turn;
        returns the K/V and Q rings' positions after them."""
        num_heads, kv_group_size, seq_k = heads
        first_head, first_block, second_head, second_block, count = _item(position, order, CAUSAL, SIMPLE)
        for index in range(count):
            batch_head = first_head + index * (second_head - first_head)
            batch, head, kv_head, start_m, blocks = _query_tile(
                batch_head, first_block + index * (second_block - first_block), num_heads, kv_group_size,
                seq_k, BLOCK_N, CAUSAL)
            _consumer_tile(descs, buffers, barriers, turns, (batch, head, batch_head, start_m, blocks, it, done),
                           WARPGROUP, HEAD_DIM, BLOCK_N, CAUSAL, CHECK_N, Q_SLOTS, TAIL, SHORT_DIAGONAL, PINGPONG,
                           EXP2_POLY, UNDER_PV, MASKED_LAST)
            it += blocks
            done += 1
        return it, done

    @gluon.jit
    def _second_consumer(io, buffers, barriers, turns, schedule, HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr,
                         CAUSAL: gl.constexpr, CHECK_N: gl.constexpr, Q_SLOTS: gl.constexpr, TAIL: gl.constexpr,
                         SHORT_DIAGONAL: gl.constexpr, PINGPONG: gl.constexpr, SIMPLE: gl.constexpr,
                         EXP2_POLY: gl.constexpr, UNDER_PV: gl.constexpr, MASKED_LAST: gl.constexpr):
        _consumer(io, buffers, barriers, turns, schedule, 1, HEAD_DIM, BLOCK_N, CAUSAL, CHECK_N, Q_SLOTS, TAIL,
                  SHORT_DIAGONAL, PINGPONG, SIMPLE, EXP2_POLY, UNDER_PV, MASKED_LAST)

    @gluon.jit
    def _load_block(desc, ring, tail_desc, tail_ring, full, empty, index, batch, head, row,
                    HEAD_DIM: gl.constexpr, TAIL: gl.constexpr):
        """K or V block ``index`` (counted over the program's tiles) into its slot of a ring (two
        slots, or KV_STAGES) and its columns from HEAD_DIM on into the tail ring, once both
        consumers have released the block that slot held before. A new barrier counts as phase 1
        complete: each slot's first fill does not wait; the same holds for the Q ring."""
        STAGES: gl.constexpr = full.shape[0]
        slot = index % STAGES
        mbarrier.wait(empty.index(slot), ((index // STAGES) & 1) ^ 1)
        if TAIL > 0:
            mbarrier.expect(full.index(slot), desc.block_type.nbytes + tail_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(tail_desc, [batch, head, row, HEAD_DIM], full.index(slot),
                                            tail_ring.index(slot))
        else:
            mbarrier.expect(full.index(slot), desc.block_type.nbytes)
        tma.async_copy_global_to_shared(desc, [batch, head, row, 0], full.index(slot), ring.index(slot))

    @gluon.jit
    def _producer(io, buffers, barriers, schedule, HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr,
                  CAUSAL: gl.constexpr, CHECK_N: gl.constexpr, Q_SLOTS: gl.constexpr, TAIL: gl.constexpr,
                  SIMPLE: gl.constexpr):
        Q, K, V, O, LSE, seq_q, seq_k, qk_scale, q_shape, kv_shape, q_strides, k_strides, v_strides, o_strides = io
        q_desc, q_tail_desc = _tma_descriptors(Q, q_shape, q_strides, 64, HEAD_DIM, TAIL)
        k_desc, k_tail_desc = _tma_descriptors(K, kv_shape, k_strides, BLOCK_N, HEAD_DIM, TAIL)
        v_desc, v_tail_desc = _tma_descriptors(V, kv_shape, v_strides, BLOCK_N, HEAD_DIM, TAIL)
        descs = (q_desc, q_tail_desc, k_desc, k_tail_desc, v_desc, v_tail_desc)
        items, head_units, tail_heads, batch_heads, query_blocks, num_heads, kv_group_size = schedule
        it = 0
        done = 0
        order = _schedule_order(items, head_units, tail_heads, batch_heads, query_blocks)
        heads = (num_heads, kv_group_size, seq_k)
        if SIMPLE:  # as the consumers (_consumer)
            for position in range(gl.program_id(0), items, gl.num_programs(0)):
                it, done = _producer_item(position, order, heads, descs, buffers, barriers, it, done, HEAD_DIM,
                                          BLOCK_N, CAUSAL, Q_SLOTS, TAIL, SIMPLE)
        else:
            for round_ in range(0, gl.cdiv(items, gl.num_programs(0))):
                it, done = _producer_item(_item_position(round_, order), order, heads, descs, buffers,
                                          barriers, it, done, HEAD_DIM, BLOCK_N, CAUSAL, Q_SLOTS, TAIL, SIMPLE)

    @gluon.jit
    def _producer_item(position, order, heads, descs, buffers, barriers, it, done, HEAD_DIM: gl.constexpr,
                       BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr, Q_SLOTS: gl.constexpr, TAIL: gl.constexpr,
                       SIMPLE: gl.constexpr):
        """The loads of the item at ``position``: each tile's K and V blocks and Q; returns the K/V
        and Q rings' positions after them."""
        num_heads, kv_group_size, seq_k = heads
        q_desc, q_tail_desc, k_desc, k_tail_desc, v_desc, v_tail_desc = descs
        q_smem, k_smem, v_smem, q_tail_smem, k_tail_smem, v_tail_smem = buffers
        q_full, q_empty, k_full, k_empty, v_full, v_empty = barriers
        first_head, first_block, second_head, second_block, count = _item(position, order, CAUSAL, SIMPLE)
        for index in range(count):
            batch, head, kv_head, start_m, blocks = _query_tile(
                first_head + index * (second_head - first_head),
                first_block + index * (second_block - first_block), num_heads, kv_group_size, seq_k,
                BLOCK_N, CAUSAL)
            for j in range(blocks):
                _load_block(k_desc, k_smem, k_tail_desc, k_tail_smem, k_full, k_empty, it + j,
                            batch, kv_head, j * BLOCK_N, HEAD_DIM, TAIL)
                if j == 0:  # after the first K block, which can load while the last tile ends
                    q_slot = done % Q_SLOTS
                    mbarrier.wait(q_empty.index(q_slot), ((done // Q_SLOTS) & 1) ^ 1)
                    if TAIL > 0:
                        mbarrier.expect(q_full.index(q_slot),
                                        2 * (q_desc.block_type.nbytes + q_tail_desc.block_type.nbytes))
                    else:
                        mbarrier.expect(q_full.index(q_slot), 2 * q_desc.block_type.nbytes)
                    for half in gl.static_range(2):
                        tma.async_copy_global_to_shared(q_desc, [batch, head, start_m + half * 64, 0],
                                                        q_full.index(q_slot), q_smem.index(q_slot * 2 + half))
                        if TAIL > 0:
                            tma.async_copy_global_to_shared(
                                q_tail_desc, [batch, head, start_m + half * 64, HEAD_DIM], q_full.index(q_slot),
                                q_tail_smem.index(q_slot * 2 + half))
                _load_block(v_desc, v_smem, v_tail_desc, v_tail_smem, v_full, v_empty, it + j,
                            batch, kv_head, j * BLOCK_N, HEAD_DIM, TAIL)
            it += blocks
            done += 1
        return it, done

    # Every integer of the launch is left unspecialized: Triton would otherwise compile the kernel
    # again for each new class (1, divisible by 16, other) of any stride, size or count, which a
    # job's changing batch and sequence lengths hit, while the kernel only feeds them to its TMA
    # descriptors, loop bounds and masks at run time (SHAPE_FREE_INTEGERS).
    @gluon.jit(do_not_specialize=SHAPE_FREE_INTEGERS)
    def _attention_forward_ws_kernel(Q, K, V, O, LSE, stride_qb, stride_qh, stride_qs, stride_kb, stride_kh,
                                     stride_ks, stride_vb, stride_vh, stride_vs, stride_ob, stride_oh, stride_os,
                                     batch, seq_q, seq_k, num_heads, num_kv_heads, head_dim,
                                     qk_scale, items, head_units, tail_heads, query_blocks,
                                     HEAD_DIM: gl.constexpr,
                                     BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr, CHECK_N: gl.constexpr,
                                     Q_SLOTS: gl.constexpr, TAIL: gl.constexpr, SHORT_DIAGONAL: gl.constexpr,
                                     KV_STAGES: gl.constexpr, PINGPONG: gl.constexpr, SIMPLE: gl.constexpr,
                                     EXP2_POLY: gl.constexpr, UNDER_PV: gl.constexpr, MASKED_LAST: gl.constexpr,
                                     num_warps: gl.constexpr):
        dtype: gl.constexpr = Q.dtype.element_ty
        q_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([1, 1, 64, HEAD_DIM], dtype)
        kv_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([1, 1, BLOCK_N, HEAD_DIM], dtype)
        q_smem = gl.allocate_shared_memory(dtype, [2 * Q_SLOTS, 1, 1, 64, HEAD_DIM], q_layout)
        k_smem = gl.allocate_shared_memory(dtype, [KV_STAGES, 1, 1, BLOCK_N, HEAD_DIM], kv_layout)
        v_smem = gl.allocate_shared_memory(dtype, [KV_STAGES, 1, 1, BLOCK_N, HEAD_DIM], kv_layout)
        if TAIL > 0:  # head_dim's columns from HEAD_DIM on (width 192: 128 + 64)
            q_tail_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([1, 1, 64, TAIL], dtype)
            kv_tail_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([1, 1, BLOCK_N, TAIL], dtype)
            q_tail_smem = gl.allocate_shared_memory(dtype, [2 * Q_SLOTS, 1, 1, 64, TAIL], q_tail_layout)
            k_tail_smem = gl.allocate_shared_memory(dtype, [KV_STAGES, 1, 1, BLOCK_N, TAIL], kv_tail_layout)
            v_tail_smem = gl.allocate_shared_memory(dtype, [KV_STAGES, 1, 1, BLOCK_N, TAIL], kv_tail_layout)
        else:
            q_tail_smem = q_smem
            k_tail_smem = k_smem
            v_tail_smem = v_smem
        q_full = gl.allocate_shared_memory(gl.int64, [Q_SLOTS, 1], mbarrier.MBarrierLayout())
        q_empty = gl.allocate_shared_memory(gl.int64, [Q_SLOTS, 1], mbarrier.MBarrierLayout())
        k_full = gl.allocate_shared_memory(gl.int64, [KV_STAGES, 1], mbarrier.MBarrierLayout())
        k_empty = gl.allocate_shared_memory(gl.int64, [KV_STAGES, 1], mbarrier.MBarrierLayout())
        v_full = gl.allocate_shared_memory(gl.int64, [KV_STAGES, 1], mbarrier.MBarrierLayout())
        v_empty = gl.allocate_shared_memory(gl.int64, [KV_STAGES, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(Q_SLOTS):
            mbarrier.init(q_full.index(i), count=1)
            mbarrier.init(q_empty.index(i), count=2)  # both consumers
        turns = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())  # ping-pong
        if PINGPONG:
            for i in gl.static_range(2):
                mbarrier.init(turns.index(i), count=1)
        for i in gl.static_range(KV_STAGES):
            mbarrier.init(k_full.index(i), count=1)
            mbarrier.init(k_empty.index(i), count=2)
            mbarrier.init(v_full.index(i), count=1)
            mbarrier.init(v_empty.index(i), count=2)

        # Each partition makes the TMA descriptors it uses (make_tensor_descriptor: written to this
        # program's global scratch and fenced for the TMA unit by the threads that then use them).
        io = (Q, K, V, O, LSE, seq_q, seq_k, qk_scale, [batch, num_heads, seq_q, head_dim],
              [batch, num_kv_heads, seq_k, head_dim], [stride_qb, stride_qh, stride_qs],
              [stride_kb, stride_kh, stride_ks], [stride_vb, stride_vh, stride_vs], [stride_ob, stride_oh, stride_os])
        buffers = (q_smem, k_smem, v_smem, q_tail_smem, k_tail_smem, v_tail_smem)
        barriers = (q_full, q_empty, k_full, k_empty, v_full, v_empty)
        schedule = (items, head_units, tail_heads, batch * num_heads, query_blocks, num_heads,
                    num_heads // num_kv_heads)
        gl.warp_specialize([
            (_consumer, (io, buffers, barriers, turns, schedule, 0, HEAD_DIM, BLOCK_N, CAUSAL, CHECK_N, Q_SLOTS,
                         TAIL, SHORT_DIAGONAL, PINGPONG, SIMPLE, EXP2_POLY, UNDER_PV, MASKED_LAST)),
            (_second_consumer, (io, buffers, barriers, turns, schedule, HEAD_DIM, BLOCK_N, CAUSAL, CHECK_N,
                                Q_SLOTS, TAIL, SHORT_DIAGONAL, PINGPONG, SIMPLE, EXP2_POLY, UNDER_PV,
                                MASKED_LAST)),
            (_producer, (io, buffers, barriers, schedule, HEAD_DIM, BLOCK_N, CAUSAL, CHECK_N, Q_SLOTS, TAIL, SIMPLE)),
        ], [4, 1], [240, 24])  # registers of the second consumer and the producer (MAX_REGISTERS)


def available() -> bool:
    """This Triton has Gluon's Hopper modules."""
    return gluon is not None


def _from_keys(least: int | None, seq_k: int) -> bool:
    """A routing table's answer for a call of ``seq_k`` keys: from ``least`` keys on; None, never."""
    return least is not None and seq_k >= least


def kernel_width(head_dim: int) -> int:
    """The next power of two, at least 32: the width of the backward kernels' tiles (they compute
    on fewer of its columns at some head dims: attention_gluon_backward.columns)."""
    return max(32, 1 << (head_dim - 1).bit_length())


def forward_width(head_dim: int, seq_k: int, causal: bool) -> int:
    """The head_dim a call of ``seq_k`` keys computes at (TMA zero-fills the columns past
    head_dim): the next power of two, at least 32, or the narrowest of SPLIT's widths under it
    that holds head_dim where SPLIT_MIN_KEYS routes it (48 from 33 to 48 in calls not causal from
    4096 keys, 96 from 65 to 96, 160 from 136 to 160, 192 from 161 to 192)."""
    power = kernel_width(head_dim)

    def routed(width: int) -> bool:
        return _from_keys(SPLIT_MIN_KEYS.get(width, (0, 0))[0 if causal else 1], seq_k)

    return min((width for width in SPLIT if head_dim <= width < power and routed(width)), default=power)


def descriptor_ready(tensor: torch.Tensor) -> bool:
    """A (batch, heads, seq, head_dim) tensor TMA can read in place: 16-byte aligned start and
    strides, contiguous head_dim."""
    size = tensor.element_size()
    return (tensor.dtype in DTYPES and tensor.stride(-1) == 1 and tensor.data_ptr() % 16 == 0
            and all(stride * size % 16 == 0 for stride in tensor.stride()[:-1]))


def usable(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> bool:
    """The kernel can run these inputs (the caller has checked they are on an sm90 GPU)."""
    return (gluon is not None and q.shape[-1] <= 256 and q.dtype == k.dtype == v.dtype
            and all(descriptor_ready(tensor) for tensor in (q, k, v)))


@functools.lru_cache(maxsize=None)
def _shared_layout(rows: int, width: int, dtype: torch.dtype):
    return gl.NVMMASharedLayout.get_default_for([1, 1, rows, width],
                                                gl.bfloat16 if dtype == torch.bfloat16 else gl.float16)


def _descriptor(tensor: torch.Tensor, rows: int, width: int):
    return TensorDescriptor(tensor, list(tensor.shape), list(tensor.stride()), [1, 1, rows, width],
                            _shared_layout(rows, width, tensor.dtype))


def q_slots(width: int) -> int:
    """Q tiles in shared memory: two (the next tile's Q loads while this one runs) where they fit
    beside two slots each of K and V (192 KB at width 192 with 64-row K/V blocks), else one."""
    return 1 if width == 256 else 2


def narrow_key_blocks(width: int, seq_k: int, causal: bool) -> bool:
    """Whether the forward reads 64 keys a block where BLOCK_N has 128 (NARROW_KEY_BLOCKS_MAX_KEYS)."""
    return causal and BLOCK_N[width] > 64 and seq_k <= NARROW_KEY_BLOCKS_MAX_KEYS.get(width, 0)


def block_n(width: int, seq_k: int, causal: bool) -> int:
    """Keys a block of the forward's K/V rings: BLOCK_N, or 64 (narrow_key_blocks)."""
    return 64 if narrow_key_blocks(width, seq_k, causal) else BLOCK_N[width]


def kv_stages(head_dim: int, seq_k: int, causal: bool, width: int | None = None) -> int:
    """Slots of the K and V rings in a call at ``width`` (None: the call's, forward_width):
    KV_STAGES where measured faster (KV_STAGES_MAX_KEYS, KV_STAGES_MIN_HEAD_DIM at widths past
    32), else two; NARROW_KEY_BLOCK_SLOTS times that with 64-key blocks where BLOCK_N has 128
    (narrow_key_blocks)."""
    if width is None:
        width = forward_width(head_dim, seq_k, causal)
    stages = KV_STAGES.get(width, 2)
    if seq_k > KV_STAGES_MAX_KEYS.get(width, 0) or (width > 32 and head_dim < KV_STAGES_MIN_HEAD_DIM):
        stages = 2
    return stages * NARROW_KEY_BLOCK_SLOTS if narrow_key_blocks(width, seq_k, causal) else stages


def pingpong(width: int, seq_k: int, causal: bool) -> bool:
    """Whether the consumers take turns to issue their products (PINGPONG_MIN_KEYS,
    PINGPONG_CAUSAL_MIN_KEYS)."""
    return _from_keys((PINGPONG_CAUSAL_MIN_KEYS if causal else PINGPONG_MIN_KEYS).get(width), seq_k)


def softmax_under_pv(width: int, seq_k: int, causal: bool, head_dim: int | None = None) -> bool:
    """Whether the key loop's softmax runs under the last block's P·V (SOFTMAX_UNDER_PV_MIN_KEYS,
    SOFTMAX_UNDER_PV_MIN_HEAD_DIM) in a call of ``head_dim`` (None: ``width``) at ``width``."""
    narrowest = SOFTMAX_UNDER_PV_MIN_HEAD_DIM.get(width, 0)
    return (not causal and _from_keys(SOFTMAX_UNDER_PV_MIN_KEYS.get(width), seq_k)
            and (width if head_dim is None else head_dim) >= narrowest)


def checks_seq_k(seq_q: int, seq_k: int, keys_a_block: int, causal: bool) -> bool:
    """Whether the kernel masks the keys past seq_k (CHECK_N): where the last key block is partial,
    unless the causal mask hides them from every stored row (CAUSAL_MASK_COVERS_SEQ_K)."""
    ragged = seq_k % keys_a_block != 0
    return ragged and not (CAUSAL_MASK_COVERS_SEQ_K and causal and seq_q <= seq_k)


def masked_last(width: int, causal: bool, check_n: bool) -> bool:
    """Whether the key loop runs the blocks no mask reaches before the masked ones (MASKED_BLOCKS_LAST);
    ``check_n``: the kernel masks the keys past seq_k (checks_seq_k)."""
    return MASKED_BLOCKS_LAST and causal and (check_n or width in MASKED_BLOCKS_LAST_WIDTHS)


def even_tail(width: int, seq_k: int) -> bool:
    """Whether causal calls with an even number of query blocks get the schedule's tail (EVEN_TAIL_MIN_KEYS)."""
    return _from_keys(EVEN_TAIL_MIN_KEYS.get(width), seq_k)


def work(seq_q: int, seq_k: int, batch_heads: int, causal: bool, programs: int,
         width: int | None = None) -> attention_schedule.Schedule:
    """Which tiles each of at most ``programs`` programs runs (attention_schedule), at ``width``
    (None: without even_tail's routing)."""
    return attention_schedule.schedule(batch_heads, -(-seq_q // BLOCK_M), -(-seq_k // BLOCK_M), causal, programs,
                                       tail_at_even=width is not None and even_tail(width, seq_k))


def _diagonal_skippable(width: int, keys_a_block: int) -> bool:
    """Whether the kernel can skip what the first consumer's rows cannot see of a causal tile's
    last key block: the whole block at 64 keys a block, half of it at 128 only without a tail
    operand (_half_diagonal_block has none: not at SPLIT's widths)."""
    return keys_a_block == 64 or width not in SPLIT


def short_diagonal(width: int, seq_q: int, causal: bool, seq_k: int | None = None) -> bool:
    """The first consumer skips what its rows cannot see of a causal tile's last key block: all
    of it at 64 keys a block (block_n, ``seq_k`` keys: ``seq_q`` where None), else half of it up to
    SHORT_DIAGONAL_MAX_QUERIES where it can (_diagonal_skippable)."""
    keys_a_block = block_n(width, seq_q if seq_k is None else seq_k, causal)
    routed = keys_a_block == 64 or seq_q <= SHORT_DIAGONAL_MAX_QUERIES.get(width, 0)
    return SHORT_DIAGONAL and causal and routed and _diagonal_skippable(width, keys_a_block)


def attention_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                      softmax_scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(out, lse) as attention.attention_forward returns them: out contiguous like q, lse the
    base-2 log-sum-exp of the scaled scores, float32, (batch * heads, seq_q). Inputs pass
    ``usable``; q's GPU is the current one."""
    batch, num_heads, seq_q, head_dim = q.shape
    num_kv_heads, seq_k = k.shape[1], k.shape[2]
    width = forward_width(head_dim, seq_k, causal)
    main, tail = SPLIT.get(width, (width, 0))
    keys_a_block = block_n(width, seq_k, causal)
    check_n = checks_seq_k(seq_q, seq_k, keys_a_block, causal)
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    lse = torch.empty((batch * num_heads, seq_q), device=q.device, dtype=torch.float32)
    # One program an item where not PERSISTENT: a number of programs no item list reaches.
    schedule = work(seq_q, seq_k, batch * num_heads, causal, sm_count(q.device) if PERSISTENT else 1 << 30, width)
    use_torch_scratch()
    fast(_attention_forward_ws_kernel)[(schedule.programs,)](
        q, k, v, out, lse, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *out.stride()[:3],
        batch, seq_q, seq_k, num_heads, num_kv_heads, head_dim, softmax_scale * LOG2_E, schedule.items,
        schedule.head_units, schedule.tail_heads, -(-seq_q // BLOCK_M), HEAD_DIM=main, BLOCK_N=keys_a_block,
        CAUSAL=causal, CHECK_N=check_n,
        Q_SLOTS=q_slots(width), TAIL=tail, SHORT_DIAGONAL=short_diagonal(width, seq_q, causal, seq_k),
        KV_STAGES=kv_stages(head_dim, seq_k, causal, width), PINGPONG=pingpong(width, seq_k, causal),
        SIMPLE=schedule.simple, EXP2_POLY=EXP2_POLY.get(width, 0),
        UNDER_PV=softmax_under_pv(width, seq_k, causal, head_dim),
        MASKED_LAST=masked_last(width, causal, check_n),
        num_warps=4,
        maxnreg=MAX_REGISTERS)
    return out, lse


def compile_for_sm90(kernel, signature: dict, constexprs: dict, max_registers: int):
    """A Gluon kernel compiled for sm90 without a GPU (Triton's own ptxas), for this signature
    (argument name: Triton type, constexprs as "constexpr") and these constexpr values, on 4
    warps per partition as the launches run it. Not under TRITON_INTERPRET (the interpreter
    replaces the kernel's jit functions)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon import _runtime

    source = _runtime.GluonASTSource(fn=kernel, signature=signature, constexprs=constexprs, attrs={})
    target = GPUTarget("cuda", 90, 32)
    options = triton.compiler.make_backend(target).parse_options({"num_warps": 4, "maxnreg": max_registers})
    return triton.compile(source, target=target, options=options.__dict__)


def compile_sm90(width: int, causal: bool, check_n: bool, dtype: torch.dtype = torch.bfloat16,
                 short_diagonal: bool = True, seq_k: int = 512, ping_pong: bool | None = None,
                 simple: bool = True, exp2_poly: int | None = None, under_pv: bool | None = None):
    """The kernel compiled for sm90 without a GPU, as a launch at this width and ``seq_k`` keys
    (which sets the K/V rings' slots) would specialize it, ``ping_pong`` None as routed, ``simple``
    the schedule's walk of one head's pairs (Schedule.simple): for tests and benches on machines
    without a Hopper GPU (compile_for_sm90)."""
    name = "bf16" if dtype == torch.bfloat16 else "fp16"
    main, tail = SPLIT.get(width, (width, 0))

    pointer = f"*{name}"
    types = {"Q": pointer, "K": pointer, "V": pointer, "O": pointer, "LSE": "*fp32", "qk_scale": "fp32",
             **dict.fromkeys(SHAPE_FREE_INTEGERS, "i32")}
    signature = {parameter: types.get(parameter, "constexpr") for parameter in _attention_forward_ws_kernel.arg_names}
    keys_a_block = block_n(width, seq_k, causal)
    constexprs = {"HEAD_DIM": main, "BLOCK_N": keys_a_block, "CAUSAL": causal, "CHECK_N": check_n,
                  "Q_SLOTS": q_slots(width), "TAIL": tail,
                  "SHORT_DIAGONAL": short_diagonal and _diagonal_skippable(width, keys_a_block),
                  "KV_STAGES": kv_stages(width, seq_k, causal, width),
                  "PINGPONG": pingpong(width, seq_k, causal) if ping_pong is None else ping_pong,
                  "SIMPLE": simple, "EXP2_POLY": EXP2_POLY.get(width, 0) if exp2_poly is None else exp2_poly,
                  "UNDER_PV": softmax_under_pv(width, seq_k, causal) if under_pv is None else under_pv,
                  "MASKED_LAST": masked_last(width, causal, check_n),
                  "num_warps": 4}  # head_dim = width
    return compile_for_sm90(_attention_forward_ws_kernel, signature, constexprs, MAX_REGISTERS)


__all__ = ["available", "usable", "descriptor_ready", "kernel_width", "forward_width", "attention_forward", "BLOCK_N"]
