"""RootCommand: one command that needs root, run only by ``gpudoctor fix --system``."""

from __future__ import annotations

from typing import Any

from ...model import RootCommand
from ..shellquote import comment, sh_argv
from .base import KEPT, MANUAL, UNDONE, ActionKind, UndoContext


def describe(action: RootCommand) -> str:
    return "run as root: " + sh_argv(action.argv)


def commands(action: RootCommand) -> list[str]:
    return ["sudo " + sh_argv(action.argv)]


def render(action: RootCommand) -> list[str]:
    lines = [sh_argv(action.argv)]
    if action.undo_argv:
        lines.insert(0, comment("undo: " + sh_argv(action.undo_argv)))
    return lines


def undo_root_command(change: dict[str, Any], context: UndoContext) -> tuple[str, str]:
    undo_argv = tuple(change.get("undo_argv") or ())
    if not undo_argv:
        return KEPT, f"no undo known for: {sh_argv(change['argv'])}"
    if context.root is None:
        return MANUAL, f"run as root: {sh_argv(undo_argv)}"
    code = context.root(undo_argv)
    return (UNDONE, sh_argv(undo_argv)) if code == 0 else (KEPT, f"{sh_argv(undo_argv)} exited {code}")


KIND = ActionKind((RootCommand,), order=4, describe=describe, commands=commands, render=render,
                  needs_root=lambda action: True, undoers={"root_command": undo_root_command})
