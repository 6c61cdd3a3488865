"""The terminal report: grouped by area, flutter-doctor style, each finding with its fix."""

from __future__ import annotations

import os
from typing import Iterable

from rich.console import Console
from rich.markup import escape

from ..fix.actions import fix_lines, fix_scope_suggested
from ..knowledge import load_catalogue
from ..model import CheckResult, CheckStatus, Finding, Severity
from .text import printable

AREAS = {
    "driver": "Driver and libcuda",
    "toolchain": "Compilers and CUDA toolkit",
    "capability": "GPU capability",
    "packages": "Python packages",
    "runtime": "Runtime",
    "training-code": "Training code and config",
    "training-pass": "Training pass",
    "hardware": "GPU hardware health",
    "cluster": "Across ranks",
}


def _shown(text) -> str:
    """Text from a log or the machine, for rich markup: controls escaped (a log line's escape
    sequences never reach the terminal, issue 14 item 15), then rich's own markup escaped."""
    return escape(printable(text))


_SEVERITY_STYLE = {Severity.ERROR: ("✗", "red"), Severity.WARNING: ("!", "yellow"), Severity.INFO: ("i", "blue")}


def _area_mark(results: list[CheckResult]) -> str:
    """✓ only when every check of the area ran and passed: a skipped check is not a pass."""
    severities = [f.severity for r in results for f in r.findings]
    if Severity.ERROR in severities:
        return "[red][✗][/]"
    if Severity.WARNING in severities or any(r.status == CheckStatus.ERROR for r in results):
        return "[yellow][!][/]"
    if any(r.status == CheckStatus.SKIP for r in results):
        return "[dim][-][/]"
    return "[green][✓][/]"


def _area_note(results: list[CheckResult]) -> str:
    not_run = sum(r.status in (CheckStatus.SKIP, CheckStatus.ERROR) for r in results)
    if not not_run:
        return ""
    if not_run == len(results):
        return f" [dim](not checked: {'its check' if not_run == 1 else f'all {not_run} checks'} could not run)[/]"
    return f" [dim]({len(results) - not_run} of {len(results)} checks ran; {not_run} could not run)[/]"


def not_run_reasons(checks: Iterable[CheckResult]) -> list[tuple[str, int]]:
    """(reason, how many checks) for the checks that could not run, most common first."""
    counts: dict[str, int] = {}
    for result in checks:
        if result.status in (CheckStatus.SKIP, CheckStatus.ERROR):
            reason = result.reason if result.status == CheckStatus.SKIP else "check crashed"
            counts[reason] = counts.get(reason, 0) + 1
    return sorted(counts.items(), key=lambda item: -item[1])


def status_line(findings: list[Finding], checks: list[CheckResult], plannable: set[str] | None = None) -> str:
    """The last line: never "No problems found" for checks that did not run (issue 13 item 3);
    ``gpudoctor fix`` named only when it would plan something for these findings (issue 13 item 6)."""
    ran = sum(r.status in (CheckStatus.PASS, CheckStatus.FAIL) for r in checks)
    not_run = len(checks) - ran
    tail = f"; {not_run} could not run (-v: why)" if not_run else ""
    if not findings:
        if not checks:
            return "[yellow]Nothing was checked.[/]"
        if not ran:
            return f"[yellow]Nothing could be checked[/]: all {not_run} checks could not run (-v: why)."
        if not not_run:
            return f"[green]No problems found[/] (all {ran} checks ran)."
        return f"[green]No problems found in the {ran} checks that ran[/]{tail}."
    errors = sum(f.severity == Severity.ERROR for f in findings)
    warnings = sum(f.severity == Severity.WARNING for f in findings)
    review = fix_scope_suggested(findings, plannable)
    return (f"{errors} error(s), {warnings} warning(s) in the {ran} checks that ran{tail}. "
            + (f"Review the fixes with `{review}`." if review else "Each finding above says how to fix it."))


