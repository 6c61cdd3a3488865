"""The warp-specialized Gluon forward on Hopper (gpudoctor.kernels.attention_gluon).

CPU (CI): the kernel compiles for sm90 with Triton's own ptxas, without spills, at every width
it runs at; which calls take it; which layouts TMA can read in place. Gluon has no interpreter,
so its results are checked on the GPU (`pytest -m gpu`): against a float32 reference at ragged
and whole lengths, GQA, both dtypes, strided inputs, and through flash_attention's autograd.
"""

import dataclasses

import pytest
import torch
from gluonhelpers import SASS_TOOLS, compiled_in_child, gpu_inputs, hopper, needs_gluon

from gpudoctor.kernels import attention as attention_module
from gpudoctor.kernels import attention_gluon, attention_gluon_backward, attention_schedule
from gpudoctor.kernels.attention import flash_attention, reference_attention, select_config

# Compiled in a child process (gluonhelpers.compiled_in_child). The SASS (nvdisasm, shipped with
# Triton) says where local memory is touched.
_COMPILE = SASS_TOOLS + """
import json, sys
import torch
from gpudoctor.kernels import attention_gluon
rows = []


def under_pv(sass, start, end):
    loop = sass[start:end]
    scores = next(i for i, line in enumerate(loop) if re.search(r"DEPBAR\\.LE gsb0, 0x[12] ", line))
    output = next(i for i, line in enumerate(loop) if i > scores and "DEPBAR.LE gsb0, 0x0" in line)
    return any("MUFU.EX2" in line for line in loop[scores:output])


for width, causal, check_n, dtype, *rest in json.loads(sys.argv[1]):
    simple, seq_k = (rest + [True, 512])[:2]
    compiled = attention_gluon.compile_sm90(width, causal, check_n, getattr(torch, dtype), simple=simple, seq_k=seq_k)
    ptx = compiled.asm["ptx"]
    sass = sass_of(ptx)
    products = [i for i, line in enumerate(sass) if "HGMMA" in line]
    # The key-block loops are the innermost loops holding both products (outside them: the tile
    # loop's first and last products, and the first consumer's half block). Spans that close after
    # the kernel's EXIT are the cold paths of barrier waits jumping back, not loops.
    end = max(i for i, line in enumerate(sass) if re.search(r"\\bEXIT\\b", line))
    loops = {loop for loop in product_loops(sass, products) if loop[1] < end}
    # Q·Kᵀ reads both operands from shared memory, P·V takes P from registers.
    def holds_both(loop):
        inside = [sass[p] for p in products if loop[0] < p < loop[1]]
        return (any(re.search(r"HGMMA\\S* R\\d+, gdesc", line) for line in inside)
                and any(re.search(r"HGMMA\\S* R\\d+, R\\d+, gdesc", line) for line in inside))
    both = [loop for loop in loops if holds_both(loop)]
    key_loops = [loop for loop in both if not any(loop[0] < other[0] and other[1] < loop[1] for other in both)]
    local = [i for i, line in enumerate(sass) if re.search(r"\\b(LDL|STL)\\b", line)]
    rows.append({"local": len(local), "local_in_key_loops": [sass[i].strip() for i in local
                                                            if any(start < i < end for start, end in key_loops)],
                 "key_loops": len(key_loops), "warps": compiled.metadata.num_warps, "shared": compiled.metadata.shared,
                 "setmaxnreg": re.findall(r"setmaxnreg\\.(inc|dec)\\.sync\\.aligned\\.u32\\s+(\\d+)", ptx),
                 "waits": sorted(set(re.findall(r"wgmma\\.wait_group\\.sync\\.aligned (\\d+)", ptx))),
                 # In each key loop: exp2s (MUFU.EX2) between the wait for Q·K_jᵀ and the wait for
                 # P_{j-1}·V_{j-1} (WARPGROUP.DEPBAR.LE gsb0, 0x0), i.e. the softmax under that product.
                 "softmax_under_pv": [under_pv(sass, start, end) for start, end in key_loops],
                 "acquires": ptx.count("fence.proxy.tensormap::generic.acquire"),
                 "scratch": compiled.metadata.global_scratch_size})
print(json.dumps(rows))
"""
COMPILE_CASES = [(128, True, True, "bfloat16"), (128, False, False, "float16"), (256, True, False, "bfloat16"),
                 (64, False, True, "bfloat16"), (32, True, True, "float16"), (192, True, True, "bfloat16"),
                 (192, False, False, "float16"), (48, True, True, "bfloat16"), (48, False, False, "float16", True, 4096),
                 (160, True, True, "bfloat16"), (96, False, True, "float16"),
                 # causal, an odd number of query blocks: the schedule's general walk (Schedule.simple)
                 (64, True, True, "bfloat16", False), (256, True, False, "float16", False),
                 # not causal from 1024 keys at widths 32 and 64: the softmax under the last P·V
                 (64, False, False, "bfloat16", True, 4096), (32, False, False, "float16", True, 1024),
                 # causal past 512 keys at widths 64-128: 128 keys a block (at 512, 64: narrow_key_blocks)
                 (128, True, False, "bfloat16", True, 1024), (64, True, True, "float16", True, 2048)]


@pytest.fixture(scope="module")
def compiled_sm90():
    return compiled_in_child(_COMPILE, COMPILE_CASES)


@needs_gluon
@pytest.mark.parametrize("case", COMPILE_CASES, ids=lambda case: "-".join(map(str, case)))
def test_compiles_for_sm90_without_local_memory_in_its_key_loops(case, compiled_sm90):
    row = compiled_sm90[tuple(case)]
    # One key-block loop per consumer warpgroup, touching no local memory. Around it, once per
    # tile, ptxas may reload a few spilled scalars (measured in these cases, eighteenth session: 90
    # accesses at width 128 causal with a ragged last key block, 80 without the first consumer's
    # half block (SHORT_DIAGONAL), 14 at width 256 causal, 15 at width 192 causal ragged, none at
    # widths 32 and 64; 50 at width 128 not causal ragged, not compiled here).
    # (two where routed: the blocks no mask reaches first, attention_gluon.masked_last)
    assert row["key_loops"] == 2 * (2 if attention_gluon.masked_last(case[0], case[1], case[2]) else 1)
    assert row["local_in_key_loops"] == [], row["local_in_key_loops"]
    assert row["local"] <= 100, row["local"]
    # Three partitions: two consumer warpgroups at 240 registers each, a producer at 24.
    assert row["warps"] == 12
    assert ["inc", "240"] in row["setmaxnreg"] and ["dec", "24"] in row["setmaxnreg"]
    # Q·K_jᵀ waited for while P_{j-1}·V_{j-1} is still running: the overlap the kernel exists for
    # (at SPLIT's widths, two P·V products: the main columns and the tail).
    assert ("2" if case[0] in attention_gluon.SPLIT else "1") in row["waits"]
    # ... and, where routed (not causal), block j's exp2s issued before the wait for P_{j-1}·V_{j-1}:
    # without the branch after the softmax ptxas moves that wait above them (twenty-third session).
    seq_k = case[5] if len(case) > 5 else 512
    routed = attention_gluon.softmax_under_pv(case[0], seq_k, case[1])
    if routed:
        assert all(row["softmax_under_pv"]), row["softmax_under_pv"]
    elif not attention_gluon.masked_last(case[0], case[1], case[2]):
        assert not any(row["softmax_under_pv"]), row["softmax_under_pv"]
    # (In the unmasked loop of two, causal at widths 128 and 256, ptxas places some exp2s under
    # P·V unasked: the code measured in bench/attention_gluon_masked_last.py's run 7.)
    # Shared memory: Q (two slots of 2 x 64 rows, one at 256) and two slots each of K and V, within
    # sm90's 227 KB.
    assert row["shared"] <= 232448
    # TMA descriptors made in the kernel, each fenced for the TMA unit where it is used: Q, K and
    # V in the producer, the output in each consumer; twice as many with a tail. 128 bytes each
    # of per-program global scratch.
    descriptors = 5 * (2 if case[0] in attention_gluon.SPLIT else 1)
    assert row["acquires"] == descriptors and row["scratch"] == 128 * descriptors


