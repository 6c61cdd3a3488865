"""Turn a ranked diagnosis into a ``Finding``: the message from the signature's template, the
fixes from the rule's remedy (the same one the static check calls) with the captured values."""

from __future__ import annotations

import functools
from typing import Any

from ..model import Finding, Severity
from ..remedies import fixes_for
from ..remedies.machine import Machine
from .ranking import Diagnosis
from .templates import derive, fill


@functools.lru_cache(maxsize=None)
def _catalogue() -> dict[str, Any]:
    try:
        from ..knowledge import load_catalogue

        return dict(load_catalogue())
    except Exception:  # the catalogue is the lead's; a log diagnosis must work without it
        return {}


def _values(diagnosis: Diagnosis) -> dict[str, str]:
    values: dict[str, str] = {}
    for hit in (*diagnosis.primary, *diagnosis.supporting):
        for key, value in hit.values.items():
            values.setdefault(key, value)
    for hit in (*diagnosis.primary, *diagnosis.supporting):
        lookup = hit.signature.lookup
        if lookup and lookup.into not in values:
            values[lookup.into] = lookup.table.get(values.get(lookup.capture, ""), lookup.default)
    specs: dict[str, str] = {}
    for sig in {h.signature.id: h.signature for h in (*diagnosis.primary, *diagnosis.supporting)}.values():
        specs.update(sig.derive)
    derive(values, specs)
    return values


def _severity(diagnosis: Diagnosis) -> Severity:
    # A failure seen in a log already happened: error, unless the signature says the line is
    # only a warning (Unsloth's slow path, an optional Triton). The catalogue's severity is for
    # the static check, which predicts rather than observes.
    return max((Severity(h.signature.severity or "error") for h in diagnosis.primary), key=lambda s: s.rank)


def build_finding(diagnosis: Diagnosis, machine: Machine | None = None) -> Finding:
    rule = _catalogue().get(diagnosis.rule)
    values = _values(diagnosis)
    messages = list(dict.fromkeys(fill(h.signature.message, values) for h in diagnosis.primary))

    fixes = fixes_for(diagnosis.rule, values, machine)

    first = diagnosis.first
    evidence = {
        "log": first.source,
        "line_number": first.line_number,
        "line": first.line,
        "matches": sum(h.count for h in diagnosis.primary),
        "signatures": [h.signature.id for h in diagnosis.primary],
        "values": {k: v for k, v in values.items() if v and v != "?"},
        "consequence": diagnosis.is_consequence,
    }
    return Finding(
        id=diagnosis.rule,
        severity=_severity(diagnosis),
        title=rule.title if rule is not None else diagnosis.rule,
        message=" ".join(messages),
        evidence=evidence,
        fixes=fixes,
    )
