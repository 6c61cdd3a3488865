"""Undo: reverse exactly the manifest, newest change first, and only where the thing on disk
is still what gpudoctor made (a symlink still pointing where we pointed it, a file with the
content we wrote, an empty directory of ours, our own marker line).

Under the state lock, so a concurrent ``fix`` cannot append while undo rewrites. Every record
is checked first (``manifest.normalized_change``): one gpudoctor would not have written is
refused, named, and dropped, and does not stop the others. Undo runs no command read from the
manifest; root undo is derived from the record's kind."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from ..paths import GpudoctorDirs, UnsafeDirectory, private_dir_problem
from .actions import UNDOERS
from .actions.base import GONE, KEPT, MANUAL, UNDONE, RootRunner, UndoContext
from .actions.env_entry import undo_env_batch
from .actions.make_dir import undo_mkdir
from .manifest import LOCK_NAME, Manifest, normalized_change, own_entries, state_lock, teardown_state_dirs

REFUSED = "refused"
WOULD = "would undo"

__all__ = ["GONE", "KEPT", "MANUAL", "REFUSED", "UNDONE", "WOULD", "RootRunner", "UndoOutcome", "undo", "undo_plan"]

# gpudoctor's own temporary files (paths.write_private_file): a kill between their creation and
# the rename leaves one; undo removes them from gpudoctor's own directories.
_TEMP_NAME = re.compile(r"^\..+\.gpudoctor-\d+-\d+$")


@dataclass(frozen=True)
class UndoOutcome:
    """What undo did, or would do, with one manifest record: its status (undone, already gone, left in place,
    needs root, refused, would undo) and a sentence saying what, or why not."""

    change: dict[str, Any]
    status: str
    message: str


def _is_own_dir(change: dict[str, Any]) -> bool:
    return change.get("op") == "mkdir" and change.get("purpose") == "manifest"


def _checked(manifest: Manifest, dirs: GpudoctorDirs) -> tuple[list[dict[str, Any]], list[UndoOutcome]]:
    usable, refused = [], []
    for number, change in enumerate(manifest.changes, 1):
        normal, why = normalized_change(change, dirs)
        if normal is None:
            shown = change if isinstance(change, dict) else {"op": "?"}
            refused.append(UndoOutcome(shown, REFUSED, f"manifest entry {number} refused, not acted on: {why}"))
        else:
            usable.append(normal)
    return usable, refused


def undo_plan(dirs: GpudoctorDirs | None = None) -> list[UndoOutcome]:
    """What ``undo`` would do, changing nothing (``fix --undo --dry-run``)."""
    dirs = dirs or GpudoctorDirs.from_env()
    # what undo itself would say: it refuses a state dir others can write (state_lock), so the
    # plan must not list that manifest's records as what it would do (found in review)
    problem = private_dir_problem(dirs.state)
    if problem and os.path.lexists(dirs.state):  # not missing, nor removed since by a concurrent undo
        raise UnsafeDirectory(f"refusing to keep gpudoctor's state in {dirs.state}: {problem}")
    manifest = Manifest.load(dirs.manifest_file)
    usable, refused = _checked(manifest, dirs)
    outcomes = list(refused)
    ordered = [c for c in reversed(usable) if not _is_own_dir(c)] + [c for c in reversed(usable) if _is_own_dir(c)]
    for change in ordered:
        outcomes.append(UndoOutcome(change, WOULD, describe_change(change)))
    return outcomes


def describe_change(change: dict[str, Any]) -> str:
    op = change["op"]
    if op == "mkdir":
        return f"remove directory {change['path']} if empty"
    if op == "symlink":
        return f"remove symlink {change['link']} if it still points to {change['target']}"
    if op in ("write_file", "env_file"):
        return f"remove {change['path']} if unchanged"
    if op == "env":
        entry = change["entry"]
        return f"take the {entry.get('mode', 'set')} {entry['name']} entry out of the env file"
    if op == "append_line":
        return f"remove gpudoctor's line from {change['path']}"
    if op == "root_file":
        return f"as root: rm -- {change['path']} if unchanged, then ldconfig"
    if op == "root_symlink":
        return f"as root: rm -- {change['link']} if it still points to {change['target']}"
    if op == "packages" and change.get("state") == "in progress":
        return (f"as root: remove what the interrupted install of {' '.join(change['requested'])} added "
                "(packages it cannot attribute are named, not removed)")
    if op == "packages":
        return f"as root: remove the packages the install added: {' '.join(change['added'])}"
    return op


def undo(dirs: GpudoctorDirs | None = None, root: RootRunner | None = None) -> list[UndoOutcome]:
    """Reverse the manifest. ``root`` runs an argv as root (for --system changes); without it
    those are reported as MANUAL and stay in the manifest."""
    dirs = dirs or GpudoctorDirs.from_env()
    with state_lock(dirs.state, create=False) as manifest:
        if manifest is None:
            return []
        return _undo_locked(manifest, dirs, root)


def _undo_locked(manifest: Manifest, dirs: GpudoctorDirs, root: RootRunner | None) -> list[UndoOutcome]:
    context = UndoContext(dirs, root)
    usable, outcomes = _checked(manifest, dirs)
    remaining: list[dict[str, Any]] = []
    own_dirs = [c for c in usable if _is_own_dir(c)]
    _remove_own_temp_files(usable, dirs)
    for batch in _batches(reversed([c for c in usable if not _is_own_dir(c)])):
        try:
            if batch[0]["op"] == "env":  # consecutive env records: one read and one write
                results = undo_env_batch(batch, context)
            else:
                results = [UNDOERS[batch[0]["op"]](batch[0], context)]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            results = [(KEPT, f"{batch[0]['op']}: {exc}")] * len(batch)
        for change, (status, message) in zip(batch, results):
            outcomes.append(UndoOutcome(change, status, message))
            # needs root, or a file edit left alone because the user changed it since: the record
            # holds the only copy of the original text, so it is kept (found in review)
            # (also when the file is missing now: a branch checkout or a stash can bring it back)
            if status == MANUAL or (status == KEPT and change.get("op") == "edit_file"):
                remaining.append(change)

    if remaining:  # keep what still needs a root hand or holds an original, so a later --undo can finish it
        manifest.changes = list(reversed(remaining)) + own_dirs
        manifest.save()
        return outcomes
    # The state dirs go in one rename (a kill leaves the manifest or a teardown tree, never
    # unrecorded dirs); a waiting fix sees its lock file gone and starts over.
    top = teardown_state_dirs([c["path"] for c in own_dirs], {"manifest.json", LOCK_NAME})
    if top is None:
        manifest.remove()
        lock = os.path.join(dirs.state, LOCK_NAME)
        if os.path.lexists(lock) and not os.path.islink(lock):
            os.unlink(lock)
    for change in reversed(own_dirs):
        if top is not None and (change["path"] == top or change["path"].startswith(top + "/")):
            outcomes.append(UndoOutcome(change, UNDONE, f"removed directory {change['path']}"))
        else:
            status, message = undo_mkdir(change, context)
            outcomes.append(UndoOutcome(change, status, message))
    return outcomes


def _batches(changes):
    batch: list[dict[str, Any]] = []
    for change in changes:
        if batch and not (change["op"] == "env" and batch[0]["op"] == "env"):
            yield batch
            batch = []
        batch.append(change)
    if batch:
        yield batch


def _remove_own_temp_files(changes: list[dict[str, Any]], dirs: GpudoctorDirs) -> None:
    places = {dirs.state, dirs.config, dirs.cache}
    places.update(c["path"] for c in changes if c["op"] == "mkdir")
    for _name, path in own_entries(places, _TEMP_NAME.match):
        if os.path.isfile(path):
            os.unlink(path)
