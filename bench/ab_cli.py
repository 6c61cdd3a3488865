"""The command line the Gluon A/B benches share (attention_gluon_kv_stages, _pingpong, _schedule,
_short_diagonal, _persistent, _backward_walk, _backward_columns, _backward_narrow, _backward_split,
_backward_roles, _backward_lag, _backward_dq_swizzle, _backward_short, _backward_narrow_walk,
_softmax, _key_blocks, _masked_last, _causal_covers, _specialization): the parser's first options
and the refusal of names that are not known, the whole main of those that only switch module
settings (run_settings), the settings' switch where each is values of a module's attributes
(module_settings), and the switch of a routing table (set_routing). Without torch, so that a
wrong name is refused before torch loads."""

from __future__ import annotations

import argparse
import importlib
import sys


def shapes_parser(doc: str, shapes, settings=()) -> argparse.ArgumentParser:
    """A parser described by ``doc``'s first line, with --rounds and --shapes (of ``shapes``, rows
    whose first field is the name), and --settings (of ``settings``, all by default) where given."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shapes", nargs="*", help=f"of {[shape[0] for shape in shapes]}")
    if settings:
        parser.add_argument("--settings", nargs="*", default=list(settings), help=f"of {list(settings)}")
    return parser


def refused(args, shapes, known_settings=()) -> bool:
    """Whether ``args.shapes`` (and ``args.settings``, where the parser took them: of
    ``known_settings``) name something unknown; says which on stderr."""
    unknown = set(args.shapes or ()) - {shape[0] for shape in shapes}
    what = "shapes"
    if known_settings:
        unknown |= set(args.settings) - set(known_settings)
        what = "shapes or settings"
    if unknown:
        print(f"unknown {what}: {sorted(unknown)}", file=sys.stderr)
    return bool(unknown)


def run_settings(doc: str, shapes, settings, make_apply, argv=None) -> int:
    """The whole main of an A/B bench that only switches module settings
    (attention_gluon_backward_walk, _columns, _split, _key_blocks): --rounds, --shapes, --settings
    (of ``settings``), --no-backward and --out; unknown names refused before torch loads; then on
    a Hopper GPU attention_ab.compare_settings with the apply that ``make_apply()`` returns
    (called once torch and gpudoctor may load)."""
    parser = shapes_parser(doc, shapes, tuple(settings))
    parser.add_argument("--no-backward", action="store_true", help="the forward alone")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    if refused(args, shapes, tuple(settings)):
        return 2
    from attention_ab import compare_settings, hopper

    if not hopper():
        return 2
    compare_settings(shapes, list(args.settings), make_apply(), args.rounds, backward=not args.no_backward,
                     out=args.out, only=args.shapes)
    return 0


def set_routing(attention, name: str, value) -> None:
    """Sets the attention module's routing table ``name`` (GLUON_SUMMED_DQ_HEAD_DIMS, ...) to
    ``value``, forgetting the routing _select_config remembered for each head_dim where it changes."""
    if getattr(attention, name) != value:
        setattr(attention, name, value)
        attention._select_config.cache_clear()


def module_settings(module: str, names, settings):
    """run_settings' make_apply where each setting is the values of ``module``'s attributes
    ``names`` (a tuple; one name: the setting is its value), set as ``settings[label]`` says or,
    for label None, as shipped (their values when make_apply runs)."""
    single = isinstance(names, str)
    names = (names,) if single else tuple(names)

    def make_apply():
        target = importlib.import_module(module)
        shipped = tuple(getattr(target, name) for name in names)

        def apply(label):  # None: as shipped
            values = shipped if label is None else (settings[label],) if single else settings[label]
            for name, value in zip(names, values, strict=True):
                setattr(target, name, value)

        return apply

    return make_apply
