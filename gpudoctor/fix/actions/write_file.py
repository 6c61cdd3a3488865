"""WriteFile: a file gpudoctor creates whole (an ld.so.conf.d entry, as root), never over another."""

from __future__ import annotations

import os
from typing import Any

from ...model import WriteFile
from ..shellquote import sh
from .base import ALREADY, DONE, GONE, KEPT, UNDONE, ActionKind, Refused, UndoContext
from .shell import fail


def describe(action: WriteFile) -> str:
    return f"write {action.path}"


def commands(action: WriteFile) -> list[str]:
    tee = "sudo tee" if action.needs_root else "tee"
    return [f"printf '%s' {sh(action.content)} | {tee} {sh(action.path)} >/dev/null"]


LDCONF_DIR = "/etc/ld.so.conf.d/"


def format_problem(action: WriteFile) -> str | None:
    """Why the content is not valid for the file's format, or None. An ld.so.conf.d file is
    parsed line by line by ldconfig: a newline inside a directory name would add a second
    directory to the loader's cache (issue 14 item 8: CONDA_PREFIX=$'/x\\n/tmp/evil')."""
    if any(ch in action.path for ch in "\n\r\0"):
        return f"{action.path!r}: a file name with a line break"
    if action.path.startswith(LDCONF_DIR):
        body = action.content[:-1] if action.content.endswith("\n") else action.content
        if not body.startswith("/") or "#" in body or not body.isprintable():  # '#' starts a comment
            return f"{action.path}: must be one absolute directory per line, got {body!r}"
    return None


def render(action: WriteFile) -> list[str]:
    problem = format_problem(action)
    if problem:
        return [fail("refusing to write " + problem)]
    path, content = sh(action.path), sh(action.content)
    return [
        f"if [ -e {path} ] || [ -L {path} ]; then",
        f"  printf '%s' {content} | cmp -s - {path} || " + fail(f"{action.path} exists with other content; refusing to replace it"),
        "else",
        f"  printf '%s' {content} > {path}",
        "fi",
    ]


def apply(applier: Any, action: WriteFile) -> str:
    problem = format_problem(action)
    if problem:
        raise Refused("refusing to write " + problem)
    if os.path.lexists(action.path):
        try:
            with open(action.path, encoding="utf-8") as handle:
                if handle.read() == action.content:
                    return ALREADY
        except (OSError, UnicodeDecodeError):
            pass
        raise Refused(f"{action.path} exists with other content; refusing to replace it")
    applier.ensure_dir(os.path.dirname(action.path))
    change = applier.manifest.record("write_file", path=action.path, content=action.content)
    created = False
    try:
        fd = os.open(action.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        created = True  # O_EXCL: never clobber a racer
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(action.content)
            # on disk before the record says "written" (fsynced): after a power cut a file only
            # closed can be empty while the record holds, and undo would keep it as the user's
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        if created:
            os.unlink(action.path)
        applier.manifest.forget(change)
        raise
    # Written whole: from now on undo removes it only while it holds exactly this content (a
    # file the user has since emptied or cut is theirs). Where this update never lands (a kill
    # right here), undo still accepts a prefix, the trace of a write cut short.
    applier.manifest.update(change, written=True)
    return DONE


def undo_write_file(change: dict[str, Any], context: UndoContext) -> tuple[str, str]:
    path = change["path"]
    if not os.path.lexists(path):
        return GONE, path
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, encoding="utf-8") as handle:
            text = handle.read(len(change["content"]) + 1)
        if change.get("written") is True:
            unchanged = text == change["content"]
        else:  # the whole content, or a prefix of it: a write cut short by a kill or a full disk
            unchanged = change["content"].startswith(text)
    except (OSError, UnicodeDecodeError):
        unchanged = False
    if not unchanged:
        return KEPT, f"{path} was changed since gpudoctor wrote it"
    os.unlink(path)
    return UNDONE, f"removed {path}"


KIND = ActionKind((WriteFile,), order=2, describe=describe, commands=commands, render=render,
                  needs_root=lambda action: action.needs_root, apply=apply, undoers={"write_file": undo_write_file})
