"""`gpudoctor check --distributed` (one rank of a torchrun / srun / PyTorchJob launch) and
`--nproc N` (torchrun on this host): the options, and rank 0's report and exit code."""

from __future__ import annotations

import importlib.util
import os
import sys


def add_arguments(parser) -> None:
    group = parser.add_argument_group("multi-GPU and multi-node")
    group.add_argument("--distributed", action="store_true",
                       help="run as one rank of a torchrun / srun / PyTorchJob launch: every rank is checked and "
                            "rank 0 prints one report of what differs")
    group.add_argument("--nproc", type=int, metavar="N",
                       help="launch N ranks on this host with torchrun and check them all (implies --distributed)")
    group.add_argument("--nccl", action="store_true",
                       help="--distributed: also measure NCCL all-reduce/all-gather bandwidth (implied by --train)")
    group.add_argument("--rank-timeout", type=float, default=120.0, metavar="SECONDS",
                       help="--distributed: how long rank 0 waits for the other ranks' reports (default: 120)")


def wanted(args) -> bool:
    # `is not None`: --nproc 0 is a usage error (exit 2), not a plain single-host check
    return bool(getattr(args, "distributed", False) or getattr(args, "nproc", None) is not None)


def _usage_problem(args) -> str | None:
    if args.nproc is not None and args.nproc < 1:
        return f"--nproc must be at least 1, got {args.nproc}"
    if args.rank_timeout <= 0:
        return "--rank-timeout must be positive"
    if args.snapshot:
        return "--snapshot replays one machine; compare two snapshots with `gpudoctor diff A B`"
    if args.log:
        return "--log is not supported with --distributed/--nproc; run `gpudoctor explain LOG` on the rank's log"
    if getattr(args, "markdown", False):
        return "--markdown is not supported with --distributed/--nproc (use --json or the terminal report)"
    if importlib.util.find_spec("torch") is None:
        from ..train.protocol import install_hint

        return f"--distributed and --nproc need torch (torch.distributed's rendezvous store): {install_hint()}"
    return None


def run(args) -> int:
    problem = _usage_problem(args)
    if problem:
        sys.stderr.write(f"gpudoctor: error: {problem}\n")
        return 2
    if args.nproc is not None and not args.distributed:
        from ..distributed.launcher import launch_local

        budget = args.rank_timeout * 2 + (args.train_timeout + 60) * 2 + 120
        return launch_local(args.nproc, rank_argv(args), budget)
    return run_as_rank(args)


def rank_argv(args) -> list[str]:
    """Each rank's command line: the same check, as --distributed."""
    out = ["check", "--distributed", "--rank-timeout", str(args.rank_timeout), "--fail-on", args.fail_on]
    for flag in ("json", "verbose", "exit_zero", "train", "compile", "nccl", "peft"):
        if getattr(args, flag, False):
            out.append("--" + flag.replace("_", "-"))
    for flag, values in (("--only", args.only), ("--skip", args.skip), ("--require", args.require)):
        for value in values:
            out += [flag, value]
    if getattr(args, "preset", None):
        out += ["--preset", args.preset]
    out += ["--train-timeout", str(args.train_timeout)]
    return out


def run_as_rank(args) -> int:
    from ..model import Severity
    from ..distributed.environment import NotDistributed, discover
    from ..distributed.session import Options, run_rank

    try:
        env = discover(os.environ)
    except NotDistributed as exc:
        sys.stderr.write(f"gpudoctor: error: --distributed: {exc}\n")
        return 2
    from .check import parse_requirements
    from .main import UsageError

    try:
        requirements = parse_requirements(args.require)
    except UsageError as exc:
        sys.stderr.write(f"gpudoctor: error: {exc}\n")
        return 2
    options = Options(rank_timeout_s=args.rank_timeout, nccl=args.nccl, train=args.train,
                      phase_timeout_s=args.train_timeout, compile=args.compile, preset=args.preset,
                      only=tuple(args.only), skip=tuple(args.skip), requirements=requirements)
    report, mine = run_rank(env, options)
    if not mine or report is None:
        return 0
    if args.json:
        from ..distributed.render import render_distributed_json

        print(render_distributed_json(report))
    else:
        from rich.console import Console

        from ..distributed.render import print_distributed

        print_distributed(Console(), report, verbose=args.verbose)
    sys.stdout.flush()
    threshold = {"error": Severity.ERROR, "warning": Severity.WARNING, "info": Severity.INFO}[args.fail_on].rank
    code = 0 if args.exit_zero else (1 if any(f.severity.rank >= threshold for f in report.findings) else 0)
    if env.is_leader:
        from ..distributed.launcher import record_exit_code

        record_exit_code(code)
    return code
