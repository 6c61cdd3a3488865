"""A Markdown report, for issues and docs."""

from __future__ import annotations

from typing import Iterable

from ..fix.actions import fix_commands
from ..model import CheckResult, Finding


def render_markdown(findings: Iterable[Finding], checks: Iterable[CheckResult], summary: list[str] | None = None,
                    requirements=()) -> str:
    lines = ["# gpudoctor report", ""]
    for line in summary or []:
        lines.append(f"- {line}")
    if requirements:  # --require verdicts: anything but "met" fails the gate
        lines += ["", "| required feature | status | reason |", "| --- | --- | --- |"]
        lines += [f"| `{r['feature']}` | {r['status']} | {r['reason'].replace('|', '/')} |" for r in requirements]
    lines += ["", "| check | status | reason |", "| --- | --- | --- |"]
    for c in checks:
        lines.append(f"| `{c.id}` | {c.status.value} | {c.reason.replace('|', '/')} |")
    findings = list(findings)
    if findings:
        lines += ["", "## Findings", ""]
        for f in findings:
            lines.append(f"### {f.severity.value}: {f.title} (`{f.id}`)")
            lines += ["", f.message, ""]
            for fix in f.fixes:
                lines.append(f"- fix ({fix.kind}): {fix.summary}")
                lines += [f"  - `{c}`" for c in fix_commands(fix)]
            lines.append("")
    return "\n".join(lines) + "\n"


class MarkdownReporter:
    def render(self, report) -> str:
        return render_markdown(report.findings, report.checks, list(report.summary),
                               report.extra.get("requirements", ()))
