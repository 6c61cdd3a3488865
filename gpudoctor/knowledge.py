"""Loads the rule catalogue and version tables shipped in ``gpudoctor/rules/*.toml``."""

from __future__ import annotations

import functools
import os
import sys
from typing import TYPE_CHECKING, Any

from .model import Severity

if TYPE_CHECKING:
    from .rule import Rule

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

def __getattr__(name: str):
    # Rule lives in rule.py, created on first use: a healthy preflight() reads version tables
    # from here but never a rule (each dataclass created costs ~0.5-1 ms at a training script's
    # start on Python 3.12).
    if name == "Rule":
        from .rule import Rule

        return Rule
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


RULES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rules")


def read_rules_file(name: str) -> str:
    """The text of one file in gpudoctor/rules/: the one loader of the knowledge files.
    A plain path, not importlib.resources (~3.5 ms to import, paid by preflight's first call):
    gpudoctor is always installed as files (pip never installs it zipped)."""
    with open(os.path.join(RULES_DIR, name), encoding="utf-8") as handle:
        return handle.read()


def load_rules_toml(name: str) -> dict[str, Any]:
    return tomllib.loads(read_rules_file(name))


_load_toml = load_rules_toml


def _rule(raw: dict[str, Any]) -> Rule:
    from .rule import Rule

    return Rule(
        id=raw["id"],
        area=raw["area"],
        severity=Severity(raw["severity"]),
        title=raw["title"],
        detected_by=tuple(raw["detected_by"]),
        what=raw["what"],
        why=raw["why"],
        fix=raw["fix"],
        references=tuple(raw["references"]),
        verified=raw.get("verified", ""),
        breaks_triton_jit=bool(raw.get("breaks_triton_jit", False)),
    )


@functools.lru_cache(maxsize=None)
def load_catalogue() -> dict[str, Rule]:
    rules: dict[str, Rule] = {}
    for raw in _load_toml("catalogue.toml")["rule"]:
        rule = _rule(raw)
        if rule.id in rules:
            raise ValueError(f"duplicate rule id in catalogue.toml: {rule.id}")
        rules[rule.id] = rule
    return rules


def catalogue_rule(rule_id: str) -> Rule:
    """``load_catalogue()[rule_id]``, parsing only that rule's table while the whole catalogue
    has not been loaded: a check's finding needs one rule, and tomllib takes ~10 ms for the
    60 KB catalogue (preflight's first call on a machine with a finding; 2-core box, Python
    3.12). Where the table cannot be read alone, the full load, which raises as before."""
    if not load_catalogue.cache_info().currsize:
        rule = read_catalogue_table(rule_id)
        if rule is not None:
            return rule
    return load_catalogue()[rule_id]


def read_catalogue_table(rule_id: str) -> Rule | None:
    """The rule from its own ``[[rule]]`` table of catalogue.toml (the text from its
    ``[[rule]]`` line to the next one); None where that is not one table with this id alone
    (no such id, the id twice). A test checks that every rule read this way equals the full
    load's."""
    text = read_rules_file("catalogue.toml")
    marker = f'\nid = "{rule_id}"\n'
    at = text.find(marker)
    if at < 0 or text.find(marker, at + 1) >= 0:
        return None
    start = text.rfind("\n[[rule]]\n", 0, at + 1)
    end = text.find("\n[[rule]]\n", at)
    if start < 0:
        return None
    try:
        tables = tomllib.loads(text[start:end if end >= 0 else len(text)]).get("rule")
    except tomllib.TOMLDecodeError:  # a "[[rule]]" line inside a multi-line string cut the table
        return None
    if not isinstance(tables, list) or len(tables) != 1 or tables[0].get("id") != rule_id:
        return None
    return _rule(tables[0])


@functools.lru_cache(maxsize=None)
def load_tables() -> dict[str, Any]:
    return _load_toml("tables.toml")
