"""Fix actions: data only. Rendering to shell, applying and undoing live in ``gpudoctor.fix``,
which dispatches on the action's type, so checks can build plans without importing fixers.

A module of its own, re-exported by ``gpudoctor.model`` on first use: a check on a healthy machine
builds no fix, and these eleven frozen dataclasses cost about 0.6 ms each to create (Python 3.12,
measured on the H200 machine), all on preflight's first call otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping



@dataclass(frozen=True)
class MakeDir:
    """Create a directory of gpudoctor's own (private by default)."""

    path: str
    mode: int = 0o700


@dataclass(frozen=True)
class Symlink:
    """Create ``link`` pointing at ``target``; never over an existing file."""

    link: str
    target: str


@dataclass(frozen=True)
class SetEnv:
    """A variable for gpudoctor's user-local env file. ``prepend`` joins with ':' in front of
    the current value (for PATH-like variables)."""

    name: str
    value: str
    prepend: bool = False


@dataclass(frozen=True)
class RootCommand:
    """A shell command that needs root; only run with ``gpudoctor fix --system``."""

    argv: tuple[str, ...]
    undo_argv: tuple[str, ...] | None = None


@dataclass(frozen=True)
class WriteFile:
    """Write a file gpudoctor owns (e.g. ``/etc/ld.so.conf.d/gpudoctor-libcuda.conf``)."""

    path: str
    content: str
    needs_root: bool = False


@dataclass(frozen=True)
class InstallPackage:
    """Install OS packages with the distro's own package manager (root)."""

    manager: str  # apt | dnf | yum | zypper | pacman
    packages: tuple[str, ...]


@dataclass(frozen=True)
class RemoveFromPathVar:
    """Remove ``entry`` from a PATH-like variable (e.g. a stubs dir from LD_LIBRARY_PATH)."""

    name: str
    entry: str


@dataclass(frozen=True)
class AppendLine:
    """Append one line to a file the user owns (a shell profile), once. Undo removes exactly
    that line and nothing else; a file that did not exist is created and removed again."""

    path: str
    line: str


@dataclass(frozen=True)
class CodeEdit:
    """A change in the user's training code or config that gpudoctor can describe but not apply."""

    description: str
    before: str = ""
    after: str = ""


@dataclass(frozen=True)
class EditFile:
    """Replace a file of the user's (training code, a config) with ``new_text``, only while it
    still has the bytes that ``sha256`` (hex) names; the original bytes go to the manifest first,
    so ``gpudoctor fix --undo`` gives the file back byte for byte (``gpudoctor fix --code``)."""

    path: str
    sha256: str
    new_text: str


@dataclass(frozen=True)
class SuggestCommand:
    """A command the user runs themselves (``pip install …``); shown, never run by gpudoctor."""

    command: str


Action = (MakeDir | Symlink | SetEnv | RootCommand | WriteFile | InstallPackage | RemoveFromPathVar | AppendLine
          | CodeEdit | EditFile | SuggestCommand)

ACTION_TYPES: dict[str, type] = {cls.__name__: cls for cls in (
    MakeDir, Symlink, SetEnv, RootCommand, WriteFile, InstallPackage, RemoveFromPathVar, AppendLine, CodeEdit,
    EditFile, SuggestCommand)}


def action_from_json(data: Mapping[str, Any]) -> Action:
    """The inverse of the JSON reporter's ``{"type": name, **fields}`` (lists back to tuples)."""
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k != "type"}
    return ACTION_TYPES[data["type"]](**fields)
