"""Fix-aware check (issue 13 item 4): which findings are already fixed by gpudoctor's env file,
only not loaded in the shell that ran ``check``. Decided the way ``fix`` verifies: the checks of
those findings re-run with the env file applied on top of the current environment, and a finding
that is gone there is "recorded, not loaded" -- the user needs `eval "$(gpudoctor env)"` or
`gpudoctor run -- CMD`, not another `gpudoctor fix`."""

from __future__ import annotations

from typing import Iterable, Mapping

from ..paths import GpudoctorDirs
from . import envfile
from .verify import FIXED, Diagnose, live_diagnose, verify

LOAD_HINT = 'eval "$(gpudoctor env)"'
RUN_HINT = "gpudoctor run -- CMD ..."


def fixed_but_not_loaded(finding_ids: Iterable[str], env: Mapping[str, str], dirs: GpudoctorDirs | None = None,
                         diagnose: Diagnose | None = None) -> list[str]:
    """The ids among ``finding_ids`` that the env file fixes, when this environment has not loaded
    it. Empty when there is no env file, it cannot be read, or it is already loaded."""
    ids = list(dict.fromkeys(finding_ids))
    if not ids:
        return []
    dirs = dirs or GpudoctorDirs.from_env(env)
    try:
        entries = envfile.read_entries(dirs.env_file)
    except (OSError, ValueError):  # unreadable or not ours: `gpudoctor run` names the problem
        return []
    if not entries:
        return []
    fixed_env = envfile.apply_to(env, entries)
    if dict(fixed_env) == dict(env):
        return []  # loaded already: the findings are real in this shell too
    return [v.finding_id for v in verify(ids, fixed_env, diagnose or live_diagnose) if v.status == FIXED]
