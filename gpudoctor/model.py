"""The data that flows through gpudoctor: findings, their fixes, and check results.

Everything here is a frozen dataclass: probes, checks, the log matcher and the fixers exchange
these values and never mutate them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Mapping


class Severity(str, enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        """Higher is more severe; used for ordering and for ``--fail-on``."""
        return {"info": 0, "warning": 1, "error": 2}[self.value]


class CheckStatus(str, enum.Enum):
    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"
    ERROR = "error"  # the check itself crashed; the others went on


# Fix actions (MakeDir, Symlink, SetEnv, …, SuggestCommand, ACTION_TYPES, action_from_json) live in
# model_actions and are re-exported here on first use (module __getattr__): a healthy check
# builds no fix and never pays for creating them.
_ACTION_NAMES = frozenset(("MakeDir", "Symlink", "SetEnv", "RootCommand", "WriteFile", "InstallPackage",
                           "RemoveFromPathVar", "AppendLine", "CodeEdit", "EditFile", "SuggestCommand", "Action",
                           "ACTION_TYPES", "action_from_json"))


def __getattr__(name: str):
    if name in _ACTION_NAMES:
        from . import model_actions

        return getattr(model_actions, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class Fix:
    """One way to fix a finding. ``kind``: user (no root) | system (root) | code | manual.
    Only typed actions: the commands and env a user sees are derived from them by
    ``gpudoctor.fix.actions``, so no output can disagree with what ``gpudoctor fix`` does."""

    kind: str
    summary: str
    # model_actions.Action; named as Any here so typing.get_type_hints(Fix) resolves without
    # creating the action classes (they are re-exported lazily, see __getattr__ above)
    actions: tuple[Any, ...] = ()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Fix":
        from .model_actions import action_from_json

        return cls(str(data["kind"]), str(data["summary"]),
                   tuple(action_from_json(a) for a in data.get("actions", ())))


@dataclass(frozen=True)
class Finding:
    """One problem found on this machine: the rule it breaks (``id``), what was seen and the
    evidence, and the fixes for it, best first."""

    id: str
    severity: Severity
    title: str
    message: str
    evidence: Mapping[str, Any] = field(default_factory=dict)
    fixes: tuple[Fix, ...] = ()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Finding":
        """Rebuild a finding from the JSON reporter's object (the preflight cache, ``--json``
        output), actions included: nothing is lost on the way through."""
        return cls(str(data["id"]), Severity(data["severity"]), str(data.get("title", "")),
                   str(data.get("message", "")), dict(data.get("evidence") or {}),
                   tuple(Fix.from_json(f) for f in data.get("fixes", ())))


@dataclass(frozen=True)
class CheckResult:
    """How one check ended (passed, failed, skipped with a reason, error) and what it found."""

    id: str
    status: CheckStatus
    reason: str = ""
    duration_ms: float = 0.0
    findings: tuple[Finding, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status.value,
            "reason": self.reason,
            "duration_ms": round(self.duration_ms, 3),
        }


def sort_findings(findings: list[Finding] | tuple[Finding, ...]) -> list[Finding]:
    """Root causes before consequences (a log's generic CalledProcessError after the
    `cannot find -lcuda` that caused it), then most severe first; stable otherwise, so the log
    matcher's cause-first order survives."""
    return sorted(findings, key=lambda f: (bool(f.evidence.get("consequence")), -f.severity.rank))
