"""`gpudoctor explain FILE...`: diagnose a failed run from its log, most likely cause first.

Exit status (the README's contract): 1 when a known failure was recognised, 0 when none was, 2 with a
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
    parser.add_argument("--json", action="store_true", help="machine-readable output (JSON, schema 1)")
    parser.add_argument("-v", "--verbose", action="store_true", help="show the evidence (matched line, values)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--no-probe",
        action="store_true",
        help="do not look at this machine for the fix (use when the log comes from another machine)",
    )
    where.add_argument("--snapshot", metavar="DIR",
                       help="name the fix for a recorded machine (`gpudoctor snapshot DIR` on the machine the log came from)")
    where.add_argument("--python", metavar="PATH",
                       help="name the fix for this interpreter's environment (the one the failed run used); default: as "
                       "for check")
    # one grammar with check and fix: `--only a b`, `--only a,b`, repeated; ids validated (exit 2)
    parser.add_argument("--only", nargs="+", action="extend", default=[], metavar="ID",
                        help="report only these rule ids")
    parser.add_argument("--skip", nargs="+", action="extend", default=[], metavar="ID", help="do not report these rule ids")
    parser.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)
    parser.set_defaults(run=run)


def _machine(args, inspecting: list):
    """Where the fix will be applied: this machine (probed only if a failure is recognised), a
    recorded snapshot of the machine the log came from, or none (``--no-probe``). The facts come
    from the same Host and probes the static checks use, and on this machine the environment is
    the one `check` inspects (``--python``, else its own, or the interpreter with torch when its
    own has none), so both name the same `<python> -m pip`; the header line saying which goes
    into ``inspecting``. A --python that is not an interpreter is a usage error before any log
    is read."""
    if args.no_probe:
        return None
    from ..facts import Facts
    from ..host import LiveHost, SnapshotHost
    from ..remedies import machine_from_facts
    from .check import inspected_host

    host = SnapshotHost(args.snapshot) if args.snapshot else LiveHost()
    if args.python:
        inspected, header = inspected_host(host, args.python, None)
        inspecting.append(header)
        return lambda: machine_from_facts(Facts(inspected))

    def probe():
        inspected, header = inspected_host(host, None, args.snapshot)
        if header:
            inspecting.append(header)
        return machine_from_facts(Facts(inspected))
    return probe


def run(args) -> int:
    from ..logs import LogInputError, diagnose_paths

    from ..host import HostError
    from ..selection import SelectionError, selection
    from .main import UsageError

    try:  # an id only the static checks decide (`--only no-nvidia-driver`) could never be reported here
        args.only, args.skip = selection(args.only, args.skip, detector="log")
    except SelectionError as exc:
        raise UsageError(str(exc)) from None

    inspecting: list[str] = []  # "inspecting Python … at …", where the fix names another interpreter
    try:
        machine = _machine(args, inspecting)
    except HostError as exc:
        sys.stderr.write(f"gpudoctor: error: {exc}\n")
        return EXIT_UNREADABLE
    probed: list = []  # the Machine, once the diagnosis asked for it
    if machine is not None:
        machine = _remembered(machine, probed)
    try:
        findings = diagnose_paths(list(args.files), machine=machine)
    except LogInputError as exc:
        sys.stderr.write(f"gpudoctor: error: cannot read log: {exc}\n")
        return EXIT_UNREADABLE
    recognised = findings
    findings = [f for f in findings if f.id not in args.skip and (not args.only or f.id in args.only)]
    # deselected causes are named: "no known cause" over findings the user filtered out is false
    filtered_out = sorted({f.id for f in recognised} - {f.id for f in findings})

    from ..report.base import ReportView

    extra = {"filtered_out": filtered_out} if filtered_out else {}
    if findings:
        # the ids `gpudoctor fix` would plan here: what this machine's static checks found (none
        # with --no-probe); a finding outside it shows its steps by hand, never a fix that finds nothing
        extra["fixable_here"] = sorted(probed[0].static_fixes) if probed else []
    if not recognised:
        extra["unrecognised"] = _unrecognised(args.files)
    # the interpreter line only where a fix was built for it (the machine is probed only then)
    summary = tuple(inspecting) if probed and findings else ()
    view = ReportView(tuple(findings), title="gpudoctor explain", summary=summary, extra=extra)
    sys.stdout.write(_reporter(args).render(view))
    return EXIT_RECOGNISED if findings else EXIT_NONE


def _remembered(machine, probed: list):
    def probe():
        if not probed:
            probed.append(machine())
        return probed[0]
    return probe


def _unrecognised(files) -> dict:
    """An honest unknown: no known cause matched, so show the last exception the log has and where
    it came from (stdin was consumed by the diagnosis and is not read twice)."""
    from ..logs.last_exception import last_exception_in_paths

    readable = [f for f in files if f != "-"]
    last = last_exception_in_paths(readable) if readable else None
    return {"known_cause": None,
            "last_exception": None if last is None else {"type": last.type, "message": last.message,
                                                         "line_number": last.line_number, "where": last.where,
                                                         "text": last.describe()},
            "next": "gpudoctor report  (a Markdown block for a bug report)"}


def _reporter(args):
    if args.json:
        from ..report.json import JsonReporter

        return JsonReporter()
    from ..report.explain import ExplainReporter

    return ExplainReporter(args.files, verbose=args.verbose, tty=sys.stdout.isatty())
