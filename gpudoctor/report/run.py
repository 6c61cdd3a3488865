"""``gpudoctor run``'s own lines about the command: the diagnosis after it failed, and the
warnings its output showed when it succeeded. Plain lines for stderr (no rich: the child's
output was just streamed raw, and this must read the same in a pipe or a CI log)."""

from __future__ import annotations

from ..fix.actions import fix_lines, fix_scope_suggested
from .text import printable


class RunReporter:
    """``render(view) -> str`` for the findings read from a command's output. ``exit_code`` 0:
    the warning-level findings of a success (nothing at all when there are none); otherwise the
    findings from the last ``lines_read`` lines of a failure. ``view.extra['scan_error']``: the
    output could not be read for findings (said, never shown as a clean result);
    ``view.extra['fixable_here']``: the ids `gpudoctor fix` would plan on this machine (absent:
    all); the others show their steps to run by hand."""

    def __init__(self, exit_code: int, lines_read: int) -> None:
        self.exit_code, self.lines_read = exit_code, lines_read

    def render(self, report) -> str:
        lines = self._success(report) if self.exit_code == 0 else self._failure(report)
        return "\n".join(lines) + "\n" if lines else ""

    def _success(self, report) -> list[str]:
        error = report.extra.get("scan_error")
        if error:
            return [f"\ngpudoctor: could not scan the output for warnings ({printable(error)})"]
        if not report.findings:
            return []
        out = [f"\ngpudoctor: the command succeeded, but its output showed {len(report.findings)} warning(s):"]
        plannable = _plannable(report)
        for finding in report.findings:
            out += _finding_lines(finding, plannable)
        return out

    def _failure(self, report) -> list[str]:
        error = report.extra.get("scan_error")
        if error:
            return [f"\ngpudoctor: the command exited {self.exit_code}",
                    f"gpudoctor: could not diagnose the output ({printable(error)})"]
        out = [f"\ngpudoctor: the command exited {self.exit_code}; diagnosing the last {self.lines_read} lines of its output"]
        if not report.findings:
            out.append("gpudoctor: no known failure recognised in the output; try `gpudoctor check`")
            return out
        plannable = _plannable(report)
        for finding in report.findings:
            out += _finding_lines(finding, plannable)
        review = fix_scope_suggested(report.findings, plannable)
        if review:  # only when it would plan something here (issue 13 item 6)
            out.append(f"  Review the fixes gpudoctor can apply here: {review}")
        return out


def _plannable(report) -> set[str] | None:
    fixable = report.extra.get("fixable_here")
    return None if fixable is None else set(fixable)


def _finding_lines(finding, plannable: set[str] | None = None) -> list[str]:
    # printable: the findings quote the child's output, escape sequences included (issue 14 item 15)
    out = [printable(f"  [{finding.severity.value}] {finding.id}: {finding.title}")]
    out += [f"      {line}" for line in printable(finding.message).splitlines()]
    for fix in finding.fixes:
        out.append(printable(f"      fix ({fix.kind}): {fix.summary}"))
        out += [f"        {printable(line)}"
                for line in fix_lines(finding.id, fix, plannable=plannable is None or finding.id in plannable)]
    return out
