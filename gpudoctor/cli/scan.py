"""`gpudoctor scan [PATH…]`: read the training project before it runs; and the `--code` part of
`gpudoctor fix` (the edits a scan found, as a diff, applied, recorded for --undo).

Exit status (scan): 0 nothing at or above --fail-on, 1 findings at or above it, 2 usage error.
Exit status (fix --code): 0 every edit made (or none needed), 1 refused / not confirmed."""

from __future__ import annotations

import argparse
import os
import sys

from ..model import CheckStatus, Severity

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "scan", help="read the training code and configs for failures before the run (nothing is imported or run)",
        description="Read Python files (with ast, never imported) and YAML/JSON/TOML configs, judge their keyword "
        "arguments and keys against the installed transformers/TRL/PEFT/axolotl versions, and what they ask of "
        "the GPU (the model's head_dim with FlashAttention, bf16, 4-bit loading) against this machine.")
    parser.add_argument("paths", nargs="*", metavar="PATH", help="files or directories (default: the current directory)")
    parser.add_argument("--json", action="store_true", help="print the schema-1 JSON report on stdout")
    parser.add_argument("-v", "--verbose", action="store_true", help="also list the judgements that passed")
    parser.add_argument("--fail-on", choices=[s.value for s in Severity], default="error",
                        help="exit 1 when a finding is at least this severe (default: error)")
    parser.add_argument("--python", metavar="PATH",
                        help="judge against this interpreter's packages (the one you train with); default: as "
                        "`gpudoctor check` chooses")
    parser.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)
    parser.set_defaults(run=run)


def machine_facts(python: str | None = None):
    """(Facts, header line) of the machine and the interpreter `gpudoctor check` would inspect:
    the scan judges against the same packages and GPU. The probes run only when a judgement
    needs them (a script with no model to judge never touches NVML)."""
    from ..facts import Facts
    from ..host import LiveHost
    from .check import inspected_host

    host, header = inspected_host(LiveHost(), python, None)
    return Facts(host), header


def scan_for_cli(paths, python: str | None = None, facts=None):
    from ..scan import scan_paths
    from .main import UsageError

    paths = paths or ["."]
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        raise UsageError(f"no such file or directory: {', '.join(missing)}")
    header = ""
    if facts is None:
        facts, header = machine_facts(python)
    return scan_paths([os.path.abspath(p) for p in paths], facts=facts), header


def run(args) -> int:
    result, header = scan_for_cli(args.paths, args.python)
    if header:
        sys.stderr.write(f"gpudoctor: {header}\n")
    if args.json:
        from ..report.json import render_json

        sys.stdout.write(render_json(result.findings, result.checks, scan=scan_summary(result)) + "\n")
    else:
        sys.stdout.write("\n".join(scan_lines(result, verbose=args.verbose)) + "\n")
    threshold = Severity(args.fail_on).rank
    return EXIT_FINDINGS if any(f.severity.rank >= threshold for f in result.findings) else EXIT_OK


def scan_summary(result) -> dict:
    """The scan's own section of the schema-1 JSON report (an additive key)."""
    return {"python_files": result.python_files, "config_files": result.config_files,
            "not_read": [{"path": p, "reason": r} for p, r in result.not_read],
            "judged_at_newest_known": list(result.assumed)}


def scan_summary_line(section: dict) -> str:
    """`check --scan`'s line in the terminal summary: how many files, and each file not read
    (a doctor says what it did not look at, never passes over it)."""
    files = section["python_files"] + section["config_files"]
    root = section["paths"][0] if len(section.get("paths", ())) == 1 else ""
    shown = [(os.path.relpath(n["path"], root) if root and os.path.isdir(root) else n["path"], n["reason"])
             for n in section["not_read"]]
    read = ("; not read: " + ", ".join(f"{path} ({reason})" for path, reason in shown)) if shown else "; every file read"
    return f"scanned {files} file{'' if files == 1 else 's'}{read}"


def scan_lines(result, verbose: bool = False) -> list[str]:
    lines = []
    for finding in result.findings:
        lines.append(f"[{finding.severity.value}] {finding.id}: {finding.message}")
        for fix in finding.fixes:
            lines.append(f"    fix: {fix.summary}")
    for check in result.checks:
        if check.status in (CheckStatus.SKIP, CheckStatus.ERROR):
            lines.append(f"not judged: {check.id}: {check.reason}")
        elif verbose and check.status is CheckStatus.PASS:
            lines.append(f"ok: {check.id}: {check.reason}")
    for path, reason in result.not_read:
        lines.append(f"not read: {path}: {reason}")
    summary = (f"Scanned {result.python_files} Python file(s) and {result.config_files} config file(s): "
               f"{len(result.findings)} finding(s).")
    passed = sum(1 for c in result.checks if c.status is CheckStatus.PASS)
    if passed and not verbose:
        summary += f" {passed} judgement(s) against this machine passed (-v lists them)."
    if result.assumed:
        summary += f" Not installed, judged at the newest version gpudoctor knows: {', '.join(result.assumed)}."
    lines.append(summary)
    return lines


