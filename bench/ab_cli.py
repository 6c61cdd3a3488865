"""The command line the Gluon forward's benches share (attention_gluon_kv_stages, _pingpong,
_schedule, _short_diagonal, _persistent): the parser's first options and the refusal of names
that are not known. Without torch, so that a wrong name is refused before torch loads."""

from __future__ import annotations

import argparse
import sys


def shapes_parser(doc: str, shapes) -> argparse.ArgumentParser:
    """A parser described by ``doc``'s first line, with --rounds and --shapes (of ``shapes``, rows
    whose first field is the name)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shapes", nargs="*", help=f"of {[shape[0] for shape in shapes]}")
    return parser


def refused(args, shapes, settings=None, known_settings=()) -> bool:
    """Whether ``args.shapes`` (and ``settings``, where given) name something unknown; says which
    on stderr."""
    unknown = set(args.shapes or ()) - {shape[0] for shape in shapes}
    what = "shapes"
    if settings is not None:
        unknown |= set(settings) - set(known_settings)
        what = "shapes or settings"
    if unknown:
        print(f"unknown {what}: {sorted(unknown)}", file=sys.stderr)
    return bool(unknown)
