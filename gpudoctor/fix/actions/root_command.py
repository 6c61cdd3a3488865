"""RootCommand: one command that needs root, run only by ``gpudoctor fix --system``."""

from __future__ import annotations

import os
import stat
from typing import Any

from ...model import RootCommand
from ..shellquote import comment, sh_argv
from .base import GONE, KEPT, MANUAL, UNDONE, ActionKind, UndoContext


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
    """Older manifests: ``manifest.normalized_change`` turns the two shapes gpudoctor wrote into
    root_file/root_symlink; any other reaching here is refused, never run (issue 14)."""
    return KEPT, "not undone: a root command's undo is derived by gpudoctor, never read from the manifest"


def _file_sha256(path: str) -> str | None:
    import hashlib

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        return hashlib.sha256(handle.read(1 << 20)).hexdigest()


def undo_root_file(change: dict[str, Any], context: UndoContext) -> tuple[str, str]:
    """rm the file --system wrote (an ld.so.conf.d entry) when it still has the content written,
    then ldconfig so the loader forgets the directory. Older records carry no hash: then the
    file must still be one line naming an absolute directory, as gpudoctor writes them."""
    path = change["path"]
    if not os.path.lexists(path):
        return GONE, path
    digest = _file_sha256(path)
    if change.get("sha256"):
        if digest != change["sha256"]:
            return KEPT, f"{path} was changed since gpudoctor wrote it"
    elif digest is None or not _one_dir_line(path):
        return KEPT, f"{path} is not the one-line file gpudoctor writes"
    steps = (("rm", "--", path), ("ldconfig",))
    if context.root is None:
        return MANUAL, "run as root: " + "; ".join(sh_argv(argv) for argv in steps)
    for argv in steps:
        code = context.root(argv)
        if code != 0:
            return KEPT, f"{sh_argv(argv)} exited {code}"
    return UNDONE, f"removed {path} (as root) and ran ldconfig"


def _one_dir_line(path: str) -> bool:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read(4097)
    except (OSError, UnicodeDecodeError):
        return False
    return text.endswith("\n") and text.count("\n") == 1 and text.startswith("/")


def undo_root_symlink(change: dict[str, Any], context: UndoContext) -> tuple[str, str]:
    link, target = change["link"], change["target"]
    if not os.path.islink(link):
        return (KEPT, f"{link} is no longer a symlink") if os.path.lexists(link) else (GONE, link)
    if os.readlink(link) != target:
        return KEPT, f"{link} now points to {os.readlink(link)}, not {target}"
    argv = ("rm", "--", link)
    if context.root is None:
        return MANUAL, f"run as root: {sh_argv(argv)}"
    code = context.root(argv)
    return (UNDONE, f"removed {link} (as root)") if code == 0 else (KEPT, f"{sh_argv(argv)} exited {code}")


KIND = ActionKind((RootCommand,), order=4, describe=describe, commands=commands, render=render,
                  needs_root=lambda action: True,
                  undoers={"root_command": undo_root_command, "root_file": undo_root_file,
                           "root_symlink": undo_root_symlink})