@pytest.mark.parametrize("head_dim, width", [(32, 32), (33, 48), (40, 48), (48, 48), (56, 64), (64, 64), (72, 96),
                                             (80, 96), (96, 96), (104, 128), (112, 128), (128, 128), (136, 160),
                                             (160, 160), (168, 192), (192, 192), (200, 256), (256, 256)])
def test_forward_width_is_the_next_power_of_two_or_a_split_width(head_dim, width):
    assert attention_gluon.forward_width(head_dim, 4096, False) == width
    assert width in attention_gluon.BLOCK_N
    main, tail = attention_gluon.SPLIT.get(width, (width, 0))
    assert main + tail == width and main & (main - 1) == 0 and tail & (tail - 1) == 0
    assert attention_gluon.kernel_width(head_dim) == {48: 64, 96: 128, 160: 256, 192: 256}.get(width, width)  # the backward's


def test_width_48_where_measured_faster():
    # Thirtieth session: 3-5.5 % faster than 64 not causal from 4096 keys, 1-9 % slower at
    # 512-3072, and slower causal at 512-1024 and 8192-16384 keys.
    width = attention_gluon.forward_width
    assert width(40, 4096, False) == width(48, 16384, False) == 48
    assert width(40, 4095, False) == width(48, 512, False) == 64
    assert width(40, 16384, True) == width(48, 4096, True) == width(48, 512, True) == 64
    assert width(136, 512, True) == width(160, 300, False) == 160  # widths 96, 160 and 192 everywhere
    assert width(168, 512, True) == width(192, 16384, False) == 192
    assert width(72, 512, True) == width(96, 16384, False) == 96 and width(104, 512, False) == 128
    assert attention_gluon.short_diagonal(48, 512, True)  # 64 keys a block: the whole block skipped


def test_half_a_diagonal_block_never_at_split_widths(monkeypatch):
    # _half_diagonal_block has no tail operand: even where the table would give it one (the kernel
    # refuses the combination at compile time too, gl.static_assert in _consumer_tile).
    every_length = dict.fromkeys((32, 48, 64, 128, 160, 192), 1 << 31)
    monkeypatch.setattr(attention_gluon, "SHORT_DIAGONAL_MAX_QUERIES", every_length)
    assert attention_gluon.block_n(48, 1024, True) == 128
    assert not attention_gluon.short_diagonal(48, 1024, True) and attention_gluon.short_diagonal(64, 1024, True)
    assert attention_gluon.short_diagonal(160, 1024, True)  # 64 keys a block: the whole block, no half
    assert attention_gluon.short_diagonal(128, 1024, True)


def test_descriptor_ready_layouts():
    base = torch.zeros(2, 4, 64, 128, dtype=torch.bfloat16)
    assert attention_gluon.descriptor_ready(base)
    assert attention_gluon.descriptor_ready(base.transpose(1, 2).contiguous().transpose(1, 2))  # (b, s, h, d)
    assert attention_gluon.descriptor_ready(torch.zeros(1, 2, 33, 72, dtype=torch.float16))  # rows 144 bytes apart
    assert not attention_gluon.descriptor_ready(base.float())
    assert not attention_gluon.descriptor_ready(base.transpose(-1, -2))  # head_dim not contiguous
    assert not attention_gluon.descriptor_ready(torch.zeros(1, 2, 33, 84, dtype=torch.float16)[..., :80])
    assert not attention_gluon.descriptor_ready(torch.zeros(2 * 4 * 64 * 128 + 1, dtype=torch.bfloat16)[1:]
                                                .view(2, 4, 64, 128))  # start 2 bytes past 16


def test_selected_on_hopper_from_512_keys_at_head_dim_40_and_up():
    for head_dim in (40, 64, 72, 80, 96, 112, 128, 160, 192, 256):
        assert select_config((9, 0), head_dim, 4096).gluon_forward, head_dim
        assert select_config((9, 0), head_dim, 1024).gluon_forward, head_dim
        assert select_config((9, 0), head_dim, 512).gluon_forward, head_dim
        # from 256 keys where the alternative is the pointer kernels on zero-padded copies
        # (attention.UNPADDED_GLUON_MIN_SEQ), or from head_dim 128 in many scores (there: unknown)
        assert (select_config((9, 0), head_dim, 256).gluon_forward
                == (attention_module._pads_on_pointers((9, 0), head_dim) or head_dim >= 128)), head_dim
    assert not select_config((9, 0), 32, 4096).gluon_forward  # width 32: the Triton forward is faster
    # The one-launch backward's small calls are host-bound: the Triton forward (at head_dim 96 and
    # up in fewer than 2^24 scores: attention.SMALL_CALLS_LONG_PATH_MIN_SCORES).
    assert not select_config((9, 0), 80, 512, 4 * 32 * 512 * 512).gluon_forward
    assert not select_config((9, 0), 128, 512, 1 * 32 * 512 * 512).gluon_forward
    assert select_config((9, 0), 128, 512, 4 * 32 * 512 * 512).gluon_forward
    assert select_config((9, 0), 128, 512, 32 * 32 * 512 * 512).gluon_forward
    assert not select_config((8, 0), 128, 4096).gluon_forward
    assert not select_config(None, 128, 4096).gluon_forward


def test_calls_with_gradients_at_head_dim_64_and_80_take_the_one_launch_backward_up_to_4x():
    """Up to 2^27 scores at 1024 keys, a call that will run a backward takes the one-launch
    backward, with the Gluon forward (both replayed by plans) past the small calls proper
    (sixteenth session; the Triton forward before); a forward-only call keeps the Gluon forward."""
    scores = 4 * 32 * 1024 * 1024
    for head_dim in (64, 80):
        training = select_config((9, 0), head_dim, 1024, scores, backward=True)
        assert training.fused_backward and training.gluon_forward, head_dim
        assert select_config((9, 0), head_dim, 512, scores, backward=True).gluon_forward, head_dim
        smallest = select_config((9, 0), head_dim, 512, 4 * 32 * 512 * 512, backward=True)
        assert smallest.fused_backward and not smallest.gluon_forward, head_dim  # FUSED_BACKWARD_MAX_SCORES
        inference = select_config((9, 0), head_dim, 1024, scores)
        assert inference.gluon_forward and not inference.fused_backward, head_dim
        assert not select_config((9, 0), head_dim, 1024, 2 * scores, backward=True).fused_backward
        assert not select_config((9, 0), head_dim, 2048, scores, backward=True).fused_backward
    for head_dim in (96, 128):  # measured slower there
        assert select_config((9, 0), head_dim, 1024, scores, backward=True).gluon_forward, head_dim


