"""The warp-specialized Gluon dK/dV kernels on Hopper (gpudoctor.kernels.attention_gluon_backward,
on all of its width's columns or on 96 or 112 of 128's and 48 of 64's, and attention_gluon_backward_wide at
width 256, on 256, 224, 192 or 160 columns).

CPU (CI): the kernels compile for sm90 at every width they run at, with no local-memory traffic
in their main loops but a bounded number of 32-bit scalars (width 64 with its 128-query blocks,
summing dQ at widths 64 and 128), and spilled scalars but no accumulators at width 256; which
calls take them; that a config asking for them off
Hopper runs the Triton kernels. Gluon has no interpreter, so their results are checked on the GPU
(`pytest -m gpu`): against a float32 reference and the Triton backward at ragged and whole
lengths, GQA, cross-attention lengths, both dtypes, and through flash_attention's autograd.
"""

import dataclasses

import pytest
import torch
from gluonhelpers import SASS_TOOLS, compiled_in_child, gpu_inputs, hopper, needs_gluon

from gpudoctor.kernels import attention as attention_module
from gpudoctor.kernels import attention_gluon, attention_gluon_backward
from gpudoctor.kernels.attention import flash_attention, reference_attention, select_config

# Compiled in a child process (gluonhelpers.compiled_in_child). The SASS
# (nvdisasm, shipped with Triton) says where local memory is touched: ptxas may spill the few
# scalars the epilogue needs around the loop (32 bytes at width 128, causal), inside it only the
# scalars counted in LOCAL_SCALARS_IN_LOOP (and test_wide_kernel_compiles_for_sm90_without_local_memory's).
_COMPILE = SASS_TOOLS + """
import json, sys
from gpudoctor.kernels import attention_gluon_backward
rows = []
for width, causal, atomic_dq, *more in json.loads(sys.argv[1]):
    if len(more) == 3:  # the wide kernel's block order (attention_gluon_backward_wide.walk), columns and splits
        compiled = attention_gluon_backward.attention_gluon_backward_wide.compile_sm90(
            causal, atomic_dq, walk=more[0], columns=more[1], split=more[2])
    else:  # the columns computed on (attention_gluon_backward.columns), by default the width's
        compiled = attention_gluon_backward.compile_sm90(width, causal, atomic_dq, on_columns=(more or [None])[0])
    ptx = compiled.asm["ptx"]
    sass = sass_of(ptx)
    products = [i for i, line in enumerate(sass) if "HGMMA" in line]
    loops = sorted(product_loops(sass, products))
    in_loop = [line.strip() for start, end in loops for line in sass[start:end] if re.search(r"\\b(LDL|STL)\\b", line)]
    rows.append({"local_in_loop": in_loop, "loops": len(loops), "products": len(products), "warps": compiled.metadata.num_warps,
                 # accumulators spilled anywhere (128-bit local accesses), and the TMA stores of dK and dV
                 "wide_local": [line.strip() for line in sass if re.search(r"\\b(LDL|STL)\\.128\\b", line)],
                 "tma_stores": len(re.findall(r"cp\\.async\\.bulk\\.tensor\\.4d\\.global\\.shared", ptx)),
                 "shared": compiled.metadata.shared,
                 "setmaxnreg": re.findall(r"setmaxnreg\\.(inc|dec)\\.sync\\.aligned\\.u32\\s+(\\d+)", ptx),
                 "waits": sorted(set(re.findall(r"wgmma\\.wait_group\\.sync\\.aligned (\\d+)", ptx)))})
print(json.dumps(rows))
"""
COMPILE_CASES = [(width, causal, False) for width in attention_gluon_backward.WIDTHS for causal in (True, False)]
# With dQ summed in the kernel (gluon_atomic_dq): every width, causal or not.
ATOMIC_CASES = [(width, causal, True) for width in attention_gluon_backward.WIDTHS for causal in (True, False)]
# Head dims 72-96 on 96 of width 128's columns, 104-112 on 112, 40-48 on 48 of width 64's
# (attention_gluon_backward.NARROW_COLUMNS).
NARROW_CASES = [(width, columns) for width, narrow in attention_gluon_backward.NARROW_COLUMNS.items()
                for columns in narrow]
COMPILE_CASES += [(width, causal, False, columns) for width, columns in NARROW_CASES for causal in (True, False)]
ATOMIC_CASES += [(width, causal, True, columns) for width, columns in NARROW_CASES for causal in (True, False)]

# Distinct local-memory accesses (spilled scalars: indices, addresses, barrier phases) inside the
# main loops, read from the SASS; none elsewhere, never a 128-bit one, and 64-bit ones only as
# LOCAL_PAIRS_IN_LOOP allows (no accumulator). Width 64 runs 128-query blocks (QUERY_ROWS): 64 +
# 64 float32 registers of Sᵀ and dPᵀ per thread. Measured on the H200 with them
# (docs/benchmarks.md, seventeenth session): the dK/dV kernel up to 22 % faster than with
# 64-query blocks, these spills included (level at 512 keys summing dQ).
# Summing dQ at width 64 and causal at 128, each dQ share a block late
# (attention_gluon_backward.DQ_SHARE_LAG, thirty-third session: 19 -> 52 at 64 causal, 12 -> 33 not
# causal, 26 -> 48 at 128 causal; on 48 columns 16 -> 39 causal, 5 -> 7 not causal; on 96 causal
# 0 -> 21, on 112 causal 16 -> 67; measured faster with them all the same), and a few 64-bit ones
# (LOCAL_PAIRS_IN_LOOP). On 112 columns not causal 4 without the lag.
LOCAL_SCALARS_IN_LOOP = {(64, True, False): 2, (64, True, True): 52, (64, False, True): 33, (128, True, True): 48,
                         # on 48 of width 64's columns, 96 and 112 of 128's (NARROW_COLUMNS)
                         (64, True, True, 48): 39, (64, False, True, 48): 7, (128, True, True, 96): 21,
                         (128, True, True, 112): 67, (128, False, True, 112): 4}
# Distinct 64-bit local accesses inside the loops where the shares lag (values stored before the
# loop and read back in it, one re-stored at width 128): a pair of scalars each. Never wider, and
# never as many as an accumulator (Sᵀ, dPᵀ, dK and dV hold 32-64 registers a thread each) would take.
LOCAL_PAIRS_IN_LOOP = {(64, True, True): 1, (64, False, True): 1, (128, True, True): 3, (64, True, True, 48): 2,
                       (64, False, True, 48): 1, (128, True, True, 96): 4, (128, True, True, 112): 7}

# Width 256: attention_gluon_backward_wide's kernel (backward_dkdv hands it that width), computing on
# 256, 224, 192 or 160 columns (attention_gluon_backward_wide.columns).
WIDE_CASES = [(256, causal, atomic_dq, 0, columns, 1) for causal in (True, False) for atomic_dq in (False, True)
              for columns in (256, 224, 192, 160)]
# And its chunked walk, which causal grouped-query calls from 8192 keys take.
WIDE_CASES += [(256, True, atomic_dq, attention_gluon_backward.attention_gluon_backward_wide.CHUNKED_WALK, 256, 1)
               for atomic_dq in (False, True)]
# And split (attention_gluon_backward_wide.splits), as causal calls of 8 or more query heads a KV head.
WIDE_CASES += [(256, True, atomic_dq, 0, columns, 2) for atomic_dq in (False, True)
               for columns in (256, 224, 192, 160)]

@pytest.fixture(scope="module")
def compiled_sm90():
    return compiled_in_child(_COMPILE, COMPILE_CASES + ATOMIC_CASES + WIDE_CASES)


