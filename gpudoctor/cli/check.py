"""`gpudoctor check`: static probes and rules (never imports torch or triton)."""

from __future__ import annotations

import sys

from ..model import Severity

FAIL_ON = {"error": Severity.ERROR, "warning": Severity.WARNING, "info": Severity.INFO}


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("check", help="diagnose this machine (default command)")
    add_arguments(parser)
    parser.set_defaults(run=run)


def add_arguments(parser) -> None:
    parser.add_argument("--json", action="store_true", help="print the JSON report (schema 1) on stdout")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown report")
    parser.add_argument("-v", "--verbose", action="store_true", help="show passed and skipped checks and evidence")
    parser.add_argument("--only", action="append", default=[], metavar="ID", help="run only these rule ids")
    parser.add_argument("--skip", action="append", default=[], metavar="ID", help="skip these rule ids")
    parser.add_argument("--fail-on", choices=tuple(FAIL_ON), default="error",
                        help="exit 1 when a finding is at least this severe (default: error)")
    parser.add_argument("--exit-zero", action="store_true", help="always exit 0 unless gpudoctor itself fails")
    parser.add_argument("--snapshot", metavar="DIR", help="replay a recorded snapshot instead of this machine")
    parser.add_argument("--log", action="append", default=[], metavar="FILE", help="also diagnose a failure log")
    parser.add_argument("--require", action="append", default=[], metavar="FEATURE",
                        help="a feature the training needs: bf16, flash-attn, head_dim=N (repeatable)")
    parser.add_argument("--debug", action="store_true", help=argparse_suppress())
    # The training pass (issue 6). Its code imports torch, so it is imported only when --train is given.
    parser.add_argument("--train", action="store_true",
                        help="also run a small QLoRA training pass on the real kernels, in a child process")
    parser.add_argument("--preset", choices=("phi2", "llama", "turing", "tiny"), default=None,
                        help="model shapes for --train (default: phi2 on a GPU, tiny in interpreter mode)")
    parser.add_argument("--compile", action="store_true", help="--train: also run the step under torch.compile")
    parser.add_argument("--peft", action="store_true", help="--train: also build the adapters with PEFT's LoraConfig")
    parser.add_argument("--train-timeout", type=float, default=300.0, metavar="SECONDS",
                        help="--train: kill the child after this long and diagnose the hang (default: 300)")


def argparse_suppress():
    import argparse

    return argparse.SUPPRESS


def parse_requirements(items: list[str]) -> dict:
    """'head_dim=80', 'bf16', 'flash-attn' -> {'head_dim': [80], 'bf16': True, 'flash-attn': True}."""
    requirements: dict = {}
    for item in items:
        for part in item.split(","):
            part = part.strip()
            if not part:
                continue
            if "=" in part:
                key, value = part.split("=", 1)
                key = key.strip().replace("-", "_")
                if key == "head_dim":
                    try:
                        requirements.setdefault("head_dim", []).append(int(value))
                    except ValueError:
                        from .main import UsageError

                        raise UsageError(f"head_dim must be an integer, got {value!r}") from None
                else:
                    requirements[key] = value
            else:
                requirements[part] = True
    return requirements


def _unknown_ids(ids: list[str]) -> list[str]:
    from ..knowledge import load_catalogue

    catalogue = load_catalogue()
    return [i for i in ids if i not in catalogue]


def machine_summary(facts) -> list[str]:
    lines = []
    try:
        system = facts.get("system")
        if system.info:
            extras = [x for x in (system.container, "WSL2" if system.is_wsl else None, "Colab" if system.is_colab else None) if x]
            lines.append(f"{system.info.distro_name}, kernel {system.info.kernel}, {system.info.libc or 'libc ?'}, "
                         f"Python {system.info.python_version} ({system.python_env})" + (f", {', '.join(extras)}" if extras else ""))
    except Exception:  # noqa: BLE001 - the summary is a courtesy; checks report probe failures
        pass
    try:
        driver = facts.get("driver")
        if driver.nvml.ok:
            cuda = driver.cuda_driver
            for gpu in driver.nvml.devices:
                lines.append(f"GPU {gpu.index}: {gpu.name} (compute {gpu.compute_capability[0]}.{gpu.compute_capability[1]}, "
                             f"{gpu.memory_total / 2**30:.0f} GiB), driver {driver.nvml.driver_version}, CUDA {cuda[0]}.{cuda[1]}" if cuda else "")
        elif driver.gpu_present:
            lines.append(f"NVIDIA GPU present; NVML: {driver.nvml.error}")
        else:
            lines.append("no NVIDIA GPU found")
    except Exception:  # noqa: BLE001
        pass
    try:
        packages = facts.get("packages")
        names = ("torch", "triton", "pytorch-triton", "bitsandbytes", "flash-attn", "transformers", "trl", "peft", "unsloth")
        found = [f"{n} {packages.get(n).version}" for n in names if packages.get(n)]
        if found:
            lines.append(", ".join(found))
    except Exception:  # noqa: BLE001
        pass
    try:
        toolchain = facts.get("toolchain")
        parts = []
        if toolchain.triton_cc:
            cc = toolchain.compiler_at(toolchain.triton_cc) or next(
                (c for c in toolchain.compilers if c.path.endswith("/" + toolchain.triton_cc)), None)
            parts.append(f"cc {toolchain.triton_cc}" + (f" {'.'.join(map(str, cc.version))}" if cc and cc.version else ""))
        for toolkit in toolchain.toolkits:
            version = ".".join(map(str, toolkit.version)) if toolkit.version else "?"
            parts.append(f"CUDA toolkit {version} at {toolkit.root} (gcc <= {toolkit.max_gcc})")
        if parts:
            lines.append(", ".join(parts))
    except Exception:  # noqa: BLE001
        pass
    return lines


