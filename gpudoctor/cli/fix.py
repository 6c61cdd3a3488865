"""`gpudoctor fix`: review (--dry-run), apply user-local fixes without root, system fixes with
--system after confirmation, verify each fix, and undo exactly what was done (--undo).

Exit status: 0 when every finding that was worked on is verified fixed (or there was nothing
to do); 1 when something was refused, not confirmed, or is NOT fixed; 2 for usage errors."""

from __future__ import annotations

import argparse
import os
import sys

from ..paths import GpudoctorDirs

EXIT_OK, EXIT_NOT_FIXED = 0, 1


def run_diagnosis(env, only):
    """(env, only ids) -> engine Report. A module attribute so tests can swap the machine."""
    from ..fix.verify import live_diagnose

    return live_diagnose(env, only)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "fix",
        help="apply user-local fixes (no root); --dry-run to review, --system for root fixes, --undo to revert",
        description="Fix what gpudoctor check finds. By default only user-local changes (no root): a private "
        "stub library dir, an env file, a writable cache dir. Every change is recorded for --undo.",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the plan as a bash script; change nothing")
    parser.add_argument("--script", metavar="FILE", help="write the plan's bash script to FILE; change nothing else")
    parser.add_argument("--system", action="store_true", help="the root fixes instead (shown and confirmed first)")
    parser.add_argument("--sudo", action="store_true", help="with --system/--undo: allowed to use sudo when not root")
    parser.add_argument("-y", "--yes", action="store_true", help="do not ask before running root fixes")
    parser.add_argument("--undo", action="store_true", help="reverse every change recorded in the manifest")
    parser.add_argument("--profile", nargs="?", const="", metavar="FILE",
                        help="also load the env file from your shell profile (default: ~/.bashrc or ~/.zshrc by $SHELL), "
                        "so new shells get the fixes; undone by --undo")
    # one grammar with check and explain: `--only a b`, `--only a,b`, repeated; ids validated (exit 2)
    parser.add_argument("--only", nargs="+", action="extend", default=[], metavar="ID", help="only these rule ids")
    parser.add_argument("--skip", nargs="+", action="extend", default=[], metavar="ID", help="leave these rule ids alone")
    parser.add_argument("--code", nargs="*", metavar="PATH", default=None,
                        help="edit the training code instead: what `gpudoctor scan PATH…` found (default: the current "
                        "directory), shown as a diff, asked first (--yes skips), undone by --undo")
    parser.add_argument("--python", metavar="PATH",
                        help="fix for this interpreter's environment (the one you train with), as `check --python` "
                        "inspects it; default: as check chooses")
    parser.add_argument("--json", action="store_true", help="print a JSON result on stdout")
    parser.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)
    parser.set_defaults(run=run)


def _validate_selection(args) -> None:
    from ..selection import SelectionError, selection
    from .main import UsageError

    try:  # `fix --only bogus` used to exit 0 having fixed nothing (issue 13 item 7)
        args.only, args.skip = selection(args.only, args.skip, detector="scan" if args.code is not None else "static")
    except SelectionError as exc:
        raise UsageError(str(exc)) from None
    # `fix --code` selects its edits with both --only and --skip (cli/scan.run_fix_code)


def _diagnosis(args):
    """The (env, only) -> Report that plans and verifies: ``run_diagnosis`` over gpudoctor's
    own packages, or, when check would inspect another interpreter (``--python``, or the
    training env that has torch when gpudoctor's own has none), over that one's, so that a
    `gpudoctor fix` sent from `check` sees the same findings (issue 13 item b)."""
    from ..host import LiveHost
    from .check import inspected_host

    host, header = inspected_host(LiveHost(), args.python, None)
    interpreter = getattr(host, "interpreter", None)
    args.inspected_python = None
    if interpreter is None:
        return run_diagnosis
    sys.stderr.write(f"gpudoctor: {header}\n")
    args.inspected_python = {"executable": interpreter.executable, "version": interpreter.version,
                             "chosen_because": interpreter.chosen_because or "--python"}

    def diagnose(env, only):
        from ..fix.verify import live_diagnose

        return live_diagnose(env, only, interpreter=interpreter)

    return diagnose


