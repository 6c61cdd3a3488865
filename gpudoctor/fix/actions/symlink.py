"""Symlink: ``link`` -> ``target``, never over an existing file."""

from __future__ import annotations

import os
from typing import Any

from ...model import Symlink
from ..shellquote import sh
from .base import ALREADY, DONE, GONE, KEPT, UNDONE, ActionKind, Refused, UndoContext
from .shell import fail


def describe(action: Symlink) -> str:
    return f"symlink {action.link} -> {action.target}"


def commands(action: Symlink) -> list[str]:
    return [f"ln -s {sh(action.target)} {sh(action.link)}"]


def render(action: Symlink) -> list[str]:
    link, target = sh(action.link), sh(action.target)
    return [
        f"if [ -L {link} ]; then",
        f'  [ "$(readlink -- {link})" = {target} ] || ' + fail(f"{action.link} already points elsewhere; leaving it alone"),
        f"elif [ -e {link} ]; then",
        "  " + fail(f"{action.link} exists and is not a symlink; refusing to replace it"),
        "else",
        f"  ln -s -- {target} {link}",
        "fi",
    ]


def apply(applier: Any, action: Symlink) -> str:
    link, target = action.link, action.target
    applier.ensure_dir(os.path.dirname(link))  # the own-directory rule before even looking
    if os.path.islink(link):
        current = os.readlink(link)
        if current == target:
            return ALREADY
        ours = applier.manifest.owns_symlink(link)
        if not ours or ours["target"] != current:
            raise Refused(f"{link} already points to {current}, and gpudoctor did not make it; leaving it alone")
        applier.manifest.record("symlink", link=link, target=target, previous_target=current)
        os.unlink(link)  # ours, and the real library moved: re-point it
        os.symlink(target, link)
        return DONE
    if os.path.lexists(link):
        kind = "a directory" if os.path.isdir(link) else "a real file"
        raise Refused(f"{link} exists and is {kind}, not a symlink; refusing to replace it")
    applier.ensure_dir(os.path.dirname(link))
    change = applier.manifest.record("symlink", link=link, target=target, previous_target=None)
    try:
        os.symlink(target, link)
    except BaseException:
        applier.manifest.forget(change)
        raise
    return DONE


def undo_symlink(change: dict[str, Any], context: UndoContext) -> tuple[str, str]:
    link, target, previous = change["link"], change["target"], change.get("previous_target")
    if not os.path.islink(link):
        return (KEPT, f"{link} is no longer a symlink") if os.path.lexists(link) else (GONE, link)
    current = os.readlink(link)
    if current != target:
        return KEPT, f"{link} now points to {current}, not where gpudoctor pointed it ({target})"
    os.unlink(link)
    if previous:
        os.symlink(previous, link)
        return UNDONE, f"re-pointed {link} -> {previous}"
    return UNDONE, f"removed symlink {link}"


KIND = ActionKind((Symlink,), order=3, describe=describe, commands=commands, render=render, apply=apply,
                  undoers={"symlink": undo_symlink})
