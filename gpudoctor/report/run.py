"""``gpudoctor run``'s diagnosis after the command failed: plain lines on stderr (no rich: the
child's output was just streamed raw, and this must read the same in a pipe or a CI log)."""

from __future__ import annotations

from ..fix.actions import fix_lines
from .text import printable


class RunReporter:
    """``render(view) -> str`` for the findings from the last lines of a failed command's output."""

    def __init__(self, exit_code: int, lines_read: int) -> None:
        self.exit_code, self.lines_read = exit_code, lines_read

    def render(self, report) -> str:
        out = [f"\ngpudoctor: the command exited {self.exit_code}; diagnosing the last {self.lines_read} lines of its output"]
        if not report.findings:
            out.append("gpudoctor: no known failure recognised in the output; try `gpudoctor check`")
            return "\n".join(out) + "\n"
        for finding in report.findings:
            # printable: the findings quote the child's output, escape sequences included (issue 14 item 15)
            out.append(printable(f"  [{finding.severity.value}] {finding.id}: {finding.title}"))
            out += [f"      {line}" for line in printable(finding.message).splitlines()]
            for fix in finding.fixes:
                out.append(printable(f"      fix ({fix.kind}): {fix.summary}"))
                out += [f"        {printable(line)}" for line in fix_lines(finding.id, fix)]
        out.append("  Apply the user-local fixes with: gpudoctor fix   (review first: gpudoctor fix --dry-run)")
        return "\n".join(out) + "\n"
