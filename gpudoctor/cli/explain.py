"""`gpudoctor explain FILE...`: diagnose a failed run from its log, most likely cause first.

Exit status (DESIGN.md): 1 when a known failure was recognised, 0 when none was, 2 with a
one-line error when an input cannot be read.
"""

from __future__ import annotations

import argparse
import sys

EXIT_NONE, EXIT_RECOGNISED, EXIT_UNREADABLE = 0, 1, 2


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "explain",
        help="diagnose a failure from its log (files, '-' for stdin, .gz)",
        description="Recognise known GPU fine-tuning failures in logs and print the cause and the fix.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="log file(s); '-' reads stdin; .gz is read transparently")
    parser.add_argument("--json", action="store_true", help="machine-readable output (DESIGN.md schema)")
    parser.add_argument("-v", "--verbose", action="store_true", help="show the evidence (matched line, values)")
    parser.add_argument(
        "--no-probe",
        action="store_true",
        help="do not look at this machine for the fix (use when the log comes from another machine)",
    )
    parser.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)
    parser.set_defaults(run=run)


def _host(no_probe: bool):
    """This machine, for fixes that name real paths; None when asked not to look."""
    if no_probe:
        return None
    from ..logs.enrich import LOCAL

    try:
        from ..host.live import LiveHost

        return LiveHost()
    except Exception:  # the lead's probes are optional: gpudoctor.logs' own glob/which lookups
        return LOCAL


def run(args) -> int:
    from ..logs import LogInputError, diagnose_paths

    host = _host(args.no_probe)
    try:
        findings = diagnose_paths(list(args.files), host=host)
    except LogInputError as exc:
        sys.stderr.write(f"gpudoctor: error: cannot read log: {exc}\n")
        return EXIT_UNREADABLE

    if args.json:
        from ..report import render_json

        print(render_json(findings, []))
    else:
        _print_terminal(findings, args.files, args.verbose)
    return EXIT_RECOGNISED if findings else EXIT_NONE


def _print_terminal(findings, files, verbose: bool) -> None:
    from rich.console import Console
    from rich.markup import escape

    from ..report import print_findings

    console = Console()
    names = ", ".join("<stdin>" if f == "-" else f for f in files)
    console.print(f"[bold]gpudoctor explain[/] {escape(names)}")
    if not findings:
        console.print("[green]No known failure recognised[/] in this log.")
        return
    causes = [f for f in findings if not f.evidence.get("consequence")]
    consequences = [f for f in findings if f.evidence.get("consequence")]
    console.print("[bold]Most likely cause first[/]")
    print_findings(console, causes, verbose)
    if consequences:
        console.print("[bold]Consequences of the above[/] [dim](same failure, reported later in the log)[/]")
        print_findings(console, consequences, verbose)
    for f in findings[:1]:
        where = f.evidence.get("log"), f.evidence.get("line_number")
        console.print(f"[dim]first seen: {escape(str(where[0]))}:{where[1]}[/]", highlight=False)