def run(args) -> int:
    from ..engine import diagnose
    from ..host import HostError, LiveHost, SnapshotHost

    unknown = _unknown_ids(args.only + args.skip)
    if unknown:
        sys.stderr.write(f"gpudoctor: error: unknown rule id(s): {', '.join(unknown)} (see `gpudoctor rules`)\n")
        return 2
    try:
        host = SnapshotHost(args.snapshot) if args.snapshot else LiveHost()
    except HostError as exc:
        sys.stderr.write(f"gpudoctor: error: {exc}\n")
        return 2
    from ..facts import Facts
    from ..remedies import machine_from_facts

    requirements = parse_requirements(args.require)
    facts = Facts(host, requirements)
    log_findings = []
    if args.log:
        try:
            from ..logs import diagnose_paths
        except ImportError:
            sys.stderr.write("gpudoctor: error: log diagnosis is not available in this build\n")
            return 2
        try:
            # The machine comes from the same Facts the checks use below: each fact probed once.
            log_findings = diagnose_paths(args.log, machine=lambda: machine_from_facts(facts))
        except OSError as exc:
            sys.stderr.write(f"gpudoctor: error: cannot read log: {exc.strerror or exc}\n")
            return 2
    # The training pass starts first: its child imports torch while the static checks run.
    pending = None
    if getattr(args, "train", False):
        from ..train.runner import start_training_pass  # torch-free; the child imports torch

        pending = start_training_pass(preset=args.preset, compile=args.compile, peft=args.peft,
                                      timeout_s=args.train_timeout)
    try:
        report = diagnose(host, only=args.only, skip=args.skip, requirements=requirements,
                          extra_findings=log_findings, facts=facts)
    except BaseException:
        if pending is not None:
            pending.cancel()  # the child runs in its own session: it would outlive us
        raise
    show_progress = not (args.json or args.markdown) and sys.stderr.isatty()
    train_pass = (pending.finish(show_progress=show_progress, machine=machine_from_facts(facts))
                  if pending is not None else None)
    if train_pass is not None:
        from ..engine import Report
        from ..model import sort_findings

        # A cause the static checks already reported (e.g. c-compiler-missing) is not repeated;
        # the pass's own rules (no static check decides them) never collide with a static id.
        static_ids = {f.id for f in report.findings}
        extra = [f for f in train_pass.findings if f.id not in static_ids]
        report = Report(tuple(sort_findings(list(report.findings) + extra)),
                        tuple(report.checks) + tuple(train_pass.checks), report.facts)
    summary = machine_summary(report.facts)
    if args.snapshot:
        summary.insert(0, f"replaying snapshot {args.snapshot}")
    if args.json:
        from ..report import render_json

        extra_json = {"train": train_pass.data} if train_pass is not None else {}
        print(render_json(report.findings, report.checks, **extra_json))
    elif args.markdown:
        from ..report import render_markdown

        print(render_markdown(report.findings, report.checks, summary), end="")
    else:
        from rich.console import Console

        from ..report.terminal import print_report

        console = Console()
        print_report(console, report.findings, report.checks, title="gpudoctor check", summary=summary, verbose=args.verbose)
        if train_pass is not None:
            from ..train.display import print_train_summary

            print_train_summary(console, train_pass.data)
    if args.exit_zero:
        return 0
    threshold = FAIL_ON[args.fail_on].rank
    return 1 if any(f.severity.rank >= threshold for f in report.findings) else 0