def test_not_taken_where_it_cannot_run(monkeypatch):
    """A config asking for it on inputs it cannot run (here: the CPU interpreter) runs the Triton
    forward."""
    monkeypatch.setattr(attention_gluon, "attention_forward",
                        lambda *args: pytest.fail("the Gluon forward ran off Hopper"))
    generator = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 2, 20, 64, generator=generator, dtype=torch.float16) for _ in range(3))
    config = dataclasses.replace(select_config(None, 64), gluon_forward=True)
    out = flash_attention(q, k, v, causal=True, config=config)
    expected = reference_attention(q, k, v, causal=True)
    assert (out.double() - expected).abs().max().item() < 1e-2


# ----------------------------------------------------------------------------------------------
# GPU (device machine)
# ----------------------------------------------------------------------------------------------

def _check_forward(q, k, v, causal, tolerance):
    scale = q.shape[-1] ** -0.5
    out, lse = attention_gluon.attention_forward(q, k, v, causal, scale)
    expected = reference_attention(q, k, v, causal=causal, dtype=torch.float32)
    error = ((out.float() - expected).norm() / expected.norm()).item()
    assert error < tolerance, error
    # The log-sum-exp the backward reads: as the Triton forward writes it.
    triton_config = dataclasses.replace(attention_module.config_for(q, k), gluon_forward=False)
    _, triton_lse = attention_module.attention_forward(q, k, v, causal, scale, triton_config)
    assert (lse - triton_lse).abs().max().item() < 1e-3


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("head_dim", [40, 48, 56, 64, 80, 96, 112, 128, 136, 160, 192, 200, 256])
def test_gpu_matches_float32_reference(head_dim, causal, dtype):
    """Ragged (1000: a partial last query block and key block) and whole lengths, GQA 4:2."""
    if not hopper():
        pytest.skip("needs a Hopper GPU")
    tolerance = {torch.float16: 5e-3, torch.bfloat16: 3e-2}[dtype]
    for seq in (1000, 2048):
        q, k, v = gpu_inputs(2, 4, 2, seq, seq, head_dim, dtype, seq + head_dim)
        _check_forward(q, k, v, causal, tolerance)


@pytest.mark.gpu
@pytest.mark.parametrize("seq_q, seq_k", [(300, 1111), (1111, 300), (64, 129)])
def test_gpu_cross_attention_lengths(seq_q, seq_k):
    if not hopper():
        pytest.skip("needs a Hopper GPU")
    q, k, v = gpu_inputs(1, 8, 1, seq_q, seq_k, 128, torch.bfloat16, seq_q)
    _check_forward(q, k, v, False, 3e-2)


@pytest.mark.gpu
def test_gpu_strided_layout_read_in_place():
    """(batch, seq, heads, head_dim) memory seen as (batch, heads, seq, head_dim): TMA reads it
    without a copy."""
    if not hopper():
        pytest.skip("needs a Hopper GPU")
    q, k, v = (t.transpose(1, 2).contiguous().transpose(1, 2)
               for t in gpu_inputs(2, 4, 4, 1024, 1024, 128, torch.bfloat16, 5))
    assert all(attention_gluon.descriptor_ready(t) for t in (q, k, v)) and not q.is_contiguous()
    _check_forward(q, k, v, True, 3e-2)


def _check_causal_gradients(q, k, v, out, grad):
    """out and q, k, v's gradients (after out.backward(grad)) as the float32 reference's."""
    refs = [t.detach().float().requires_grad_() for t in (q, k, v)]
    expected = reference_attention(*refs, causal=True, dtype=torch.float32)
    expected.backward(grad.float())
    for ours, theirs in zip([out, q.grad, k.grad, v.grad], [expected, *[t.grad for t in refs]]):
        assert ours.shape == theirs.shape
        error = ((ours.float() - theirs).norm() / theirs.norm()).item()
        assert error < 3e-2, error


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim", [128, 192, 256])
def test_gpu_flash_attention_takes_it_and_its_gradients_are_right(head_dim, monkeypatch):
    if not hopper():
        pytest.skip("needs a Hopper GPU")
    calls = []
    original = attention_gluon.attention_forward
    monkeypatch.setattr(attention_gluon, "attention_forward",
                        lambda *args: calls.append(args[0].shape) or original(*args))
    seq = attention_module.GLUON_MIN_SEQ
    q, k, v = (t.requires_grad_() for t in gpu_inputs(1, 4, 2, seq, seq, head_dim, torch.bfloat16, 9))
    grad = torch.randn_like(q)
    out = flash_attention(q, k, v, causal=True)
    out.backward(grad)
    assert calls, f"flash_attention did not take the Gluon forward at seq {seq} on Hopper"
    _check_causal_gradients(q, k, v, out, grad)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("head_dim", [64, 128, 176, 256])
def test_gpu_persistent_programs_match_one_program_per_unit(head_dim, causal, dtype, monkeypatch):
    """More items than SMs, so that each program loops over several: 9 query blocks per head (an
    odd count: causal, the middle blocks of two heads are one unit; the last block is ragged), GQA 4:1.
    Each tile's work is the same whichever program does it, so the results are bitwise equal."""
    if not hopper():
        pytest.skip("needs a Hopper GPU")
    q, k, v = gpu_inputs(4, 16, 4, 1100, 1100, head_dim, dtype, head_dim)
    programs = torch.cuda.get_device_properties(0).multi_processor_count
    assert attention_gluon.work(1100, 1100, 4 * 16, causal, programs).items > programs
    scale = head_dim ** -0.5
    monkeypatch.setattr(attention_gluon, "PERSISTENT", False)
    one_per_unit = attention_gluon.attention_forward(q, k, v, causal, scale)
    monkeypatch.setattr(attention_gluon, "PERSISTENT", True)
    persistent = attention_gluon.attention_forward(q, k, v, causal, scale)
    assert torch.equal(one_per_unit[0], persistent[0]) and torch.equal(one_per_unit[1], persistent[1])
    _check_forward(q, k, v, causal, {torch.float16: 5e-3, torch.bfloat16: 3e-2}[dtype])


