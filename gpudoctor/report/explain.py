"""``gpudoctor explain``'s terminal report: the most likely cause first, then its consequences,
then where it was seen. Findings that --only/--skip left out are named, never reported as "no
known cause" (issue 13 item e); an honest unknown shows the log's last exception instead."""

from __future__ import annotations

from rich.console import Console

from .terminal import _shown, print_findings, rendered


class ExplainReporter:
    """``render(view) -> str``. ``view.extra``: ``filtered_out`` (ids recognised but deselected),
    ``unrecognised`` (no known cause: the last exception of the log), ``fixable_here`` (the ids
    `gpudoctor fix` would plan on this machine; the others show their steps by hand)."""

    def __init__(self, files, verbose: bool = False, tty: bool = False) -> None:
        self.files, self.verbose, self.tty = list(files), verbose, tty

    def render(self, report) -> str:
        fixable = report.extra.get("fixable_here")
        return rendered(self._write(report.findings, report.extra.get("unrecognised"),
                                    report.extra.get("filtered_out", ()),
                                    None if fixable is None else set(fixable), report.summary), self.tty)

    def _write(self, findings, unrecognised=None, filtered_out=(), plannable=None, summary=()):
        def write(console: Console) -> None:
            names = ", ".join("<stdin>" if f == "-" else f for f in self.files)
            console.print(f"[bold]gpudoctor explain[/] {_shown(names)}")
            for line in summary:  # which interpreter the fixes name, as check says it
                console.print(f"[dim]{_shown(line)}[/]")
            if not findings:
                if filtered_out:
                    _say_filtered(console, filtered_out)
                    return
                console.print("No known cause recognised in this log (this is not a sign that all is well).")
                last = (unrecognised or {}).get("last_exception")
                if last:
                    console.print(f"  last exception (line {last['line_number']}): {_shown(last['text'])}")
                console.print("  For a bug report: `gpudoctor report` prints the environment as Markdown.")
                return
            causes = [f for f in findings if not f.evidence.get("consequence")]
            consequences = [f for f in findings if f.evidence.get("consequence")]
            console.print("[bold]Most likely cause first[/]")
            print_findings(console, causes, self.verbose, plannable=plannable)
            if consequences:
                console.print("[bold]Consequences of the above[/] [dim](same failure, reported later in the log)[/]")
                print_findings(console, consequences, self.verbose, plannable=plannable)
            for f in findings[:1]:
                where = f.evidence.get("log"), f.evidence.get("line_number")
                console.print(f"[dim]first seen: {_shown(str(where[0]))}:{where[1]}[/]")
            if filtered_out:
                _say_filtered(console, filtered_out)
        return write


def _say_filtered(console: Console, ids) -> None:
    count = len(ids)
    console.print(f"{count} finding{'s' if count != 1 else ''} filtered out by --only/--skip: {_shown(', '.join(ids))}"
                  " (recognised in the log, not shown; run without them to see)")
