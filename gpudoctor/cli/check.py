"""`gpudoctor check`: static probes and rules (never imports torch or triton)."""

from __future__ import annotations

import sys

# Severity values (model.Severity): the model is imported after the probes have started, not
# with the parser (dataclasses, inspect and typing: ~18 ms on the 2-core box)
FAIL_ON = ("error", "warning", "info")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("check", help="diagnose this machine (default command)")
    add_arguments(parser)
    parser.set_defaults(run=run)


def add_arguments(parser) -> None:
    parser.add_argument("--json", action="store_true", help="print the JSON report (schema 1) on stdout")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown report")
    parser.add_argument("-v", "--verbose", action="store_true", help="show passed and skipped checks and evidence")
    # one grammar with fix and explain: `--only a b`, `--only a,b` and repeated --only all work
    parser.add_argument("--only", nargs="+", action="extend", default=[], metavar="ID", help="run only these rule ids")
    parser.add_argument("--skip", nargs="+", action="extend", default=[], metavar="ID", help="skip these rule ids")
    parser.add_argument("--fail-on", choices=tuple(FAIL_ON), default="error",
                        help="exit 1 when a finding is at least this severe (default: error)")
    parser.add_argument("--exit-zero", action="store_true", help="always exit 0 unless gpudoctor itself fails")
    parser.add_argument("--snapshot", metavar="DIR", help="replay a recorded snapshot instead of this machine")
    parser.add_argument("--log", action="append", default=[], metavar="FILE", help="also diagnose a failure log")
    parser.add_argument("--scan", action="append", default=[], metavar="PATH",
                        help="also scan the training code and configs at PATH (as `gpudoctor scan`), judged against "
                        "this machine; repeatable")
    parser.add_argument("--require", action="append", default=[], metavar="FEATURE",
                        help="a feature the training needs: bf16, flash-attn, head_dim=N (repeatable)")
    parser.add_argument("--python", metavar="PATH",
                        help="inspect this interpreter's packages (the one you train with); default: this one, or "
                        "the conda env / $VIRTUAL_ENV / python3 on PATH that has torch when this one has none")
    parser.add_argument("--debug", action="store_true", help="on an internal error, show the traceback")
    # The training pass (issue 6). Its code imports torch, so it is imported only when --train is given.
    parser.add_argument("--train", action="store_true",
                        help="also run a small QLoRA training pass on the real kernels, in a child process")
    parser.add_argument("--preset", choices=("phi2", "llama", "turing", "tiny"), default=None,
                        help="model shapes for --train (default: phi2 on a GPU, tiny in interpreter mode)")
    parser.add_argument("--compile", action="store_true", help="--train: also run the step under torch.compile")
    parser.add_argument("--peft", action="store_true", help="--train: also build the adapters with PEFT's LoraConfig")
    parser.add_argument("--full-matrix", action="store_true",
                        help="--train: run every NF4 and attention backend against the reference (slower; the "
                             "default runs gpudoctor's kernels beside one torch backend each)")
    parser.add_argument("--train-timeout", type=float, default=300.0, metavar="SECONDS",
                        help="--train: kill the child after this long and diagnose the hang (default: 300)")
    from .distributed import add_arguments as add_distributed_arguments  # --distributed, --nproc (issue 16)

    add_distributed_arguments(parser)


def parse_requirements(items: list[str]) -> dict:
    """--require items -> requirements (gpudoctor.requirements); a bad one is a usage error."""
    from ..requirements import RequirementError, parse_requirements as parse
    from .main import UsageError

    try:
        return parse(items)
    except RequirementError as exc:
        raise UsageError(str(exc)) from None


def run(args) -> int:
    from . import distributed

    if distributed.wanted(args):  # every rank of a launch, or --nproc N (torch only on that path)
        return distributed.run(args)
    from ..selection import SelectionError, rule_ids
    from .main import UsageError

    try:
        # without --log, an id only logs report (cuda-oom) would run no check and pass silently
        args.only = rule_ids(args.only, detector=None if args.log or getattr(args, "scan", None) else "static",
                             option="--only")
        args.skip = rule_ids(args.skip, option="--skip")
    except SelectionError as exc:
        raise UsageError(str(exc)) from None
    # NVML early only where every check runs (with --only/--skip the driver may not be asked at all)
    host, inspecting = open_host(args, searched=True, early_nvml=not (args.only or args.skip))
    try:
        return _checked(args, host, inspecting)
    finally:  # a live host's NVML child that no check collected (--only, a failure) is stopped, not left
        discard = getattr(host, "discard_nvml", None)
        if discard is not None:
            discard()


