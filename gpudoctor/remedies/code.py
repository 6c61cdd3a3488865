"""What the remedies for training code share: a code change located at the ``file:line`` a
project scan found (``gpudoctor scan``), or unlocated when a log is all there is.

The mechanical edit itself (``values["edit"]``: op, file, line, old, new) travels in the
finding's evidence; ``gpudoctor fix --code`` turns it into a libcst edit of the file."""

from __future__ import annotations

from typing import Any, Mapping

from ..model import CodeEdit


def location(v: Mapping[str, Any]) -> str:
    """" at train.py:42" when the scan saw where, else ""."""
    path = v.get("shown_path") or v.get("file")
    return f" at {path}:{v['line']}" if path and v.get("line") else ""


def code_edit(v: Mapping[str, Any], description: str, before: str, after: str) -> CodeEdit:
    return CodeEdit(description + location(v), before, after)


def applies_with_fix_code(v: Mapping[str, Any]) -> str:
    """The sentence that tells a scan's reader how to have the edit made."""
    return " `gpudoctor fix --code` makes this edit (review it with --dry-run)." if v.get("edit") else ""


def training_config_key_changed(v: Mapping[str, Any]) -> list:
    """A fine-tuning tool's own config key removed or renamed (axolotl's schema): from a scan,
    with ``key``, ``replacement`` (the new key, or "" when it is gone) and the ``edit`` when the
    change is mechanical."""
    from ..model import Fix

    key = v.get("key") or "the key"
    replacement = v.get("replacement")
    if replacement and v.get("edit"):
        summary = f"Rename `{key}:` to `{replacement}:`."
    elif replacement:
        summary = f"Replace `{key}:` with `{replacement}`."
    else:
        summary = f"Remove `{key}:`."
    if v.get("note"):
        summary += f" {v['note'][:1].upper()}{v['note'][1:]}."
    return [Fix("code", summary + applies_with_fix_code(v), (code_edit(v, f"config key {key}", key, str(replacement or "")),))]
