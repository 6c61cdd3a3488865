"""The preflight summary on stderr: a reporter over ``PreflightResult``.

Imported on preflight's cached path, so it imports nothing (no rich, no model): it reads the
findings' JSON records (``report.json.finding_to_json``'s form) the result holds.
"""

from __future__ import annotations

LOADER_NOTE = ("  note: LD_LIBRARY_PATH changed after this process started; libraries this process loads "
               "will not see it. Start training with `gpudoctor run -- python ...` instead.\n")


class PreflightReporter:
    """``render(result) -> str``: one line when all is well, else one line per problem and its fix."""

    def render(self, result) -> str:
        records = result.records
        counts = {s: sum(1 for r in records if r.get("severity") == s) for s in ("error", "warning")}
        cached = f"cached from {_age(result)} ago, " if result.cached else ""
        how = f"{result.checks} checks, {cached}{result.duration_ms:.0f} ms"
        if result.env_changed:
            how += f", env: {', '.join(sorted(result.env_changed))}"
        # the dynamic loader read LD_LIBRARY_PATH when this process started; children see the change
        loader_note = LOADER_NOTE if "LD_LIBRARY_PATH" in result.env_changed else ""
        unmet = list(getattr(result, "unmet_requirements", ()))
        if result.not_run:
            head = f"gpudoctor preflight: checks NOT run ({result.not_run})"
        elif not any(counts.values()) and not unmet:
            return f"gpudoctor preflight: OK ({how})\n" + loader_note
        elif not any(counts.values()):
            head = f"gpudoctor preflight: {len(unmet)} required feature(s) not verified ({how})"
        else:
            head = "gpudoctor preflight: " + ", ".join(
                [f"{n} {s}{'s' if n != 1 else ''}" for s, n in counts.items() if n]
                + ([f"{len(unmet)} required feature(s) not verified"] if unmet else [])) + f" ({how})"
        lines = [head] + [f"  required {r['feature']}: {r['status']} ({r['reason']})" for r in unmet]
        for record in records:
            if record.get("severity") not in counts:
                continue
            lines.append(f"  {record['severity']:<7} {record['id']}: {record.get('title', '')}")
            fixes = record.get("fixes") or []
            if any(f.get("kind") == "user" for f in fixes):
                lines.append("          fix without root: gpudoctor fix   (review: gpudoctor fix --dry-run)")
            elif fixes:
                lines.append(f"          fix: {fixes[0].get('summary', '')}")
        return "\n".join(lines) + "\n" + loader_note


def _age(result) -> str:
    """How long ago the cached verdict was checked: "40 s", "12 min", "5 h"."""
    import time

    checked_at = getattr(result, "checked_at", None)
    if not isinstance(checked_at, (int, float)):
        return "an unknown time"
    seconds = max(0, time.time() - checked_at)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.0f} h"