# (batch, heads, KV heads, seq, what the schedule must hold): a head part and a tail of more than
# two rounds (the benchmarks' shape, snake rounds; the tail as the A/B option TAIL gives it); an odd
# number of query blocks (middles of two heads make a unit), with an odd number of heads (one runs
# tile by tile); one tile a program (TAIL); one query block a head (every unit two heads' tiles); an
# even number of query blocks where the tail is routed (width 64 from 2048 keys: even_tail).
SCHEDULE_CASES = [(32, 32, 32, 512, "tail"), (8, 33, 11, 640, "middles"), (3, 11, 11, 640, "middles"),
                  (1, 8, 2, 512, "one tile a program"), (4, 75, 75, 100, "middles"),
                  (4, 16, 4, 2048, "routed")]


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize(("batch", "heads", "kv_heads", "seq", "feature"), SCHEDULE_CASES)
def test_gpu_every_schedule_runs_each_tile_once(batch, heads, kv_heads, seq, feature, head_dim, monkeypatch):
    """Causal: the persistent programs' static schedule (attention_schedule) against one program a
    tile, bitwise, and against the float32 reference: a tile run twice or never would differ."""
    if not hopper():
        pytest.skip("needs a Hopper GPU")
    if feature != "routed":  # routed: as shipped (attention_gluon.even_tail at width 64)
        monkeypatch.setattr(attention_schedule, "TAIL", {"even": feature != "middles", "odd": feature != "middles"})
    programs = torch.cuda.get_device_properties(0).multi_processor_count
    schedule = attention_gluon.work(seq, seq, batch * heads, True, programs,
                                    attention_gluon.forward_width(head_dim, seq, True))
    query_blocks = -(-seq // 128)
    if feature == "routed":
        assert schedule.simple == (head_dim != 64)  # a tail at width 64 from 2048 keys (EVEN_TAIL_MIN_KEYS)
    elif feature == "tail":
        assert schedule.head_units > 0 and schedule.tail_heads * query_blocks > 2 * programs
    elif feature == "middles":
        assert query_blocks % 2 == 1 and schedule.head_units >= 2 * (query_blocks // 2) + 1
        assert schedule.tail_heads == batch * heads % 2 and not schedule.simple
    else:
        assert schedule.items == batch * heads * query_blocks == schedule.programs
    q, k, v = gpu_inputs(batch, heads, kv_heads, seq, seq, head_dim, torch.bfloat16, seq)
    scale = head_dim ** -0.5
    monkeypatch.setattr(attention_gluon, "PERSISTENT", False)
    one_per_tile = attention_gluon.attention_forward(q, k, v, True, scale)
    monkeypatch.setattr(attention_gluon, "PERSISTENT", True)
    persistent = attention_gluon.attention_forward(q, k, v, True, scale)
    assert torch.equal(one_per_tile[0], persistent[0]) and torch.equal(one_per_tile[1], persistent[1])
    if batch * heads <= 300:  # the float32 reference of the benchmarks' shape takes 4 GB
        _check_forward(q, k, v, True, 3e-2)


def test_first_consumer_skips_the_diagonal_blocks_right_half_where_measured_faster(monkeypatch):
    assert attention_gluon.short_diagonal(64, 512, True) and attention_gluon.short_diagonal(64, 1024, True)
    assert not attention_gluon.short_diagonal(64, 4096, True)  # measured 1-1.4 % slower there
    assert attention_gluon.short_diagonal(32, 512, True) and not attention_gluon.short_diagonal(32, 1024, True)
    assert not attention_gluon.short_diagonal(128, 1024, True)  # half a block: slower at every length measured
    # ... but with 64 keys a block (narrow_key_blocks, causal up to 512 keys) the whole block
    assert attention_gluon.short_diagonal(128, 512, True) and attention_gluon.short_diagonal(64, 300, True)
    assert attention_gluon.short_diagonal(256, 16384, True) and attention_gluon.short_diagonal(192, 512, True)
    assert not attention_gluon.short_diagonal(64, 512, False)
    monkeypatch.setattr(attention_gluon, "SHORT_DIAGONAL", False)
    assert not attention_gluon.short_diagonal(256, 512, True)


@pytest.mark.gpu
@pytest.mark.parametrize("seq_q, seq_k", [(512, 512), (1000, 1000), (200, 200), (64, 64), (1111, 300), (300, 1111)])
@pytest.mark.parametrize("head_dim", [40, 64, 128, 192, 256])
def test_gpu_first_consumer_skipping_the_diagonal_blocks_right_half(head_dim, seq_q, seq_k, monkeypatch):
    """In a causal tile's last key block the first consumer reads only the keys left of its rows'
    end (half the block at widths 32-128, none of it at 192-256), then passes the block on; forced
    on at every width and length here (short_diagonal). Whole and ragged lengths, a tile with one
    key block (64, 200), and, kernel-level only (flash_attention refuses causal cross-attention),
    keys shorter and longer than the queries: the output and log-sum-exp as the whole block's, and
    as the float32 reference's."""
    if not hopper():
        pytest.skip("needs a Hopper GPU")
    q, k, v = gpu_inputs(2, 8, 2, seq_q, seq_k, head_dim, torch.bfloat16, seq_q + head_dim)
    scale = head_dim ** -0.5
    monkeypatch.setattr(attention_gluon, "SHORT_DIAGONAL", False)
    whole_out, whole_lse = attention_gluon.attention_forward(q, k, v, True, scale)
    monkeypatch.setattr(attention_gluon, "SHORT_DIAGONAL", True)
    monkeypatch.setattr(attention_gluon, "SHORT_DIAGONAL_MAX_QUERIES", dict.fromkeys((32, 64, 128, 192, 256), seq_q))
    out, lse = attention_gluon.attention_forward(q, k, v, True, scale)
    # Only the masked keys' zeros leave the sums (bitwise equal on the H200, eighteenth session).
    assert (out.float() - whole_out.float()).abs().max().item() <= 1e-2
    assert (lse - whole_lse).abs().max().item() <= 1e-5
    expected = reference_attention(q, k, v, causal=True, dtype=torch.float32)
    error = ((out.float() - expected).norm() / expected.norm()).item()
    assert error < 3e-2, error


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("batch, kv_heads, seq_q, seq_k", [
    (4, 32, 512, 512), (2, 8, 1000, 1000), (8, 32, 200, 200), (16, 32, 64, 64), (2, 8, 1111, 300),
    (2, 8, 300, 1111), (1, 8, 4096, 4096)], ids=lambda value: str(value))
@pytest.mark.parametrize("head_dim, narrow, wide", [(40, 48, 64), (48, 48, 64), (88, 96, 128), (96, 96, 128),
                                                    (144, 160, 192), (160, 160, 192)])
def test_gpu_split_widths_everywhere(head_dim, narrow, wide, batch, kv_heads, seq_q, seq_k, causal, monkeypatch):
    """SPLIT's narrower widths (48: 32 + 16 columns; 160: 128 + 32), forced at every length and both
    kinds of call here (SPLIT_MIN_KEYS): the output and log-sum-exp as at the next wider width (64;
    192: 128 + 64) (not bitwise: the products sum in another order) and as the float32
    reference's; 64 keys a block (width 48 causal up to 768 keys, width 160 everywhere: the whole
    diagonal block skipped) and 128 (where half a block is not skipped: short_diagonal), more
    units than SMs, ragged lengths, GQA 4:1, keys shorter and longer than the queries. Then the
    consumers' turns, three K/V slots and (calls not causal: softmax_under_pv never routes causal
    ones) the softmax under the last P·V forced on: bitwise as without."""
    if not hopper():
        pytest.skip("needs a Hopper GPU")
    q, k, v = gpu_inputs(batch, 32, kv_heads, seq_q, seq_k, head_dim, torch.bfloat16, seq_q + head_dim + 5)
    scale = head_dim ** -0.5
    monkeypatch.setattr(attention_gluon, "SPLIT_MIN_KEYS", {narrow: (None, None)})
    assert attention_gluon.forward_width(head_dim, seq_k, causal) == wide
    at_wide = attention_gluon.attention_forward(q, k, v, causal, scale)
    monkeypatch.setattr(attention_gluon, "SPLIT_MIN_KEYS", {narrow: (0, 0)})
    assert attention_gluon.forward_width(head_dim, seq_k, causal) == narrow
    out, lse = attention_gluon.attention_forward(q, k, v, causal, scale)
    assert (out.float() - at_wide[0].float()).abs().max().item() <= 2e-2
    assert (lse - at_wide[1]).abs().max().item() <= 1e-3
    if seq_q == seq_k or not causal:
        _check_forward(q, k, v, causal, 3e-2)
    monkeypatch.setattr(attention_gluon, "PINGPONG_MIN_KEYS", {narrow: 0})
    monkeypatch.setattr(attention_gluon, "PINGPONG_CAUSAL_MIN_KEYS", {narrow: 0})
    monkeypatch.setattr(attention_gluon, "KV_STAGES", {narrow: 3})
    monkeypatch.setattr(attention_gluon, "KV_STAGES_MAX_KEYS", {narrow: 1 << 31})
    monkeypatch.setattr(attention_gluon, "KV_STAGES_MIN_HEAD_DIM", 0)
    monkeypatch.setattr(attention_gluon, "SOFTMAX_UNDER_PV_MIN_KEYS", {narrow: 0})
    assert attention_gluon.pingpong(narrow, seq_k, causal)
    doubled = attention_gluon.narrow_key_blocks(narrow, seq_k, causal)  # twice the slots: the same bytes
    assert attention_gluon.kv_stages(head_dim, seq_k, causal) == (6 if doubled else 3)
    forced = attention_gluon.attention_forward(q, k, v, causal, scale)
    assert torch.equal(forced[0], out) and torch.equal(forced[1], lse)


def _routed(setting, head_dim: int, seq_k: int, causal: bool):
    """A routing function of (width, seq_k, causal) at the width such a call computes at."""
    return setting(attention_gluon.forward_width(head_dim, seq_k, causal), seq_k, causal)


def test_even_tail_where_measured_faster():
    # Thirty-seventh session: the tail at even counts faster at widths 32 and 64 from 2048 keys (hd64
    # s16384 causal 5-6 %) and at 96 and 160-256 at 16384, slower at 512-1024, mixed at width 128.
    assert attention_gluon.even_tail(64, 2048) and attention_gluon.even_tail(64, 16384)
    assert attention_gluon.even_tail(32, 2048) and attention_gluon.even_tail(256, 16384)
    assert not attention_gluon.even_tail(64, 1024) and not attention_gluon.even_tail(128, 16384)
    assert not attention_gluon.even_tail(256, 8192) and attention_gluon.even_tail(192, 16384)
    tiles = attention_gluon.work(16384, 16384, 32, True, 132, attention_gluon.forward_width(64, 16384, True))
    assert not tiles.simple and tiles.tail_heads > 0
    assert attention_gluon.work(16384, 16384, 32, True, 132, attention_gluon.forward_width(128, 16384, True)).simple
    assert attention_gluon.work(1024, 1024, 512, True, 132, 64).simple
    assert attention_gluon.work(16384, 16384, 32, True, 132).simple  # no width: not routed


def test_narrow_key_blocks_where_measured_faster():
    # Twenty-seventh session: 64 keys a block 5-15 % faster causal at 512-640 keys at widths
    # 32-128, level to faster at 768, 3-6 % slower at 1024 and more from 2048; not causal never
    # (BLOCK_N).
    for head_dim in (32, 40, 64, 80, 128):
        assert _routed(attention_gluon.block_n, head_dim, 512, True) == 64
        assert _routed(attention_gluon.block_n, head_dim, 768, True) == 64
        assert _routed(attention_gluon.block_n, head_dim, 1024, True) == 128
        assert _routed(attention_gluon.block_n, head_dim, 512, False) == 128
    assert _routed(attention_gluon.block_n, 80, 256, True) == 64  # the training pass's call
    assert _routed(attention_gluon.block_n, 256, 16384, False) == _routed(attention_gluon.block_n, 192, 512, True) == 64
    # twice the K/V slots of 128-key blocks: the same bytes
    assert attention_gluon.kv_stages(64, 512, True) == 6 and attention_gluon.kv_stages(40, 512, True) == 4
    assert attention_gluon.kv_stages(128, 512, True) == 4 and attention_gluon.kv_stages(128, 1024, True) == 2
    assert attention_gluon.kv_stages(256, 512, True) == 2


def test_three_key_value_slots_where_measured_faster():
    # Nineteenth session: faster at hd32 s512 and hd48-64 up to 1024 keys; not past those lengths,
    # nor at hd40 (slower causal at 512 keys in two runs of three).
    assert attention_gluon.kv_stages(64, 1024, False) == attention_gluon.kv_stages(48, 512, False) == 3
    assert attention_gluon.kv_stages(32, 512, False) == attention_gluon.kv_stages(24, 300, False) == 3
    assert attention_gluon.kv_stages(64, 2048, False) == attention_gluon.kv_stages(32, 1024, False) == 2
    assert attention_gluon.kv_stages(40, 512, False) == 2
    assert attention_gluon.kv_stages(128, 512, False) == attention_gluon.kv_stages(256, 512, False) == 2  # no room


def test_ping_pong_where_measured_faster():
    # Twentieth session: at width 128 (hd72-128) faster or level at every length measured but
    # causal at 512 keys (level at hd128, slower at hd80/96); level to slower at widths 32-64 and
    # level at 192-256.
    assert _routed(attention_gluon.pingpong, 128, 512, False) and _routed(attention_gluon.pingpong, 72, 300, False)
    assert _routed(attention_gluon.pingpong, 80, 1024, True) and _routed(attention_gluon.pingpong, 128, 16384, True)
    assert not _routed(attention_gluon.pingpong, 96, 512, True)
    assert not _routed(attention_gluon.pingpong, 128, 1000, True)
    assert not any(_routed(attention_gluon.pingpong, head_dim, 4096, causal) for head_dim in (32, 40, 64, 136, 192, 256)
                   for causal in (True, False))


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("batch, kv_heads, seq_q, seq_k", [
    (4, 32, 512, 512), (4, 8, 1000, 1000), (8, 32, 200, 200), (16, 32, 64, 64), (2, 8, 1111, 300),
    (2, 8, 300, 1111)], ids=lambda value: str(value))
@pytest.mark.parametrize("head_dim", [32, 40, 64])
def test_gpu_more_key_value_slots_change_no_bit(head_dim, batch, kv_heads, seq_q, seq_k, causal, monkeypatch):
    """Three and four slots in the K and V rings (KV_STAGES, forced at every length and head_dim
    here) only let the producer load further ahead: the output and log-sum-exp are bitwise those
    of two. More units than SMs (several tiles
    a program), tiles of one key block (64 and 200 queries; the first query block of a causal
    head), ragged lengths, GQA 4:1, the first consumer's half block (SHORT_DIAGONAL, causal at
    widths 32-64 up to its lengths) and, kernel-level only, keys shorter and longer than the
    queries."""
    if not hopper():
        pytest.skip("needs a Hopper GPU")
    q, k, v = gpu_inputs(batch, 32, kv_heads, seq_q, seq_k, head_dim, torch.bfloat16, seq_q + head_dim)
    scale = head_dim ** -0.5
    width = attention_gluon.forward_width(head_dim, seq_k, causal)
    monkeypatch.setattr(attention_gluon, "KV_STAGES", {})
    two = attention_gluon.attention_forward(q, k, v, causal, scale)
    monkeypatch.setattr(attention_gluon, "KV_STAGES_MAX_KEYS", {width: 1 << 31})
    monkeypatch.setattr(attention_gluon, "KV_STAGES_MIN_HEAD_DIM", 0)
    for stages in (3, 4):
        monkeypatch.setattr(attention_gluon, "KV_STAGES", {width: stages})
        narrow = attention_gluon.narrow_key_blocks(width, seq_k, causal)  # twice the slots: the same bytes
        assert attention_gluon.kv_stages(head_dim, seq_k, causal) == stages * (2 if narrow else 1)
        out, lse = attention_gluon.attention_forward(q, k, v, causal, scale)
        assert torch.equal(two[0], out) and torch.equal(two[1], lse), stages
    if seq_q == seq_k or not causal:
        _check_forward(q, k, v, causal, 3e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("batch, kv_heads, seq_q, seq_k", [
    (4, 32, 512, 512), (2, 8, 1000, 1000), (8, 32, 200, 200), (16, 32, 64, 64), (2, 8, 1111, 300),
    (2, 8, 300, 1111)], ids=lambda value: str(value))
@pytest.mark.parametrize("head_dim", [32, 40, 64, 96, 128, 160, 256])
def test_gpu_ping_pong_changes_no_bit(head_dim, batch, kv_heads, seq_q, seq_k, causal, monkeypatch):
    """The consumers taking turns to issue their products (attention_gluon.pingpong, forced at every
    length here) only orders their issue: the output and log-sum-exp are bitwise those without
    turns. Turns are counted over a program's tiles, so this covers more units than SMs, tiles of
    one key block, the first consumer's half block (widths 32-64) and whole skipped block (192,
    256) taken as an empty turn, ragged lengths, GQA 4:1, a tail operand (width 160) and, at the
    kernel level, keys shorter and longer than the queries: a turn counted wrong hangs or races."""
    if not hopper():
        pytest.skip("needs a Hopper GPU")
    q, k, v = gpu_inputs(batch, 32, kv_heads, seq_q, seq_k, head_dim, torch.bfloat16, seq_q + head_dim + 7)
    scale = head_dim ** -0.5
    width = attention_gluon.forward_width(head_dim, seq_k, causal)
    monkeypatch.setattr(attention_gluon, "PINGPONG_MIN_KEYS", {})
    monkeypatch.setattr(attention_gluon, "PINGPONG_CAUSAL_MIN_KEYS", {})
    plain = attention_gluon.attention_forward(q, k, v, causal, scale)
    monkeypatch.setattr(attention_gluon, "PINGPONG_MIN_KEYS", {width: 0})
    monkeypatch.setattr(attention_gluon, "PINGPONG_CAUSAL_MIN_KEYS", {width: 0})
    assert attention_gluon.pingpong(width, seq_k, causal)
    out, lse = attention_gluon.attention_forward(q, k, v, causal, scale)
    assert torch.equal(plain[0], out) and torch.equal(plain[1], lse)
    if seq_q == seq_k or not causal:
        _check_forward(q, k, v, causal, 3e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("batch, kv_heads, seq_q, seq_k, causal", [
    (4, 32, 1024, 1024, True), (2, 8, 1000, 1000, True), (8, 32, 200, 200, True), (2, 8, 1111, 300, True),
    (2, 8, 300, 1111, True)], ids=lambda value: str(value))
@pytest.mark.parametrize("head_dim", [40, 64, 128, 160, 256])
def test_gpu_unmasked_blocks_first_change_no_bit(head_dim, batch, kv_heads, seq_q, seq_k, causal, monkeypatch):
    """The key loop in two parts, the blocks no mask reaches first (attention_gluon.masked_last),
    gives the output and log-sum-exp bitwise of one loop through the masks: causal, ragged and
    whole, one-block tiles, keys shorter and longer than the queries, a tail operand (width 160),
    the first consumer's half and whole skipped blocks. Two parts run where routed: at width 256,
    and with the seq_k mask (more queries than keys, 1111 and 300) at every width; elsewhere both
    settings run one loop. A part's bound counted wrong hangs or skips a mask."""
    if not hopper():
        pytest.skip("needs a Hopper GPU")
    q, k, v = gpu_inputs(batch, 32, kv_heads, seq_q, seq_k, head_dim, torch.bfloat16, seq_q + head_dim + 11)
    scale = head_dim ** -0.5
    monkeypatch.setattr(attention_gluon, "MASKED_BLOCKS_LAST", False)
    every = attention_gluon.attention_forward(q, k, v, causal, scale)
    monkeypatch.setattr(attention_gluon, "MASKED_BLOCKS_LAST", True)
    out, lse = attention_gluon.attention_forward(q, k, v, causal, scale)
    assert torch.equal(every[0], out) and torch.equal(every[1], lse)
    if seq_q == seq_k or not causal:
        _check_forward(q, k, v, causal, 3e-2)


def test_unmasked_blocks_first_where_measured_faster():
    # Thirty-fifth session: causal with the seq_k mask at every width measured (hd64-192 ragged);
    # thirty-sixth: without it at width 256 only (two parts slower at 192, at 96-128 short lengths).
    for width in (64, 96, 128, 192, 256):
        assert attention_gluon.masked_last(width, True, True)
        assert not attention_gluon.masked_last(width, False, True)
    assert attention_gluon.masked_last(256, True, False)
    assert not any(attention_gluon.masked_last(width, True, False) for width in (32, 48, 64, 96, 128, 160, 192))


@pytest.mark.parametrize("seq_q, seq_k, keys_a_block, causal, checked", [
    (1000, 1000, 128, True, False),  # self-attention, ragged: the causal mask hides the keys past seq_k
    (300, 1111, 64, True, False),  # fewer queries than keys: so it does
    (1111, 300, 128, True, True),  # more queries than keys: rows from 300 on see every key
    (1000, 1000, 128, False, True),  # not causal: every row sees every key
    (1024, 1024, 128, True, False), (1024, 1024, 128, False, False), (1024, 1000, 64, True, True),
], ids=lambda value: str(value))
def test_the_causal_mask_covers_keys_past_seq_k_where_no_stored_row_sees_them(seq_q, seq_k, keys_a_block, causal,
                                                                               checked, monkeypatch):
    assert attention_gluon.checks_seq_k(seq_q, seq_k, keys_a_block, causal) is checked
    monkeypatch.setattr(attention_gluon, "CAUSAL_MASK_COVERS_SEQ_K", False)  # as before: wherever ragged
    assert attention_gluon.checks_seq_k(seq_q, seq_k, keys_a_block, causal) is (seq_k % keys_a_block != 0)


@pytest.mark.gpu
@pytest.mark.parametrize("batch, kv_heads, seq_q, seq_k", [
    (2, 8, 1000, 1000), (4, 32, 777, 777), (2, 8, 2000, 2000), (8, 32, 200, 200), (1, 8, 300, 1111),
    (2, 8, 1111, 300)], ids=lambda value: str(value))
@pytest.mark.parametrize("head_dim", [40, 64, 96, 128, 160, 256])
def test_gpu_causal_calls_unmasked_past_seq_k_change_no_bit(head_dim, batch, kv_heads, seq_q, seq_k, monkeypatch):
    """Causal calls whose keys end in a partial block and outnumber no query skip the mask of the
    keys past seq_k (attention_gluon.checks_seq_k): the output and log-sum-exp are bitwise those
    with it, and the float32 reference's (top-left causal, as the kernel's). Ragged self-attention
    with one-block tiles and 64- or 128-key blocks, fewer queries than keys, a tail operand (width
    160), and more queries than keys, where the mask stays (the same kernel in both settings)."""
    if not hopper():
        pytest.skip("needs a Hopper GPU")
    q, k, v = gpu_inputs(batch, 32, kv_heads, seq_q, seq_k, head_dim, torch.bfloat16, seq_q + head_dim + 13)
    scale = head_dim ** -0.5
    keys_a_block = attention_gluon.block_n(attention_gluon.forward_width(head_dim, seq_k, True), seq_k, True)
    monkeypatch.setattr(attention_gluon, "CAUSAL_MASK_COVERS_SEQ_K", False)
    masked = attention_gluon.attention_forward(q, k, v, True, scale)
    assert attention_gluon.checks_seq_k(seq_q, seq_k, keys_a_block, True)
    monkeypatch.setattr(attention_gluon, "CAUSAL_MASK_COVERS_SEQ_K", True)
    out, lse = attention_gluon.attention_forward(q, k, v, True, scale)
    assert attention_gluon.checks_seq_k(seq_q, seq_k, keys_a_block, True) is (seq_q > seq_k)
    assert torch.equal(masked[0], out) and torch.equal(masked[1], lse)
    expected = reference_attention(q, k, v, causal=True, dtype=torch.float32)
    assert ((out.float() - expected).norm() / expected.norm()).item() < 3e-2


@pytest.mark.gpu
@pytest.mark.parametrize("batch, kv_heads, seq_q, seq_k", [
    (4, 32, 512, 512), (2, 8, 1000, 1000), (8, 32, 200, 200), (16, 32, 64, 64), (2, 8, 1111, 300),
    (2, 8, 300, 1111)], ids=lambda value: str(value))
@pytest.mark.parametrize("head_dim, pingpong", [(32, False), (40, False), (64, True), (80, True), (128, False)],
                         ids=lambda value: str(value))
def test_gpu_narrow_key_blocks(head_dim, batch, kv_heads, seq_q, seq_k, pingpong, monkeypatch):
    """Causal calls read 64 keys a block at widths 32-128 (narrow_key_blocks, forced at every length
    here): the first consumer then skips all of a tile's last block. The output and log-sum-exp
    as with 128 keys a block (not bitwise: the running maximum moves at other keys) and as the
    float32 reference's, with and without the consumers' turns; more units than SMs, tiles of one
    key block, ragged lengths, GQA 4:1 and, kernel-level only, keys shorter and longer than the
    queries."""
    if not hopper():
        pytest.skip("needs a Hopper GPU")
    q, k, v = gpu_inputs(batch, 32, kv_heads, seq_q, seq_k, head_dim, torch.bfloat16, seq_q + head_dim + 11)
    scale = head_dim ** -0.5
    width = attention_gluon.forward_width(head_dim, seq_k, True)
    monkeypatch.setattr(attention_gluon, "PINGPONG_CAUSAL_MIN_KEYS", {width: 0} if pingpong else {})
    monkeypatch.setattr(attention_gluon, "NARROW_KEY_BLOCKS_MAX_KEYS", {})
    whole_out, whole_lse = attention_gluon.attention_forward(q, k, v, True, scale)
    monkeypatch.setattr(attention_gluon, "NARROW_KEY_BLOCKS_MAX_KEYS", {width: 1 << 31})
    assert attention_gluon.block_n(width, seq_k, True) == 64 and attention_gluon.short_diagonal(width, seq_q, True)
    out, lse = attention_gluon.attention_forward(q, k, v, True, scale)
    assert (out.float() - whole_out.float()).abs().max().item() <= 2e-2
    assert (lse - whole_lse).abs().max().item() <= 1e-3
    if seq_q == seq_k:
        _check_forward(q, k, v, True, 3e-2)


def test_softmax_under_the_last_product_where_measured_faster():
    # Twenty-third session: not causal at widths 32-64 2-9 % faster from 4096 keys, level or
    # slower at 512; mixed at width 128, level to slower at 192-256 and causal. Thirty-seventh:
    # at widths 32 and 64 faster or level from 1024 keys, but hd40 on width 64 5-9 % slower.
    assert _routed(attention_gluon.softmax_under_pv, 32, 4096, False)
    assert _routed(attention_gluon.softmax_under_pv, 48, 16384, False)
    assert not _routed(attention_gluon.softmax_under_pv, 64, 4096, True)
    assert not _routed(attention_gluon.softmax_under_pv, 40, 512, False)
    assert not _routed(attention_gluon.softmax_under_pv, 64, 512, False)
    assert all(attention_gluon.softmax_under_pv(width, seq_k, False, head_dim)
               for width, head_dim in ((32, 32), (64, 48), (64, 56), (64, 64)) for seq_k in (1024, 2048, 3072))
    assert attention_gluon.forward_width(40, 2048, False) == 64
    assert not attention_gluon.softmax_under_pv(64, 2048, False, 40)
    assert attention_gluon.softmax_under_pv(48, 4096, False, 40)  # hd40 from 4096 keys: 32 + 16 columns
    assert not any(_routed(attention_gluon.softmax_under_pv, head_dim, 4096, False) for head_dim in (72, 128, 160, 256))


@pytest.mark.gpu
@pytest.mark.parametrize("batch, kv_heads, seq_q, seq_k", [
    (4, 32, 512, 512), (2, 8, 1000, 1000), (8, 32, 200, 200), (16, 32, 64, 64), (2, 8, 1111, 300),
    (2, 8, 300, 1111), (1, 8, 4096, 4096)], ids=lambda value: str(value))
@pytest.mark.parametrize("head_dim", [32, 40, 64, 96, 128, 160, 256])
def test_gpu_softmax_under_the_last_product_changes_no_bit(head_dim, batch, kv_heads, seq_q, seq_k, monkeypatch):
    """Releasing K_j's slot after block j's softmax, under a branch (SOFTMAX_UNDER_PV_MIN_KEYS,
    forced at every width and length here; calls not causal), moves only where the key loop
    waits: the output and log-sum-exp are bitwise as before, with and without ping-pong turns,
    over more units than SMs, tiles of one and two key blocks, ragged lengths, GQA 4:1, a tail
    operand (width 160; 48 at 4096 keys) and keys shorter and longer than the queries: a slot released twice or
    never hangs the producer or races it."""
    if not hopper():
        pytest.skip("needs a Hopper GPU")
    q, k, v = gpu_inputs(batch, 32, kv_heads, seq_q, seq_k, head_dim, torch.bfloat16, seq_q + head_dim + 3)
    scale = head_dim ** -0.5
    width = attention_gluon.forward_width(head_dim, seq_k, False)
    monkeypatch.setattr(attention_gluon, "SOFTMAX_UNDER_PV_MIN_HEAD_DIM", {})  # hd40 on width 64 too
    for pingpong in ({}, {width: 0}):
        monkeypatch.setattr(attention_gluon, "PINGPONG_MIN_KEYS", pingpong)
        monkeypatch.setattr(attention_gluon, "SOFTMAX_UNDER_PV_MIN_KEYS", {})
        before = attention_gluon.attention_forward(q, k, v, False, scale)
        monkeypatch.setattr(attention_gluon, "SOFTMAX_UNDER_PV_MIN_KEYS", {width: 0})
        assert attention_gluon.softmax_under_pv(width, seq_k, False, head_dim)
        out, lse = attention_gluon.attention_forward(q, k, v, False, scale)
        assert torch.equal(before[0], out) and torch.equal(before[1], lse), pingpong
    _check_forward(q, k, v, False, 3e-2)


@pytest.mark.gpu
def test_gpu_a_call_with_gradients_takes_it_with_the_one_launch_backward(monkeypatch):
    """hd64 at 2^27 scores with gradients (FUSED_BACKWARD_MAX_SCORES_WITH_GRAD's band): the Gluon
    forward, as without gradients, then the one-launch backward on its log-sum-exp; the output and
    gradients as the float32 reference's."""
    if not hopper():
        pytest.skip("needs a Hopper GPU")
    calls, fused = [], []
    original = attention_gluon.attention_forward
    monkeypatch.setattr(attention_gluon, "attention_forward", lambda *args: calls.append(1) or original(*args))
    original_fused = attention_module._launch_fused_backward
    monkeypatch.setattr(attention_module, "_launch_fused_backward",
                        lambda *args: fused.append(1) or original_fused(*args))
    q, k, v = (t.requires_grad_() for t in gpu_inputs(4, 32, 8, 1024, 1024, 64, torch.bfloat16, 11))
    grad = torch.randn_like(q)
    out = flash_attention(q, k, v, causal=True)
    out.backward(grad)
    assert len(calls) == 1 and len(fused) == 1
    _check_causal_gradients(q, k, v, out, grad)


def _recorded_widths(monkeypatch) -> tuple[list, list]:
    """(the head_dim of each Gluon forward's q, that of each attention_backward's q), filled as
    they are called on the general path."""
    widths, backward_widths = [], []
    original = attention_gluon.attention_forward
    monkeypatch.setattr(attention_gluon, "attention_forward",
                        lambda *args: widths.append(args[0].shape[-1]) or original(*args))
    original_backward = attention_module.attention_backward
    monkeypatch.setattr(attention_module, "attention_backward",
                        lambda *args, **kwargs: backward_widths.append(args[1].shape[-1])
                        or original_backward(*args, **kwargs))
    return widths, backward_widths


def _three_calls(monkeypatch, batch, heads, kv_heads, seq, head_dim, deterministic) -> tuple[list, list, list]:
    """Three causal forward+backward calls of one signature, each checked against the float32
    reference, plans forgotten first: (the head_dim of each Gluon forward and of each
    attention_backward on the general path, and per Gluon dK/dV launch there whether it summed
    dQ). The first call runs the general path, the second's backward is watched to make a replay,
    a plan replays the third's."""
    widths, backward_widths = _recorded_widths(monkeypatch)
    summed = []
    original_dkdv = attention_gluon_backward.backward_dkdv
    monkeypatch.setattr(attention_gluon_backward, "backward_dkdv",
                        lambda *args: summed.append(args[-1] is not None) or original_dkdv(*args))
    attention_module.attention_plan.forget()
    for call in range(3):
        q, k, v = (t.requires_grad_() for t in gpu_inputs(batch, heads, kv_heads, seq, seq, head_dim, torch.bfloat16,
                                                          head_dim + call))
        grad = torch.randn_like(q)
        out = flash_attention(q, k, v, causal=True, deterministic=deterministic)
        out.backward(grad)
        _check_causal_gradients(q, k, v, out, grad)
    return widths, backward_widths, summed


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim,seq,kv_heads", [(40, 256, 4), (72, 512, 2), (136, 300, 4), (88, 1024, 1)])
@pytest.mark.parametrize("deterministic", [False, True], ids=["summing-dq", "deterministic"])
def test_gpu_small_calls_at_padded_head_dims_run_unpadded(head_dim, seq, kv_heads, deterministic, monkeypatch):
    """Small calls from UNPADDED_GLUON_MIN_SEQ keys at head dims the pointer kernels would pad run
    on descriptors, the Gluon forward and backward reading them unpadded (twenty-eighth session),
    and match the float32 reference; a plan replays the third call's backward too."""
    if not hopper():
        pytest.skip("needs a Hopper GPU")
    widths, backward_widths, summed = _three_calls(monkeypatch, 2, 4, kv_heads, seq, head_dim, deterministic)
    # the general path on the first call, unpadded
    assert widths[:1] == [head_dim] and backward_widths[:1] == [head_dim], (widths, backward_widths)
    if not deterministic:  # the Gluon kernel summed dQ, and a plan replayed the third backward
        assert summed == [True, True] and backward_widths == [head_dim] * 2, (summed, backward_widths)
    else:
        assert True not in summed


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim,batch,heads,kv_heads,seq", [(96, 8, 32, 8, 256), (128, 4, 16, 4, 512),
                                                               (160, 1, 16, 16, 1024), (256, 2, 32, 8, 512)])
@pytest.mark.parametrize("deterministic", [False, True], ids=["summing-dq", "deterministic"])
def test_gpu_wide_head_dims_in_2_to_24_scores_take_the_long_path(head_dim, batch, heads, kv_heads, seq, deterministic,
                                                                 monkeypatch):
    """Calls of 2^24 scores from head_dim 96 (before the twenty-ninth session: the one-launch
    backward and the Triton forward) run the Gluon forward, and with deterministic=False the Gluon
    backward summing dQ, as long calls do (SMALL_CALLS_LONG_PATH_MIN_HEAD_DIM), and match the float32
    reference; at 96 and 128 a plan replays the third call's backward. With deterministic=True they
    route as before (the Triton forward and the one-launch backward)."""
    if not hopper():
        pytest.skip("needs a Hopper GPU")
    assert batch * heads * seq * seq == attention_module.SMALL_CALLS_LONG_PATH_MIN_SCORES
    q = torch.empty(batch, heads, seq, head_dim, device="cuda", dtype=torch.bfloat16)
    k = torch.empty(batch, kv_heads, seq, head_dim, device="cuda", dtype=torch.bfloat16)
    config = attention_module.config_for(q, k, backward=True, deterministic=deterministic)
    assert (config is select_config(torch.cuda.get_device_capability(), head_dim)) != deterministic
    widths, backward_widths, summed = _three_calls(monkeypatch, batch, heads, kv_heads, seq, head_dim, deterministic)
    assert backward_widths[:1] == [head_dim], backward_widths
    if deterministic:  # no Gluon kernel at all
        assert config.fused_backward and widths == [] and summed == [], (widths, summed)
    elif head_dim <= 128:  # the Gluon forward; the summing backward's launches replayed from the third call
        assert widths[:1] == [head_dim], widths
        assert summed == [True, True] and backward_widths == [head_dim] * 2, (summed, backward_widths)
    else:  # the wide kernel summing dQ (its split calls keep the general path)
        assert widths[:1] == [head_dim] and summed and all(summed), (widths, summed)


@pytest.mark.gpu
@pytest.mark.parametrize("fused_backward", [True, False], ids=["fused-backward", "three-launch-backward"])
@pytest.mark.parametrize("head_dim", [40, 72, 112])
def test_gpu_unpadded_forward_before_a_padding_backward(head_dim, fused_backward, monkeypatch):
    """On pointers the Triton kernels run on inputs zero-padded to a power of two (their column
    masks are slow); the Gluon forward reads them unpadded, and the backward pads them itself.
    (Small calls took this path at 512 keys before the twenty-eighth session; now from
    UNPADDED_GLUON_MIN_SEQ keys they run on descriptors: a config given says pointers here.)"""
    if not hopper():
        pytest.skip("needs a Hopper GPU")
    widths, backward_widths = _recorded_widths(monkeypatch)
    q, k, v = (t.requires_grad_() for t in gpu_inputs(2, 4, 2, 512, 512, head_dim, torch.bfloat16, head_dim))
    config = dataclasses.replace(select_config((9, 0), head_dim, 512, 2 * 4 * 512 * 512), gluon_forward=True,
                                 fused_backward=fused_backward, tma=attention_module.POINTERS,
                                 gluon_backward=False, gluon_atomic_dq=False)
    assert attention_module.padded_width(head_dim, config) != head_dim
    grad = torch.randn_like(q)
    out = flash_attention(q, k, v, causal=True, config=config)
    out.backward(grad)
    assert widths == [head_dim]
    assert backward_widths == [attention_module.padded_width(head_dim, config)]
    _check_causal_gradients(q, k, v, out, grad)
