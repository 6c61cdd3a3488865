"""`gpudoctor env [--shell sh|bash|zsh|fish]`: the exports of the applied user-local fixes, for
``eval "$(gpudoctor env)"`` (sh/bash/zsh) or ``gpudoctor env --shell fish | source``.

POSIX sh syntax unless ``--shell fish`` is given: the output is usually eval'd by a script whose
shell has nothing to do with the user's login ``$SHELL`` (a bash job script of a fish user), and
fish quoting eval'd by bash runs a value like ``x'; touch P; #`` (issue 14 item 7)."""

from __future__ import annotations

import sys

from ..paths import GpudoctorDirs


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("env", help='print the exports of the user-local fixes: eval "$(gpudoctor env)"')
    parser.add_argument("--shell", choices=("sh", "bash", "zsh", "fish"), default="sh",
                        help="syntax to print (default: POSIX sh, for sh/bash/zsh; fish only when asked)")
    parser.set_defaults(run=run)


def run(args) -> int:
    from ..fix import envfile

    dirs = GpudoctorDirs.from_env()
    try:
        entries = envfile.read_entries(dirs.env_file)
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # untrusted (another user's, a FIFO) or unreadable
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        sys.stderr.write(f"gpudoctor: error: cannot use the env file {dirs.env_file}: {reason}\n")
        return 2
    if not entries:
        sys.stderr.write(f"gpudoctor: no user-local fixes applied yet ({dirs.env_file} is empty or missing)\n")
        return 0
    shell = "fish" if args.shell == "fish" else "bash"  # bash/zsh/sh share the POSIX lines
    sys.stdout.write(envfile.render_exports(entries, shell))
    return 0
