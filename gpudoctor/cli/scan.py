"""`gpudoctor scan [PATH…]`: read the training project before it runs; and the `--code` part of
`gpudoctor fix` (the edits a scan found, as a diff, applied, recorded for --undo).

Exit status (scan): 0 nothing at or above --fail-on, 1 findings at or above it, 2 usage error.
Exit status (fix --code): 0 every edit made (or none needed), 1 refused / not confirmed."""

from __future__ import annotations

import argparse
import json
import os
import sys

from ..model import Severity

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "scan", help="read the training code and configs for failures before the run (nothing is imported or run)",
        description="Read Python files (with ast, never imported) and YAML/JSON/TOML configs, and judge their "
        "keyword arguments and keys against the installed transformers/TRL/Unsloth versions.")
    parser.add_argument("paths", nargs="*", metavar="PATH", help="files or directories (default: the current directory)")
    parser.add_argument("--json", action="store_true", help="print the schema-1 JSON report on stdout")
    parser.add_argument("--fail-on", choices=[s.value for s in Severity], default="error",
                        help="exit 1 when a finding is at least this severe (default: error)")
    parser.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)
    parser.set_defaults(run=run)


def _scan(paths):
    from ..scan import scan_paths
    from .main import UsageError

    paths = paths or ["."]
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        raise UsageError(f"no such file or directory: {', '.join(missing)}")
    return scan_paths([os.path.abspath(p) for p in paths])


def run(args) -> int:
    result = _scan(args.paths)
    if args.json:
        from ..report.json import report_dict

        extra = {"scan": {"python_files": result.python_files, "config_files": result.config_files,
                          "not_read": [{"path": p, "reason": r} for p, r in result.not_read],
                          "judged_at_newest_known": list(result.assumed)}}
        json.dump(report_dict(result.findings, **extra), sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        sys.stdout.write("\n".join(scan_lines(result)) + "\n")
    threshold = Severity(args.fail_on).rank
    return EXIT_FINDINGS if any(f.severity.rank >= threshold for f in result.findings) else EXIT_OK


def scan_lines(result) -> list[str]:
    lines = []
    for finding in result.findings:
        lines.append(f"[{finding.severity.value}] {finding.id}: {finding.message}")
        for fix in finding.fixes:
            lines.append(f"    fix: {fix.summary}")
    for path, reason in result.not_read:
        lines.append(f"not read: {path}: {reason}")
    summary = (f"Scanned {result.python_files} Python file(s) and {result.config_files} config file(s): "
               f"{len(result.findings)} finding(s).")
    if result.assumed:
        summary += f" Not installed, judged at the newest version gpudoctor knows: {', '.join(result.assumed)}."
    lines.append(summary)
    return lines


# -- gpudoctor fix --code -------------------------------------------------------------------


def run_fix_code(args) -> int:
    """`gpudoctor fix --code [PATH…]`: scan, show every edit as a unified diff, and (unless
    --dry-run) apply them after a yes, recorded in the manifest for `gpudoctor fix --undo`."""
    from ..fix.apply import apply_plan
    from ..fix.plan import Plan, Step
    from ..paths import GpudoctorDirs
    from ..scan import code_fix_plan

    result = _scan(args.code)
    findings = [f for f in result.findings if not args.only or f.id in args.only]
    edits = code_fix_plan(findings)
    out = sys.stderr if args.json else sys.stdout
    for edit in edits:
        out.write(edit.diff)
        for change, why in edit.refused:
            out.write(f"gpudoctor: not edited: {edit.path}:{change['line']} `{change['old']}`: {why}\n")
    actions = [e for e in edits if e.action is not None]
    without_edit = [f for f in findings if not isinstance(f.evidence.get("edit"), dict)]
    for finding in without_edit:
        out.write(f"gpudoctor: no mechanical edit for {finding.id}: {finding.message}\n")
    refused = any(e.refused for e in edits)
    if not actions:
        out.write("gpudoctor: no code edits to make.\n")
        return _code_json(args, edits, []) if args.json else (EXIT_FINDINGS if refused else EXIT_OK)
    if args.dry_run:
        out.write(f"gpudoctor: dry run: {len(actions)} file(s) would change; nothing was written.\n")
        return _code_json(args, edits, []) if args.json else EXIT_OK
    if not args.yes and not _confirm(f"Edit these {len(actions)} file(s)? [y/N] "):
        sys.stderr.write("gpudoctor: not confirmed; no file was changed.\n")
        return EXIT_FINDINGS
    plan = Plan("user", tuple(Step(e.action, tuple(sorted({str(d.get('op')) for d in e.done}))) for e in actions), (), ())
    applied = apply_plan(plan, GpudoctorDirs.from_env())
    for outcome in applied.outcomes:
        out.write(f"  {outcome.status:>12}  edit {outcome.step.action.path}"
                  + (f": {outcome.message}" if outcome.message else "") + "\n")
    if applied.changed:
        out.write(f"Recorded in {applied.manifest_path}; revert with: gpudoctor fix --undo\n")
    if args.json:
        return _code_json(args, edits, applied.outcomes)
    return EXIT_OK if all(o.ok for o in applied.outcomes) and not refused else EXIT_FINDINGS


def _code_json(args, edits, outcomes) -> int:
    from .. import __version__

    status = {o.step.action.path: o.status for o in outcomes}
    json.dump({"schema": 1, "tool": {"name": "gpudoctor", "version": __version__}, "code": [
        {"path": e.path, "diff": e.diff, "status": status.get(e.path, "dry run" if args.dry_run else "not applied"),
         "refused": [{"line": c["line"], "kwarg": c["old"], "reason": why} for c, why in e.refused]} for e in edits]},
        sys.stdout, indent=2)
    sys.stdout.write("\n")
    ok = all(s in ("done", "already done", "dry run") for s in status.values()) and not any(e.refused for e in edits)
    return EXIT_OK if ok else EXIT_FINDINGS


def _confirm(question: str) -> bool:
    if not sys.stdin or not sys.stdin.isatty():
        sys.stderr.write("gpudoctor: stdin is not a terminal, cannot ask; pass --yes to edit the files.\n")
        return False
    try:
        return input(question).strip().lower() in ("y", "yes")
    except EOFError:
        return False
