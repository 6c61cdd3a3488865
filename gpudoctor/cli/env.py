"""`gpudoctor env [--shell bash|zsh|fish]`: the exports of the applied user-local fixes, for
``eval "$(gpudoctor env)"`` (bash/zsh) or ``gpudoctor env --shell fish | source``."""

from __future__ import annotations

import os
import sys

from ..paths import GpudoctorDirs


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("env", help='print the exports of the user-local fixes: eval "$(gpudoctor env)"')
    parser.add_argument("--shell", choices=("bash", "zsh", "fish"), default=None,
                        help="syntax to print (default: from $SHELL, else bash)")
    parser.set_defaults(run=run)


def default_shell(env=os.environ) -> str:
    name = os.path.basename(env.get("SHELL", ""))
    return name if name in ("bash", "zsh", "fish") else "bash"


def run(args) -> int:
    from ..fix import envfile

    dirs = GpudoctorDirs.from_env()
    entries = envfile.read_entries(dirs.env_file)
    if not entries:
        sys.stderr.write(f"gpudoctor: no user-local fixes applied yet ({dirs.env_file} is empty or missing)\n")
        return 0
    sys.stdout.write(envfile.render_exports(entries, args.shell or default_shell()))
    return 0
