"""EditFile: rewrite a file of the user's training project (``gpudoctor fix --code``), undoable
byte for byte.

Apply refuses unless the file still has the bytes the edit was computed from (its sha256), puts
the original bytes in the manifest and saves it before writing, then replaces the file
atomically (a temporary file in the same directory, the same mode, ``os.replace``). Undo puts
the original bytes back only while the file still is what gpudoctor wrote; a file changed since
is left alone and named."""

from __future__ import annotations

import os
import stat
from typing import Any

from ...model import EditFile
from ..shellquote import comment
from .base import ALREADY, DONE, GONE, KEPT, UNDONE, ActionKind, Refused, UndoContext


def sha256_hex(data: bytes) -> str:
    import hashlib  # here, like base64 below: preflight imports this module for a finding's fix, never applies it

    return hashlib.sha256(data).hexdigest()


def describe(action: EditFile) -> str:
    return f"edit {action.path}"


def commands(action: EditFile) -> list[str]:
    return []  # an edit is no shell command; `gpudoctor fix --code --dry-run` shows it as a diff


def render(action: EditFile) -> list[str]:
    return [comment(f"edit {action.path} (made by `gpudoctor fix --code`; review with --dry-run)")]


def _read(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def write_atomically(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data``: a reader sees the old or the new file, never half; the
    file keeps its permission bits."""
    from ...paths import write_private_file

    write_private_file(path, data, mode=stat.S_IMODE(os.stat(path).st_mode))


def apply(applier: Any, action: EditFile) -> str:
    import base64

    new = action.new_text.encode("utf-8")
    try:
        original = _read(action.path)
    except FileNotFoundError:
        raise Refused(f"{action.path} no longer exists") from None
    if original == new:
        return ALREADY
    if sha256_hex(original) != action.sha256:
        raise Refused(f"{action.path} changed since it was scanned; run `gpudoctor fix --code` again")
    applier.manifest.record("edit_file", path=action.path, original=base64.b64encode(original).decode("ascii"),
                            sha256_before=action.sha256, sha256_after=sha256_hex(new))
    # The record is on disk before the file changes: a crash between the two leaves an undo that
    # finds the file untouched (GONE), never an edited file without its original.
    applier.ensure_dir(applier.dirs.state, purpose="manifest")
    applier.manifest.save()
    write_atomically(action.path, new)
    return DONE


def record_problem(change: dict[str, Any]) -> str:
    """"" when a manifest ``edit_file`` record has the shape gpudoctor writes, else why not: undo
    trusts nothing read back (issue 14), and a record that names a file and two digests and
    carries base64 bytes is all this undo ever acts on (it writes only the recorded original,
    and only over the exact bytes gpudoctor wrote)."""
    import base64

    path = change.get("path")
    if not (isinstance(path, str) and os.path.isabs(path) and os.path.normpath(path) == path
            and not any(ch in path for ch in "\0\n\r")):
        return f"edit_file {path!r}: not a clean absolute path"
    for key in ("sha256_before", "sha256_after"):
        digest = change.get(key)
        if not (isinstance(digest, str) and len(digest) == 64 and all(c in "0123456789abcdef" for c in digest)):
            return f"edit_file {path}: {key} is not a sha256"
    try:
        original = base64.b64decode(change.get("original", ""), validate=True)
    except (ValueError, TypeError):
        return f"edit_file {path}: the original bytes are not base64"
    if sha256_hex(original) != change["sha256_before"]:
        return f"edit_file {path}: the recorded original does not match its sha256"
    return ""


def undo_edit_file(change: dict[str, Any], context: UndoContext) -> tuple[str, str]:
    import base64

    path = change["path"]
    try:
        current = sha256_hex(_read(path))
    except FileNotFoundError:
        return KEPT, (f"{path} does not exist now; its original stays recorded in gpudoctor's manifest, and "
                      "`gpudoctor fix --undo` restores it once the file is back to gpudoctor's version")
    if current == change["sha256_before"]:
        return GONE, f"{path} already has its original content"
    if current != change["sha256_after"]:
        return KEPT, (f"{path} was changed since gpudoctor edited it; left as it is. Its original stays recorded in "
                      "gpudoctor's manifest: `gpudoctor fix --undo` restores it once the file is back to gpudoctor's "
                      "version")
    write_atomically(path, base64.b64decode(change["original"]))
    return UNDONE, f"restored {path}"


KIND = ActionKind((EditFile,), order=8, describe=describe, commands=commands, render=render, apply=apply,
                  undoers={"edit_file": undo_edit_file})
