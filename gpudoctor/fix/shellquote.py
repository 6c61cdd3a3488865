"""Quoting for the shells gpudoctor writes for. Everything that came from the machine or from
a finding (paths, values, titles) goes through here before it reaches a script."""

from __future__ import annotations

import shlex

_ANSI_C_ESCAPES = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _has_control_chars(text: str) -> bool:
    return any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text)


def sh(text: str) -> str:
    """One shell word for bash/zsh. Plain ``shlex.quote`` unless the text holds control
    characters (a newline in a path): then ANSI-C ``$'…'`` quoting, so every rendered command
    stays on one line (the env file is read back line by line)."""
    if not _has_control_chars(text):
        return shlex.quote(text)
    body = "".join(_ANSI_C_ESCAPES.get(ch) or (f"\\x{ord(ch):02x}" if ord(ch) < 0x20 or ord(ch) == 0x7F else ch) for ch in text)
    return f"$'{body}'"


def sh_always(text: str) -> str:
    """Like ``sh`` but always quoted, for places where even '/' is special (the pattern of
    ``${var/pattern/replacement}``)."""
    quoted = sh(text)
    return quoted if quoted.startswith(("'", "$'")) else "'" + text + "'"


def sh_argv(argv: tuple[str, ...] | list[str]) -> str:
    return " ".join(sh(arg) for arg in argv)


def fish(text: str) -> str:
    """One fish word: single quotes, where only backslash and quote are special."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def comment(text: str, prefix: str = "# ") -> str:
    """A comment that stays a comment: every line of ``text`` gets the prefix, so a newline in
    a finding's title cannot smuggle a command into a script."""
    lines = str(text).replace("\r", "\n").splitlines() or [""]
    return "\n".join((prefix + line).rstrip() for line in lines)