@needs_gluon
@pytest.mark.parametrize("case", COMPILE_CASES, ids=lambda case: "-".join(map(str, case)))
def test_compiles_for_sm90_without_local_memory_in_the_loop(case, compiled_sm90):
    row = compiled_sm90[tuple(case)]
    assert len(set(row["local_in_loop"])) <= LOCAL_SCALARS_IN_LOOP.get(tuple(case), 0), row["local_in_loop"]
    assert not [line for line in row["local_in_loop"] if ".64" in line or ".128" in line], row["local_in_loop"]
    assert row["loops"] == 2, row["loops"]  # one main loop per consumer warpgroup
    # Three partitions: two consumer warpgroups at 240 registers each, a producer at 24.
    assert row["warps"] == 12
    assert ["inc", "240"] in row["setmaxnreg"] and ["dec", "24"] in row["setmaxnreg"]
    # Sᵀ waited for while dPᵀ still runs, dPᵀ while dV's products run: the overlap it exists for
    # (on fewer columns than the width, a wgmma group a part of the columns), then for all.
    # On 112 columns dK's and dV's products run on all 128 (gradient_parts): one group each.
    columns = case[3] if len(case) > 3 else case[0]
    pending = {len(attention_gluon_backward.column_parts(0, columns)),
               len(attention_gluon_backward.gradient_parts(columns, case[0]))}
    assert row["waits"] == sorted(map(str, {0} | pending)), row["waits"]
    assert row["shared"] <= 232448  # sm90's 227 KB


@needs_gluon
@pytest.mark.parametrize("case", ATOMIC_CASES, ids=lambda case: "-".join(map(str, case)))
def test_summing_dq_compiles_for_sm90_within_shared_memory(case, compiled_sm90):
    assert attention_gluon_backward.SUMS_DQ  # this Triton (3.6) has the internals it reaches
    row = compiled_sm90[tuple(case)]
    assert row["warps"] == 12
    assert ["inc", "240"] in row["setmaxnreg"] and ["dec", "24"] in row["setmaxnreg"]
    # dSᵀ (2 blocks x 128 x 64) and a float32 dQ share per warpgroup beside the rings: within 227 KB.
    assert row["shared"] <= 232448
    # dK, dV and the dQ share stay in registers; ptxas reloads scalars inside the loop
    # (LOCAL_SCALARS_IN_LOOP; at width 128, causal, 9 since the causal programs run heaviest first,
    # LONGEST_FIRST_HEADS, 26 since the causal mask is skipped where no key is masked, 48 since the
    # dQ shares lag a block). The loops are not counted here: the barrier waits between the
    # products leave more label-to-branch spans.
    local = set(row["local_in_loop"])
    assert len(local) <= LOCAL_SCALARS_IN_LOOP.get(tuple(case), 0), row["local_in_loop"]
    assert not [line for line in local if ".128" in line], row["local_in_loop"]
    pairs = [line for line in local if ".64" in line]
    assert len(pairs) <= LOCAL_PAIRS_IN_LOOP.get(tuple(case), 0), row["local_in_loop"]


@needs_gluon
def test_dq_staging_layout_follows_the_swizzle_setting(monkeypatch):
    """The dQ staging tile's layout is the one DQ_SWIZZLE_BYTES says when the descriptor is made,
    whatever an earlier call cached (bench/attention_gluon_backward_dq_swizzle.py switches it
    between calls); None: the layout's default, 128 bytes at these tiles."""
    for swizzle, expected in ((None, 128), (32, 32), (None, 128), (64, 64)):
        monkeypatch.setattr(attention_gluon_backward, "DQ_SWIZZLE_BYTES", swizzle)
        assert attention_gluon_backward._dq_layout(64, 64).swizzle_byte_width == expected


@needs_gluon
@pytest.mark.parametrize("case", WIDE_CASES, ids=lambda case: "-".join(map(str, case)))
def test_wide_kernel_compiles_for_sm90_without_local_memory(case, compiled_sm90):
    """Width 256: dK and dV split by columns between the warpgroups (64 + 64 registers each) and
    the scores by warpgroup (S in one, dP in the other: 32 registers), so nothing spills; Pᵀ/dSᵀ
    tiles beside the rings within 227 KB. Summing dQ, ptxas spills scalars (indices, addresses)
    in the loops, measured on the H200 with them (docs/benchmarks.md, twelfth session), but never
    the accumulators: no local access wider than 64 bits."""
    width, causal, atomic_dq, _, columns, split = case
    assert attention_gluon_backward.attention_gluon_backward_wide.SCORE_ROLES  # the bounds below are by role
    row = compiled_sm90[tuple(case)]
    assert row["wide_local"] == [], row["wide_local"]
    # dK and dV: one TMA store each of the whole rows (the first warpgroup, split 1), or split
    # each warpgroup's float32 accumulators 64 columns a store (a 32-column one in one box; on 224
    # a warpgroup's 64 + 32 parts in one box each).
    assert row["tma_stores"] == (2 if split == 1 else {256: 8, 224: 8, 192: 6, 160: 6}[columns]), row["tma_stores"]
    if atomic_dq:
        assert not [line for line in row["local_in_loop"] if ".128" in line], row["local_in_loop"]
        # measured with the score products by warpgroup (SCORE_ROLES; by keys: 58, 23, 16, 27, 0,
        # 0, 6): at 256 columns K's and V's operands hoisted 12 causal, 4 not; worked out in each
        # block (attention_gluon_backward_wide.kv_each_block) in the chunked walk and split none; on
        # 224 and 192 none; on 160 hoisted, split 4
        assert len(set(row["local_in_loop"])) <= (4 if split > 1 else 12), row["local_in_loop"]
    else:
        assert row["local_in_loop"] == [], row["local_in_loop"]
    assert row["warps"] == 12
    assert ["inc", "240"] in row["setmaxnreg"] and ["dec", "24"] in row["setmaxnreg"]
    # The score products by warpgroup (SCORE_ROLES): the next block's S (warpgroup 0) or dP
    # (warpgroup 1) waited for while this block's dK and dV run (2 pending; on 224 columns a
    # warpgroup's dK or dV is two parts, 64 + 32: 3); summing dQ, S while this block's dK and first
    # dQ chunk run (2; on 224 3 in warpgroup 0, dK's two parts and the chunk), and dV with S's
    # wgmma groups (1 at 256, 2 on 160 or 192 columns, 3 on 224: column_parts), dK and the chunk
    # (3 at 256, 4 on 192 and 160, 6 on 224).
    pending = ({256: {"3", "2"}, 224: {"6", "3"}, 192: {"4", "2"}, 160: {"4", "2"}} if atomic_dq
               else {256: {"2"}, 224: {"3"}, 192: {"2"}, 160: {"2"}})[columns]
    assert pending <= set(row["waits"]), row["waits"]
    assert row["shared"] <= 232448


