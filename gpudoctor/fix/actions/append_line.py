"""AppendLine: one line in a file the user owns (the shell profile, ``fix --profile``)."""

from __future__ import annotations

import contextlib
import os
from typing import Any

from ...model import AppendLine
from ..shellquote import sh
from .shell import fail
from .base import ALREADY, DONE, GONE, KEPT, UNDONE, ActionKind, Refused, UndoContext


def describe(action: AppendLine) -> str:
    return f"add to {action.path}: {action.line}"


def commands(action: AppendLine) -> list[str]:
    return [f"printf '%s\\n' {sh(action.line)} >> {sh(action.path)}"]


def render(action: AppendLine) -> list[str]:
    if any(ch in action.line + action.path for ch in "\n\r\0"):
        return [fail(f"refusing to append a line with a line break to {action.path}")]
    path, line = sh(action.path), sh(action.line)
    return [
        f"if ! grep -qxF -- {line} {path} 2>/dev/null; then",
        # a file that does not end in a newline gets one first, so the line stands alone
        f"  if [ -s {path} ] && [ -n \"$(tail -c 1 -- {path})\" ]; then printf '\\n' >> {path}; fi",
        f"  printf '%s\\n' {line} >> {path}",
        "fi",
    ]


def apply(applier: Any, action: AppendLine) -> str:
    """Append the line unless it is there already. Only appends: the user's own lines are never
    touched, and the file keeps its inode, owner and mode."""
    if "\n" in action.line or "\r" in action.line:
        raise Refused(f"refusing to append a line with a line break to {action.path}")
    try:
        with open(action.path, "rb") as handle:
            text = handle.read().decode("utf-8", "surrogateescape")
        existed = True
    except FileNotFoundError:
        text, existed = "", False
    if action.line in text.split("\n"):  # whole lines, as the script's `grep -qxF` sees them
        return ALREADY
    added = ("\n" if text and not text.endswith("\n") else "") + action.line + "\n"
    applier.ensure_dir(os.path.dirname(action.path))  # the own-directory rule, also for HOME
    change = applier.manifest.record("append_line", path=action.path, line=action.line, added=added,
                                     created=not existed)
    try:
        with open(action.path, "a" if existed else "x", encoding="utf-8", errors="surrogateescape") as handle:
            handle.write(added)
    except BaseException:
        if not existed:
            with contextlib.suppress(OSError):
                os.unlink(action.path)
        applier.manifest.forget(change)
        raise
    return DONE


def undo_append_line(change: dict[str, Any], context: UndoContext) -> tuple[str, str]:
    """Take back exactly the appended text: from the end of the file when nothing came after it,
    else the one line equal to ours; the file is rewritten in place (same inode, owner, mode)."""
    path, line, added = change["path"], change["line"], change["added"]
    try:
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8", "surrogateescape")
    except FileNotFoundError:
        return GONE, path
    if change.get("created") and text == added:
        os.unlink(path)
        return UNDONE, f"removed {path}"
    remaining = text[: len(text) - len(added)]
    # From the end only when our text still starts a line there: a user who edited our line in
    # place (commented it out, wrapped it) keeps the line, found or not by the search below.
    at_end = text.endswith(added) and (added.startswith("\n") or remaining == "" or remaining.endswith("\n"))
    if not at_end:
        lines = text.splitlines(keepends=True)
        ours = [i for i, existing in enumerate(lines) if existing.rstrip("\r\n") == line]
        if len(ours) != 1:
            return (GONE, f"the line in {path}") if not ours else (KEPT, f"{path} has the line {len(ours)} times")
        del lines[ours[0]]
        remaining = "".join(lines)
    with open(path, "r+b") as handle:
        handle.write(remaining.encode("utf-8", "surrogateescape"))
        handle.truncate()
    return UNDONE, f"removed the gpudoctor line from {path}"


KIND = ActionKind((AppendLine,), order=6, describe=describe, commands=commands, render=render, apply=apply,
                  undoers={"append_line": undo_append_line})
