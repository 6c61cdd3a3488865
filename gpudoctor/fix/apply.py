"""Apply the user-local part of a plan (no root), idempotently, recording each change.

Safety rules, in code below: never replace or delete anything gpudoctor did not create (a
symlink's path taken by a real file is refused); write only into directories the user alone
controls; directories made here get the action's mode (0700 by default), intermediate ones
included; every change is in the manifest, durably, before it is made (issue 14)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..paths import GpudoctorDirs, UnsafeDirectory, parent_dir_problem, private_dir_problem
from .actions import describe, kind_of, needs_root
from .actions.base import ALREADY, DONE, ERROR, REFUSED, Refused
from .manifest import Manifest, state_lock
from .plan import Plan, Step

SKIPPED = "skipped"

__all__ = ["ALREADY", "DONE", "ERROR", "REFUSED", "SKIPPED", "Refused", "Applier", "ApplyResult", "Outcome", "apply_plan"]


@dataclass(frozen=True)
class Outcome:
    """What applying one step of a plan came to: its status (done, already done, refused, error, or skipped
    after an earlier step of the same fix failed) and what was done or why not."""

    step: Step
    status: str  # done | already done | refused | error | skipped
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.status in (DONE, ALREADY)


@dataclass(frozen=True)
class ApplyResult:
    """What ``apply_plan`` did: one outcome per step, in plan order, the manifest that records the changes,
    and whether this run recorded any change (the manifest's own directories aside)."""

    outcomes: tuple[Outcome, ...]
    manifest_path: str
    changed: bool

    def failed_findings(self) -> set[str]:
        return {fid for o in self.outcomes if not o.ok for fid in o.step.finding_ids}


class Applier:
    def __init__(self, dirs: GpudoctorDirs, manifest: Manifest) -> None:
        self.dirs = dirs
        self.manifest = manifest

    def ensure_dir(self, path: str, mode: int = 0o700, purpose: str = "fix") -> bool:
        """mkdir -p under the own-directory rule: an existing directory must belong to the user
        alone (owner, no group/other write, not a symlink); a new one is made with ``mode``
        inside a parent nobody else controls, and recorded before it is made (manifest-first).
        Anything else is refused with the reason (issue 14: a shared XDG_CACHE_HOME where
        another user made gpudoctor/lib first)."""
        missing = []
        probe = os.path.abspath(path)
        while not os.path.lexists(probe):
            missing.append(probe)
            parent = os.path.dirname(probe)
            if parent == probe:
                break
            probe = parent
        if os.path.lexists(probe) and not os.path.isdir(probe):
            raise Refused(f"{probe} exists and is not a directory")
        problem = parent_dir_problem(probe) if missing else private_dir_problem(probe)
        if problem:
            raise Refused(f"refusing to write into {path}: {problem}")
        for directory in reversed(missing):
            change = self.manifest.record("mkdir", path=directory, purpose=purpose)
            try:
                os.mkdir(directory, mode)
            except BaseException:
                self.manifest.forget(change)
                raise
            os.chmod(directory, mode)  # mkdir's mode is filtered by the umask
        return bool(missing)


def apply_plan(plan: Plan, dirs: GpudoctorDirs | None = None) -> ApplyResult:
    """Apply under the state lock, each change recorded before it is made. A finding whose
    step failed gets none of its later steps: its env entry must not point at a directory
    whose symlink was refused."""
    dirs = dirs or GpudoctorDirs.from_env()
    outcomes: list[Outcome] = []
    try:
        with state_lock(dirs.state) as manifest:  # UnsafeDirectory only from here, never from a step
            applier = Applier(dirs, manifest)
            recorded_before = _own_records(manifest)
            broken: set[str] = set()
            for step in plan.steps:
                if broken.intersection(step.finding_ids):
                    outcomes.append(Outcome(step, SKIPPED, "skipped: an earlier step of the same fix did not succeed"))
                    continue
                outcome = _apply_step(applier, step)
                outcomes.append(outcome)
                if not outcome.ok:
                    broken.update(step.finding_ids)
            changed = _own_records(manifest) > recorded_before
    except UnsafeDirectory as exc:
        return ApplyResult(tuple(Outcome(step, REFUSED, str(exc)) for step in plan.steps), dirs.manifest_file, False)
    return ApplyResult(tuple(outcomes), dirs.manifest_file, changed)


def _own_records(manifest: Manifest) -> int:
    return sum(1 for c in manifest.changes if not (c.get("op") == "mkdir" and c.get("purpose") == "manifest"))


def _apply_step(applier: Applier, step: Step) -> Outcome:
    action = step.action
    kind = kind_of(action)
    if not kind.user_local or needs_root(action):
        return Outcome(step, REFUSED, f"not a user-local action: {describe(action)}")
    try:
        return Outcome(step, kind.apply(applier, action))
    except Refused as exc:
        return Outcome(step, REFUSED, str(exc))
    except ValueError as exc:  # a value the target format cannot hold (a newline in a path)
        return Outcome(step, REFUSED, f"{describe(action)}: {exc}")
    except OSError as exc:
        return Outcome(step, ERROR, f"{describe(action)}: {exc}")
