"""The JSON report (the schema-1 contract in the README)."""

from __future__ import annotations

import json
from typing import Iterable

from .. import __version__
from ..model import CheckResult, Finding

SCHEMA = 1


def _scrub(value):
    """Redact secret-looking keys anywhere in evidence."""
    if isinstance(value, dict):
        from ..host.redact import REDACTED, is_secret_name  # here: a healthy preflight has no evidence to scrub

        return {k: (REDACTED if is_secret_name(str(k)) and isinstance(v, str) else _scrub(v)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_scrub(v) for v in value]
    return value


def finding_to_json(finding: Finding) -> dict:
    """One finding as the schema-1 object; its fixes' commands and env are derived from their
    actions (``gpudoctor.fix.actions``), and the actions come along so nothing is lost."""
    from ..fix.actions import fix_to_json

    return {
        "id": finding.id,
        "severity": finding.severity.value,
        "title": finding.title,
        "message": finding.message,
        "evidence": dict(finding.evidence),
        "fixes": [fix_to_json(fix) for fix in finding.fixes],
    }


def report_dict(findings: Iterable[Finding], checks: Iterable[CheckResult] = (), **extra) -> dict:
    data = {
        "schema": SCHEMA,
        "tool": {"name": "gpudoctor", "version": __version__},
        "findings": [_scrub(finding_to_json(f)) for f in findings],
        "checks": [c.to_json() for c in checks],
    }
    data.update(extra)
    return data


def render_json(findings: Iterable[Finding], checks: Iterable[CheckResult] = (), **extra) -> str:
    return json.dumps(report_dict(findings, checks, **extra), indent=2, default=str)


class JsonReporter:
    """The schema-1 envelope of a ``ReportView``; ``extra`` sections are added at the top level."""

    def render(self, report) -> str:
        return render_json(report.findings, report.checks, **dict(report.extra)) + "\n"
