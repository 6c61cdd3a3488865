"""`gpudoctor snapshot DIR`: record this machine's answers for replay anywhere."""

from __future__ import annotations

import sys


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("snapshot", help="record this machine into DIR (secrets redacted)")
    parser.add_argument("directory")
    parser.add_argument("--note", default="", help="a note stored with the snapshot")
    parser.add_argument("--require", action="append", default=[], metavar="FEATURE", help="as for check")
    parser.add_argument("--python", metavar="PATH",
                        help="record this interpreter's packages (the one you train with); default: the one check "
                        "inspects")
    parser.set_defaults(run=run)


def run(args) -> int:
    from ..engine import diagnose
    from ..host import LiveHost, RecordingHost
    from .check import inspected_host, parse_requirements

    problem = _output_problem(args.directory)
    if problem:
        sys.stderr.write(f"gpudoctor: error: refusing to write the snapshot: {problem}\n")
        return 2
    # the environment check inspects (--python, else its own or the one with torch), so a snapshot
    # replays what check saw here and its fixes name the same interpreter
    inspected, inspecting = inspected_host(LiveHost(), args.python, None)
    if inspecting:
        print(inspecting)
    host = RecordingHost(inspected)
    report = diagnose(host, requirements=parse_requirements(args.require))
    try:
        path = host.write(args.directory, note=args.note)
    except OSError as exc:
        sys.stderr.write(f"gpudoctor: error: cannot write snapshot to {args.directory}: {exc.strerror or exc}\n")
        return 2
    print(f"wrote {path} ({len(report.checks)} checks replayable; secrets redacted)")
    return 0


def _output_problem(directory: str) -> str | None:
    """A planted symlink (the directory or its snapshot.json) would be followed by the write,
    and a directory others can write lets them swap the file (issue 14 item 12)."""
    import os

    from ..host.snapshot import SNAPSHOT_FILE
    from ..paths import private_dir_problem

    if os.path.islink(directory):
        return f"{directory} is a symlink"
    if os.path.lexists(directory):
        problem = private_dir_problem(directory)
        if problem:
            return problem
        target = os.path.join(directory, SNAPSHOT_FILE)
        if os.path.islink(target) or (os.path.lexists(target) and not os.path.isfile(target)):
            return f"{target} is a symlink or not a regular file"
    return None
