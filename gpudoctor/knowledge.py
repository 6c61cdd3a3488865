"""Loads the rule catalogue and version tables shipped in ``gpudoctor/rules/*.toml``."""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass
from typing import Any

from .model import Severity

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

@dataclass(frozen=True)
class Rule:
    """One rule of ``rules/catalogue.toml``: everything a user sees about a problem (title, what,
    why, fix, references) is derived from it, whichever detector found the problem."""

    id: str
    area: str
    severity: Severity
    title: str
    detected_by: tuple[str, ...]
    what: str
    why: str
    fix: str
    references: tuple[str, ...]
    # what a passing static check established, in words (`check -v`: "✓ id: <verified>")
    verified: str = ""
    # the problem makes Triton's JIT fail (compile, launcher build or load): the training pass
    # names it as the cause of a triton-jit-failed when the log diagnosis finds it
    breaks_triton_jit: bool = False


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


@functools.lru_cache(maxsize=None)
def load_catalogue() -> dict[str, Rule]:
    rules: dict[str, Rule] = {}
    for raw in _load_toml("catalogue.toml")["rule"]:
        rule = Rule(
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
        if rule.id in rules:
            raise ValueError(f"duplicate rule id in catalogue.toml: {rule.id}")
        rules[rule.id] = rule
    return rules


@functools.lru_cache(maxsize=None)
def load_tables() -> dict[str, Any]:
    return _load_toml("tables.toml")
