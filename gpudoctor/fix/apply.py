"""Apply the user-local part of a plan (no root), idempotently, recording each change.

Safety rules, in code below: never replace or delete anything gpudoctor did not create (a
symlink's path taken by a real file is refused); directories made here get the action's mode
(0700 by default), intermediate ones included; every change lands in the manifest before the
function returns, even when a later step fails."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..paths import GpudoctorDirs
from .actions import describe, kind_of, needs_root
from .actions.base import ALREADY, DONE, ERROR, REFUSED, Refused
from .manifest import Manifest
from .plan import Plan, Step

__all__ = ["ALREADY", "DONE", "ERROR", "REFUSED", "Refused", "Applier", "ApplyResult", "Outcome", "apply_plan"]


@dataclass(frozen=True)
class Outcome:
    step: Step
    status: str  # done | already done | refused | error
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.status in (DONE, ALREADY)


@dataclass(frozen=True)
class ApplyResult:
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
        """mkdir -p, but every directory it creates gets ``mode`` and a manifest record."""
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
        for directory in reversed(missing):
            os.mkdir(directory, mode)
            os.chmod(directory, mode)  # mkdir's mode is filtered by the umask
            self.manifest.record("mkdir", path=directory, purpose=purpose)
        return bool(missing)


def apply_plan(plan: Plan, dirs: GpudoctorDirs | None = None) -> ApplyResult:
    dirs = dirs or GpudoctorDirs.from_env()
    manifest = Manifest.load(dirs.manifest_file)
    applier = Applier(dirs, manifest)
    recorded_before = len(manifest.changes)
    outcomes: list[Outcome] = []
    try:
        for step in plan.steps:
            outcomes.append(_apply_step(applier, step))
    finally:
        changed = len(manifest.changes) > recorded_before
        if changed:  # an idempotent re-run leaves even the manifest untouched
            applier.ensure_dir(dirs.state, purpose="manifest")
            manifest.save()
    return ApplyResult(tuple(outcomes), dirs.manifest_file, changed)


def _apply_step(applier: Applier, step: Step) -> Outcome:
    action = step.action
    kind = kind_of(action)
    if not kind.user_local or needs_root(action):
        return Outcome(step, REFUSED, f"not a user-local action: {describe(action)}")
    try:
        return Outcome(step, kind.apply(applier, action))
    except Refused as exc:
        return Outcome(step, REFUSED, str(exc))
    except OSError as exc:
        return Outcome(step, ERROR, f"{describe(action)}: {exc}")
