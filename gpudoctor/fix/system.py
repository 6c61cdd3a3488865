"""The root part of a plan. gpudoctor never escalates by itself: the script runs directly when
gpudoctor already is root, through ``sudo`` only when the user passed ``--sudo``, and otherwise
the user is told to run the script as root."""

from __future__ import annotations

import os
import subprocess
from typing import Callable

from ..model import InstallPackage, RootCommand, WriteFile
from ..paths import GpudoctorDirs
from .manifest import state_lock
from .packages import install_argv, installed_packages
from .plan import Plan


class NeedsRoot(Exception):
    """Not root and not allowed to use sudo."""


def is_root() -> bool:
    return os.geteuid() == 0


def root_prefix(use_sudo: bool) -> tuple[str, ...]:
    if is_root():
        return ()
    if use_sudo:
        return ("sudo", "--")
    raise NeedsRoot("the system fixes need root; rerun with --sudo to use sudo, or run the script as root yourself")


def run_system_script(script: str, use_sudo: bool) -> int:
    argv = (*root_prefix(use_sudo), "bash", "-c", script, "gpudoctor-fix")
    return subprocess.call(argv)


def root_runner(use_sudo: bool) -> Callable[[tuple[str, ...]], int] | None:
    """For undo of root changes; None when there is no permitted way to become root."""
    try:
        prefix = root_prefix(use_sudo)
    except NeedsRoot:
        return None
    return lambda argv: subprocess.call((*prefix, *argv))


def packages_before(plan: Plan) -> dict[str, frozenset[str] | None]:
    """The package database of every manager the plan installs with, read before the script
    runs, so that undo removes what the install added and nothing that was there before."""
    managers = {step.action.manager for step in plan.steps if isinstance(step.action, InstallPackage)}
    return {manager: installed_packages(manager) for manager in managers}


IN_PROGRESS = "in progress"  # a packages record made before its install ran (manifest-first)


def record_system_intents(plan: Plan, dirs: GpudoctorDirs, existed_before: set[str],
                          installed_before: dict[str, frozenset[str] | None] | None = None) -> int:
    """Before the root script runs (manifest-first, issue 14): record each file and symlink it
    will create, with the content's hash or the link's target, and each package install with
    the package database as it was (state "in progress"), so that a script killed midway leaves
    a record of everything it may have made. Undo checks each against the disk (the database)
    and removes only what still matches. Paths that existed before are not ours: no record.
    Returns the number of files and links recorded."""
    import hashlib

    intents = []
    for step in plan.steps:
        action = step.action
        if isinstance(action, WriteFile) and action.needs_root and action.path not in existed_before:
            intents.append({"op": "root_file", "path": action.path,
                            "sha256": hashlib.sha256(action.content.encode("utf-8")).hexdigest()})
        elif isinstance(action, RootCommand) and action.undo_argv:
            created = _created_path(action)
            if created is not None and created not in existed_before:
                intents.append({"op": "root_symlink", "link": created, "target": action.argv[2]})
    installs = [{"op": "packages", "state": IN_PROGRESS, "pid": os.getpid(), "manager": manager,
                 "argv": list(install_argv(manager, requested)), "requested": list(requested),
                 "before": sorted(before)}
                for manager, before in (installed_before or {}).items()
                if before is not None and (requested := _requested(plan, manager))]
    if intents or installs:
        with state_lock(dirs.state) as manifest:
            for intent in intents + installs:
                manifest.record(**intent)
    return len(intents)


def record_system_changes(plan: Plan, dirs: GpudoctorDirs, existed_before: set[str],
                          installed_before: dict[str, frozenset[str] | None] | None = None,
                          succeeded: bool = True) -> tuple[int, list[str]]:
    """After the script ran (also when it failed part way): each install's record becomes what
    it added (the database diff), under the state lock; an install that added nothing loses its
    record. Returns (package installs recorded, notes on what could not be recorded)."""
    count, notes = 0, []
    with state_lock(dirs.state) as manifest:
        for manager, before in (installed_before or {}).items():
            pending = _pending_install(manifest, manager)
            after = installed_packages(manager)
            if before is None:
                notes.append(f"could not read the {manager} package database; the install has no undo record")
                continue
            if after is None:
                notes.append(f"could not read the {manager} package database after the install; its record stays "
                             "'in progress' and `gpudoctor fix --undo` works out what it added")
                continue
            added = sorted(after - before)  # the requested packages and the dependencies they pulled in
            if pending is not None and not added:
                manifest.forget(pending)
            elif pending is not None:
                for key in ("state", "before", "pid"):
                    pending.pop(key, None)
                manifest.update(pending, added=added)
            elif added:
                manifest.record("packages", manager=manager,
                                argv=list(install_argv(manager, _requested(plan, manager))), added=added)
            count += bool(added)
    return count, notes


def _requested(plan: Plan, manager: str) -> tuple[str, ...]:
    return tuple(p for s in plan.steps if isinstance(s.action, InstallPackage) and s.action.manager == manager
                 for p in s.action.packages)


def _pending_install(manifest, manager: str) -> dict | None:
    """This run's "in progress" record of ``manager``'s install (``record_system_intents``)."""
    for change in reversed(manifest.changes):
        if (change.get("op") == "packages" and change.get("state") == IN_PROGRESS
                and change.get("manager") == manager and change.get("pid") == os.getpid()):
            return change
    return None


def _created_path(action: RootCommand) -> str | None:
    """The path an ``ln -s TARGET LINK`` creates, so a pre-existing one is never 'undone'."""
    if len(action.argv) == 4 and action.argv[0] == "ln" and action.argv[1] == "-s":
        return action.argv[-1]
    return None


def paths_touched(plan: Plan) -> list[str]:
    paths = []
    for step in plan.steps:
        action = step.action
        if isinstance(action, WriteFile):
            paths.append(action.path)
        elif isinstance(action, RootCommand) and _created_path(action):
            paths.append(_created_path(action))
    return paths
