"""`gpudoctor diff SNAP_A SNAP_B`: two recorded machines compared the way ranks are (a node that
works against one that does not). Exit 0 when they agree, 1 when they differ, 2 on bad input."""

from __future__ import annotations

import os
import sys


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("diff", help="compare two recorded snapshots (exit 0 same, 1 different)")
    parser.add_argument("snapshot_a", metavar="SNAP_A", help="a directory written by `gpudoctor snapshot`")
    parser.add_argument("snapshot_b", metavar="SNAP_B")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON (schema 1)")
    parser.add_argument("-v", "--verbose", action="store_true", help="also list what is the same")
    parser.set_defaults(run=run)


def _member(path: str, label: str):
    from ..distributed.compare import Member
    from ..distributed.rankfacts import comparable_facts
    from ..engine import diagnose
    from ..host import SnapshotHost

    host = SnapshotHost(path)
    report = diagnose(host)
    return Member(label, label, comparable_facts(report.facts), tuple(report.findings), tuple(report.checks))


def run(args) -> int:
    from ..distributed.compare import compare
    from ..host import HostError

    labels = (args.snapshot_a, args.snapshot_b)
    if os.path.realpath(labels[0]) == os.path.realpath(labels[1]):
        sys.stderr.write("gpudoctor: error: diff needs two different snapshots\n")
        return 2
    try:
        members = [_member(path, label) for path, label in zip(labels, ("A", "B"))]
    except HostError as exc:
        sys.stderr.write(f"gpudoctor: error: {exc}\n")
        return 2
    comparison = compare(members, subject="snapshots")
    differs = bool(comparison.differences) or any("ranks" in f.evidence for f in comparison.findings)
    if args.json:
        import json

        from ..distributed.render import comparison_json
        from ..report.json import report_dict

        body = report_dict(comparison.findings, comparison.checks,
                           diff={"a": labels[0], "b": labels[1], "same": not differs, **comparison_json(comparison)})
        print(json.dumps(body, indent=2, default=str))
    else:
        from rich.console import Console

        from ..distributed.render import print_diff

        print_diff(Console(), comparison, labels, verbose=args.verbose)
    return 1 if differs else 0
