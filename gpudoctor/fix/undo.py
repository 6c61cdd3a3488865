"""Undo: reverse exactly the manifest, newest change first, and only where the thing on disk
is still what gpudoctor made (a symlink still pointing where we pointed it, a file with the
content we wrote, an empty directory)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ..paths import GpudoctorDirs
from .actions import UNDOERS
from .actions.base import GONE, KEPT, MANUAL, UNDONE, RootRunner, UndoContext
from .actions.make_dir import undo_mkdir
from .manifest import Manifest

__all__ = ["GONE", "KEPT", "MANUAL", "UNDONE", "RootRunner", "UndoOutcome", "undo"]


@dataclass(frozen=True)
class UndoOutcome:
    change: dict[str, Any]
    status: str
    message: str


def undo(dirs: GpudoctorDirs | None = None, root: RootRunner | None = None) -> list[UndoOutcome]:
    """Reverse the manifest. ``root`` runs an argv as root (for --system changes); without it
    those are reported as MANUAL and stay in the manifest."""
    dirs = dirs or GpudoctorDirs.from_env()
    manifest = Manifest.load(dirs.manifest_file)
    context = UndoContext(dirs, root)
    outcomes: list[UndoOutcome] = []
    remaining: list[dict[str, Any]] = []
    own_dirs = [c for c in manifest.changes if c["op"] == "mkdir" and c.get("purpose") == "manifest"]
    for change in reversed([c for c in manifest.changes if c not in own_dirs]):
        handler = UNDOERS.get(change["op"])
        if handler is None:
            outcomes.append(UndoOutcome(change, KEPT, f"unknown change {change['op']!r}"))
            continue
        try:
            status, message = handler(change, context)
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
        status, message = undo_mkdir(change, context)
        outcomes.append(UndoOutcome(change, status, message))
    return outcomes
