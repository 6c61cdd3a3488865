"""The persistent Gluon forward's causal schedule (attention_schedule): the head part's units
alone ("units": the heads the head part cannot group aside) against units and a tail of single
tiles, largest first ("tail"), at even and odd numbers of query blocks alike (shipped: the tail at
odd ones, attention_schedule.TAIL, and at even ones where attention_gluon.EVEN_TAIL_MIN_KEYS routes
it), and optionally the kernels of earlier commits (--before
FILE ...: those commits' gpudoctor/kernels/attention_gluon.py, each a setting named by its file's
stem; before this schedule, causal units put the middle block of an odd count alone), cuDNN
beside them, on Hopper; the settings take turns (attention_ab's loop).

    PYTHONPATH=. python3 bench/attention_gluon_schedule.py [--rounds 3] [--shapes hd64-s512-c ...] [--before FILE ...] [--out FILE]
"""

from __future__ import annotations

import sys
from pathlib import Path

from ab_cli import refused, shapes_parser

# (name, batch, heads, kv_heads, seq, head_dim, causal, dtype): 2^28 scores (16384 tokens x 32
# heads), odd numbers of query blocks (384, 640, 1152 keys), the training pass's shape.
SHAPES = (
    ("hd64-s512-c", 32, 32, 32, 512, 64, True, "bf16"),
    ("hd40-s512-c", 32, 32, 32, 512, 40, True, "bf16"),
    ("hd128-s512-c", 32, 32, 32, 512, 128, True, "bf16"),
    ("hd256-s512-c", 32, 32, 32, 512, 256, True, "bf16"),
    ("hd64-s1024-c", 16, 32, 32, 1024, 64, True, "bf16"),
    ("hd128-s1024-c", 16, 32, 32, 1024, 128, True, "bf16"),
    ("hd64-s2048-c", 8, 32, 32, 2048, 64, True, "bf16"),
    ("hd128-s4096-c", 4, 32, 32, 4096, 128, True, "bf16"),
    ("hd128-gqa8-s4096-c", 4, 32, 4, 4096, 128, True, "bf16"),
    ("hd64-s16384-c", 1, 32, 32, 16384, 64, True, "bf16"),
    ("hd64-s640-c", 16, 32, 32, 640, 64, True, "bf16"),
    ("hd128-s640-c", 16, 32, 32, 640, 128, True, "bf16"),
    ("hd64-s384-c", 32, 32, 32, 384, 64, True, "bf16"),
    ("hd128-s1152-c", 8, 32, 32, 1152, 128, True, "bf16"),
    ("hd80-train-pass", 4, 32, 32, 256, 80, True, "bf16"),
    ("hd64-s512", 32, 32, 32, 512, 64, False, "bf16"),
    # thirty-seventh session: even numbers of query blocks from 2048 keys, where run 9 had the tail
    # faster (hd64 s16384 5 %)
    ("hd128-s16384-c", 1, 32, 32, 16384, 128, True, "bf16"),
    ("hd64-s8192-c", 2, 32, 32, 8192, 64, True, "fp16"),
    ("hd128-s8192-c", 2, 32, 32, 8192, 128, True, "bf16"),
    ("hd64-gqa8-s16384-c", 1, 32, 4, 16384, 64, True, "bf16"),
    ("hd128-gqa4-s16384-c", 1, 32, 8, 16384, 128, True, "fp16"),
    ("hd96-s16384-c", 1, 32, 32, 16384, 96, True, "bf16"),
    ("hd256-s16384-c", 1, 32, 32, 16384, 256, True, "bf16"),
    ("hd192-s8192-c", 2, 32, 32, 8192, 192, True, "bf16"),
    ("hd40-s8192-c", 2, 32, 32, 8192, 40, True, "bf16"),
    ("hd48-s4096-c", 4, 32, 32, 4096, 48, True, "fp16"),
    ("hd160-gqa8-s4096-c", 4, 32, 4, 4096, 160, True, "bf16"),
    ("hd80-s2048-c", 8, 32, 32, 2048, 80, True, "bf16"),
    ("hd256-s8192-c", 2, 32, 32, 8192, 256, True, "bf16"),
    ("hd240-gqa8-s16384-c", 1, 32, 4, 16384, 240, True, "fp16"),
    ("hd224-s16384-c", 1, 32, 32, 16384, 224, True, "bf16"),
    ("hd256-gqa4-s4096-c", 4, 32, 8, 4096, 256, True, "bf16"),
    ("hd32-s8192-c", 2, 32, 32, 8192, 32, True, "bf16"),
    ("hd32-s2048-c", 8, 32, 32, 2048, 32, True, "bf16"),
    ("hd160-s16384-c", 1, 32, 32, 16384, 160, True, "bf16"),
    ("hd192-s16384-c", 1, 32, 32, 16384, 192, True, "bf16"),
    ("hd176-gqa4-s16384-c", 1, 32, 8, 16384, 176, True, "fp16"),
    ("hd144-gqa8-s16384-c", 1, 32, 4, 16384, 144, True, "bf16"),
    ("hd112-s16384-c", 1, 32, 32, 16384, 112, True, "fp16"),
    ("hd72-gqa4-s16384-c", 1, 32, 8, 16384, 72, True, "fp16"),
    ("hd88-gqa4-s16384-c", 1, 32, 8, 16384, 88, True, "bf16"),
    ("hd152-gqa8-s16384-c", 1, 32, 4, 16384, 152, True, "bf16"),
    ("hd184-gqa4-s16384-c", 1, 32, 8, 16384, 184, True, "bf16"),
)
SETTINGS = ("units", "tail", "tail-cost2")
# "tail-cost2": the tail with attention_schedule.COST_PER_TILE at 2 blocks instead of 0.5 (the model
# then picks shorter tails at few query blocks: 34 heads instead of 100 at 512 keys, 1024 heads)
TAIL_COST = 2.0


