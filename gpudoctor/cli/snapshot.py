"""`gpudoctor snapshot DIR`: record this machine's answers for replay anywhere."""

from __future__ import annotations

import sys


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("snapshot", help="record this machine into DIR (secrets redacted)")
    parser.add_argument("directory")
    parser.add_argument("--note", default="", help="a note stored with the snapshot")
    parser.add_argument("--require", action="append", default=[], metavar="FEATURE", help="as for check")
    parser.set_defaults(run=run)


def run(args) -> int:
    from ..engine import diagnose
    from ..host import LiveHost, RecordingHost
    from .check import parse_requirements

    host = RecordingHost(LiveHost())
    report = diagnose(host, requirements=parse_requirements(args.require))
    try:
        path = host.write(args.directory, note=args.note)
    except OSError as exc:
        sys.stderr.write(f"gpudoctor: error: cannot write snapshot to {args.directory}: {exc.strerror or exc}\n")
        return 2
    print(f"wrote {path} ({len(report.checks)} checks replayable; secrets redacted)")
    return 0
