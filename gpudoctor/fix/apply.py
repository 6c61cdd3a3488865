"""Apply the user-local part of a plan (no root), idempotently, recording each change.

Safety rules, in code below: never replace or delete anything gpudoctor did not create (a
symlink's path taken by a real file is refused); directories made here get the action's mode
(0700 by default), intermediate ones included; every change lands in the manifest before the
function returns, even when a later step fails."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from ..model import Action, AppendLine, MakeDir, RemoveFromPathVar, SetEnv, Symlink, WriteFile
from ..paths import GpudoctorDirs
from . import envfile
from .manifest import Manifest
from .plan import Plan, Step
from .render import describe, env_entry_for, needs_root

DONE, ALREADY, REFUSED, ERROR = "done", "already done", "refused", "error"


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


class Refused(Exception):
    """A step that would overwrite or delete something gpudoctor does not own."""


class _Applier:
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

    # -- one function per action type -----------------------------------------------------
    def make_dir(self, action: MakeDir) -> str:
        if os.path.isdir(action.path):
            return ALREADY
        return DONE if self.ensure_dir(action.path, action.mode) else ALREADY

    def symlink(self, action: Symlink) -> str:
        link, target = action.link, action.target
        if os.path.islink(link):
            current = os.readlink(link)
            if current == target:
                return ALREADY
            ours = self.manifest.owns_symlink(link)
            if not ours or ours["target"] != current:
                raise Refused(f"{link} already points to {current}, and gpudoctor did not make it; leaving it alone")
            os.unlink(link)  # ours, and the real library moved: re-point it
            os.symlink(target, link)
            self.manifest.record("symlink", link=link, target=target, previous_target=current)
            return DONE
        if os.path.lexists(link):
            kind = "a directory" if os.path.isdir(link) else "a real file"
            raise Refused(f"{link} exists and is {kind}, not a symlink; refusing to replace it")
        self.ensure_dir(os.path.dirname(link))
        os.symlink(target, link)
        self.manifest.record("symlink", link=link, target=target, previous_target=None)
        return DONE

    def env(self, action: SetEnv | RemoveFromPathVar) -> str:
        path = self.dirs.env_file
        entry = env_entry_for(action)
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
        if not os.path.lexists(path):
            self.ensure_dir(os.path.dirname(path))
            self.manifest.record("env_file", path=path)
        envfile.write_entries(path, entries)
        self.manifest.record("env", entry=entry.to_json(), replaced=replaced.to_json() if replaced else None)
        return DONE

    def write_file(self, action: WriteFile) -> str:
        if os.path.lexists(action.path):
            try:
                with open(action.path, encoding="utf-8") as handle:
                    if handle.read() == action.content:
                        return ALREADY
            except (OSError, UnicodeDecodeError):
                pass
            raise Refused(f"{action.path} exists with other content; refusing to replace it")
        self.ensure_dir(os.path.dirname(action.path))
        with open(action.path, "x", encoding="utf-8") as handle:  # "x": never clobber a racer
            handle.write(action.content)
        self.manifest.record("write_file", path=action.path, content=action.content)
        return DONE

    def append_line(self, action: AppendLine) -> str:
        """Append the line to the user's file unless it is there already. Only appends: the
        user's own lines are never touched, and the file keeps its inode, owner and mode."""
        if "\n" in action.line or "\r" in action.line:
            raise Refused(f"refusing to append a line with a line break to {action.path}")
        try:
            with open(action.path, "rb") as handle:
                text = handle.read().decode("utf-8", "surrogateescape")
            existed = True
        except FileNotFoundError:
            text, existed = "", False
        if action.line in text.split("\n"):  # whole lines, as the script's `grep -qxF` sees them
            return ALREADY
        added = ("\n" if text and not text.endswith("\n") else "") + action.line + "\n"
        if not existed:
            self.ensure_dir(os.path.dirname(action.path))
        with open(action.path, "a" if existed else "x", encoding="utf-8", errors="surrogateescape") as handle:
            handle.write(added)
        self.manifest.record("append_line", path=action.path, line=action.line, added=added, created=not existed)
        return DONE


APPLIERS: dict[type, Callable[[_Applier, Action], str]] = {
    MakeDir: _Applier.make_dir,
    Symlink: _Applier.symlink,
    SetEnv: _Applier.env,
    RemoveFromPathVar: _Applier.env,
    WriteFile: _Applier.write_file,
    AppendLine: _Applier.append_line,
}


def apply_plan(plan: Plan, dirs: GpudoctorDirs | None = None) -> ApplyResult:
    dirs = dirs or GpudoctorDirs.from_env()
    manifest = Manifest.load(dirs.manifest_file)
    applier = _Applier(dirs, manifest)
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


def _apply_step(applier: _Applier, step: Step) -> Outcome:
    action = step.action
    handler = APPLIERS.get(type(action))
    if handler is None or needs_root(action):
        return Outcome(step, REFUSED, f"not a user-local action: {describe(action)}")
    try:
        return Outcome(step, handler(applier, action))
    except Refused as exc:
        return Outcome(step, REFUSED, str(exc))
    except OSError as exc:
        return Outcome(step, ERROR, f"{describe(action)}: {exc}")