def print_findings(console: Console, findings: Iterable[Finding], verbose: bool = False, not_loaded=None,
                   plannable: set[str] | None = None) -> None:
    """``not_loaded``: check's ``fixed_not_loaded`` section (ids fixed by the env file that this
    shell has not loaded): those findings point at loading it, not at running fix again.
    ``plannable``: the ids ``gpudoctor fix`` would find on this machine (None: all); the others
    show their steps to run by hand, never a `gpudoctor fix` that would find nothing."""
    pending = set((not_loaded or {}).get("ids", ()))
    for f in findings:
        mark, style = _SEVERITY_STYLE[f.severity]
        console.print(f"    [{style}]{mark}[/] [bold]{_shown(f.title)}[/] [dim]({_shown(f.id)})[/]")
        console.print(f"      {_shown(f.message)}", highlight=False)
        if f.id in pending:
            console.print(f"      [cyan]fixed[/] in {_shown(not_loaded['env_file'])}, but not loaded in this shell: "
                          f"{_shown(not_loaded['load'])}   (or start training with {_shown(not_loaded['run'])})")
            continue
        for fix in f.fixes:
            console.print(f"      [cyan]fix[/] [dim]({_shown(fix.kind)})[/] {_shown(fix.summary)}", highlight=False)
            for line in fix_lines(f.id, fix, verbose, plannable is None or f.id in plannable):
                console.print(f"        {_shown(line)}", highlight=False)
        if verbose and f.evidence:
            for key, value in f.evidence.items():
                console.print(f"      [dim]{_shown(str(key))}: {_shown(str(value))}[/]", highlight=False)


def print_requirements(console: Console, requirements) -> None:
    """--require verdicts (``requirement_verdicts``' JSON form): ✓ only for a verified feature."""
    if not requirements:
        return
    marks = {"met": "[green]✓[/]", "NOT met": "[red]✗[/]"}
    unmet = [r for r in requirements if r["status"] != "met"]
    console.print(("[red][✗][/]" if unmet else "[green][✓][/]") + " Required features")
    for item in requirements:
        mark = marks.get(item["status"], "[yellow]?[/]")
        console.print(f"    {mark} {_shown(item['feature'])}: {_shown(item['status'])} — {_shown(item['reason'])}")


def print_report(console: Console, findings: Iterable[Finding], checks: Iterable[CheckResult],
                 title: str = "gpudoctor", summary: list[str] | None = None, verbose: bool = False,
                 requirements=(), not_loaded=None) -> None:
    from ..fix.plan import refindable_ids

    findings = list(findings)
    checks = list(checks)
    catalogue = load_catalogue()
    plannable = refindable_ids(checks)  # a log finding the static checks do not find: steps by hand
    console.print(f"[bold]{_shown(title)}[/]")
    for line in summary or []:
        console.print(f"  [dim]{_shown(line)}[/]", highlight=False)
    by_area: dict[str, list[CheckResult]] = {}
    for result in checks:
        area = catalogue[result.id].area if result.id in catalogue else "runtime"
        by_area.setdefault(area, []).append(result)
    shown: set[int] = set()
    for area, results in by_area.items():
        console.print(f"{_area_mark(results)} {_shown(AREAS.get(area, area))}{_area_note(results)}")
        for result in results:
            if result.status == CheckStatus.PASS and verbose:
                # a qualified pass (checks.base.PassedWithin) says how far it looked; else the rule's sentence
                verified = result.reason or (catalogue[result.id].verified if result.id in catalogue else "")
                console.print(f"    [green]✓[/] {_shown(result.id)}" + (f": {_shown(verified)}" if verified else ""))
            elif result.status == CheckStatus.SKIP and verbose:
                console.print(f"    [dim]- {_shown(result.id)}: skipped, {_shown(result.reason)}[/]", highlight=False)
            elif result.status == CheckStatus.ERROR:
                console.print(f"    [yellow]![/] {_shown(result.id)}: [yellow]check crashed[/] — {_shown(result.reason)}", highlight=False)
            print_findings(console, result.findings, verbose, not_loaded, plannable)
            shown.update(id(f) for f in result.findings)
    rest = [f for f in findings if id(f) not in shown]
    if rest:
        console.print("[bold]From logs[/]")
        print_findings(console, rest, verbose, not_loaded, plannable)
    print_requirements(console, requirements)
    reasons = not_run_reasons(checks)
    for reason, count in reasons[:None if verbose else 3]:
        console.print(f"  [dim]not run: {_shown(reason)}: {count} check{'s' if count != 1 else ''}[/]")
    if not verbose and len(reasons) > 3:
        console.print(f"  [dim]not run for {len(reasons) - 3} other reason(s): -v lists each check[/]")
    unmet = [r for r in requirements or () if r["status"] != "met"]
    if unmet:
        console.print(f"[red]{len(unmet)} required feature(s) not verified[/] ({_shown(', '.join(r['feature'] for r in unmet))}): "
                      "the gate fails.")
    console.print(status_line(findings, checks, plannable))
    if not_loaded and not_loaded.get("ids"):
        console.print(f"{len(not_loaded['ids'])} of them already fixed in {_shown(not_loaded['env_file'])}: load it with "
                      f"{_shown(not_loaded['load'])}")


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
                                                      summary=list(report.summary), verbose=self.verbose,
                                                      requirements=report.extra.get("requirements", ()),
                                                      not_loaded=report.extra.get("fixed_not_loaded")), self.tty)
