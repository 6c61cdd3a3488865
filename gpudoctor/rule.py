"""One rule of the catalogue, as ``knowledge`` loads it (apart so that a healthy preflight(),
which reads knowledge's version tables but no rule, never creates the class)."""

from __future__ import annotations

from dataclasses import dataclass

from .model import Severity


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
