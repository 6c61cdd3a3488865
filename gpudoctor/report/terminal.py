"""The terminal report: grouped by area, flutter-doctor style, each finding with its fix."""

from __future__ import annotations

import os
from typing import Iterable

from rich.console import Console
from rich.markup import escape

from ..fix.actions import fix_lines
from ..knowledge import load_catalogue
from ..model import CheckResult, CheckStatus, Finding, Severity

AREAS = {
    "driver": "Driver and libcuda",
    "toolchain": "Compilers and CUDA toolkit",
    "capability": "GPU capability",
    "packages": "Python packages",
    "runtime": "Runtime",
    "training-code": "Training code and config",
    "training-pass": "Training pass",
}
_SEVERITY_STYLE = {Severity.ERROR: ("✗", "red"), Severity.WARNING: ("!", "yellow"), Severity.INFO: ("i", "blue")}


def _area_mark(results: list[CheckResult]) -> str:
    severities = [f.severity for r in results for f in r.findings]
    if Severity.ERROR in severities:
        return "[red][✗][/]"
    if Severity.WARNING in severities or any(r.status == CheckStatus.ERROR for r in results):
        return "[yellow][!][/]"
    if all(r.status == CheckStatus.SKIP for r in results):
        return "[dim][-][/]"
    return "[green][✓][/]"


def print_findings(console: Console, findings: Iterable[Finding], verbose: bool = False) -> None:
    for f in findings:
        mark, style = _SEVERITY_STYLE[f.severity]
        console.print(f"    [{style}]{mark}[/] [bold]{escape(f.title)}[/] [dim]({f.id})[/]")
        console.print(f"      {escape(f.message)}", highlight=False)
        for fix in f.fixes:
            console.print(f"      [cyan]fix[/] [dim]({fix.kind})[/] {escape(fix.summary)}", highlight=False)
            for line in fix_lines(f.id, fix, verbose):
                console.print(f"        {escape(line)}", highlight=False)
        if verbose and f.evidence:
            for key, value in f.evidence.items():
                console.print(f"      [dim]{escape(str(key))}: {escape(str(value))}[/]", highlight=False)


def print_report(console: Console, findings: Iterable[Finding], checks: Iterable[CheckResult],
                 title: str = "gpudoctor", summary: list[str] | None = None, verbose: bool = False) -> None:
    findings = list(findings)
    checks = list(checks)
    catalogue = load_catalogue()
    console.print(f"[bold]{escape(title)}[/]")
    for line in summary or []:
        console.print(f"  [dim]{escape(line)}[/]", highlight=False)
    by_area: dict[str, list[CheckResult]] = {}
    for result in checks:
        area = catalogue[result.id].area if result.id in catalogue else "runtime"
        by_area.setdefault(area, []).append(result)
    shown: set[int] = set()
    for area, results in by_area.items():
        console.print(f"{_area_mark(results)} {AREAS.get(area, area)}")
        for result in results:
            if result.status == CheckStatus.PASS and verbose:
                console.print(f"    [green]✓[/] {result.id}")
            elif result.status == CheckStatus.SKIP and verbose:
                console.print(f"    [dim]- {result.id}: skipped, {escape(result.reason)}[/]", highlight=False)
            elif result.status == CheckStatus.ERROR:
                console.print(f"    [yellow]![/] {result.id}: [yellow]check crashed[/] — {escape(result.reason)}", highlight=False)
            print_findings(console, result.findings, verbose)
            shown.update(id(f) for f in result.findings)
    rest = [f for f in findings if id(f) not in shown]
    if rest:
        console.print("[bold]From logs[/]")
        print_findings(console, rest, verbose)
    errors = sum(f.severity == Severity.ERROR for f in findings)
    warnings = sum(f.severity == Severity.WARNING for f in findings)
    skipped = sum(r.status == CheckStatus.SKIP for r in checks)
    crashed = sum(r.status == CheckStatus.ERROR for r in checks)
    if not findings:
        console.print(f"[green]No problems found[/] ({len(checks)} checks, {skipped} skipped; -v shows why).")
    else:
        console.print(f"{errors} error(s), {warnings} warning(s) in {len(checks)} checks ({skipped} skipped"
                      + (f", {crashed} crashed" if crashed else "") + "). Fix them with `gpudoctor fix --dry-run`.")


def make_console(stream=None, stderr: bool = False) -> Console:
    """A console made for copying: no rich auto-highlighting, no hard wrap when the output is not
    a terminal (a `$ gpudoctor fix --only ... --dry-run` line stays one line in a pipe or file),
    and NO_COLOR honoured (https://no-color.org; rich reads it too, stated here so it holds)."""
    import sys

    stream = stream if stream is not None else (sys.stderr if stderr else sys.stdout)
    tty = hasattr(stream, "isatty") and stream.isatty()
    return Console(file=stream, highlight=False, soft_wrap=not tty,
                   no_color=bool(os.environ.get("NO_COLOR")), emoji=False)


def rendered(write, stream_is_tty: bool) -> str:
    import io

    buffer = io.StringIO()
    console = Console(file=buffer, highlight=False, soft_wrap=not stream_is_tty, force_terminal=stream_is_tty,
                      no_color=bool(os.environ.get("NO_COLOR")), emoji=False)
    if stream_is_tty:
        import shutil

        console.width = shutil.get_terminal_size().columns
    write(console)
    return buffer.getvalue()


class TerminalReporter:
    """The check report as terminal text (colour and wrapping only when ``tty``)."""

    def __init__(self, verbose: bool = False, tty: bool = False) -> None:
        self.verbose, self.tty = verbose, tty

    def render(self, report) -> str:
        return rendered(lambda console: print_report(console, report.findings, report.checks, title=report.title,
                                                      summary=list(report.summary), verbose=self.verbose), self.tty)


class ExplainReporter:
    """``gpudoctor explain``: most likely cause first, then its consequences, then where it was seen."""

    def __init__(self, files, verbose: bool = False, tty: bool = False) -> None:
        self.files, self.verbose, self.tty = list(files), verbose, tty

    def render(self, report) -> str:
        return rendered(self._write(report.findings), self.tty)

    def _write(self, findings):
        def write(console: Console) -> None:
            names = ", ".join("<stdin>" if f == "-" else f for f in self.files)
            console.print(f"[bold]gpudoctor explain[/] {escape(names)}")
            if not findings:
                console.print("[green]No known failure recognised[/] in this log.")
                return
            causes = [f for f in findings if not f.evidence.get("consequence")]
            consequences = [f for f in findings if f.evidence.get("consequence")]
            console.print("[bold]Most likely cause first[/]")
            print_findings(console, causes, self.verbose)
            if consequences:
                console.print("[bold]Consequences of the above[/] [dim](same failure, reported later in the log)[/]")
                print_findings(console, consequences, self.verbose)
            for f in findings[:1]:
                where = f.evidence.get("log"), f.evidence.get("line_number")
                console.print(f"[dim]first seen: {escape(str(where[0]))}:{where[1]}[/]")
        return write