def _checked(args, host, inspecting: str) -> int:
    from ..facts import Facts

    requirements = parse_requirements(args.require)
    facts = Facts(host, requirements)
    if not (args.only or args.skip or args.snapshot):
        # As preflight does: the probes' subprocesses and NVML start now, before the checks and
        # the reporter (rich, for the terminal) are imported, so those imports run while the
        # probes wait instead of before them.
        facts.prefetch_in_background(facts.names)
    from ..engine import diagnose

    reporter = _reporter(args)
    log_findings: list = []
    if args.log:
        try:
            from ..logs import diagnose_paths
            from ..remedies import machine_from_facts
        except ImportError:
            sys.stderr.write("gpudoctor: error: log diagnosis is not available in this build\n")
            return 2
        try:
            # The machine comes from the same Facts the checks use below: each fact probed once.
            log_findings = diagnose_paths(args.log, machine=lambda: machine_from_facts(facts))
        except OSError as exc:
            sys.stderr.write(f"gpudoctor: error: cannot read log: {exc.strerror or exc}\n")
            return 2
        # --only/--skip select log findings too
        log_findings = [f for f in log_findings
                        if f.id not in args.skip and (not args.only or f.id in args.only)]
    # The training pass starts first: its child imports torch while the static checks run.
    pending = None
    if getattr(args, "train", False):
        from ..train.runner import start_training_pass  # torch-free; the child imports torch

        pending = start_training_pass(preset=args.preset, compile=args.compile, peft=args.peft,
                                      full_matrix=args.full_matrix or None,
                                      timeout_s=args.train_timeout)
    try:
        report = diagnose(host, only=args.only, skip=args.skip, requirements=requirements,
                          extra_findings=log_findings, facts=facts)
    except BaseException:
        if pending is not None:
            pending.cancel()  # the child runs in its own session: it would outlive us
        raise
    show_progress = not (args.json or args.markdown) and sys.stderr.isatty()
    train_pass = None
    if pending is not None:  # the remedies are imported only where a machine is described
        from ..remedies import machine_from_facts

        train_pass = pending.finish(show_progress=show_progress,
                                    machine=machine_from_facts(facts, [f for c in report.checks for f in c.findings]))
    if train_pass is not None:
        from ..engine import Report
        from ..model import sort_findings

        # A cause the static checks already reported (e.g. c-compiler-missing) is not repeated;
        # the pass's own rules (no static check decides them) never collide with a static id.
        static_ids = {f.id for f in report.findings}
        extra = [f for f in train_pass.findings if f.id not in static_ids]
        report = Report(tuple(sort_findings(list(report.findings) + extra)),
                        tuple(report.checks) + tuple(train_pass.checks), report.facts)
    scan_section = None
    if getattr(args, "scan", None):  # the training code, judged against the same Facts (issue 17)
        from .scan import scan_summary_line, with_scan

        report, scan_section = with_scan(report, args.scan, facts, args.only, args.skip)
    from ..report.base import ReportView
    from ..report.summary import machine_summary

    summary = machine_summary(report.facts)  # from the facts the checks gathered: never probes
    if args.snapshot:
        summary.insert(0, f"replaying snapshot {args.snapshot}")
    if not inspecting:
        inspecting = _searched_header(host)
    if inspecting:
        summary.insert(0, inspecting)
    if scan_section is not None:
        summary.append(scan_summary_line(scan_section))
    from ..requirement_verdicts import verify_requirements

    # each --require feature: met, NOT met, or cannot verify here (a gate never assumes)
    verdicts = verify_requirements(requirements, report.checks, report.facts)
    extra = {"train": train_pass.data} if train_pass is not None else {}
    if scan_section is not None:
        extra["scan"] = scan_section
    if verdicts:
        extra["requirements"] = [v.to_json() for v in verdicts]
    if not args.snapshot:  # fix-aware: a finding the env file fixes, in a shell that has not loaded it
        not_loaded = _fixed_not_loaded(report)
        if not_loaded:
            extra["fixed_not_loaded"] = not_loaded
    if args.json:  # additive (schema 1): the versions a bug report needs, from the facts gathered
        from ..environment import environment

        extra["environment"] = environment(report.facts, host)
    view = ReportView(report.findings, report.checks, title="gpudoctor check", summary=tuple(summary), extra=extra)
    sys.stdout.write(reporter.render(view))
    if train_pass is not None and not (args.json or args.markdown):
        from ..train.display import TrainReporter

        sys.stdout.write(TrainReporter(tty=sys.stdout.isatty()).render(view))
    if args.exit_zero:
        return 0
    from ..model import Severity

    threshold = Severity(args.fail_on).rank
    unmet = any(not v.ok for v in verdicts)
    return 1 if unmet or any(f.severity.rank >= threshold for f in report.findings) else 0


