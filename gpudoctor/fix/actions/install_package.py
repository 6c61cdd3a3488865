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
    if change.get("state") == "in progress":
        return _undo_interrupted(change, context)
    manager, root = change["manager"], context.root
    if root is None:
        return MANUAL, f"run as root: {sh_argv(remove_argv(manager, change['added']))}"
    present = installed_packages(manager)
    if present is None:
        return KEPT, f"could not read the {manager} package database; left {' '.join(change['added'])} installed"
    still = [name for name in change["added"] if name in present]
    if not still:
        return GONE, f"packages {' '.join(change['added'])}"
    return _remove(manager, still, root)


def _remove(manager: str, names: list[str], root) -> tuple[str, str]:
    check = removal_check_argv(manager, names)
    if check is not None and root(check) != 0:
        return KEPT, f"left {' '.join(names)} installed: other packages now depend on them ({sh_argv(check)} refused)"
    argv = remove_argv(manager, names)
    code = root(argv)
    return (UNDONE, sh_argv(argv)) if code == 0 else (KEPT, f"{sh_argv(argv)} exited {code}")


def _undo_interrupted(change: dict[str, Any], context: UndoContext) -> tuple[str, str]:
    """An install recorded before it ran whose run never finished (gpudoctor was killed): the
    database then is in ``before``. A requested package installed now and not then is this
    install's: removed. Any other package that appeared since may be a dependency the install
    pulled in, or one someone installed after: gpudoctor cannot tell, so it names them and the
    command to remove them, and removes none (it never deletes what it may not have made)."""
    manager, root = change["manager"], context.root
    requested, before = change["requested"], set(change["before"])
    if root is None:
        return MANUAL, (f"an interrupted install of {' '.join(requested)}: run `gpudoctor fix --undo` as root "
                        "(--sudo) to work out what it added")
    present = installed_packages(manager)
    if present is None:
        return KEPT, f"could not read the {manager} package database; cannot tell what the interrupted install added"
    new = present - before
    ours = sorted(name for name in requested if name in new)
    unknown = sorted(new - set(ours))
    if not new:
        return GONE, f"the interrupted install of {' '.join(requested)} left nothing installed"
    parts, status = [], UNDONE
    if ours:
        status, message = _remove(manager, ours, root)
        parts.append(message)
    else:
        parts.append(f"none of {' '.join(requested)} (the interrupted install's request) is installed")
    if unknown:
        status = KEPT
        parts.append(f"left installed, since gpudoctor cannot tell whether the interrupted install pulled them in "
                     f"or someone installed them later: {' '.join(unknown)}; if they are not yours: "
                     f"sudo {sh_argv(remove_argv(manager, unknown))}")
    return status, "; ".join(parts)


KIND = ActionKind((InstallPackage,), order=0, describe=describe, commands=commands, render=render,
                  needs_root=lambda action: True, undoers={"packages": undo_packages})
