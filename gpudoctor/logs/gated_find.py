"""Find a literal in a byte block by its rarest byte first.

``bytes.find`` costs about the same for every pass over a block, 0.2-0.5 ms per MB on the
2-core dev box, and the scanner makes one pass per trigger literal (37 of them): that, not
Python, was the scan's cost. A single-byte ``find`` is memchr (several GB/s), so each literal is
searched for by the byte of it that logs contain least (the ``RARITY`` order below), and only
where that byte occurs is the literal compared (``startswith``, in C). In a training log most
literals' rarest byte (an upper-case letter, ``q``, ``x``, a backquote) turns up a few times per
MB, so the pass costs a memchr and a handful of comparisons. A gate byte that is common in this
particular log would make the Python loop the cost: after ``BUDGET_SHIFT``'s budget of gate hits
the literal is searched for with a plain ``find`` instead, from where the gate stopped.
"""

from __future__ import annotations

# Printable ASCII from most to least common in the real logs under fixtures/logs (all of them,
# healthy and failed, counted once when this was written); what is not listed counts as rarest.
RARITY = (b" ertionaslcdup/m.h0_g1:byf-,=2kC63vw8x5EN4(7T\")FLAIR9\\PUD^]O['SG>MW<*B`zqV+~|#!YHXj%QK{};J?@Z$&")
_RANK = {byte: rank for rank, byte in enumerate(RARITY)}
BUDGET_SHIFT = 12  # gate hits allowed per block: len(block) >> 12, one per 4 KiB


def gate_of(literal: bytes) -> tuple[int, int]:
    """(offset, byte) of the literal's rarest byte: its first occurrence among the rarest."""
    offset = max(range(len(literal)), key=lambda i: (_RANK.get(literal[i], len(RARITY)), -i))
    return offset, literal[offset]


def line_starts(block: bytes, literal: bytes, gate: tuple[int, int], start: int) -> list[int]:
    """Positions of ``literal`` in ``block`` at or after ``start``, at most one per line (the
    first), exactly as a ``find`` loop that resumes at each hit's line end would give them."""
    offset, byte = gate
    found: list[int] = []
    budget = len(block) >> BUDGET_SHIFT
    pos = block.find(byte, start + offset)
    while pos != -1:
        begin = pos - offset
        if block.startswith(literal, begin):
            found.append(begin)
            line_end = block.find(b"\n", begin)
            if line_end == -1:
                return found
            pos = block.find(byte, line_end + offset)
        else:
            pos = block.find(byte, pos + 1)
        budget -= 1
        if budget < 0 and pos != -1:  # a common byte in this log: a plain find is cheaper from here
            begin = block.find(literal, pos - offset)
            while begin != -1:
                found.append(begin)
                line_end = block.find(b"\n", begin)
                if line_end == -1:
                    break
                begin = block.find(literal, line_end)
            return found
    return found
