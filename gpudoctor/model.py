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


# ---------------------------------------------------------------------------------------------
# Fix actions: data only. Rendering to shell, applying and undoing live in ``gpudoctor.fix``,
# which dispatches on the action's type, so checks can build plans without importing fixers.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MakeDir:
    path: str
    mode: int = 0o700


@dataclass(frozen=True)
class Symlink:
    """Create ``link`` pointing at ``target``; never over an existing file."""

    link: str
    target: str


@dataclass(frozen=True)
class SetEnv:
    """A variable for gpudoctor's user-local env file. ``prepend`` joins with ':' in front of
    the current value (for PATH-like variables)."""

    name: str
    value: str
    prepend: bool = False


@dataclass(frozen=True)
class RootCommand:
    """A shell command that needs root; only run with ``gpudoctor fix --system``."""

    argv: tuple[str, ...]
    undo_argv: tuple[str, ...] | None = None


@dataclass(frozen=True)
class WriteFile:
    """Write a file gpudoctor owns (e.g. ``/etc/ld.so.conf.d/gpudoctor-libcuda.conf``)."""

    path: str
    content: str
    needs_root: bool = False


@dataclass(frozen=True)
class InstallPackage:
    """Install OS packages with the distro's own package manager (root)."""

    manager: str  # apt | dnf | yum | zypper | pacman
    packages: tuple[str, ...]


@dataclass(frozen=True)
class RemoveFromPathVar:
    """Remove ``entry`` from a PATH-like variable (e.g. a stubs dir from LD_LIBRARY_PATH)."""

    name: str
    entry: str


@dataclass(frozen=True)
class AppendLine:
    """Append one line to a file the user owns (a shell profile), once. Undo removes exactly
    that line and nothing else; a file that did not exist is created and removed again."""

    path: str
    line: str


@dataclass(frozen=True)
class CodeEdit:
    """A change in the user's training code or config that gpudoctor can describe but not apply."""

    description: str
    before: str = ""
    after: str = ""


@dataclass(frozen=True)
class EditFile:
    """Replace a file of the user's (training code, a config) with ``new_text``, only while it
    still has the bytes that ``sha256`` (hex) names; the original bytes go to the manifest first,
    so ``gpudoctor fix --undo`` gives the file back byte for byte (``gpudoctor fix --code``)."""

    path: str
    sha256: str
    new_text: str


@dataclass(frozen=True)
class SuggestCommand:
    """A command the user runs themselves (``pip install …``); shown, never run by gpudoctor."""

    command: str


Action = (MakeDir | Symlink | SetEnv | RootCommand | WriteFile | InstallPackage | RemoveFromPathVar | AppendLine
          | CodeEdit | EditFile | SuggestCommand)

ACTION_TYPES: dict[str, type] = {cls.__name__: cls for cls in (
    MakeDir, Symlink, SetEnv, RootCommand, WriteFile, InstallPackage, RemoveFromPathVar, AppendLine, CodeEdit,
    EditFile, SuggestCommand)}


def action_from_json(data: Mapping[str, Any]) -> Action:
    """The inverse of the JSON reporter's ``{"type": name, **fields}`` (lists back to tuples)."""
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k != "type"}
    return ACTION_TYPES[data["type"]](**fields)


@dataclass(frozen=True)
class Fix:
    """One way to fix a finding. ``kind``: user (no root) | system (root) | code | manual.
    Only typed actions: the commands and env a user sees are derived from them by
    ``gpudoctor.fix.actions``, so no output can disagree with what ``gpudoctor fix`` does."""

    kind: str
    summary: str
    actions: tuple[Action, ...] = ()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Fix":
        return cls(str(data["kind"]), str(data["summary"]),
                   tuple(action_from_json(a) for a in data.get("actions", ())))


@dataclass(frozen=True)
class Finding:
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