def run(args) -> int:
    _validate_selection(args)
    dirs = GpudoctorDirs.from_env()
    if args.python and (args.undo or args.code is not None):
        from .main import UsageError

        raise UsageError("--python goes with planning fixes; --undo reverses the manifest and --code edits code, "
                         "neither reads an interpreter")
    if args.undo:
        return _undo(args, dirs)
    if args.code is not None:
        from .scan import run_fix_code

        return run_fix_code(args)

    from ..fix.plan import build_plan, with_profile_line
    from ..fix.script import render_script

    if args.profile is not None and args.system:
        from .main import UsageError

        raise UsageError("--profile goes with the user-local fixes, not --system")
    profile = _profile_path(args.profile) if args.profile is not None else None
    diagnose = _diagnosis(args)
    report = diagnose(dict(os.environ), args.only)
    if args.skip:
        report = report._replace(findings=tuple(f for f in report.findings if f.id not in args.skip))
    plan = build_plan(report.findings, "system" if args.system else "user")
    if profile:
        plan = with_profile_line(plan, profile, dirs.env_file)
    script = render_script(plan, dirs)

    if args.dry_run or args.script:
        if args.script:
            _write_script(args.script, script)
            _say(args, f"gpudoctor: wrote the {plan.scope} fix plan to {args.script} ({len(plan.steps)} steps)")
        if args.json:
            _emit_json(args, report, scope=plan.scope, script=script, steps=_steps_json(plan))
        elif args.dry_run:
            sys.stdout.write(script)
        return EXIT_OK
    from ..fix.manifest import ManifestError
    from ..paths import UnsafeDirectory

    try:
        if plan.scope == "user":
            return _apply_user(args, dirs, plan, report, diagnose)
        return _apply_system(args, dirs, plan, script, report, diagnose)
    except (ManifestError, UnsafeDirectory) as exc:  # refused before any change
        sys.stderr.write(f"gpudoctor: error: {exc}\n")
        return 2


# -- user-local ---------------------------------------------------------------------------


def _apply_user(args, dirs, plan, report, diagnose) -> int:
    from ..fix.session import fix_user

    result = fix_user(plan, dirs, os.environ, diagnose)
    if result.applied is None:
        _say(args, "gpudoctor: nothing to fix without root.")
        _list_without_fix(args, plan)
        if args.json:
            _emit_json(args, report, scope="user", applied=[], verification=[], without_fix=[f.id for f in plan.without_fix])
        return EXIT_OK if result.ok else EXIT_NOT_FIXED

    for outcome in result.applied.outcomes:
        line = f"  {outcome.status:>12}  {_describe(outcome.step.action)}"
        _say(args, line + (f"\n{'':16}{outcome.message}" if outcome.message else ""))
    for note in plan.notes:
        _say(args, f"  note: {note}")
    _say(args, "Verification (checks re-run with the env file applied):")
    _say_verification(args, result.verification)
    if result.any_fixed:
        _say(args, f'Env file: {dirs.env_file}\nUse it with: eval "$(gpudoctor env)"  or  gpudoctor run -- CMD ...')
    if result.applied.changed:
        _say(args, f"Recorded in {result.applied.manifest_path}; revert with: gpudoctor fix --undo")
    _list_without_fix(args, plan)
    if args.json:
        _emit_json(
            args,
            report,
            scope="user",
            applied=[{"action": _describe(o.step.action), "findings": list(o.step.finding_ids),
                      "status": o.status, "message": o.message} for o in result.applied.outcomes],
            verification=_verification_json(result.verification),
            without_fix=[f.id for f in plan.without_fix],
            env_file=dirs.env_file,
            manifest=result.applied.manifest_path,
        )
    return EXIT_OK if result.ok else EXIT_NOT_FIXED


