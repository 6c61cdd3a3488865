"""The planner: pick one fix per finding for the requested scope, merge the actions across
findings, drop duplicates and order them so every step's prerequisites come first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from ..model import Action, AppendLine, Finding, Fix, RemoveFromPathVar, SetEnv
from .actions import needs_root, order_key

SCOPES = ("user", "system")

@dataclass(frozen=True)
class Step:
    """One action of a plan and the findings it fixes (the same action wanted by several findings is one step)."""

    action: Action
    finding_ids: tuple[str, ...]


@dataclass(frozen=True)
class Chosen:
    """A finding and the fix the planner picked for it."""

    finding: Finding
    fix: Fix


@dataclass(frozen=True)
class Plan:
    """What ``gpudoctor fix`` will do in one scope (user or system): the steps, each after its prerequisites,
    the fix picked for each finding, the findings with no fix of that scope, and notes for the user."""

    scope: str
    steps: tuple[Step, ...]
    chosen: tuple[Chosen, ...]  # the fix picked for each finding, in finding order
    without_fix: tuple[Finding, ...]  # findings with no fix of this scope
    notes: tuple[str, ...] = ()  # conflicts, skipped actions: said plainly to the user

    @property
    def finding_ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c.finding.id for c in self.chosen))

    @property
    def empty(self) -> bool:
        return not self.steps


def refindable_ids(checks) -> set[str]:
    """The finding ids ``gpudoctor fix`` would find again on the machine these check results
    come from: it plans from the static checks alone, so only what a static check found
    (not a log line, not the training pass) can be sent to it."""
    from ..knowledge import load_catalogue

    catalogue = load_catalogue()
    return {f.id for c in checks for f in c.findings
            if c.id in catalogue and "static" in catalogue[c.id].detected_by}


def choose_fix(finding: Finding, scope: str) -> Fix | None:
    """The first fix of the scope's kind; a user fix is the default, a system fix is what
    ``--system`` asks for."""
    for fix in finding.fixes:
        if fix.kind == scope:
            return fix
    return None


def build_plan(findings: Iterable[Finding], scope: str = "user") -> Plan:
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {SCOPES}, not {scope!r}")
    chosen: list[Chosen] = []
    without: list[Finding] = []
    merged: dict[Action, list[str]] = {}  # insertion-ordered; identical actions merge here
    notes: list[str] = []
    set_values: dict[str, tuple[str, str]] = {}  # name -> (value, finding id) for conflicts

    seen: set[tuple] = set()
    for finding in findings:
        # the same finding reported twice is planned once; two findings of one rule (two stub
        # dirs on LD_LIBRARY_PATH) are both fixed (issue 14 item 11)
        key = (finding.id, finding.message, finding.fixes)
        if key in seen:
            continue
        seen.add(key)
        fix = choose_fix(finding, scope)
        if fix is None:
            without.append(finding)
            continue
        chosen.append(Chosen(finding, fix))
        for action in fix.actions:
            if scope == "user" and needs_root(action):
                notes.append(f"{finding.id}: skipped (needs root, use --system): {action!r}")
                continue
            if isinstance(action, SetEnv) and not action.prepend:
                earlier = set_values.get(action.name)
                if earlier and earlier[0] != action.value:
                    notes.append(
                        f"{finding.id}: wants {action.name}={action.value!r} but {earlier[1]} already sets "
                        f"{earlier[0]!r}; keeping the first"
                    )
                    continue
                set_values[action.name] = (action.value, finding.id)
            ids = merged.setdefault(action, [])
            if finding.id not in ids:
                ids.append(finding.id)

    ordered = sorted(merged.items(), key=lambda item: order_key(item[0]))  # stable
    steps = tuple(Step(action, tuple(ids)) for action, ids in ordered)
    return Plan(scope, steps, tuple(chosen), tuple(without), tuple(notes))


def with_profile_line(plan: Plan, profile: str, env_file: str) -> Plan:
    """``gpudoctor fix --profile``: also load the env file from the user's shell profile, so new
    shells get the fixes too (a stub dir removed from LD_LIBRARY_PATH stays removed). Added to a
    user plan that writes env entries, or when the env file exists from an earlier run."""
    import os

    if plan.scope != "user":
        return plan
    env_steps = [s for s in plan.steps if isinstance(s.action, (SetEnv, RemoveFromPathVar))]
    if not env_steps and not os.path.exists(env_file):
        note = "--profile: no env file to load (no fix here sets a variable), so the profile is left alone"
        return Plan(plan.scope, plan.steps, plan.chosen, plan.without_fix, plan.notes + (note,))
    line = profile_line(env_file)
    ids = tuple(dict.fromkeys(fid for s in env_steps for fid in s.finding_ids)) or ("--profile",)
    return Plan(plan.scope, plan.steps + (Step(AppendLine(profile, line), ids),), plan.chosen, plan.without_fix,
                plan.notes)


def profile_line(env_file: str) -> str:
    """The one line ``--profile`` appends; undo removes only exactly this line (its own marker)."""
    from .shellquote import sh_always

    if "\n" in env_file or "\r" in env_file or "\0" in env_file:
        raise ValueError(f"the env file path {env_file!r} has a line break; a profile line cannot hold it")
    quoted = sh_always(env_file)
    return f"[ -f {quoted} ] && . {quoted}  # added by gpudoctor fix --profile; gpudoctor fix --undo removes it"
