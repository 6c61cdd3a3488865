"""Undo: reverse exactly the manifest, newest change first, and only where the thing on disk
is still what gpudoctor made (a symlink still pointing where we pointed it, a file with the
content we wrote, an empty directory)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable

from ..paths import GpudoctorDirs
from . import envfile
from .manifest import Manifest
from .packages import installed_packages, remove_argv, removal_check_argv
from .shellquote import sh_argv

UNDONE, GONE, KEPT, MANUAL = "undone", "already gone", "left in place", "needs root"

RootRunner = Callable[[tuple[str, ...]], int]


@dataclass(frozen=True)
class UndoOutcome:
    change: dict[str, Any]
    status: str
    message: str


def _mkdir(change: dict[str, Any], _root: RootRunner | None) -> tuple[str, str]:
    path = change["path"]
    if not os.path.isdir(path) or os.path.islink(path):
        return GONE, path
    if os.listdir(path):
        return KEPT, f"{path} is not empty"
    os.rmdir(path)
    return UNDONE, f"removed directory {path}"


def _symlink(change: dict[str, Any], _root: RootRunner | None) -> tuple[str, str]:
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


def _write_file(change: dict[str, Any], _root: RootRunner | None) -> tuple[str, str]:
    path = change["path"]
    if not os.path.lexists(path):
        return GONE, path
    try:
        with open(path, encoding="utf-8") as handle:
            unchanged = handle.read() == change["content"]
    except (OSError, UnicodeDecodeError):
        unchanged = False
    if not unchanged:
        return KEPT, f"{path} was changed since gpudoctor wrote it"
    os.unlink(path)
    return UNDONE, f"removed {path}"


def _env(change: dict[str, Any], _root: RootRunner | None, env_file: str = "") -> tuple[str, str]:
    entry = envfile.EnvEntry.from_json(change["entry"])
    entries = envfile.read_entries(env_file)
    if entry not in entries:
        return GONE, f"{entry.name} entry"
    index = len(entries) - 1 - entries[::-1].index(entry)
    if change.get("replaced"):
        entries[index] = envfile.EnvEntry.from_json(change["replaced"])
    else:
        del entries[index]
    envfile.write_entries(env_file, entries)
    return UNDONE, f"{entry.mode} {entry.name}: removed from {env_file}"


def _env_file(change: dict[str, Any], _root: RootRunner | None) -> tuple[str, str]:
    path = change["path"]
    if not os.path.lexists(path):
        return GONE, path
    if envfile.read_entries(path):
        return KEPT, f"{path} still has entries gpudoctor did not record"
    os.unlink(path)
    return UNDONE, f"removed {path}"


def _append_line(change: dict[str, Any], _root: RootRunner | None) -> tuple[str, str]:
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


def _root_command(change: dict[str, Any], root: RootRunner | None) -> tuple[str, str]:
    undo_argv = tuple(change.get("undo_argv") or ())
    if not undo_argv:
        return KEPT, f"no undo known for: {sh_argv(change['argv'])}"
    if root is None:
        return MANUAL, f"run as root: {sh_argv(undo_argv)}"
    code = root(undo_argv)
    return (UNDONE, sh_argv(undo_argv)) if code == 0 else (KEPT, f"{sh_argv(undo_argv)} exited {code}")


def _packages(change: dict[str, Any], root: RootRunner | None) -> tuple[str, str]:
    """Remove what an install added, if still installed, and only when nothing else has come
    to depend on it since (the removal tools refuse; dpkg is asked with --dry-run first)."""
    manager = change["manager"]
    if root is None:
        return MANUAL, f"run as root: {sh_argv(remove_argv(manager, change['added']))}"
    present = installed_packages(manager)
    if present is None:
        return KEPT, f"could not read the {manager} package database; left {' '.join(change['added'])} installed"
    still = [name for name in change["added"] if name in present]
    if not still:
        return GONE, f"packages {' '.join(change['added'])}"
    check = removal_check_argv(manager, still)
    if check is not None and root(check) != 0:
        return KEPT, f"left {' '.join(still)} installed: other packages now depend on them ({sh_argv(check)} refused)"
    argv = remove_argv(manager, still)
    code = root(argv)
    return (UNDONE, sh_argv(argv)) if code == 0 else (KEPT, f"{sh_argv(argv)} exited {code}")


UNDOERS: dict[str, Callable[..., tuple[str, str]]] = {
    "mkdir": _mkdir,
    "symlink": _symlink,
    "write_file": _write_file,
    "env": _env,
    "env_file": _env_file,
    "root_command": _root_command,
    "append_line": _append_line,
    "packages": _packages,
}


def undo(dirs: GpudoctorDirs | None = None, root: RootRunner | None = None) -> list[UndoOutcome]:
    """Reverse the manifest. ``root`` runs an argv as root (for --system changes); without it
    those are reported as MANUAL and stay in the manifest."""
    dirs = dirs or GpudoctorDirs.from_env()
    manifest = Manifest.load(dirs.manifest_file)
    outcomes: list[UndoOutcome] = []
    remaining: list[dict[str, Any]] = []
    own_dirs = [c for c in manifest.changes if c["op"] == "mkdir" and c.get("purpose") == "manifest"]
    for change in reversed([c for c in manifest.changes if c not in own_dirs]):
        handler = UNDOERS.get(change["op"])
        if handler is None:
            outcomes.append(UndoOutcome(change, KEPT, f"unknown change {change['op']!r}"))
            continue
        try:
            if change["op"] == "env":
                status, message = _env(change, root, env_file=dirs.env_file)
            else:
                status, message = handler(change, root)
        except OSError as exc:
            status, message = KEPT, f"{change['op']}: {exc}"
        outcomes.append(UndoOutcome(change, status, message))
        if status == MANUAL:
            remaining.append(change)

    if remaining:  # keep what still needs a root hand, so a later --undo can finish it
        manifest.changes = list(reversed(remaining)) + own_dirs
        manifest.save()
        return outcomes
    if os.path.exists(dirs.manifest_file):
        os.unlink(dirs.manifest_file)
    for change in reversed(own_dirs):
        status, message = _mkdir(change, root)
        outcomes.append(UndoOutcome(change, status, message))
    return outcomes