def test_selected_on_hopper_for_long_sequences_in_the_measured_bucket():
    assert select_config((9, 0), 128, 4096).gluon_backward
    assert select_config((9, 0), 112, 2048).gluon_backward
    assert select_config((9, 0), 104, 4096).gluon_backward  # the 128 bucket
    assert select_config((9, 0), 128).gluon_backward  # seq_k unknown: long
    assert select_config((9, 0), 128, 1024, 2 * 32 * 1024 * 1024).gluon_backward  # GLUON_MANY_SCORES
    # fewer: from 2^24 scores the long path all the same (SMALL_CALLS_LONG_PATH_MIN_SCORES), below the
    # one-launch backward
    assert select_config((9, 0), 128, 1024, 1 * 32 * 1024 * 1024).gluon_backward
    assert not select_config((9, 0), 128, 1024, 8 * 1024 * 1024).gluon_backward
    assert select_config((9, 0), 128, 1024, 16 * 32 * 1024 * 1024).gluon_backward
    assert select_config((9, 0), 128, 512, 32 * 32 * 512 * 512).gluon_backward
    assert select_config((9, 0), 128, 256, 2 ** 30).gluon_backward  # from 256 keys (UNPADDED_GLUON_MIN_SEQ)
    assert not select_config((9, 0), 128, 128, 2 ** 30).gluon_backward
    assert select_config((9, 0), 40, 1024, 16 * 32 * 1024 * 1024).gluon_atomic_dq
    assert not select_config((9, 0), 48, 1024, 1 * 32 * 1024 * 1024).gluon_atomic_dq
    # but where the pointer kernels would pad head_dim, from 256 keys (UNPADDED_GLUON_MIN_SEQ)
    assert select_config((9, 0), 40, 1024, 1 * 32 * 1024 * 1024).gluon_atomic_dq
    # hd64 from 512 keys in many scores too, as every head_dim (GLUON_MANY_SCORES_MIN_SEQ_AT empty
    # since the thirty-sixth session: a ragged 1000 took the Triton backward, 0.84x cuDNN); in the
    # one-launch backward's calls with gradients and in fewer scores, not.
    assert select_config((9, 0), 64, 1024, 16 * 32 * 1024 * 1024).gluon_atomic_dq
    assert select_config((9, 0), 64, 1000, 8 * 32 * 1000 * 1000, backward=True).gluon_atomic_dq
    assert select_config((9, 0), 64, 512, 32 * 32 * 512 * 512).gluon_atomic_dq
    assert not select_config((9, 0), 64, 1000, 2 * 32 * 1000 * 1000).gluon_atomic_dq
    assert select_config((9, 0), 48, 512, 32 * 32 * 512 * 512).gluon_atomic_dq
    assert select_config((9, 0), 64, 1024, 4 * 32 * 1024 * 1024, backward=True).fused_backward
    assert not select_config((9, 0), 96, 4096).gluon_backward  # measured slower than the split kernels
    assert not select_config((9, 0), 64, 4096).gluon_backward
    assert select_config((9, 0), 256, 4096).gluon_backward  # attention_gluon_backward_wide
    assert select_config((9, 0), 160, 2048).gluon_backward  # the 256 bucket from 160
    assert not select_config((9, 0), 136, 4096).gluon_backward  # measured level with the Triton one
    assert select_config((9, 0), 136, 4096).gluon_atomic_dq  # summing, it is faster there too
    assert select_config((9, 0), 256, 1024).gluon_backward  # from GLUON_WIDE_MIN_SEQ there
    # and from 512 keys in calls of 2^26 scores (eighteenth session), not in fewer or below 512
    assert select_config((9, 0), 256, 512, 8 * 32 * 512 * 512).gluon_backward
    assert select_config((9, 0), 144, 512, 32 * 32 * 512 * 512).gluon_atomic_dq
    assert not select_config((9, 0), 256, 512, 1 * 32 * 512 * 512).gluon_backward  # under 2^24 scores
    assert select_config((9, 0), 256, 512, 2 * 32 * 512 * 512).gluon_backward  # from them, as from 256 keys
    assert select_config((9, 0), 256, 256, 2 ** 30).gluon_backward
    assert not select_config((9, 0), 256, 128, 2 ** 30).gluon_backward
    assert not select_config((8, 0), 128, 4096).gluon_backward
    assert not select_config(None, 128, 4096).gluon_backward


@pytest.mark.parametrize("head_dim, summed", [(128, True), (112, True), (96, True), (88, True), (72, True),
                                              (64, True), (40, True), (80, True), (32, False), (136, True),
                                              (192, True), (256, True)])
def test_summing_dq_selected_on_hopper_at_the_measured_head_dims(head_dim, summed):
    """deterministic=False runs a kernel summing dQ where it was measured faster end to end
    (hd40, 64, 72, 88, 96, 112, 128 from 2048 keys, or from 512 in calls of 2^26 scores, hd64 from
    1024 there until the thirty-sixth session; hd136-256 from 1024, or from 512 in calls of 2^26
    scores since the eighteenth session) and at the head dims of the same kernel widths between
    them, in calls of every size from
    256 keys where the pointer kernels would pad head_dim (twenty-eighth session) and from head_dim 96
    in calls of 2^24 scores or more (twenty-ninth); hd80 too since the kernel computes it on 96
    columns (thirty-first session; level or slower at width 128); not hd32 (unmeasured)."""
    assert select_config((9, 0), head_dim, 4096).gluon_atomic_dq == summed
    assert select_config((9, 0), head_dim).gluon_atomic_dq == summed
    for scores in (2 * 32 * 1024 * 1024, 4 * 32 * 1024 * 1024, 16 * 32 * 1024 * 1024):  # GLUON_MANY_SCORES
        assert select_config((9, 0), head_dim, 1024, scores).gluon_atomic_dq == summed
    # In fewer scores only where the pointer kernels would pad head_dim (UNPADDED_GLUON_MIN_SEQ), and
    # at 1024 keys in the 256 bucket (GLUON_WIDE_MIN_SEQ).
    # and from head_dim 96 in small calls of 2^24 scores or more (SMALL_CALLS_LONG_PATH_MIN_SCORES),
    # from 128 in larger ones under 1024 keys.
    padded = attention_module._pads_on_pointers((9, 0), head_dim)
    assert (select_config((9, 0), head_dim, 1024, 48 * 1024 * 1024).gluon_atomic_dq
            == (summed and (head_dim > 128 or padded)))
    assert (select_config((9, 0), head_dim, 1024, 32 * 1024 * 1024).gluon_atomic_dq
            == (summed and (head_dim >= 96 or padded)))
    assert (select_config((9, 0), head_dim, 1024, 8 * 1024 * 1024).gluon_atomic_dq
            == (summed and (head_dim > 128 or padded)))  # at 1024 keys the 256 bucket's: GLUON_WIDE_MIN_SEQ
    for scores in (8 * 32 * 512 * 512, 32 * 32 * 512 * 512):
        assert select_config((9, 0), head_dim, 512, scores).gluon_atomic_dq == summed
    assert (select_config((9, 0), head_dim, 512, 6 * 32 * 512 * 512).gluon_atomic_dq
            == (summed and (padded or head_dim >= 128)))
    assert not select_config((8, 9), head_dim, 4096).gluon_atomic_dq
    assert not select_config((10, 0), head_dim, 4096).gluon_atomic_dq


def test_usable_inputs():
    q = torch.zeros(1, 4, 64, 128, dtype=torch.bfloat16)
    assert attention_gluon_backward.usable(q, q[:, :2], q[:, :2], q) == attention_gluon.available()
    wide = torch.zeros(1, 4, 64, 256, dtype=torch.bfloat16)  # attention_gluon_backward_wide
    assert attention_gluon_backward.usable(wide, wide, wide, wide) == attention_gluon.available()
    assert not attention_gluon_backward.usable(*[torch.zeros(1, 4, 64, 264, dtype=torch.bfloat16)] * 4)
    assert not attention_gluon_backward.usable(q, q, q, q.half())
    assert not attention_gluon_backward.usable(q, q, q, q.transpose(-1, -2))


def test_not_taken_where_it_cannot_run(monkeypatch):
    """A config asking for it on inputs it cannot run (here: the CPU interpreter) runs the Triton
    kernels, with right gradients."""
    monkeypatch.setattr(attention_gluon_backward, "backward_dkdv",
                        lambda *args: pytest.fail("the Gluon dK/dV kernel ran off Hopper"))
    generator = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(1, 2, 20, 64, generator=generator, dtype=torch.float16).requires_grad_()
               for _ in range(3))
    grad = torch.randn(1, 2, 20, 64, generator=generator, dtype=torch.float16)
    config = dataclasses.replace(select_config(None, 64), gluon_backward=True)
    flash_attention(q, k, v, causal=True, config=config).backward(grad)
    refs = [t.detach().double().requires_grad_() for t in (q, k, v)]
    reference_attention(*refs, causal=True).backward(grad.double())
    for ours, theirs in zip((q.grad, k.grad, v.grad), (t.grad for t in refs)):
        assert (ours.double() - theirs).abs().max().item() < 2e-2


@pytest.mark.parametrize("gluon_backward, deterministic, sums_dq, calls_expected", [
    (True, True, True, [False]), (True, False, True, [True]), (False, False, True, [True]), (False, True, True, []),
    (True, False, False, [False]), (False, False, False, [])],
    ids=["deterministic", "summed", "summed-only", "neither", "no-sums-in-triton", "no-sums-summed-only"])