# -- gpudoctor fix --code -------------------------------------------------------------------


def run_fix_code(args) -> int:
    """`gpudoctor fix --code [PATH…]`: scan, show every edit as a unified diff, and (unless
    --dry-run) apply them after a yes, recorded in the manifest for `gpudoctor fix --undo`.
    --only/--skip select the findings whose edits are made (validated by cli/fix.py)."""
    from ..fix.apply import apply_plan
    from ..fix.plan import Plan, Step
    from ..paths import GpudoctorDirs
    from ..scan import code_fix_plan

    result, header = scan_for_cli(args.code)
    if header:
        sys.stderr.write(f"gpudoctor: {header}\n")
    skip = set(args.skip or ())
    findings = [f for f in result.findings if (not args.only or f.id in args.only) and f.id not in skip]
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
        return _code_json(findings, edits, {}, "nothing to do") if args.json else (EXIT_FINDINGS if refused else EXIT_OK)
    if args.dry_run:
        out.write(f"gpudoctor: dry run: {len(actions)} file(s) would change; nothing was written.\n")
        return _code_json(findings, edits, {}, "dry run") if args.json else EXIT_OK
    if not args.yes and not _confirm(f"Edit these {len(actions)} file(s)? [y/N] "):
        sys.stderr.write("gpudoctor: not confirmed; no file was changed.\n")
        return _code_json(findings, edits, {}, "not confirmed", EXIT_FINDINGS) if args.json else EXIT_FINDINGS
    plan = Plan("user", tuple(Step(e.action, tuple(sorted({str(d.get('op')) for d in e.done}))) for e in actions), (), ())
    applied = apply_plan(plan, GpudoctorDirs.from_env())
    for outcome in applied.outcomes:
        out.write(f"  {outcome.status:>12}  edit {outcome.step.action.path}"
                  + (f": {outcome.message}" if outcome.message else "") + "\n")
    if applied.changed:
        out.write(f"Recorded in {applied.manifest_path}; revert with: gpudoctor fix --undo\n")
    ok = all(o.ok for o in applied.outcomes) and not refused
    if args.json:
        return _code_json(findings, edits, {o.step.action.path: o.status for o in applied.outcomes}, "not applied",
                          EXIT_OK if ok else EXIT_FINDINGS, applied.manifest_path if applied.changed else None)
    return EXIT_OK if ok else EXIT_FINDINGS


def _code_json(findings, edits, status: dict, default_status: str, code: int | None = None,
               manifest: str | None = None) -> int:
    """The schema-1 envelope (report.json) with the findings worked on and, under "code", each
    file's diff, what became of it and the edits refused with their reason."""
    from ..report.json import render_json

    files = [{"path": e.path, "diff": e.diff, "status": status.get(e.path, default_status if e.action else "no edit"),
              "refused": [{"line": c["line"], "kwarg": c["old"], "reason": why} for c, why in e.refused]}
             for e in edits]
    extra = {"code": files}
    if manifest:
        extra["manifest"] = manifest
    sys.stdout.write(render_json(findings, (), **extra) + "\n")
    if code is not None:
        return code
    ok = not any(e.refused for e in edits)
    return EXIT_OK if ok else EXIT_FINDINGS


def _confirm(question: str) -> bool:
    if not sys.stdin or not sys.stdin.isatty():
        sys.stderr.write("gpudoctor: stdin is not a terminal, cannot ask; pass --yes to edit the files.\n")
        return False
    try:
        return input(question).strip().lower() in ("y", "yes")
    except EOFError:
        return False


# -- gpudoctor check --scan PATH ------------------------------------------------------------


def with_scan(report, paths, facts, only=(), skip=()):
    """`check --scan PATH`: the scan's findings and judgements merged into check's report, judged
    against the same Facts (one probe of each fact for both), selected by the same --only/--skip.
    Returns (report, the scan's JSON section)."""
    from ..engine import Report
    from ..model import sort_findings

    result, _ = scan_for_cli(paths, facts=facts)
    wanted = (lambda rule: rule not in set(skip) and (not only or rule in set(only)))
    findings = [f for f in result.findings if wanted(f.id)]
    checks = [c for c in result.checks if wanted(c.id)]
    merged = Report(tuple(sort_findings(list(report.findings) + findings)), tuple(report.checks) + tuple(checks),
                    report.facts)
    return merged, {**scan_summary(result), "paths": [os.path.abspath(p) for p in paths]}
