"""Order what matched so the most likely root cause comes first.

Signatures of one rule are merged into one diagnosis (a rule is reported once, however many
lines show it). A diagnosis is a *consequence* when every line that made it names, in
``consequence_of``, a rule that is also present: a generic ``CalledProcessError`` after
``cannot find -lcuda`` is the same failure seen later. Causes come first by weight, then by
where they first appeared; consequences follow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from .matcher import SignatureHit


@dataclass(frozen=True)
class Diagnosis:
    """One catalogue rule the log shows, its signature hits merged: those with a message (highest weight first)
    and those that only contribute values, its ranking weight (its strongest hit's), and whether it is a
    consequence of another rule present."""

    rule: str
    primary: tuple[SignatureHit, ...]  # hits with a message, highest weight first
    supporting: tuple[SignatureHit, ...]  # hits that only contribute values
    weight: int
    is_consequence: bool

    @property
    def first(self) -> SignatureHit:
        return min(self.primary, key=lambda h: (h.source, h.line_number))


def rank(hits: Iterable[SignatureHit], source_order: Mapping[str, int] | None = None) -> list[Diagnosis]:
    order = source_order or {}
    by_rule: dict[str, list[SignatureHit]] = {}
    for hit in hits:
        by_rule.setdefault(hit.signature.rule, []).append(hit)

    grouped: dict[str, tuple[list[SignatureHit], list[SignatureHit]]] = {}
    for rule, rule_hits in by_rule.items():
        primary = sorted((h for h in rule_hits if h.signature.message), key=lambda h: -h.signature.weight)
        if primary:  # value-only lines never make a diagnosis on their own
            supporting = [h for h in rule_hits if not h.signature.message]
            grouped[rule] = (primary, supporting)

    present = set(grouped)
    diagnoses = []
    for rule, (primary, supporting) in grouped.items():
        consequence = all(present.intersection(h.signature.consequence_of) for h in primary)
        diagnoses.append(
            Diagnosis(rule, tuple(primary), tuple(supporting), primary[0].signature.weight, consequence)
        )

    def position(d: Diagnosis) -> tuple[int, int]:
        first = min(d.primary, key=lambda h: (order.get(h.source, 0), h.line_number))
        return order.get(first.source, 0), first.line_number

    return sorted(diagnoses, key=lambda d: (d.is_consequence, -d.weight, position(d)))
