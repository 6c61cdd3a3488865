"""gpudoctor's single user-local env file (``GpudoctorDirs.env_file``).

The file is a sourceable bash/zsh script, and it is also machine-readable: each entry is a
``# gpudoctor-env: {json}`` line followed by the shell line it stands for. gpudoctor only ever
reads the JSON lines back, so nothing here parses shell.
"""

from __future__ import annotations

import json
import os

from ..xdg import not_only_yours

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing alone costs ~1.5 ms
if TYPE_CHECKING:  # typing, dataclasses, tempfile and shlex stay out of preflight's fast path
    from typing import Iterable, Mapping

MARKER = "# gpudoctor-env: "
HEADER = (
    "# gpudoctor user-local environment, written by `gpudoctor fix`.\n"
    "# Use it with:  eval \"$(gpudoctor env)\"   (or source this file from bash/zsh)\n"
    "# Undo with:    gpudoctor fix --undo\n"
)
MODES = ("set", "prepend", "remove")
SHELLS = ("bash", "zsh", "fish")


class EnvEntry:
    """``set``: NAME=value; ``prepend``: value in front of a ':'-list (once);
    ``remove``: drop value from a ':'-list. Immutable value object (a plain class rather than
    a dataclass: importing dataclasses costs preflight's cached path ~5 ms)."""

    __slots__ = ("name", "value", "mode")

    def __init__(self, name: str, value: str, mode: str = "set") -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "mode", mode)
        if self.mode not in MODES:
            raise ValueError(f"unknown env entry mode {self.mode!r}")
        if not self.name or not (self.name[0].isalpha() or self.name[0] == "_") or not all(
            ch.isalnum() or ch == "_" for ch in self.name
        ) or not self.name.isascii():
            raise ValueError(f"not a valid environment variable name: {self.name!r}")
        # The file is line-based (a marker line, then its shell line): a line break would make a
        # second line, NUL cannot be in an environment at all (issue 14 item 8).
        if not isinstance(self.value, str) or any(ch in self.value for ch in "\n\r\0"):
            raise ValueError(f"{self.name}: a value with a line break or NUL cannot go into the env file")
        if self.mode != "set" and ":" in self.value or self.mode == "prepend" and not self.value:
            raise ValueError(f"{self.name}: {self.value!r} cannot be one entry of a ':'-separated list")

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("EnvEntry is immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EnvEntry) and (self.name, self.value, self.mode) == (other.name, other.value, other.mode)

    def __hash__(self) -> int:
        return hash((self.name, self.value, self.mode))

    def __repr__(self) -> str:
        return f"EnvEntry({self.name!r}, {self.value!r}, {self.mode!r})"

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "value": self.value, "mode": self.mode}

    @classmethod
    def from_json(cls, data: Mapping[str, str]) -> "EnvEntry":
        return cls(str(data["name"]), str(data["value"]), str(data.get("mode", "set")))


# -- reading and writing ------------------------------------------------------------------


def parse(text: str) -> list[EnvEntry]:
    entries = []
    for line in text.splitlines():
        if line.startswith(MARKER):
            try:
                entries.append(EnvEntry.from_json(json.loads(line[len(MARKER):])))
            except (ValueError, KeyError, TypeError):
                continue  # a hand-edited line we do not understand is left alone, not fatal
    return entries


class UntrustedEnvFile(OSError):
    """The env file, or its directory, is not one only this user can write: its entries (any
    variable: LD_PRELOAD, PATH, CC) are not applied. The reading side of the own-directory rule
    that ``fix`` follows when it writes the file (paths.private_dir_problem)."""


def read_entries(path: str) -> list[EnvEntry]:
    """The entries of the env file at ``path``; [] when there is none. UntrustedEnvFile when
    someone else could have written it: found in review, preflight() put the LD_PRELOAD of an
    env.sh another user owned, in a shared XDG_CONFIG_HOME, into the training process. Opened
    with O_NONBLOCK: a FIFO at its name blocked preflight() forever (found in review)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return []
    with open(fd, encoding="utf-8") as handle:
        try:
            directory = os.stat(os.path.dirname(os.path.abspath(path)))
        except FileNotFoundError:
            # Removed, with the file, since it was opened: a concurrent `fix --undo` (fix verifies
            # after the state lock is released; CI, twenty-eighth session, "internal error:
            # FileNotFoundError" in test_concurrent_fix_and_undo_then_undo_is_exact). None now.
            return []
        problem = not_only_yours(os.fstat(fd), "it", regular=True) or not_only_yours(directory, "its directory")
        if problem:
            raise UntrustedEnvFile(f"{problem}; its entries are not applied")
        return parse(handle.read())


def entry_lines(entry: EnvEntry) -> tuple[str, str]:
    """The two lines that stand for one entry: the JSON marker and the bash/zsh line."""
    return MARKER + json.dumps(entry.to_json(), ensure_ascii=True), posix_line(entry)


def render_file(entries: Iterable[EnvEntry]) -> str:
    body = [HEADER]
    for entry in entries:
        body.extend(line + "\n" for line in entry_lines(entry))
    return "".join(body)


def write_entries(path: str, entries: Iterable[EnvEntry]) -> None:
    """Atomic replace (paths.write_private_file: O_EXCL temp, 0600, fsync, rename). Lines that
    are not gpudoctor's (the user's own) stay where they were (issue 14 item 6); entries still
    wanted stay in place, new ones go at the end, dropped ones (and only they) go."""
    from ..paths import write_private_file

    try:
        with open(path, "rb") as handle:
            old = handle.read().decode("utf-8", "surrogateescape")
    except FileNotFoundError:
        old = ""
    write_private_file(path, merge_text(old, list(entries)).encode("utf-8", "surrogateescape"))


def merge_text(old: str, entries: list[EnvEntry]) -> str:
    wanted = list(entries)
    out = [HEADER]
    lines = old.splitlines(keepends=True)
    header_lines = set(HEADER.splitlines(keepends=True))
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if line in header_lines:
            continue
        if line.startswith(MARKER):
            try:
                entry = EnvEntry.from_json(json.loads(line[len(MARKER):]))
            except (ValueError, KeyError, TypeError):
                out.append(line)  # a marker we cannot read: the user's line now, kept
                continue
            follows = lines[index].rstrip("\n") if index < len(lines) else None
            if follows == posix_line(entry):
                index += 1  # its shell line belongs to it
            if entry in wanted:
                wanted.remove(entry)
                out.extend(text + "\n" for text in entry_lines(entry))
            continue
        out.append(line if line.endswith("\n") else line + "\n")
    for entry in wanted:
        out.extend(text + "\n" for text in entry_lines(entry))
    return "".join(out)


def foreign_lines(path: str) -> list[str]:
    """The lines of the env file that are not gpudoctor's (header and entries excluded)."""
    try:
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8", "surrogateescape")
    except FileNotFoundError:
        return []
    kept = merge_text(text, []).splitlines()[len(HEADER.splitlines()):]
    return [line for line in kept if line.strip()]