def test_backward_routes_through_the_kernel_where_it_runs(monkeypatch, gluon_backward, deterministic, sums_dq,
                                                          calls_expected):
    """With the kernel said to run (faked here on the CPU by the float64 reference's gradients),
    attention_backward takes dK and dV from it and dQ from the Triton dQ kernel (gluon_backward),
    or, with gluon_atomic_dq and deterministic=False only, from the float32 sums the kernel fills
    (gluon_backward or not); with neither, the Triton kernels run. A Triton without the internals
    summing dQ needs (SUMS_DQ) never sums."""
    monkeypatch.setattr(attention_gluon_backward, "SUMS_DQ", sums_dq)
    calls = []

    def fake_kernel(grad_out, q, k, v, lse, delta, causal, softmax_scale, dq_sum=None):
        calls.append(dq_sum is not None)
        refs = [t.detach().double().requires_grad_() for t in (q, k, v)]
        with torch.enable_grad():  # (called from autograd's backward, where it is off)
            reference_attention(*refs, causal=causal, softmax_scale=softmax_scale).backward(grad_out.double())
        if dq_sum is not None:
            dq_sum.view(q.shape)[...] = refs[0].grad.float()
        return refs[1].grad.to(k.dtype), refs[2].grad.to(v.dtype)

    monkeypatch.setattr(attention_module, "_gluon_backward_runs", lambda *args: True)
    monkeypatch.setattr(attention_gluon_backward, "backward_dkdv", fake_kernel)
    generator = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, 2, 20, 64, generator=generator, dtype=torch.float16).requires_grad_()
               for _ in range(3))
    grad = torch.randn(1, 2, 20, 64, generator=generator, dtype=torch.float16)
    config = dataclasses.replace(select_config(None, 64), gluon_backward=gluon_backward, gluon_atomic_dq=True)
    flash_attention(q, k, v, causal=True, config=config, deterministic=deterministic).backward(grad)
    assert calls == calls_expected
    refs = [t.detach().double().requires_grad_() for t in (q, k, v)]
    reference_attention(*refs, causal=True).backward(grad.double())
    for ours, theirs in zip((q.grad, k.grad, v.grad), (t.grad for t in refs)):
        assert (ours.double() - theirs).abs().max().item() < 2e-2


# ----------------------------------------------------------------------------------------------
# GPU (device machine)
# ----------------------------------------------------------------------------------------------

def _dkdv_inputs(batch, heads, kv_heads, seq_q, seq_k, head_dim, causal, dtype, seed, layout=None):
    """What backward_dkdv takes for one seeded call: (q, k, v, grad, scale, out, lse, delta,
    config), ``out`` and ``lse`` from the Triton forward (``config``: the Gluon kernels off),
    delta = rowsum(out * grad); ``layout`` (where given) applied to q, k, v and grad."""
    q, k, v = gpu_inputs(batch, heads, kv_heads, seq_q, seq_k, head_dim, dtype, seed)
    grad = torch.randn_like(q)
    if layout is not None:
        q, k, v, grad = (layout(t) for t in (q, k, v, grad))
    scale = head_dim ** -0.5
    config = dataclasses.replace(attention_module.config_for(q, k), gluon_forward=False, gluon_backward=False,
                                 fused_backward=False)
    out, lse = attention_module.attention_forward(q, k, v, causal, scale, config)
    delta = (out.float() * grad.float()).sum(-1).reshape(batch * heads, seq_q).contiguous()
    return q, k, v, grad, scale, out, lse, delta, config


def _settings_change_no_bit(settings, apply, head_dim, causal, heads, kv_heads, seq, dtype):
    """For each of ``settings`` (``apply(setting)`` puts it in place), backward_dkdv's (dK, dV) with
    the Triton dQ and summing dQ for one seeded call of 2 x ``heads`` query heads: the summing
    call's dK/dV and summed dQ checked against float32, and every setting's dK and dV, both
    calls', bitwise those of the first setting."""
    q, k, v, grad, scale, _, lse, delta, _ = _dkdv_inputs(2, heads, kv_heads, seq, seq, head_dim, causal, dtype,
                                                          head_dim + seq)
    expected_dq, expected_dk, expected_dv = _float32_grads(q, k, v, grad, causal)
    results = []
    for setting in settings:
        apply(setting)
        sums = attention_gluon_backward.dq_sum_buffer(q)
        results.append((attention_gluon_backward.backward_dkdv(grad, q, k, v, lse, delta, causal, scale),
                        attention_gluon_backward.backward_dkdv(grad, q, k, v, lse, delta, causal, scale, sums)))
        assert _relative_error(sums.view(q.shape), expected_dq) < 3e-2
        for ours, expected in zip(results[-1][1], (expected_dk, expected_dv)):
            assert _relative_error(ours, expected) < 3e-2
    for setting, result in zip(settings[1:], results[1:]):
        for first, other in zip(results[0], result):
            assert torch.equal(first[0], other[0]) and torch.equal(first[1], other[1]), setting


def _float32_grads(q, k, v, grad, causal):
    """[dq, dk, dv] of the float32 reference attention for the incoming gradient ``grad``."""
    refs = [t.detach().float().requires_grad_() for t in (q, k, v)]
    reference_attention(*refs, causal=causal, dtype=torch.float32).backward(grad.float())
    return [ref.grad for ref in refs]


def _relative_error(ours, expected):
    return ((ours.float() - expected).norm() / expected.norm()).item()


def _check(batch, heads, kv_heads, seq_q, seq_k, head_dim, causal, dtype, layout=None):
    """The kernel's dK and dV against the float32 reference's (relative error) and the Triton
    backward's (the same products in another order: close to each other)."""
    q, k, v, grad, scale, out, lse, delta, config = _dkdv_inputs(batch, heads, kv_heads, seq_q, seq_k, head_dim,
                                                                 causal, dtype, seq_q + head_dim, layout)
    _, triton_dk, triton_dv = attention_module.attention_backward(grad, q, k, v, out, lse, causal, scale, config)
    assert attention_gluon_backward.usable(q, k, v, grad)
    dk, dv = attention_gluon_backward.backward_dkdv(grad, q, k, v, lse, delta, causal, scale)
    _, expected_dk, expected_dv = _float32_grads(q, k, v, grad, causal)
    tolerance = {torch.float16: 5e-3, torch.bfloat16: 3e-2}[dtype]
    for ours, triton_result, expected in ((dk, triton_dk, expected_dk), (dv, triton_dv, expected_dv)):
        error = _relative_error(ours, expected)
        assert error < tolerance, error
        assert ((ours.float() - triton_result.float()).norm() / expected.norm()).item() < tolerance / 2


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("head_dim", [32, 40, 64, 96, 112, 128, 136, 160, 256])
def test_gpu_matches_float32_reference(head_dim, causal, dtype):
    """Ragged (777: odd, a partial last query and key block) and whole lengths, GQA 4:2."""
    if not hopper():
        pytest.skip("needs a Hopper GPU")
    for seq in (777, 1024):
        _check(2, 4, 2, seq, seq, head_dim, causal, dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("seq_q, seq_k", [(300, 1111), (1111, 300), (64, 129)])
def test_gpu_cross_attention_lengths(seq_q, seq_k, head_dim):
    if not hopper():
        pytest.skip("needs a Hopper GPU")
    _check(1, 8, 1, seq_q, seq_k, head_dim, False, torch.bfloat16)


@pytest.mark.gpu
def test_gpu_strided_layout_read_in_place():
    if not hopper():
        pytest.skip("needs a Hopper GPU")
    _check(2, 4, 4, 1024, 1024, 128, True, torch.bfloat16,
           layout=lambda t: t.transpose(1, 2).contiguous().transpose(1, 2))


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim", [128, 256])
@pytest.mark.parametrize("deterministic", [True, False], ids=["deterministic", "summing-dq"])
def test_gpu_flash_attention_takes_it_and_its_gradients_are_right(monkeypatch, deterministic, head_dim):
    """The shipped config at GLUON_MIN_SEQ keys: the kernel with dQ from the Triton dQ kernel
    (deterministic=True) or summing it (the default, deterministic=False, where the config sums
    dQ at that head_dim)."""
    if not hopper():
        pytest.skip("needs a Hopper GPU")
    calls = []
    original = attention_gluon_backward.backward_dkdv
    monkeypatch.setattr(attention_gluon_backward, "backward_dkdv",
                        lambda *args: calls.append(args[8] is not None) or original(*args))
    seq = attention_module.GLUON_MIN_SEQ
    q, k, v = (t.requires_grad_() for t in gpu_inputs(2, 4, 4, seq, seq, head_dim, torch.bfloat16, 11))
    grad = torch.randn_like(q)
    summed = not deterministic and attention_module.config_for(q, k).gluon_atomic_dq
    flash_attention(q, k, v, causal=True, deterministic=deterministic).backward(grad)
    assert calls == [summed], f"flash_attention's Gluon backward calls at seq {seq}: {calls}"
    for ours, theirs in zip((q.grad, k.grad, v.grad), _float32_grads(q, k, v, grad, True)):
        error = _relative_error(ours, theirs)
        assert error < 3e-2, error


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim, causal, kv_heads, seq, dtype", [
    (128, True, 2, 777, torch.bfloat16), (128, False, 4, 1024, torch.bfloat16), (64, True, 1, 1000, torch.bfloat16),
    (112, False, 2, 1100, torch.bfloat16), (40, True, 4, 300, torch.bfloat16), (80, False, 1, 640, torch.bfloat16),
    (96, True, 4, 64, torch.bfloat16), (256, True, 2, 777, torch.bfloat16), (192, False, 1, 1000, torch.bfloat16),
    (256, True, 4, 64, torch.bfloat16), (256, False, 2, 555, torch.float16), (136, True, 4, 300, torch.float16),
    (72, True, 2, 1000, torch.bfloat16), (88, False, 4, 777, torch.float16), (56, False, 2, 130, torch.float16),
    (64, True, 4, 2048, torch.bfloat16), (48, True, 2, 200, torch.float16)])
