"""MakeDir: a private directory (mode 0700 by default), parents included."""

from __future__ import annotations

import os
from typing import Any

from ...model import MakeDir
from ..shellquote import sh
from .base import ALREADY, DONE, GONE, KEPT, UNDONE, ActionKind, UndoContext


def describe(action: MakeDir) -> str:
    return f"make directory {action.path} (mode {action.mode:o})"


def commands(action: MakeDir) -> list[str]:
    return [f"mkdir -p -m {action.mode:o} {sh(action.path)}"]


def render(action: MakeDir) -> list[str]:
    # umask applies to every directory mkdir -p creates, not only the last one (unlike -m)
    umask = f"{0o777 & ~action.mode:03o}"
    return [f"( umask {umask} && mkdir -p -- {sh(action.path)} )"]


def apply(applier: Any, action: MakeDir) -> str:
    return DONE if applier.ensure_dir(action.path, action.mode) else ALREADY


def undo_mkdir(change: dict[str, Any], context: UndoContext) -> tuple[str, str]:
    path = change["path"]
    if not os.path.isdir(path) or os.path.islink(path):
        return GONE, path
    if os.lstat(path).st_uid != os.geteuid():
        return KEPT, f"{path} does not belong to you; gpudoctor did not make it"
    if os.listdir(path):
        return KEPT, f"{path} is not empty"
    os.rmdir(path)
    return UNDONE, f"removed directory {path}"


KIND = ActionKind((MakeDir,), order=1, describe=describe, commands=commands, render=render, apply=apply,
                  undoers={"mkdir": undo_mkdir})
