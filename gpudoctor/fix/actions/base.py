"""What every fix action kind provides, in one place per kind (see ``gpudoctor.fix.actions``).

A kind is data plus functions: its order in a plan, whether it needs root, how it describes
itself, the one-line commands a person would type (what check, JSON, Markdown and preflight
show), the guarded bash lines of the dry-run script, how ``gpudoctor fix`` applies it, and how
``--undo`` reverses each manifest record it makes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

if TYPE_CHECKING:
    from ..apply import Applier
    from ...paths import GpudoctorDirs

# apply outcomes
DONE, ALREADY, REFUSED, ERROR = "done", "already done", "refused", "error"
# undo outcomes
UNDONE, GONE, KEPT, MANUAL = "undone", "already gone", "left in place", "needs root"

RootRunner = Callable[[tuple[str, ...]], int]


class Refused(Exception):
    """A step that would overwrite or delete something gpudoctor does not own."""


@dataclass(frozen=True)
class UndoContext:
    """What undoing a recorded change may use: gpudoctor's own directories, and a way to run
    commands as root when the user asked for that."""

    dirs: "GpudoctorDirs"
    root: RootRunner | None = None  # runs an argv as root; None: root changes stay for later


Undoer = Callable[[dict[str, Any], UndoContext], tuple[str, str]]


def _no_apply(applier: "Applier", action: Any) -> str:
    raise Refused("not a user-local action")


@dataclass(frozen=True)
class ActionKind:
    """Everything about one kind of fix action in one place (pre-commit's one-module-per-language):
    its plan order, how it is described, rendered for people and for the reviewable script,
    whether it needs root, how it is applied and how each manifest entry it writes is undone."""

    action_types: tuple[type, ...]
    order: int  # lower runs first in a plan
    describe: Callable[[Any], str]
    commands: Callable[[Any], list[str]]  # one-line POSIX sh commands, for people
    render: Callable[[Any], list[str]]  # guarded bash lines for the reviewable script
    needs_root: Callable[[Any], bool] = lambda action: False
    apply: Callable[["Applier", Any], str] = _no_apply
    undoers: Mapping[str, Undoer] = field(default_factory=dict)  # manifest op -> undo

    @property
    def user_local(self) -> bool:
        """``gpudoctor fix`` can apply it without root."""
        return self.apply is not _no_apply
