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