def main(argv=None) -> int:
    parser = shapes_parser(__doc__, SHAPES)
    parser.add_argument("--before", nargs="*", default=[], help="earlier commits' gpudoctor/kernels/attention_gluon.py")
    parser.add_argument("--no-backward", action="store_true", help="the forward alone")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    if refused(args, SHAPES):
        return 2
    from attention_ab import compare_settings, hopper

    from gpudoctor.kernels import attention_gluon, attention_schedule

    if not hopper():
        return 2
    shipped = (dict(attention_schedule.TAIL), attention_gluon.attention_forward,
               dict(attention_gluon.EVEN_TAIL_MIN_KEYS))
    no_tail, tail = dict.fromkeys(shipped[0], False), dict.fromkeys(shipped[0], True)
    forwards = {"units": (no_tail, shipped[1], {}), "tail": (tail, shipped[1], {}),
                "tail-cost2": (tail, shipped[1], {}), None: shipped}
    shipped_cost = attention_schedule.COST_PER_TILE
    labels = list(SETTINGS)
    for path in args.before:
        name = Path(path).stem
        forwards[name] = (shipped[0], _module_from(path, name).attention_forward, shipped[2])
        labels.insert(len(labels) - len(SETTINGS), name)  # before the settings, as the files accumulate

    def apply(name):
        # "units": no tail at any even count, the routed ones (EVEN_TAIL_MIN_KEYS) included
        attention_schedule.TAIL, attention_gluon.attention_forward, attention_gluon.EVEN_TAIL_MIN_KEYS = forwards[name]
        cost = TAIL_COST if name == "tail-cost2" else shipped_cost
        if cost != attention_schedule.COST_PER_TILE:
            # its cached choices depend on COST_PER_TILE (cleared only on a change: the schedule's
            # search on every call would slow the host and leave the GPU idle between calls)
            attention_schedule.COST_PER_TILE = cost
            attention_schedule._causal.cache_clear()

    compare_settings(SHAPES, labels, apply, args.rounds, backward=not args.no_backward, out=args.out,
                     only=args.shapes, before=args.before)
    return 0


def _module_from(path: str, name: str):
    """That file as a module of gpudoctor.kernels (its relative imports resolve there)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"gpudoctor.kernels._{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    sys.exit(main())
