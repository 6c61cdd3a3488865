"""The persistent Gluon forward's static schedule (gpudoctor.kernels.attention_schedule): its
shape on CPU; that the kernel runs every tile exactly once under it is checked on the GPU
(test_attention_gluon.py, test_gpu_every_schedule_runs_each_tile_once)."""

import pytest

from gpudoctor.kernels import attention_schedule
from gpudoctor.kernels.attention_schedule import _longest_program, head_part_units, schedule

H200_SMS = 132


def _units_only_longest(batch_heads, query_blocks, programs):
    """The model's longest program under the schedule before this one: pairs i and last-i (the
    middle block of an odd count alone), round-robin."""
    pairs = (query_blocks + 1) // 2
    cost = [attention_schedule._tile_cost(query_blocks - 1 - pair, query_blocks)
            + (attention_schedule._tile_cost(pair, query_blocks) if query_blocks - 1 - pair != pair else 0)
            for pair in range(pairs)]
    units = batch_heads * pairs
    load = [0.0] * min(units, programs)
    for unit in range(units):
        load[unit % len(load)] += cost[unit % pairs]
    return max(load)


def _ideal(batch_heads, query_blocks):
    return batch_heads * sum(attention_schedule._tile_cost(block, query_blocks)
                             for block in range(query_blocks)) / H200_SMS


# (seq, batch x heads): the benchmarks' causal shapes (16384 tokens x 32 heads) and odd numbers of
# query blocks (384, 640 keys), where units of two sizes went to fixed programs.
@pytest.mark.parametrize(("seq", "batch_heads", "before", "after"), [
    (512, 1024, 0.031, 0.011), (1024, 512, 0.031, 0.011), (2048, 256, 0.031, 0.005), (4096, 128, 0.031, 0.005),
    (16384, 32, 0.031, 0.002), (640, 512, 0.23, 0.02), (384, 1024, 0.37, 0.02)])
def test_causal_rounds_leave_less_idle_than_units_alone(seq, batch_heads, before, after, monkeypatch):
    """In the model, with the tail (not shipped for even numbers of query blocks: TAIL)."""
    monkeypatch.setattr(attention_schedule, "TAIL", {"even": True, "odd": True})
    query_blocks = seq // 128
    chosen = schedule(batch_heads, query_blocks, query_blocks, True, H200_SMS)
    ideal = _ideal(batch_heads, query_blocks)
    assert _units_only_longest(batch_heads, query_blocks, H200_SMS) / ideal - 1 > before
    longest = _longest_program(chosen.head_units, query_blocks, query_blocks, chosen.tail_heads, chosen.programs)
    assert longest / ideal - 1 < after


@pytest.mark.parametrize("tail", [False, True], ids=["shipped", "tail"])
@pytest.mark.parametrize("query_blocks", [1, 2, 3, 4, 5, 8, 9, 16, 33, 128])
@pytest.mark.parametrize("batch_heads", [1, 7, 64, 100, 1000, 4096])
def test_causal_schedule_is_a_whole_head_part_and_a_tail(batch_heads, query_blocks, tail, monkeypatch):
    """The head part takes whole groups of heads (two with an odd number of query blocks), the
    tail the rest tile by tile, and no program is left without an item."""
    monkeypatch.setattr(attention_schedule, "TAIL", {"even": tail, "odd": tail})
    chosen = schedule(batch_heads, query_blocks, query_blocks, True, H200_SMS)
    group = attention_schedule.heads_per_group(query_blocks)
    assert 0 <= chosen.tail_heads <= batch_heads and (batch_heads - chosen.tail_heads) % group == 0
    assert chosen.head_units == head_part_units(batch_heads, query_blocks, chosen.tail_heads)
    assert chosen.items == chosen.head_units + chosen.tail_heads * query_blocks
    assert chosen.programs == min(chosen.items, H200_SMS)
    if tail and batch_heads * query_blocks <= H200_SMS:  # one tile a program
        assert (chosen.items, chosen.tail_heads) == (batch_heads * query_blocks, batch_heads)
    if not tail:  # the heads the head part cannot group, no more
        assert chosen.tail_heads == batch_heads % group
        assert chosen.simple == (query_blocks % 2 == 0)


@pytest.mark.parametrize("seq", [256, 512, 1024, 4096])
def test_shipped_even_query_blocks_walk_one_heads_pairs(seq):
    """As before this schedule: measured faster than the general walk with its tail (TAIL), unless
    the caller routes a tail (tail_at_even)."""
    chosen = schedule(1024, seq // 128, seq // 128, True, H200_SMS)
    assert chosen.simple and chosen.items == 1024 * seq // 256 and chosen.programs == H200_SMS
    routed = schedule(1024, seq // 128, seq // 128, True, H200_SMS, tail_at_even=True)
    assert not routed.simple and routed.head_units + routed.tail_heads * (seq // 128) == routed.items


def test_units_of_an_odd_count_pair_the_middles_of_two_heads():
    assert [attention_schedule.units_per_group(blocks) for blocks in (1, 2, 3, 4, 5)] == [1, 1, 3, 2, 5]
    assert head_part_units(10, 5, 0) == 25  # 2 pairs a head, and 5 units of two heads' middles


def test_not_causal_one_tile_an_item():
    assert schedule(64, 9, 9, False, H200_SMS) == attention_schedule.Schedule(576, 576, 0, H200_SMS, simple=True)
    assert schedule(64, 9, 9, False, H200_SMS).simple
    assert schedule(2, 3, 3, False, H200_SMS).programs == 6

