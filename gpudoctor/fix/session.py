"""One fix session, below the command line: apply a plan, verify each finding under the
environment the fix produced, and say what was recorded for undo. ``cli/fix.py`` parses
arguments, asks for confirmation and prints; everything that changes the machine or decides
whether a finding is fixed happens here (issue 12 item 5).

The results are plain frozen data, so the CLI, JSON and tests read the same facts."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

from ..paths import GpudoctorDirs
from .apply import ApplyResult, apply_plan
from .plan import Plan
from .verify import FIXED, Diagnose, Verification, fixed_environment, verify


def errors_left(plan: Plan) -> bool:
    """An error-level finding the plan has no fix for in its scope: the session cannot end fixed."""
    return any(f.severity.value == "error" for f in plan.without_fix)


@dataclass(frozen=True)
class UserFixResult:
    """``fix`` without root: what each step did, and each finding's verification."""

    plan: Plan
    applied: ApplyResult | None  # None when the plan had nothing to apply
    verification: tuple[Verification, ...] = ()

    @property
    def ok(self) -> bool:
        if self.applied is None:
            return not errors_left(self.plan)
        return (all(o.ok for o in self.applied.outcomes) and all(v.status == FIXED for v in self.verification)
                and not errors_left(self.plan))

    @property
    def any_fixed(self) -> bool:
        return any(v.status == FIXED for v in self.verification)


def fix_user(plan: Plan, dirs: GpudoctorDirs, base_env: Mapping[str, str], diagnose: Diagnose) -> UserFixResult:
    """Apply the user-local plan (under the state lock, manifest-first: ``fix.apply``), then re-run
    the checks of its findings with the env file applied on top of ``base_env``."""
    if plan.empty:
        return UserFixResult(plan, None)
    applied = apply_plan(plan, dirs)
    checks = verify(plan.finding_ids, fixed_environment(base_env, dirs), diagnose)
    return UserFixResult(plan, applied, tuple(checks))


@dataclass(frozen=True)
class SystemFixResult:
    """``fix --system`` after the user confirmed: the root script's exit status, what was
    recorded for ``--undo`` (``recorded`` counts intents and package installs), notes, and
    the verification (empty when the script failed: nothing is claimed then)."""

    exit_code: int
    recorded: int  # package installs (and links/files) recorded after the script ran
    intents: int  # files/links recorded before it ran, undone only where they still match
    notes: tuple[str, ...] = ()
    verification: tuple[Verification, ...] = ()

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and all(v.status == FIXED for v in self.verification)


def fix_system(plan: Plan, dirs: GpudoctorDirs, script: str, use_sudo: bool, base_env: Mapping[str, str],
               diagnose: Diagnose) -> SystemFixResult:
    """Run the confirmed root script. Intents are recorded before it runs (manifest-first, issue
    14): files, links, and each package install with the database as it was ("in progress");
    after it ran, also when it failed part way, each install's record becomes what it added. A
    kill in between leaves the "in progress" record, which --undo works from."""
    from .system import packages_before, paths_touched, record_system_changes, record_system_intents, run_system_script

    existed = {p for p in paths_touched(plan) if os.path.lexists(p)}
    installed_before = packages_before(plan)
    intents = record_system_intents(plan, dirs, existed, installed_before)
    code = run_system_script(script, use_sudo)
    if code != 0:
        recorded, _ = record_system_changes(plan, dirs, existed, installed_before, succeeded=False)
        return SystemFixResult(code, recorded, intents)
    recorded, notes = record_system_changes(plan, dirs, existed, installed_before)
    checks = verify(plan.finding_ids, fixed_environment(base_env, dirs), diagnose)
    return SystemFixResult(code, recorded, intents, tuple(notes), tuple(checks))
