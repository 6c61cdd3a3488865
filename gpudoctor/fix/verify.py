"""Verification: after a fix, re-run the checks of the findings it addressed, under the
environment the fix produced (the env file applied on top of ``base_env``), and say for each
finding whether it is really gone."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from ..paths import GpudoctorDirs
from . import envfile

FIXED, NOT_FIXED, UNKNOWN = "fixed", "NOT fixed", "unknown"

# (env, only ids) -> a Report with .findings and .checks (gpudoctor.engine.Report)
Diagnose = Callable[[Mapping[str, str], list[str]], Any]


def live_diagnose(env: Mapping[str, str], only: list[str] | None, requirements: Any = None,
                  interpreter: Any = None) -> Any:
    """The real thing: the engine over a LiveHost that sees ``env``; with ``interpreter``
    (``gpudoctor.interpreter.Interpreter``, ``fix --python``) its packages are that
    interpreter's, as ``check --python`` sees them."""
    from ..engine import diagnose
    from ..host.live import LiveHost

    host = LiveHost(env)
    if interpreter is not None:
        from ..interpreter import InterpretedHost

        host = InterpretedHost(host, interpreter)
    return diagnose(host, only=only or None, requirements=requirements)


@dataclass(frozen=True)
class Verification:
    """Whether one finding is gone after the fix, by re-running its check: fixed, NOT fixed (``detail`` is the
    finding's message), or unknown (``detail`` says why)."""

    finding_id: str
    status: str  # fixed | NOT fixed | unknown
    detail: str = ""


def fixed_environment(base_env: Mapping[str, str] | None = None, dirs: GpudoctorDirs | None = None) -> dict[str, str]:
    base_env = os.environ if base_env is None else base_env
    dirs = dirs or GpudoctorDirs.from_env(base_env)
    return envfile.apply_to(base_env, envfile.read_entries(dirs.env_file))


def verify(
    finding_ids: Iterable[str],
    env: Mapping[str, str],
    diagnose: Diagnose | None = None,
) -> list[Verification]:
    ids = list(dict.fromkeys(finding_ids))
    if not ids:
        return []
    report = (diagnose or live_diagnose)(env, ids)
    still = {f.id: f for f in report.findings}
    checks = {c.id: c for c in report.checks}
    results = []
    for fid in ids:
        if fid in still:
            results.append(Verification(fid, NOT_FIXED, still[fid].message))
            continue
        check = checks.get(fid)
        if check is None:
            results.append(Verification(fid, UNKNOWN, "no check with this id to re-run"))
        elif check.status.value in ("skip", "error"):
            results.append(Verification(fid, UNKNOWN, f"the check could not run: {check.reason}"))
        else:
            results.append(Verification(fid, FIXED, ""))
    return results
