"""InstallPackage: distro packages through the distro's own manager (root); undo removes exactly
what the install added (see ``gpudoctor.fix.packages``)."""

from __future__ import annotations

from typing import Any

from ...model import InstallPackage
from ..packages import install_argv, installed_packages, remove_argv, removal_check_argv
from ..shellquote import comment, sh_argv
from .base import GONE, KEPT, MANUAL, UNDONE, ActionKind, UndoContext


def describe(action: InstallPackage) -> str:
    return "install: " + sh_argv(install_argv(action.manager, action.packages))


def commands(action: InstallPackage) -> list[str]:
    return ["sudo " + sh_argv(install_argv(action.manager, action.packages))]


def render(action: InstallPackage) -> list[str]:
    # `gpudoctor fix --system` compares the package database before and after, and records only
    # what this install added; that is what `gpudoctor fix --undo` removes.
    remover = sh_argv(remove_argv(action.manager, ()))
    return [comment(f"undo: gpudoctor fix --undo removes what this install added, with {remover}"),
            sh_argv(install_argv(action.manager, action.packages))]


def undo_packages(change: dict[str, Any], context: UndoContext) -> tuple[str, str]:
    """Remove what an install added, if still installed, and only when nothing else has come
    to depend on it since (the removal tools refuse; dpkg is asked with --dry-run first)."""
    manager, root = change["manager"], context.root
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


KIND = ActionKind((InstallPackage,), order=0, describe=describe, commands=commands, render=render,
                  needs_root=lambda action: True, undoers={"packages": undo_packages})