def test_gpu_summed_dq_matches_float32_reference(head_dim, causal, kv_heads, seq, dtype, monkeypatch):
    """dQ summed in the kernel by TMA reduce-adds (gluon_atomic_dq), through flash_attention with
    deterministic=False, against float32 and, element by element, the deterministic Triton dQ (a
    lost or doubled 64-row share shows there though hardly in a norm); dK and dV as without."""
    if not hopper():
        pytest.skip("needs a Hopper GPU")
    q, k, v = gpu_inputs(2, 4, kv_heads, seq, seq, head_dim, dtype, seq + head_dim)
    grad = torch.randn_like(q)
    # fused_backward off: at these sizes the one-launch Triton backward would win the routing.
    config = dataclasses.replace(attention_module.config_for(q, k), gluon_backward=True, gluon_atomic_dq=True,
                                 fused_backward=False)
    sums = []
    original = attention_gluon_backward.backward_dkdv
    monkeypatch.setattr(attention_gluon_backward, "backward_dkdv",
                        lambda *args: sums.append(args[8] is not None) or original(*args))
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    flash_attention(*leaves, causal=causal, config=config, deterministic=False).backward(grad)
    assert sums == [True]
    for ours, theirs in zip((t.grad for t in leaves), _float32_grads(q, k, v, grad, causal)):
        error = _relative_error(ours, theirs)
        assert error < 3e-2, error
    triton = [t.detach().requires_grad_() for t in (q, k, v)]
    triton_config = dataclasses.replace(config, gluon_backward=False, gluon_atomic_dq=False)
    flash_attention(*triton, causal=causal, config=triton_config, deterministic=True).backward(grad)
    dq, triton_dq = leaves[0].grad.float(), triton[0].grad.float()
    # Measured on the H200: at most 3.2e-3 of dQ's largest value apart.
    assert (dq - triton_dq).abs().max().item() <= 1e-2 * triton_dq.abs().max().item()


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim", [64, 128])
def test_gpu_causal_order_changes_no_bits(head_dim, monkeypatch):
    """Causal programs heaviest first in groups of KV heads (LONGEST_FIRST_HEADS), with a last
    group of fewer heads (3 x 5 = 15 KV heads in groups of 8: 8 + 7): every key block of every
    head is computed once, so dK and dV are bitwise those of the launch order, and right."""
    if not hopper():
        pytest.skip("needs a Hopper GPU")
    q, k, v, grad, scale, _, lse, delta, _ = _dkdv_inputs(3, 10, 5, 700, 700, head_dim, True, torch.bfloat16, 17)
    results = []
    for group in (0, 8):
        monkeypatch.setattr(attention_gluon_backward, "LONGEST_FIRST_HEADS", group)
        results.append(attention_gluon_backward.backward_dkdv(grad, q, k, v, lse, delta, True, scale))
    assert torch.equal(results[0][0], results[1][0]) and torch.equal(results[0][1], results[1][1])
    for ours, expected in zip(results[1], _float32_grads(q, k, v, grad, True)[1:]):
        assert _relative_error(ours, expected) < 3e-2


def test_chunked_walk_where_measured_faster():
    # Thirty-sixth session: chunks of 8 blocks faster in causal GQA 8:1 calls at width 128 from 2048
    # keys; not at width 64, GQA 4:1 or not causal.
    walk = attention_gluon_backward.walk
    assert walk(128, True, 8, 2048) == walk(128, True, 16, 16384) == attention_gluon_backward.CHUNKED_WALK == 3
    assert walk(128, True, 8, 1024) == walk(64, True, 8, 8192) == walk(128, True, 4, 16384) == 0
    assert walk(128, False, 8, 8192) == walk(128, True, 1, 8192) == 0


def _check_with_summed_dq(heads, kv_heads, head_dim, causal):
    """dK and dV (as _check), and dQ summed by the kernel, against float32: batch 2, 777 queries and
    keys, bf16."""
    _check(2, heads, kv_heads, 777, 777, head_dim, causal, torch.bfloat16)
    q, k, v, grad, scale, _, lse, delta, _ = _dkdv_inputs(2, heads, kv_heads, 777, 777, head_dim, causal,
                                                          torch.bfloat16, 3)
    sums = attention_gluon_backward.dq_sum_buffer(q)
    attention_gluon_backward.backward_dkdv(grad, q, k, v, lse, delta, causal, scale, sums)
    assert _relative_error(sums.view(q.shape), _float32_grads(q, k, v, grad, causal)[0]) < 3e-2


@pytest.mark.gpu
@pytest.mark.parametrize("walk", [0, 1, 2, 3, 4, 5])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_gpu_walks_match_float32_reference(walk, causal, monkeypatch):
    """Each block order of the dK/dV kernel at widths 64 and 128 (attention_gluon_backward.WALK),
    on all columns and on fewer (hd96, hd48 causal), GQA 8:1 and 4:1, ragged length: dK and dV (as
    _check), and dQ summed by the kernel, a share a block late where routed, against float32."""
    if not hopper():
        pytest.skip("needs a Hopper GPU")
    monkeypatch.setattr(attention_gluon_backward, "WALK", walk)
    for heads, kv_heads, head_dim in ((8, 1, 128), (8, 2, 64), (8, 1, 96), (8, 2, 48)):
        assert attention_gluon_backward.walk(attention_gluon.kernel_width(head_dim), causal, heads // kv_heads,
                                             777) == walk
        _check_with_summed_dq(heads, kv_heads, head_dim, causal)