# -- system (root) ------------------------------------------------------------------------


def _apply_system(args, dirs, plan, script, report, diagnose) -> int:
    from ..fix.session import fix_system
    from ..fix.system import NeedsRoot, root_prefix

    if plan.empty:
        _say(args, "gpudoctor: no system fixes to run.")
        return EXIT_OK
    out = sys.stderr if args.json else sys.stdout
    out.write(script)
    out.flush()
    try:
        root_prefix(args.sudo)
    except NeedsRoot as exc:
        sys.stderr.write(
            f"gpudoctor: {exc}.\n  Save the script: gpudoctor fix --system --script FILE\n"
            "  then run it as root:  sudo bash FILE\n"
        )
        return EXIT_NOT_FIXED
    if not args.yes and not _confirm(f"Run these {len(plan.steps)} step(s) as root? [y/N] "):
        sys.stderr.write("gpudoctor: not confirmed; nothing was run.\n")
        return EXIT_NOT_FIXED
    result = fix_system(plan, dirs, script, args.sudo, os.environ, diagnose)
    if result.exit_code != 0:
        sys.stderr.write(f"gpudoctor: the root script failed (exit {result.exit_code}); see its output. "
                         + (f"Recorded the {result.recorded} package install(s) it made for --undo" if result.recorded
                            else "No package install recorded")
                         + (f"; the {result.intents} file(s)/link(s) it may have made are recorded and undone only "
                            "where they still match.\n" if result.intents else ".\n"))
        if args.json:
            _emit_json(args, report, scope="system", exit=result.exit_code, verification=[])
        return EXIT_NOT_FIXED
    for note in result.notes:
        _say(args, f"  note: {note}")
    _say(args, "Verification:")
    _say_verification(args, result.verification)
    recorded = result.recorded + result.intents
    if recorded:
        _say(args, f"Recorded {recorded} root change(s) with a known undo: gpudoctor fix --undo --sudo")
    if args.json:
        _emit_json(args, report, scope="system", exit=result.exit_code, verification=_verification_json(result.verification))
    return EXIT_OK if result.ok else EXIT_NOT_FIXED


def _confirm(question: str) -> bool:
    if not sys.stdin or not sys.stdin.isatty():
        sys.stderr.write("gpudoctor: stdin is not a terminal, cannot ask; pass --yes to run the root fixes.\n")
        return False
    try:
        return input(question).strip().lower() in ("y", "yes")
    except EOFError:
        return False


# -- undo ---------------------------------------------------------------------------------


def _undo(args, dirs) -> int:
    from ..fix.manifest import ManifestError
    from ..paths import UnsafeDirectory
    from ..fix.system import root_runner
    from ..fix.undo import KEPT, MANUAL, REFUSED, undo, undo_plan

    try:
        if args.dry_run or args.script:  # the plan only: nothing is undone (issue 14 item 14)
            outcomes = undo_plan(dirs)
            if args.script:
                _write_script(args.script, _undo_script(outcomes))
                _say(args, f"gpudoctor: wrote the undo plan to {args.script} ({len(outcomes)} steps); nothing was undone")
        else:
            outcomes = undo(dirs, root_runner(args.sudo))
    except (ManifestError, UnsafeDirectory) as exc:  # refused, not gpudoctor's failure (found in review)
        sys.stderr.write(f"gpudoctor: error: {exc}\n")
        return 2
    if not outcomes:
        _say(args, f"gpudoctor: nothing to undo (no manifest at {dirs.manifest_file}).")
    if not args.script:
        for outcome in outcomes:
            _say(args, f"  {outcome.status:>14}  {outcome.message}")
    if args.json:
        _emit_json(args, None, undo=[{"op": o.change.get("op"), "status": o.status, "message": o.message} for o in outcomes],
                   dry_run=bool(args.dry_run or args.script))
    return EXIT_NOT_FIXED if any(o.status in (KEPT, MANUAL, REFUSED) for o in outcomes) else EXIT_OK


