"""`gpudoctor report`: a Markdown block to paste into a bug report (environment, versions,
findings; secrets redacted). Runs every static check (so every fact is gathered) and never
imports torch: torch's CUDA build, cuDNN and NCCL come from the installed distributions."""

from __future__ import annotations

import sys


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("report", help="print a Markdown block for a bug report (environment + findings)")
    parser.add_argument("--snapshot", metavar="DIR", help="a recorded machine instead of this one")
    parser.add_argument("--json", action="store_true", help="the check --json report with its environment object")
    parser.add_argument("--python", metavar="PATH", help="inspect this interpreter's packages (see check --python)")
    parser.add_argument("--debug", action="store_true", help="on an internal error, show the traceback")
    parser.set_defaults(run=run)


def run(args) -> int:
    from ..engine import diagnose
    from ..environment import environment
    from ..report.base import ReportView

    from .check import open_host

    host, inspecting = open_host(args)
    report = diagnose(host)
    view = ReportView(report.findings, report.checks, title="gpudoctor report",
                      summary=(inspecting,) if inspecting else (),
                      extra={"environment": environment(report.facts, host)})
    if args.json:
        from ..report.json import JsonReporter

        reporter = JsonReporter()
    else:
        from ..report.bugreport import BugReportReporter

        reporter = BugReportReporter()
    sys.stdout.write(reporter.render(view))
    return 0