def open_host(args, searched: bool = False, early_nvml: bool = False):
    """(host, header line) for check and report: the recorded or live machine, seen through the
    inspected interpreter. A snapshot that cannot be read is a usage error (exit 2). With
    ``searched``, the search for the training interpreter runs beside the probes (a
    ``SearchedHost``) and the header comes from ``interpreter_header`` once the checks ran. With
    ``early_nvml``, a live host's NVML query starts now, as preflight's does, not when the driver
    probe first asks (on the H200 that was ~45 ms into `check`, and NVML's answer, ~90 ms after its
    start, was the last fact in); the caller stops it if nothing collects it (``discard_nvml``)."""
    if not args.snapshot:  # the snapshot reader (and HostError) only for a snapshot: ~6 ms of check's start
        from ..host.live import LiveHost

        live = LiveHost()
        if early_nvml:
            live.start_nvml()
        return inspected_host(live, args.python, None, searched)
    from ..host import HostError, SnapshotHost
    from .main import UsageError

    try:
        host = SnapshotHost(args.snapshot)
    except HostError as exc:
        raise UsageError(str(exc)) from None
    return inspected_host(host, args.python, args.snapshot, searched)


def inspected_host(host, python: str | None, snapshot: str | None, searched: bool = False):
    """(host, header line): with --python, a host whose packages are that interpreter's; without
    it, the interpreter that has torch when gpudoctor's own has none (said in the header).
    A snapshot is a recorded machine: --python does not apply to it."""
    import sys

    from ..interpreter import (InterpretedHost, InterpreterError, SearchedHost, has_torch, query_interpreter,
                               training_interpreter)
    from .main import UsageError

    if snapshot:
        if python:
            raise UsageError("--python inspects an interpreter on this machine; it does not go with --snapshot")
        return host, ""
    if python:
        try:
            interpreter = query_interpreter(host, python)
        except InterpreterError as exc:
            raise UsageError(str(exc)) from None
        # the pip commands of its fixes name this interpreter (`<python> -m pip`, remedies/installer.py)
        return InterpretedHost(host, interpreter), interpreter_header(interpreter)
    if searched and not has_torch(sys.path):  # a search will start Pythons: beside the probes
        return SearchedHost(host, lambda: training_interpreter(host, sys.executable, sys.path, sys.prefix)), ""
    interpreter = training_interpreter(host, sys.executable, sys.path, sys.prefix)
    if interpreter is None:
        return host, ""
    return InterpretedHost(host, interpreter), interpreter_header(interpreter)


def _searched_header(host) -> str:
    """The header of a SearchedHost's interpreter (found by now: the checks waited for it)."""
    from ..interpreter import SearchedHost

    return interpreter_header(host.interpreter) if isinstance(host, SearchedHost) else ""


def interpreter_header(interpreter) -> str:
    """The header line naming the inspected interpreter ("" for none)."""
    if interpreter is None:
        return ""
    if not interpreter.chosen_because:
        return f"inspecting Python {interpreter.version} at {interpreter.executable} (--python)"
    return (f"inspecting Python {interpreter.version} at {interpreter.executable}: {interpreter.chosen_because} "
            "(--python to choose)")


def _fixed_not_loaded(report) -> dict | None:
    import os

    from ..fix.pending import LOAD_HINT, RUN_HINT, fixed_but_not_loaded
    from ..paths import GpudoctorDirs

    static = [f.id for c in report.checks for f in c.findings]
    ids = fixed_but_not_loaded(static, os.environ)
    if not ids:
        return None
    return {"ids": ids, "env_file": GpudoctorDirs.from_env().env_file, "load": LOAD_HINT, "run": RUN_HINT}


def _reporter(args):
    if args.json:
        from ..report.json import JsonReporter

        return JsonReporter()
    if args.markdown:
        from ..report.markdown import MarkdownReporter

        return MarkdownReporter()
    from ..report.terminal import TerminalReporter

    return TerminalReporter(verbose=args.verbose, tty=sys.stdout.isatty())