@pytest.mark.gpu
@pytest.mark.parametrize("walk", [0, 1, 2, 3, 4, 5])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_gpu_wide_walks_match_float32_reference(walk, causal, monkeypatch):
    """Each block order of the wide kernel (attention_gluon_backward_wide.WALK) at GQA 8:1 and
    4:1, ragged length: dK and dV (as _check), and dQ summed by the kernel, against float32."""
    if not hopper():
        pytest.skip("needs a Hopper GPU")
    from gpudoctor.kernels import attention_gluon_backward_wide

    monkeypatch.setattr(attention_gluon_backward_wide, "WALK", walk)
    for heads, kv_heads, head_dim in ((8, 1, 256), (8, 2, 192)):
        assert attention_gluon_backward_wide.walk(causal, heads // kv_heads, 777) == walk
        _check_with_summed_dq(heads, kv_heads, head_dim, causal)


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim, causal, heads, kv_heads, seq, dtype, walk", [
    (256, True, 8, 1, 777, torch.bfloat16, None), (256, False, 4, 2, 1024, torch.float16, None),
    (256, True, 8, 1, 777, torch.bfloat16, 4), (216, True, 4, 4, 777, torch.bfloat16, None),
    (176, False, 8, 2, 555, torch.bfloat16, None), (144, True, 4, 1, 300, torch.float16, None),
    (200, True, 2, 1, 64, torch.bfloat16, None), (160, False, 2, 2, 130, torch.bfloat16, None)])
def test_gpu_wide_score_roles_match_float32_reference(head_dim, causal, heads, kv_heads, seq, dtype, walk,
                                                      monkeypatch):
    """The wide kernel summing dQ with its score products by warpgroup (SCORE_ROLES: warpgroup 0 S
    and P, warpgroup 1 dP and dS from P read back) on every column count (160, 192, 224, 256), split
    (causal GQA 8:1) and walking chunks: dK, dV and the summed dQ against float32, and close to the
    kernel's by keys (dS from P in Q's dtype rather than float32: not bitwise)."""
    if not hopper():
        pytest.skip("needs a Hopper GPU")
    from gpudoctor.kernels import attention_gluon_backward_wide

    monkeypatch.setattr(attention_gluon_backward_wide, "WALK", walk)
    q, k, v, grad, scale, _, lse, delta, _ = _dkdv_inputs(2, heads, kv_heads, seq, seq, head_dim, causal, dtype,
                                                          head_dim + seq)
    expected = _float32_grads(q, k, v, grad, causal)
    tolerance = {torch.float16: 5e-3, torch.bfloat16: 3e-2}[dtype]
    results = []
    for roles in (False, True):
        monkeypatch.setattr(attention_gluon_backward_wide, "SCORE_ROLES", roles)
        sums = attention_gluon_backward.dq_sum_buffer(q)
        dk, dv = attention_gluon_backward.backward_dkdv(grad, q, k, v, lse, delta, causal, scale, sums)
        results.append((sums.view(q.shape), dk, dv))
    # dQ (first) within the suite's bound for summed dQ, 3e-2 in both dtypes
    for ours, by_keys, reference, bound in zip(results[1], results[0], expected, (3e-2, tolerance, tolerance)):
        error = _relative_error(ours, reference)
        assert error < bound, error
        assert ((ours.float() - by_keys.float()).norm() / reference.norm()).item() < bound / 2


@pytest.mark.parametrize("causal, group, seq_k, expected", [
    (True, 8, 8192, 4), (True, 16, 16384, 4), (True, 8, 4096, 0), (True, 4, 16384, 0), (False, 8, 16384, 0),
    (True, 1, 16384, 0)])
def test_wide_walk_chunked_where_measured_faster(causal, group, seq_k, expected):
    """Chunks of 16 blocks (walk 4) for causal calls of 8 or more query heads a KV head from 8192
    keys, measured 2-8 % faster there (twenty-second session); each head's blocks in turn
    elsewhere."""
    from gpudoctor.kernels import attention_gluon_backward_wide

    assert attention_gluon_backward_wide.walk(causal, group, seq_k) == expected


@pytest.mark.parametrize("causal, group, seq_k, heads, expected", [
    (True, 8, 4096, None, 2), (True, 8, 512, None, 2), (True, 16, 2048, None, 4), (True, 32, 777, None, 8),
    (True, 12, 1024, None, 3), (True, 10, 1024, None, 5), (True, 8, 8192, None, 1), (True, 16, 16384, None, 1),
    (True, 4, 4096, None, 1), (False, 8, 4096, None, 1), (True, 1, 4096, None, 1),
    (True, 4, 4096, 2, 2), (True, 8, 16384, 1, 8), (False, 8, 4096, 2, 1), (True, 1, 4096, 2, 1)])
def test_wide_kernel_splits_causal_calls_of_many_heads_a_kv_head(causal, group, seq_k, heads, expected,
                                                                   monkeypatch):
    """Causal calls of 8 or more query heads a KV head below 8192 keys over the fewest programs
    that leave each at most 4 heads (measured 3-7 % faster there, slower from 8192 keys and at
    GQA 4:1, twenty-fifth session); SPLIT (benches' A/B) in every causal grouped-query call; never
    when not causal or MHA."""
    from gpudoctor.kernels import attention_gluon_backward_wide

    monkeypatch.setattr(attention_gluon_backward_wide, "SPLIT", heads)
    assert attention_gluon_backward_wide.splits(causal, group, seq_k) == expected


