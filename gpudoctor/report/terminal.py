"""The terminal report: grouped by area, flutter-doctor style, each finding with its fix."""

from __future__ import annotations

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