# -- applying to an environment mapping ----------------------------------------------------


def apply_to(env: Mapping[str, str], entries: Iterable[EnvEntry]) -> dict[str, str]:
    """What the environment looks like after sourcing the file (same semantics as the shell
    lines): a new dict, ``env`` is not modified."""
    result = dict(env)
    for entry in entries:
        current = result.get(entry.name, "")
        parts = [p for p in current.split(":") if p] if current else []
        if entry.mode == "set":
            result[entry.name] = entry.value
        elif entry.mode == "prepend":
            if entry.value not in parts:
                result[entry.name] = entry.value + (":" + current if current else "")
        else:  # remove
            kept = [p for p in current.split(":") if p != entry.value] if current else []
            if any(kept):
                result[entry.name] = ":".join(kept)
            else:
                result.pop(entry.name, None)
    return result


def apply_to_os_environ(path: str) -> dict[str, str]:
    """Apply the env file to this process; returns the variables that changed."""
    after = apply_to(os.environ, read_entries(path))
    changed = {k: v for k, v in after.items() if os.environ.get(k) != v}
    for name in set(os.environ) - set(after):
        changed[name] = ""
        del os.environ[name]
    os.environ.update({k: v for k, v in changed.items() if k in after})
    return changed


# -- rendering exports for a shell ---------------------------------------------------------


def posix_line(entry: EnvEntry) -> str:
    """One bash/zsh line; safe under ``set -u`` and idempotent when sourced twice."""
    from .shellquote import sh_always

    name, value = entry.name, sh_always(entry.value)
    if entry.mode == "set":
        return f"export {name}={value}"
    if entry.mode == "prepend":
        return f'case ":${{{name}:-}}:" in *:{value}:*) ;; *) export {name}={value}"${{{name}:+:${name}}}" ;; esac'
    # remove: strip every occurrence of the entry from the ':'-list with POSIX parameter
    # expansion only (``gpudoctor env`` prints POSIX sh: dash has no ${x/pat/rep}, and zsh ends
    # that pattern at a '/' even in quotes). The value goes through a variable and is quoted
    # inside the patterns, so it is matched literally, never globbed.
    return (
        f'_gv={value}; _gd=":${{{name}:-}}:"; '
        'while case "$_gd" in *:"$_gv":*) true ;; *) false ;; esac; do '
        '_gd="${_gd%%:"$_gv":*}:${_gd#*:"$_gv":}"; done; '
        "_gd=${_gd#:}; _gd=${_gd%:}; "
        f'if [ -n "$_gd" ]; then export {name}="$_gd"; else unset {name}; fi; unset _gd _gv'
    )


def fish_line(entry: EnvEntry) -> str:
    from .shellquote import fish

    name, value = entry.name, fish(entry.value)
    if entry.mode == "set":
        return f"set -gx {name} {value}"
    # fish keeps *PATH variables as lists and joins them with ':' when exporting
    if entry.mode == "prepend":
        # elements copied one by one: a set-but-empty variable is the list (""), and joining
        # it would give "/dir:" -- an empty entry, which means the current directory
        return (f"if not contains -- {value} ${name}; set -l _gd {value}; for _gp in ${name}; "
                f"test -n \"$_gp\"; and set -a _gd \"$_gp\"; end; set -gx --path {name} $_gd; end")
    # remove: compare each element literally (`string match` would glob the value, and with an
    # empty list it reads stdin); an emptied variable is erased, as in the bash/zsh line.
    return (
        f"if set -q {name}[1]; set -l _gd; for _gp in ${name}; test \"$_gp\" = {value}; or set -a _gd \"$_gp\"; end; "
        f"if set -q _gd[1]; set -gx --path {name} $_gd; else; set -e {name}; end; else; set -e {name}; end"
    )


def render_exports(entries: Iterable[EnvEntry], shell: str = "bash") -> str:
    if shell not in SHELLS:
        raise ValueError(f"unsupported shell {shell!r}; choose one of {', '.join(SHELLS)}")
    line = fish_line if shell == "fish" else posix_line
    return "".join(line(entry) + "\n" for entry in entries)
