"""gpudoctor's command line: an explicit registry of subcommands, one module each."""

from __future__ import annotations

import argparse
import importlib
import sys

from .. import __version__

# name -> module path. Each module exposes add_parser(subparsers) and run(args) -> int.
COMMANDS = {
    "check": "gpudoctor.cli.check",
    "rules": "gpudoctor.cli.rules",
    "snapshot": "gpudoctor.cli.snapshot",
    "explain": "gpudoctor.cli.explain",
    "fix": "gpudoctor.cli.fix",
    "env": "gpudoctor.cli.env",
    "run": "gpudoctor.cli.run",
    "scan": "gpudoctor.cli.scan",
    "diff": "gpudoctor.cli.diff",
    "report": "gpudoctor.cli.report",
}

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class UsageError(Exception):
    """Bad input from the user: reported as one line, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit 2, as the contract says
        self.exit(EXIT_USAGE, f"gpudoctor: error: {message}\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; with ``command``, only that subcommand's module is imported and its parser
    added (the others' imports, ~25 ms on the 2-core box, are what `gpudoctor check` would pay
    for nothing: issue 12's 0.3 s). Without it, every subcommand (help, an unknown command)."""
    parser = _Parser(prog="gpudoctor", description="Environment doctor and auto-fixer for GPU fine-tuning stacks.")
    parser.add_argument("--version", action="version", version=f"gpudoctor {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, module_path in COMMANDS.items():
        if command is None or name == command:
            importlib.import_module(module_path).add_parser(subparsers)
    return parser


def _parse(argv: list[str]) -> argparse.Namespace:
    """The arguments; check is the default command (`gpudoctor`, `gpudoctor -v`, `gpudoctor
    --json`). Only the named subcommand's module is imported to parse them; --help, --version and
    a command that does not exist get the whole parser."""
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version")):
        argv = ["check", *argv]
    return build_parser(argv[0] if argv[0] in COMMANDS else None).parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse(list(argv if argv is not None else sys.argv[1:]))
    try:
        return int(args.run(args))
    except KeyboardInterrupt:
        sys.stderr.write("gpudoctor: interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
    except UsageError as exc:
        sys.stderr.write(f"gpudoctor: error: {exc}\n")
        return EXIT_USAGE
    except Exception as exc:  # noqa: BLE001 - gpudoctor's own failure: one line, exit 2
        if getattr(args, "debug", False):
            raise
        sys.stderr.write(f"gpudoctor: internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)\n")
        return EXIT_USAGE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
