"""A Markdown report, for issues and docs. Text from the machine or a log is escaped (<, >, &
as entities, controls as \\x..) so a rendered report shows it instead of running it as HTML;
commands stay readable in code spans, which Markdown keeps literal (issue 14 item 15)."""

from __future__ import annotations

from typing import Iterable

from ..fix.actions import fix_commands
from ..model import CheckResult, Finding
from .text import markdown_cell, markdown_code, markdown_text


def render_markdown(findings: Iterable[Finding], checks: Iterable[CheckResult], summary: list[str] | None = None,
                    requirements=()) -> str:
    lines = ["# gpudoctor report", ""]
    for line in summary or []:
        lines.append(f"- {markdown_text(line)}")
    if requirements:  # --require verdicts: anything but "met" fails the gate
        lines += ["", "| required feature | status | reason |", "| --- | --- | --- |"]
        lines += [f"| {markdown_code(r['feature'], cell=True)} | {markdown_cell(r['status'])} | {markdown_cell(r['reason'])} |"
                  for r in requirements]
    lines += ["", "| check | status | reason |", "| --- | --- | --- |"]
    for c in checks:
        lines.append(f"| {markdown_code(c.id, cell=True)} | {c.status.value} | {markdown_cell(c.reason)} |")
    findings = list(findings)
    if findings:
        lines += ["", "## Findings", ""]
        for f in findings:
            lines.append(f"### {f.severity.value}: {markdown_text(f.title)} ({markdown_code(f.id)})".replace("\n", " "))
            lines += ["", markdown_text(f.message), ""]
            for fix in f.fixes:
                lines.append(f"- fix ({markdown_text(fix.kind)}): {markdown_text(fix.summary)}")
                lines += [f"  - {markdown_code(c)}" for c in fix_commands(fix)]
            lines.append("")
    return "\n".join(lines) + "\n"


class MarkdownReporter:
    def render(self, report) -> str:
        return render_markdown(report.findings, report.checks, list(report.summary),
                               report.extra.get("requirements", ()))
