"""SuggestCommand: a command the user runs themselves (``pip install …``, a rerun with a flag).
gpudoctor shows it and never runs it: it belongs to another tool, or to the user's judgement."""

from __future__ import annotations

from ...model import SuggestCommand
from ..shellquote import comment
from .base import ActionKind


def describe(action: SuggestCommand) -> str:
    return "run yourself: " + action.command


def commands(action: SuggestCommand) -> list[str]:
    return [action.command]


def render(action: SuggestCommand) -> list[str]:
    return [comment("run yourself (not done by this script): " + action.command)]


KIND = ActionKind((SuggestCommand,), order=8, describe=describe, commands=commands, render=render)
