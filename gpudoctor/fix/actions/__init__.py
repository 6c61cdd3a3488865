"""Every fix action kind in one place each, behind one registry (as pre-commit keeps each
language in one module): its order in a plan, describe, the commands shown to people, the bash
of the dry-run script, apply, undo of each manifest record, and whether it needs root.

The action dataclasses themselves live in ``gpudoctor.model`` so checks and remedies build them
without importing fixers. Everything a user sees of a fix (terminal, JSON, Markdown, dry-run
script, preflight) is derived here from its actions, so no two outputs can disagree."""

from __future__ import annotations

from typing import Any

from ...model import Action, Fix
from . import (
    append_line,
    code_edit,
    edit_file,
    env_entry,
    install_package,
    make_dir,
    root_command,
    suggest_command,
    symlink,
    write_file,
)
from .base import ActionKind, Undoer

KINDS: tuple[ActionKind, ...] = (
    install_package.KIND,
    make_dir.KIND,
    write_file.KIND,
    symlink.KIND,
    root_command.KIND,
    env_entry.KIND,
    append_line.KIND,
    suggest_command.KIND,
    code_edit.KIND,
    edit_file.KIND,
)

_BY_TYPE: dict[type, ActionKind] = {t: kind for kind in KINDS for t in kind.action_types}
UNDOERS: dict[str, Undoer] = {op: fn for kind in KINDS for op, fn in kind.undoers.items()}


def kind_of(action: Action) -> ActionKind:
    try:
        return _BY_TYPE[type(action)]
    except KeyError:
        raise TypeError(f"{type(action).__name__} is not a registered fix action kind") from None


def describe(action: Action) -> str:
    return kind_of(action).describe(action)


def render_action(action: Action) -> list[str]:
    return kind_of(action).render(action)


def needs_root(action: Action) -> bool:
    return kind_of(action).needs_root(action)


def order_key(action: Action) -> tuple[int, int]:
    depth = action.path.count("/") if isinstance(action, make_dir.MakeDir) else 0  # parents first
    return (kind_of(action).order, depth)


def fix_commands(fix: Fix) -> list[str]:
    """The commands a person would type for this fix, derived from its actions."""
    return [line for action in fix.actions for line in kind_of(action).commands(action)]


def fix_env(fix: Fix) -> dict[str, str]:
    """The variables the fix sets (``SetEnv``), as the JSON contract's ``env`` shows them."""
    from ...model import SetEnv

    return {a.name: a.value for a in fix.actions if isinstance(a, SetEnv)}


def fix_to_json(fix: Fix) -> dict[str, Any]:
    """The schema-1 fix object; ``actions`` is additive (each action's kind and fields)."""
    from dataclasses import asdict

    return {
        "kind": fix.kind,
        "summary": fix.summary,
        "commands": fix_commands(fix),
        "env": fix_env(fix),
        "actions": [{"type": type(a).__name__, **asdict(a)} for a in fix.actions],
    }


def applicable(fix: Fix) -> bool:
    """True when ``gpudoctor fix`` (or ``--system``) can perform at least one action itself."""
    return any(kind_of(a).user_local or kind_of(a).needs_root(a) for a in fix.actions)



def fix_lines(finding_id: str, fix: Fix, verbose: bool = False, plannable: bool = True) -> list[str]:
    """What a human report shows under a fix. A user fix: the ``gpudoctor fix`` command that
    performs it (and records it for undo), with its shell steps under ``-v``. A system fix: the
    root commands themselves, then the ``gpudoctor fix --system`` that runs and records them.
    Anything else: the commands to run.

    ``plannable`` False: ``gpudoctor fix`` would not plan this finding here, because it plans from
    the static checks of this machine and they do not find it (a finding read from a log of
    another machine or environment, or with no machine at all). Sending the user there would end
    in "nothing to fix" (issue 13 item 6), so the steps are shown to be run by hand instead."""
    commands = ["$ " + c for c in fix_commands(fix)]
    if fix.kind in ("user", "system") and applicable(fix) and not plannable:
        return commands + ["# this machine's checks do not find it now (the log may come from another machine or "
                           "environment): run these where it failed, after `gpudoctor check` there"]
    if fix.kind == "user" and applicable(fix):
        lines = [f"$ gpudoctor fix --only {finding_id}   # no root; review first with --dry-run"]
        return lines + (["  does: " + c[2:] for c in commands] if verbose else [])
    if fix.kind == "system" and applicable(fix):
        return commands + [f"$ gpudoctor fix --system --only {finding_id}   # the same, recorded for --undo"]
    return commands


def fix_scope_suggested(findings, plannable: "set[str] | None" = None) -> str | None:
    """The ``gpudoctor fix`` review command worth suggesting for these findings: the user-local
    one when one of them has a user fix it would plan, else ``--system`` when one has a system
    fix, else None (no command would plan anything: none is suggested)."""
    kinds = {fix.kind for f in findings if plannable is None or f.id in plannable
             for fix in f.fixes if fix.kind in ("user", "system") and applicable(fix)}
    if "user" in kinds:
        return "gpudoctor fix --dry-run"
    if "system" in kinds:
        return "gpudoctor fix --system --dry-run"
    return None
