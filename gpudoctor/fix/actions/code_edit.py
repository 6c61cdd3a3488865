"""CodeEdit: a change in the user's training code or config, described (not applied here)."""

from __future__ import annotations

from ...model import CodeEdit
from ..shellquote import comment
from .base import ActionKind


def describe(action: CodeEdit) -> str:
    return "code change: " + action.description


def commands(action: CodeEdit) -> list[str]:
    return []  # a code change is not a shell command; its description and before/after say it


def render(action: CodeEdit) -> list[str]:
    lines = [comment("change in your code (not done by this script): " + action.description)]
    if action.before:
        lines.append(comment(action.before, prefix="#   - "))
    if action.after:
        lines.append(comment(action.after, prefix="#   + "))
    return lines


KIND = ActionKind((CodeEdit,), order=9, describe=describe, commands=commands, render=render)