@pytest.mark.parametrize("split, shape", [(2, (2, 2, 6, 37, 40)), (3, (2, 1, 3, 5, 136)), (4, (2, 1, 8, 64, 256))])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_split_sums_add_each_elements_splits_in_order(split, shape, dtype, device):
    """attention_gluon_backward_wide.sum_splits (plain Triton: the interpreter on the CPU): dK and
    dV, contiguous, each element the float32 sum of its splits from split 0 then converted; exact
    in float16, within one bfloat16 step (the interpreter rounds bfloat16 toward zero)."""
    from gpudoctor.kernels import attention_gluon_backward_wide

    two, batch, heads, seq_k, head_dim = shape
    partials = torch.randn(shape, device=device)
    dk, dv = attention_gluon_backward_wide.sum_splits(partials, split, dtype)
    parts = partials.view(two, batch, heads // split, split, seq_k, head_dim)
    expected = parts[:, :, :, 0]
    for index in range(1, split):
        expected = expected + parts[:, :, :, index]
    for ours, sums in zip((dk, dv), expected):
        assert ours.shape == (batch, heads // split, seq_k, head_dim) and ours.dtype == dtype and ours.is_contiguous()
        if dtype == torch.float16 or device == "cuda":
            assert torch.equal(ours, sums.to(dtype))
        else:
            assert ((ours.float() - sums).abs() <= sums.abs() * 2 ** -7).all()


def test_split_sums_run_in_split_order(device):
    """Splits 2^24, 1, -2^24 sum to 0 in that order in float32 (2^24 + 1 rounds to 2^24) and to 1
    in any order that adds 1 last or first to -2^24: which split is which, and the order, show."""
    from gpudoctor.kernels import attention_gluon_backward_wide

    partials = torch.zeros((2, 1, 6, 4, 40), device=device)
    partials[:, :, 0::3], partials[:, :, 1::3], partials[:, :, 2::3] = 2.0 ** 24, 1.0, -(2.0 ** 24)
    partials[1, :, 3:] = partials[1, :, 3:].flip(1)  # dV's second KV head: -2^24, 1, 2^24: 1
    dk, dv = attention_gluon_backward_wide.sum_splits(partials, 3, torch.float16)
    assert torch.equal(dk, torch.zeros_like(dk))
    assert torch.equal(dv[:, 0], torch.zeros_like(dv[:, 0])) and torch.equal(dv[:, 1], torch.ones_like(dv[:, 1]))


@pytest.mark.gpu
@pytest.mark.parametrize("heads, kv_heads, seq_q, seq_k, head_dim, dtype", [
    (8, 1, 777, 777, 256, torch.bfloat16), (16, 1, 1024, 1024, 192, torch.float16),
    (8, 1, 513, 513, 216, torch.float16), (8, 2, 300, 300, 160, torch.bfloat16)])
@pytest.mark.parametrize("heads_per_program", [4, 1])  # as shipped; every head its own program
def test_gpu_wide_split_matches_float32_reference(heads_per_program, heads, kv_heads, seq_q, seq_k, head_dim, dtype,
                                                  monkeypatch):
    """Causal grouped-query calls split by query heads (attention_gluon_backward_wide.splits): dK
    and dV against float32 (as _check) and the unsplit kernel's, bitwise the same run to run (the
    splits are summed in a fixed order) and as the kernel summing dQ computes them, and dQ summed
    by the kernel against float32; GQA 8:1, 16:1 and 4:1 on 256, 224, 192 and 160 columns, ragged
    and whole lengths, both dtypes (causal calls have q and k of one length: flash_attention); with
    the score products by keys and by warpgroup (SCORE_ROLES), close to each other (by warpgroup dS
    comes from P in Q's dtype)."""
    if not hopper():
        pytest.skip("needs a Hopper GPU")
    from gpudoctor.kernels import attention_gluon_backward_wide

    q, k, v, grad, scale, _, lse, delta, _ = _dkdv_inputs(2, heads, kv_heads, seq_q, seq_k, head_dim, True, dtype,
                                                          seq_q + head_dim)
    expected_dq, expected_dk, expected_dv = _float32_grads(q, k, v, grad, True)
    tolerance = {torch.float16: 5e-3, torch.bfloat16: 3e-2}[dtype]
    group = heads // kv_heads
    splits = []
    for roles in (False, True):
        monkeypatch.setattr(attention_gluon_backward_wide, "SCORE_ROLES", roles)
        monkeypatch.setattr(attention_gluon_backward_wide, "SPLIT", None)
        monkeypatch.setattr(attention_gluon_backward_wide, "SPLIT_MIN_GROUP", 1 << 30)
        unsplit = attention_gluon_backward.backward_dkdv(grad, q, k, v, lse, delta, True, scale)
        monkeypatch.setattr(attention_gluon_backward_wide, "SPLIT", heads_per_program)
        assert attention_gluon_backward_wide.splits(True, group, seq_k) == group // heads_per_program
        split = attention_gluon_backward.backward_dkdv(grad, q, k, v, lse, delta, True, scale)
        again = attention_gluon_backward.backward_dkdv(grad, q, k, v, lse, delta, True, scale)
        sums = attention_gluon_backward.dq_sum_buffer(q)
        summing = attention_gluon_backward.backward_dkdv(grad, q, k, v, lse, delta, True, scale, sums)
        assert _relative_error(sums.view(q.shape), expected_dq) < 3e-2
        for ours, reference, expected, other, with_dq in zip(split, unsplit, (expected_dk, expected_dv), again,
                                                             summing):
            assert ours.shape == reference.shape and ours.dtype == reference.dtype and ours.is_contiguous()
            assert _relative_error(ours, expected) < tolerance
            assert ((ours.float() - reference.float()).norm() / expected.norm()).item() < tolerance / 2
            assert torch.equal(ours, other) and torch.equal(ours, with_dq)
        splits.append(split)
    for by_keys, by_roles, expected in zip(*splits, (expected_dk, expected_dv)):
        assert ((by_roles.float() - by_keys.float()).norm() / expected.norm()).item() < tolerance / 2


@pytest.mark.gpu
@pytest.mark.parametrize("deterministic", [False, True], ids=["summing-dq", "deterministic"])
def test_gpu_flash_attention_splits_causal_gqa8_reproducibly(deterministic, monkeypatch):
    """Through flash_attention's autograd as routed (the shipped split rule): a causal GQA 8:1
    call at head_dim 256 and 1024 keys runs split (sum_splits called), its dK and dV are bitwise
    the same call after call, and all three gradients are close to float32's."""
    if not hopper():
        pytest.skip("needs a Hopper GPU")
    from gpudoctor.kernels import attention_gluon_backward_wide

    calls = []
    original = attention_gluon_backward_wide.sum_splits
    monkeypatch.setattr(attention_gluon_backward_wide, "sum_splits",
                        lambda *args: calls.append(args[1]) or original(*args))
    assert attention_gluon_backward_wide.splits(True, 8, 1024) == 2
    q, k, v = gpu_inputs(2, 16, 2, 1024, 1024, 256, torch.bfloat16, 5)
    grad = torch.randn_like(q)
    results = []
    for _ in range(3):
        leaves = [t.detach().requires_grad_() for t in (q, k, v)]
        flash_attention(*leaves, causal=True, deterministic=deterministic).backward(grad)
        results.append([leaf.grad for leaf in leaves])
    assert calls and set(calls) == {2}
    for other in results[1:]:
        assert torch.equal(other[1], results[0][1]) and torch.equal(other[2], results[0][2])
        if deterministic:
            assert torch.equal(other[0], results[0][0])
    for ours, expected in zip(results[0], _float32_grads(q, k, v, grad, True)):
        assert _relative_error(ours, expected) < 3e-2


@pytest.mark.parametrize("head_dim, narrow, expected", [
    (136, (160, 192), 160), (160, (160, 192), 160), (168, (160, 192), 192), (192, (160, 192), 192),
    (200, (160, 192), 256), (256, (160, 192), 256), (136, (192,), 192), (160, (), 256),
    (200, (160, 192, 224), 224), (224, (160, 192, 224), 224), (232, (160, 192, 224), 256)])
def test_wide_kernel_computes_head_dims_on_the_fewest_columns(head_dim, narrow, expected, monkeypatch):
    """Each head_dim on the narrowest of NARROW_COLUMNS that holds it, else all 256."""
    from gpudoctor.kernels import attention_gluon_backward_wide

    monkeypatch.setattr(attention_gluon_backward_wide, "NARROW_COLUMNS", narrow)
    assert attention_gluon_backward_wide.columns(head_dim) == expected


@pytest.mark.parametrize("head_dim, causal, expected", [
    (32, True, 32), (40, True, 48), (48, True, 48), (40, False, 64), (48, False, 64), (56, True, 64), (64, True, 64),
    (72, False, 96), (80, True, 96), (96, False, 96), (104, True, 112), (112, False, 112), (120, True, 128),
    (128, False, 128)])
def test_narrow_kernel_computes_head_dims_on_fewer_columns_where_measured_faster(head_dim, causal, expected):
    """Head dims 72-96 on 96 of width 128's columns and 104-112 on 112 in every call, 40-48 on 48
    of width 64's in causal calls (not causal: measured level), every other on its width's."""
    assert attention_gluon_backward.columns(head_dim, causal) == expected


@pytest.mark.parametrize("narrow, causal_only, head_dim, causal, expected", [
    ({}, set(), 80, True, 128), ({}, set(), 40, True, 64), ({64: (48,)}, set(), 40, False, 48),
    ({128: (96,)}, {128}, 96, False, 128), ({128: (96,)}, {128}, 96, True, 96), ({128: (96,)}, set(), 104, True, 128),
    ({128: (112, 96)}, set(), 80, False, 96), ({128: (112, 96)}, set(), 104, False, 112)])
def test_narrow_columns_settings_override(narrow, causal_only, head_dim, causal, expected, monkeypatch):
    """NARROW_COLUMNS empty: each head_dim on its width, else on the fewest of its width's columns
    that hold it; NARROW_CAUSAL_ONLY empty: causal or not."""
    monkeypatch.setattr(attention_gluon_backward, "NARROW_COLUMNS", narrow)
    monkeypatch.setattr(attention_gluon_backward, "NARROW_CAUSAL_ONLY", causal_only)
    assert attention_gluon_backward.columns(head_dim, causal) == expected


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim, causal, heads, kv_heads, seq, dtype", [
    (96, True, 4, 2, 777, torch.bfloat16), (88, False, 8, 2, 1024, torch.float16),
    (80, True, 8, 1, 2048, torch.bfloat16), (72, False, 4, 4, 300, torch.bfloat16),
    (96, False, 8, 1, 555, torch.float16), (80, True, 4, 4, 1000, torch.float16),
    (48, True, 4, 2, 777, torch.bfloat16), (40, False, 8, 1, 1024, torch.float16),
    (48, False, 4, 4, 300, torch.float16), (40, True, 8, 2, 2048, torch.bfloat16),
    (112, True, 4, 2, 777, torch.bfloat16), (104, False, 8, 1, 1024, torch.float16),
    (112, False, 4, 4, 300, torch.float16), (104, True, 8, 2, 2048, torch.bfloat16)])