def _undo_script(outcomes) -> str:
    """``fix --undo --script F``: the plan as comments; running F runs the checked undo itself,
    since each step depends on what is still on disk then (hash, link target, marker line)."""
    from ..fix.shellquote import comment

    lines = ["#!/usr/bin/env bash", "# gpudoctor fix --undo plan; each step acts only if the thing still matches",
             "set -euo pipefail"]
    lines += [comment(f"{o.status}: {o.message}") for o in outcomes]
    lines.append('exec gpudoctor fix --undo "$@"')
    return "\n".join(lines) + "\n"


# -- helpers ------------------------------------------------------------------------------


def _profile_path(given: str) -> str:
    """The shell profile for --profile: FILE as given, else by $SHELL. The env file is bash/zsh
    syntax, so other shells get a usage error that says what to do instead."""
    from .. import xdg
    from .main import UsageError

    if given:
        return os.path.abspath(os.path.expanduser(given))
    shell = os.path.basename(os.environ.get("SHELL", ""))
    home = xdg.home(os.environ)  # a relative HOME (HOME=.) must not pick ./.bashrc
    if shell == "bash":
        return os.path.join(home, ".bashrc")
    if shell == "zsh":
        return os.path.join(os.environ.get("ZDOTDIR") or home, ".zshrc")
    if shell == "fish":
        raise UsageError("--profile writes bash/zsh syntax; in fish add `gpudoctor env --shell fish | source` "
                         "to ~/.config/fish/config.fish")
    raise UsageError(f"--profile: no known profile for SHELL={shell or '(unset)'}; name the file: --profile FILE")


def _describe(action) -> str:
    from ..fix.actions import describe

    return describe(action)


def _steps_json(plan) -> list[dict]:
    return [{"action": type(s.action).__name__, "description": _describe(s.action), "findings": list(s.finding_ids)}
            for s in plan.steps]


def _say_verification(args, checks) -> None:
    for item in checks:
        _say(args, f"  {item.finding_id}: {item.status}" + (f" — {item.detail}" if item.detail else ""))


def _verification_json(checks) -> list[dict]:
    return [{"id": v.finding_id, "status": v.status, "detail": v.detail} for v in checks]


def _list_without_fix(args, plan) -> None:
    if plan.without_fix:
        _say(args, f"Not fixable {'without root' if plan.scope == 'user' else 'here'} (see `gpudoctor check`):")
        for finding in plan.without_fix:
            kinds = ", ".join(sorted({f.kind for f in finding.fixes})) or "no automatic fix"
            _say(args, f"  [{finding.severity.value}] {finding.id}: {finding.title} ({kinds})")


def _write_script(path: str, script: str) -> None:
    """A new file (0700, the user's) renamed over ``path``: a planted symlink is replaced, not
    followed, and another user's file is not truncated in place keeping its owner and mode."""
    from ..paths import write_private_file

    write_private_file(path, script.encode("utf-8"), 0o700)


def _say(args, text: str) -> None:
    """Human output: stdout normally, stderr under --json so stdout stays one JSON object."""
    print(text, file=sys.stderr if args.json else sys.stdout)


def _emit_json(args, report, **fix) -> None:
    """The one JSON envelope (``report.json.JsonReporter``: schema, tool, findings, checks) with
    the fix's keys added; ``report`` is the diagnosis the plan was built from (None for --undo),
    and ``inspected_python`` names the interpreter it was made for when not gpudoctor's own."""
    from ..report.base import ReportView
    from ..report.json import JsonReporter

    if getattr(args, "inspected_python", None):
        fix["inspected_python"] = args.inspected_python

    view = ReportView(tuple(report.findings) if report is not None else (),
                      tuple(report.checks) if report is not None else (), extra=fix)
    sys.stdout.write(JsonReporter().render(view))
