"""The root part of a plan. gpudoctor never escalates by itself: the script runs directly when
gpudoctor already is root, through ``sudo`` only when the user passed ``--sudo``, and otherwise
the user is told to run the script as root."""

from __future__ import annotations

import os
import subprocess
from typing import Callable

from ..model import InstallPackage, RootCommand, WriteFile
from ..paths import GpudoctorDirs
from .apply import Applier
from .manifest import Manifest
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


def record_system_changes(plan: Plan, dirs: GpudoctorDirs, existed_before: set[str],
                          installed_before: dict[str, frozenset[str] | None] | None = None,
                          succeeded: bool = True) -> tuple[int, list[str]]:
    """After the script ran: record what it created that has a known undo. Files that existed
    before the run are not ours and get no undo record; neither do packages that were installed
    before. When the script failed, only the package installs are recorded: they run first and
    stay installed, while what else ran before the failure is not known. Returns (changes
    recorded, notes on what could not be recorded)."""
    manifest = Manifest.load(dirs.manifest_file)
    count, notes = 0, []
    for step in plan.steps if succeeded else ():
        action = step.action
        if isinstance(action, RootCommand) and action.undo_argv:
            created = _created_path(action)
            if created is not None and created in existed_before:
                continue
            manifest.record("root_command", argv=list(action.argv), undo_argv=list(action.undo_argv))
            count += 1
        elif isinstance(action, WriteFile) and action.needs_root and action.path not in existed_before:
            manifest.record("root_command", argv=["write", action.path], undo_argv=["rm", "--", action.path])
            count += 1
    for manager, before in (installed_before or {}).items():
        after = installed_packages(manager)
        if before is None or after is None:
            notes.append(f"could not read the {manager} package database; the install has no undo record")
            continue
        added = sorted(after - before)  # the requested packages and the dependencies they pulled in
        if added:
            requested = [p for s in plan.steps if isinstance(s.action, InstallPackage) and s.action.manager == manager
                         for p in s.action.packages]
            manifest.record("packages", manager=manager, argv=list(install_argv(manager, tuple(requested))), added=added)
            count += 1
    if count:
        Applier(dirs, manifest).ensure_dir(dirs.state, purpose="manifest")
        manifest.save()
    return count, notes


def _created_path(action: RootCommand) -> str | None:
    """The path an ``ln -s … LINK`` creates, so a pre-existing one is never 'undone'."""
    if len(action.argv) >= 4 and action.argv[0] == "ln" and action.argv[1] == "-s":
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
