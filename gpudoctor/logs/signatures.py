"""Log signatures: load ``gpudoctor/rules/signatures.toml`` into typed, compiled values.

The file is data (see its header for the fields); this module only validates and compiles it,
once per process.
"""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..knowledge import read_rules_file
from ..model import Severity

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

SEVERITIES = tuple(s.value for s in Severity)  # the model's, not a copy


@dataclass(frozen=True)
class Lookup:
    """Maps a captured value (e.g. a removed keyword argument) to advice (its replacement)."""

    capture: str
    into: str
    table: Mapping[str, str]
    default: str


@dataclass(frozen=True)
class Signature:
    """One ``[[signature]]`` of ``rules/signatures.toml``, validated and its regex compiled: a line-level
    symptom of a catalogue rule (the file's header says what each field means)."""

    id: str
    rule: str
    keyword: str
    regex: re.Pattern[str]
    weight: int
    message: str
    source: str
    severity: str | None = None
    consequence_of: tuple[str, ...] = ()
    only_if_zero: tuple[str, ...] = ()
    derive: Mapping[str, str] = field(default_factory=dict)
    lookup: Lookup | None = None


def _signature_from_toml(raw: Mapping[str, Any]) -> Signature:
    sig_id = raw["id"]
    try:
        regex = re.compile(raw["regex"])
    except re.error as exc:
        raise ValueError(f"signature {sig_id}: bad regex: {exc}") from exc
    severity = raw.get("severity")
    if severity is not None and severity not in SEVERITIES:
        raise ValueError(f"signature {sig_id}: severity must be one of {SEVERITIES}")
    if "fix" in raw:  # one owner: a rule's fixes live in gpudoctor/remedies, not per signature
        raise ValueError(f"signature {sig_id}: fixes belong to the rule's remedy (gpudoctor/remedies), not a signature")
    lookup = None
    if "lookup" in raw:
        lk = raw["lookup"]
        lookup = Lookup(lk["capture"], lk["into"], dict(lk["table"]), lk["default"])
    return Signature(
        id=sig_id,
        rule=raw["rule"],
        keyword=raw["keyword"],
        regex=regex,
        weight=int(raw["weight"]),
        message=raw["message"],
        source=raw["source"],
        severity=severity,
        consequence_of=tuple(raw.get("consequence_of", ())),
        only_if_zero=tuple(raw.get("only_if_zero", ())),
        derive=dict(raw.get("derive", {})),
        lookup=lookup,
    )


def parse_signatures(text: str) -> tuple[Signature, ...]:
    signatures = tuple(_signature_from_toml(raw) for raw in tomllib.loads(text)["signature"])
    seen: set[str] = set()
    for sig in signatures:
        if sig.id in seen:
            raise ValueError(f"duplicate signature id: {sig.id}")
        seen.add(sig.id)
    return signatures


@functools.lru_cache(maxsize=None)
def load_signatures() -> tuple[Signature, ...]:
    text = read_rules_file("signatures.toml")
    return parse_signatures(text)
