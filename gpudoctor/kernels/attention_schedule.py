"""Which tiles each program of the persistent Gluon forward runs (attention_gluon): a static
schedule, the same in every partition of a program, chosen here on the host.

A program p runs the items at positions p, p + P, p + 2P, ... of one list (P programs, one per
SM). Not causal, an item is one query tile and all tiles cost the same. Causal, a tile's cost grows
with its query block (it sees keys up to its last row), and the list is:

1. the *head part*: units of two tiles that cost the same, a head's query blocks i and last-i
   (when a head has an odd number of query blocks, the middle blocks of two heads make one unit),
   a head's units consecutive, so that programs running at once share its K and V in L2;
2. the *tail*: the last ``tail_heads`` heads' tiles one by one, largest first, each row of P
   items after the first tail row taken in the other direction (a snake), so that a program that
   got a large tile in one row gets a small one in the next.

Why: with units only, the units left for the last round (2048 units over 132 SMs: 68 programs
run 16, 64 run 15) leave every second SM idle for a unit's time, 3.1 % of a call at every causal
length at the benchmarks' shapes; and with an odd number of query blocks the middle block was a
unit alone, half the size, that a round-robin gave to fixed programs (at 640 keys, P=132, 3 units
a head: every third program got only the small one). Shipped (TAIL): with an odd number of query
blocks the middles of two heads and a tail (5-15 % faster at 384 and 640 keys on the H200); with
an even number, one head's pairs and no tail, which the kernel walks with one division
(``Schedule.simple``): the general walk cost more than the tail won there (docs/benchmarks.md,
twenty-first session), but where the caller routes a tail at even counts too (``tail_at_even``:
attention_gluon.EVEN_TAIL_MIN_KEYS: widths 32 and 64 from 2048 keys, 96 and 160-256 from 16384,
thirty-seventh session).

Pure Python, no torch: the cost model (COST_PER_TILE) only chooses ``tail_heads`` among a few
candidates; any choice gives the same result, bit for bit (each tile is computed whole by one
program).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

# A tile's cost in key blocks of 128, plus this much for the tile itself (its Q load, first
# product's latency and output store); a guess that only ranks candidate tails.
COST_PER_TILE = 0.5
# Tails up to this many rounds of P tiles are considered.
MAX_TAIL_ROUNDS = 4
# Whether causal calls get a tail beyond the heads the head part cannot group, by whether their
# query blocks are even or odd. Measured on the H200 (twenty-first session,
# bench/attention_gluon_schedule.py, forward device time, 2^28 scores): in one kernel the tail made
# the forward 1.5-3 % faster than units alone, as modelled; but that kernel's general walk over
# the items (attention_gluon._item) cost 7-15 % at 512 keys causal against the walk of one head's
# pairs, so even counts keep that walk and no tail. Odd counts need the general walk (units of two
# heads' middles: 640 keys 7-10 % faster, 384 keys 13-16 %), and the tail there was level to 6 %
# faster (hd128 at 640 and 1152 keys). Even counts also take the tail where the caller routes it
# (schedule's tail_at_even). {"even": True}: at every even count (benches' A/B, tests).
TAIL = {"even": False, "odd": True}


@dataclass(frozen=True)
class Schedule:
    """``items`` in the list above, the first ``head_units`` of them the head part's units, then
    ``tail_heads`` heads tile by tile, on ``programs``."""

    items: int
    head_units: int
    tail_heads: int
    programs: int
    # No tail and every unit one head's pair (or not causal): the kernel's one-division walk
    # (attention_gluon._item).
    simple: bool = False


def heads_per_group(query_blocks: int) -> int:
    """Heads whose units make one group of the head part: two with an odd number of query blocks
    (their middle blocks are one unit), else one."""
    return 1 + query_blocks % 2


def units_per_group(query_blocks: int) -> int:
    """Units of one group: query_blocks // 2 pairs a head, and the middles' unit if odd."""
    return heads_per_group(query_blocks) * (query_blocks // 2) + query_blocks % 2


def head_part_units(batch_heads: int, query_blocks: int, tail_heads: int) -> int:
    return (batch_heads - tail_heads) // heads_per_group(query_blocks) * units_per_group(query_blocks)


def schedule(batch_heads: int, query_blocks: int, key_blocks: int, causal: bool, sm_count: int,
             tail_at_even: bool = False) -> Schedule:
    """The schedule of a call: ``key_blocks`` the keys in blocks of 128 (causal tiles see at most
    this many). Not causal: one tile an item. ``tail_at_even``: a tail at an even number of query
    blocks too, where the caller's routing has measured it faster (attention_gluon.even_tail)."""
    if not causal:
        items = batch_heads * query_blocks
        return Schedule(items, items, 0, min(items, sm_count), simple=True)
    tail = TAIL["odd"] if query_blocks % 2 else TAIL["even"] or tail_at_even
    return _causal(batch_heads, query_blocks, min(key_blocks, query_blocks), sm_count, tail)


@functools.lru_cache(maxsize=1024)
def _causal(batch_heads: int, query_blocks: int, key_blocks: int, sm_count: int, tail: bool) -> Schedule:
    if not tail:
        tail_heads = batch_heads % heads_per_group(query_blocks)
        units = head_part_units(batch_heads, query_blocks, tail_heads)
        items = units + tail_heads * query_blocks
        return Schedule(items, units, tail_heads, min(items, sm_count), simple=query_blocks % 2 == 0)
    tiles = batch_heads * query_blocks
    if tiles <= sm_count:  # one tile a program
        return Schedule(tiles, 0, batch_heads, tiles)  # (the general walk)
    best = None
    for tail_heads in _candidates(batch_heads, query_blocks, sm_count):
        units = head_part_units(batch_heads, query_blocks, tail_heads)
        items = units + tail_heads * query_blocks
        programs = min(items, sm_count)
        cost = _longest_program(units, query_blocks, key_blocks, tail_heads, programs)
        if best is None or cost < best[0] - 1e-9:
            best = (cost, Schedule(items, units, tail_heads, programs))
    return best[1]


def _candidates(batch_heads: int, query_blocks: int, programs: int) -> list[int]:
    """Tails to compare: none (when the heads split into groups), and for 1..MAX_TAIL_ROUNDS rounds
    of tiles the fewest heads that make them, both as they come and raised until the head part
    fills whole rounds (every program the same number of units)."""
    group = heads_per_group(query_blocks)
    per_group = units_per_group(query_blocks)
    candidates = {batch_heads % group}
    for rounds in range(1, MAX_TAIL_ROUNDS + 1):
        least = -(-rounds * programs // query_blocks)
        if least > batch_heads:
            break
        tail = least + (batch_heads - least) % group
        candidates.add(tail)
        while tail <= batch_heads and ((batch_heads - tail) // group * per_group) % programs:
            tail += group
        if tail <= batch_heads:
            candidates.add(tail)
    if batch_heads * query_blocks <= MAX_TAIL_ROUNDS * programs:
        candidates.add(batch_heads)
    return sorted(tail for tail in candidates if tail <= batch_heads)


def _tile_cost(block: int, key_blocks: int) -> float:
    return min(block + 1, key_blocks) + COST_PER_TILE


def _longest_program(units: int, query_blocks: int, key_blocks: int, tail_heads: int, programs: int) -> float:
    """The model's time of the most loaded program: the head part's units (each the cost of its
    pair, taken as one average when keys are fewer than queries) round-robin, then the tail's tiles
    in the kernel's order (attention_gluon._item_position)."""
    tiles_cost = sum(_tile_cost(block, key_blocks) for block in range(query_blocks))
    unit_cost = 2 * tiles_cost / query_blocks
    rounds, extra = divmod(units, programs)
    load = [unit_cost * (rounds + (program < extra)) for program in range(programs)]
    first_tail_round = units // programs
    for index in range(tail_heads * query_blocks):
        position = units + index
        row, column = divmod(position, programs)
        program = programs - 1 - column if (row - first_tail_round) % 2 else column
        load[program] += _tile_cost(query_blocks - 1 - index // tail_heads, key_blocks)
    return max(load)
