"""The whole plan as one reviewable bash script (what ``gpudoctor fix --dry-run`` prints).

Rendering has no side effects. The output is deterministic (no timestamps), so the same plan
always gives the same script."""

from __future__ import annotations

import os

from .. import __version__
from ..model import RemoveFromPathVar, SetEnv
from ..paths import GpudoctorDirs
from .plan import Plan
from .actions import describe, render_action
from .actions.shell import ENV_FILE_VAR
from .shellquote import comment, sh

_SCOPE_TITLES = {
    "user": "user-local fixes (no root needed; run as yourself)",
    "system": "system fixes (run as root)",
}


def _finding_block(plan: Plan) -> list[str]:
    lines = ["# Why: the findings this plan fixes"]
    for chosen in plan.chosen:
        finding = chosen.finding
        lines.append(comment(f"[{finding.severity.value}] {finding.id}: {finding.title}"))
        lines.append(comment(finding.message, prefix="#     "))
        lines.append(comment(f"fix: {chosen.fix.summary}", prefix="#   "))
    return lines


def render_script(plan: Plan, dirs: GpudoctorDirs) -> str:
    out = [
        "#!/usr/bin/env bash",
        # Single-quoted '$' and '\\' are deliberate: paths and env-file lines are data here.
        "# shellcheck disable=SC2016,SC1003",
        comment(f"gpudoctor {__version__} fix plan: {_SCOPE_TITLES[plan.scope]}"),
    ]
    if plan.scope == "user":
        out.append("# `gpudoctor fix` performs these steps and records them for `gpudoctor fix --undo`;")
        out.append("# running this script by hand does the same without an undo record.")
    out.append("set -euo pipefail")
    out.append("")
    if plan.scope == "system":
        out.append('if [ "$(id -u)" -ne 0 ]; then echo "gpudoctor: run this script as root (e.g. sudo bash FILE)" >&2; exit 1; fi')
        out.append("")
    if plan.chosen:
        out.extend(_finding_block(plan))
        out.append("")

    if any(isinstance(step.action, (SetEnv, RemoveFromPathVar)) for step in plan.steps):
        out.append(f"{ENV_FILE_VAR}={sh(dirs.env_file)}")
        out.append(f"( umask 077 && mkdir -p -- {sh(os.path.dirname(dirs.env_file))} )")
        out.append("")

    for number, step in enumerate(plan.steps, 1):
        out.append(comment(f"step {number} ({', '.join(step.finding_ids)}): {describe(step.action)}"))
        out.extend(render_action(step.action))
        out.append("")

    if not plan.steps:
        out.append(f"# nothing to do: no finding has a {plan.scope} fix")
        out.append(":")
    elif plan.scope == "user":
        out.append("echo 'gpudoctor: done; load the environment with: eval \"$(gpudoctor env)\"'")

    if plan.without_fix:
        out.append("")
        out.append(f"# Findings without a {plan.scope} fix (see `gpudoctor check` for what to do):")
        for finding in plan.without_fix:
            alternatives = ", ".join(sorted({f.kind for f in finding.fixes})) or "none"
            out.append(comment(f"[{finding.severity.value}] {finding.id}: {finding.title} (fix kinds: {alternatives})"))
    if plan.notes:
        out.append("")
        out.append("# Notes:")
        out.extend(comment(note) for note in plan.notes)
    return "\n".join(out) + "\n"
