"""SetEnv and RemoveFromPathVar: entries in gpudoctor's one user-local env file, loaded by
``eval "$(gpudoctor env)"`` or ``gpudoctor run --``."""

from __future__ import annotations

import os
from typing import Any

from ...model import RemoveFromPathVar, SetEnv
from .. import envfile
from ..shellquote import sh
from ...paths import trusted_dir_problem
from .base import ALREADY, DONE, GONE, KEPT, UNDONE, ActionKind, Refused, UndoContext
from .shell import ENV_FILE_VAR, fail


def entry_for(action: SetEnv | RemoveFromPathVar) -> envfile.EnvEntry:
    if isinstance(action, RemoveFromPathVar):
        return envfile.EnvEntry(action.name, action.entry, "remove")
    return envfile.EnvEntry(action.name, action.value, "prepend" if action.prepend else "set")


def describe(action: SetEnv | RemoveFromPathVar) -> str:
    if isinstance(action, RemoveFromPathVar):
        return f"remove {action.entry} from {action.name}"
    return f"{'prepend to' if action.prepend else 'set'} {action.name}={action.value}"


def commands(action: SetEnv | RemoveFromPathVar) -> list[str]:
    try:
        return [envfile.posix_line(entry_for(action))]
    except ValueError as exc:
        return [f"# not possible: {exc}".replace("\n", " ")]


def render(action: SetEnv | RemoveFromPathVar) -> list[str]:
    try:
        marker, shell_line = envfile.entry_lines(entry_for(action))
    except ValueError as exc:  # a value the env file cannot hold: the script refuses too
        return [fail(str(exc))]
    return [
        f'grep -qxF -- {sh(marker)} "${ENV_FILE_VAR}" 2>/dev/null || '
        f'( umask 077 && printf \'%s\\n\' {sh(marker)} {sh(shell_line)} >> "${ENV_FILE_VAR}" )'
    ]


# Variables whose entries name directories something loads code from: a prepended entry must be
# a directory nobody else can add files to (issue 14: never put another user's directory there).
SEARCH_PATHS = frozenset({"LIBRARY_PATH", "LD_LIBRARY_PATH", "PATH", "PYTHONPATH", "CPATH", "LD_PRELOAD"})


def apply(applier: Any, action: SetEnv | RemoveFromPathVar) -> str:
    path = applier.dirs.env_file
    entry = entry_for(action)
    if entry.mode == "prepend" and entry.name in SEARCH_PATHS:
        problem = trusted_dir_problem(entry.value)
        if problem:
            raise Refused(f"refusing to put {entry.value} on {entry.name}: {problem}")
    applier.ensure_dir(os.path.dirname(path))  # the own-directory rule for the env file's dir
    entries = envfile.read_entries(path)
    if entry in entries:
        return ALREADY
    replaced = None
    if entry.mode == "set":
        for index, old in enumerate(entries):
            if old.mode == "set" and old.name == entry.name:
                replaced, entries[index] = old, entry
                break
    if replaced is None:
        entries.append(entry)
    created = None
    if not os.path.lexists(path):
        created = applier.manifest.record("env_file", path=path)
    change = applier.manifest.record("env", entry=entry.to_json(), replaced=replaced.to_json() if replaced else None)
    try:
        envfile.write_entries(path, entries)
    except BaseException:
        applier.manifest.forget(change)
        if created is not None:
            applier.manifest.forget(created)
        raise
    return DONE


def undo_env(change: dict[str, Any], context: UndoContext) -> tuple[str, str]:
    return undo_env_batch([change], context)[0]


def undo_env_batch(changes: list[dict[str, Any]], context: UndoContext) -> list[tuple[str, str]]:
    """Undo env records (newest first) with one read and one write of the env file: a long
    manifest is undone in linear time (issue 14 item 15: 2.6 MB took 36 s, quadratic)."""
    env_file = context.dirs.env_file
    entries = envfile.read_entries(env_file)
    results = []
    for change in changes:
        entry = envfile.EnvEntry.from_json(change["entry"])
        # newest first: the entry is almost always the last one, so search from the end
        index = next((i for i in range(len(entries) - 1, -1, -1) if entries[i] == entry), None)
        if index is None:
            results.append((GONE, f"{entry.name} entry"))
            continue
        if change.get("replaced"):
            entries[index] = envfile.EnvEntry.from_json(change["replaced"])
        else:
            del entries[index]
        results.append((UNDONE, f"{entry.mode} {entry.name}: removed from {env_file}"))
    if any(status == UNDONE for status, _ in results):
        envfile.write_entries(env_file, entries)
    return results


def undo_env_file(change: dict[str, Any], context: UndoContext) -> tuple[str, str]:
    path = change["path"]
    if not os.path.lexists(path):
        return GONE, path
    if envfile.read_entries(path):
        return KEPT, f"{path} still has entries gpudoctor did not record"
    if envfile.foreign_lines(path):
        return KEPT, f"{path} has lines you added; left in place"
    os.unlink(path)
    return UNDONE, f"removed {path}"


KIND = ActionKind((SetEnv, RemoveFromPathVar), order=5, describe=describe, commands=commands, render=render,
                  apply=apply, undoers={"env": undo_env, "env_file": undo_env_file})