def test_gpu_narrow_kernel_on_fewer_columns_changes_no_bit(head_dim, causal, heads, kv_heads, seq, dtype,
                                                           monkeypatch):
    """Head dims 72-96 on 96 of width 128's columns, 104-112 on 112 (the score products over 64 +
    32 + 16, dK and dV on all 128: gradient_parts) and 40-48 on 48 of width 64's, causal or not
    (attention_gluon_backward.NARROW_COLUMNS) against all the width's: the columns left out are
    zeros in every operand and each product's sums run in the same order, so dK and dV are
    bitwise the same, with the Triton dQ and summing dQ (whose last bits vary run to run: against
    float32 there). Ragged and whole lengths, GQA, both dtypes."""
    if not hopper():
        pytest.skip("needs a Hopper GPU")
    monkeypatch.setattr(attention_gluon_backward, "NARROW_CAUSAL_ONLY", set())  # 48 columns not causal too
    _settings_change_no_bit(
        ({}, {64: (48,), 128: (96, 112)}),
        lambda narrow: monkeypatch.setattr(attention_gluon_backward, "NARROW_COLUMNS", narrow),
        head_dim, causal, heads, kv_heads, seq, dtype)


@pytest.mark.parametrize("columns, split, walk, hoisted, expected", [
    (160, 1, 0, None, False), (160, 2, 0, None, False), (192, 1, 0, None, True), (224, 1, 0, None, True),
    (256, 1, 0, None, False), (256, 2, 0, None, True), (256, 1, 4, None, True), (160, 1, 0, False, True),
    (224, 1, 0, True, False)])
def test_wide_kernel_works_out_kv_operands_each_block_where_hoisting_spilled(columns, split, walk, hoisted,
                                                                              expected, monkeypatch):
    """Summing dQ, K's and V's operands are worked out in each block on 192 and 224 columns and in
    split or chunked-walk programs on 256 (where hoisted, ptxas spilled tens of scalars in the loop
    and that measured slower), hoisted otherwise; HOISTED_KV overrides."""
    from gpudoctor.kernels import attention_gluon_backward_wide

    monkeypatch.setattr(attention_gluon_backward_wide, "HOISTED_KV", hoisted)
    assert attention_gluon_backward_wide.kv_each_block(columns, split, walk) is expected


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim, causal, heads, kv_heads, seq, dtype", [
    (136, True, 4, 2, 777, torch.bfloat16), (168, False, 8, 2, 1024, torch.float16),
    (192, True, 4, 4, 1000, torch.bfloat16), (184, False, 8, 1, 300, torch.bfloat16),
    (160, True, 8, 1, 2048, torch.float16), (152, False, 4, 1, 555, torch.float16),
    (200, True, 4, 2, 777, torch.bfloat16), (216, False, 8, 1, 1024, torch.float16),
    (224, True, 4, 4, 300, torch.float16)])
def test_gpu_wide_kernel_on_fewer_columns_changes_no_bit(head_dim, causal, heads, kv_heads, seq, dtype,
                                                         monkeypatch):
    """Head dims 136-224 on 160, 192 or 224 columns (attention_gluon_backward_wide.columns) against all 256:
    the columns left out are zeros in every operand, and each product's sums run in the same
    order, so dK and dV are bitwise the same, with the Triton dQ and summing dQ (whose last bits
    vary run to run: against float32 there). Ragged and whole lengths, GQA, both dtypes."""
    if not hopper():
        pytest.skip("needs a Hopper GPU")
    from gpudoctor.kernels import attention_gluon_backward_wide

    _settings_change_no_bit(
        ((), (192,), (160, 192), (160, 192, 224)),
        lambda narrow: monkeypatch.setattr(attention_gluon_backward_wide, "NARROW_COLUMNS", narrow),
        head_dim, causal, heads, kv_heads, seq, dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim, causal, heads, kv_heads, seq, dtype", [
    (256, True, 8, 1, 777, torch.bfloat16), (216, False, 4, 2, 1024, torch.float16)])
def test_gpu_wide_kernel_kv_each_block_changes_no_bit(head_dim, causal, heads, kv_heads, seq, dtype, monkeypatch):
    """Summing dQ, K's and V's operands worked out in each block (shipped) or hoisted out of the
    loop (attention_gluon_backward_wide.HOISTED_KV): the same products on the same shared memory, so
    dK and dV are bitwise the same; dQ (its last bits vary run to run) against float32. A causal
    GQA 8:1 call (split) on 256 columns, and 224 columns not causal."""
    if not hopper():
        pytest.skip("needs a Hopper GPU")
    from gpudoctor.kernels import attention_gluon_backward_wide

    q, k, v, grad, scale, _, lse, delta, _ = _dkdv_inputs(2, heads, kv_heads, seq, seq, head_dim, causal, dtype,
                                                          head_dim + seq)
    expected_dq = _float32_grads(q, k, v, grad, causal)[0]
    results = []
    for hoisted in (False, True):
        monkeypatch.setattr(attention_gluon_backward_wide, "HOISTED_KV", hoisted)
        sums = attention_gluon_backward.dq_sum_buffer(q)
        results.append(attention_gluon_backward.backward_dkdv(grad, q, k, v, lse, delta, causal, scale, sums))
        assert _relative_error(sums.view(q.shape), expected_dq) < 3e-2
    assert torch.equal(results[0][0], results[1][0]) and torch.equal(results[0][1], results[1][1])


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim, causal, heads, kv_heads, seq, dtype", [
    (128, True, 4, 2, 777, torch.bfloat16), (112, False, 8, 2, 1024, torch.float16),
    (96, True, 4, 4, 300, torch.float16), (80, False, 4, 1, 555, torch.bfloat16),
    (64, True, 8, 1, 1000, torch.bfloat16), (56, False, 4, 4, 130, torch.float16),
    (48, True, 4, 2, 2048, torch.float16), (40, False, 8, 2, 64, torch.bfloat16)])
def test_gpu_dq_share_a_block_late_changes_no_bit_of_dk_dv(head_dim, causal, heads, kv_heads, seq, dtype,
                                                           monkeypatch):
    """Summing dQ, each warpgroup's dQ share of a block computed in the next block's step
    (DQ_SHARE_LAG: shipped at width 64 and causal at 128) or in its own: dK and dV come from the
    same products, bitwise the same with the Triton dQ and summing; the summed dQ (each share once,
    the last block's after the loop) against float32. Widths 64 and 128, on fewer columns too,
    programs of one block (the last key programs of hd96 s300 causal) and of a few (64 keys, GQA
    4:1), ragged lengths, GQA."""
    if not hopper():
        pytest.skip("needs a Hopper GPU")
    _settings_change_no_bit(
        ({64: (True, True), 128: (True, True)}, {}),
        lambda lag: monkeypatch.setattr(attention_gluon_backward, "DQ_SHARE_LAG", lag),
        head_dim, causal, heads, kv_heads, seq, dtype)


@pytest.mark.parametrize("width, causal, expected", [(64, True, True), (64, False, True), (128, True, True),
                                                      (128, False, False), (32, True, False), (256, True, False)])
def test_dq_shares_lag_where_measured_faster(width, causal, expected):
    """Summing dQ, the shares lag a block at width 64 and in causal calls at 128 (DQ_SHARE_LAG's
    runs: not causal at 128 was slower at hd128 s4096 in three runs); not at width 32 (which
    flash_attention's routing never has sum dQ: not measured) or 256 (the wide kernel)."""
    assert attention_gluon_backward.lags_dq_share(width, causal) is expected
