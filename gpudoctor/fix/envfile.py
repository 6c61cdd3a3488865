"""gpudoctor's single user-local env file (``GpudoctorDirs.env_file``).

The file is a sourceable bash/zsh script, and it is also machine-readable: each entry is a
``# gpudoctor-env: {json}`` line followed by the shell line it stands for. gpudoctor only ever
reads the JSON lines back, so nothing here parses shell.
"""

from __future__ import annotations

import json
import os

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
        ):
            raise ValueError(f"not a valid environment variable name: {self.name!r}")

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


def read_entries(path: str) -> list[EnvEntry]:
    try:
        with open(path, encoding="utf-8") as handle:
            return parse(handle.read())
    except FileNotFoundError:
        return []


def entry_lines(entry: EnvEntry) -> tuple[str, str]:
    """The two lines that stand for one entry: the JSON marker and the bash/zsh line."""
    return MARKER + json.dumps(entry.to_json(), ensure_ascii=True), posix_line(entry)


def render_file(entries: Iterable[EnvEntry]) -> str:
    body = [HEADER]
    for entry in entries:
        body.extend(line + "\n" for line in entry_lines(entry))
    return "".join(body)


def write_entries(path: str, entries: Iterable[EnvEntry]) -> None:
    """Atomic replace (temp file + rename), mode 0600: it is the user's private config."""
    import tempfile

    directory = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix=".env.", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(render_file(entries))
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


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
    # remove: strip every occurrence of the entry from the ':'-list with parameter expansion
    # only. The value goes through a variable and is quoted inside the pattern: zsh ends a
    # ${x/pat/rep} pattern at a '/' even inside single quotes, and bash would glob an unquoted one.
    return (
        f'_gv={value}; _gd=":${{{name}:-}}:"; '
        'while case "$_gd" in *:"$_gv":*) true ;; *) false ;; esac; do _gd=${_gd/:"$_gv":/:}; done; '
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
        return f"contains -- {value} ${name}; or set -gx --path {name} {value} ${name}"
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
