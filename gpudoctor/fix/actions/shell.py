"""Small pieces of bash shared by the kinds' renderers."""

from __future__ import annotations

from ..shellquote import sh

ENV_FILE_VAR = "GPUDOCTOR_ENV_FILE"  # the dry-run script defines it once at the top


def fail(message: str) -> str:
    return f"{{ printf '%s\\n' {sh('gpudoctor: ' + message)} >&2; exit 1; }}"
