"""The Gluon forward with and without FlashAttention-3's ping-pong (attention_gluon.pingpong: the two
consumers take turns to issue their products), forced at every width and length here,
cuDNN beside them, on Hopper; the settings take turns (attention_ab's loop: what each row says is
there).

    PYTHONPATH=. python3 bench/attention_gluon_pingpong.py [--rounds 3] [--shapes hd64-s512-c ...] [--out FILE]
"""

from __future__ import annotations

import sys

from ab_cli import refused, shapes_parser

# (name, batch, heads, kv_heads, seq, head_dim, causal, dtype): 2^28 scores but the training pass's shape
SHAPES = (
    ("hd64-s512-c", 32, 32, 32, 512, 64, True, "bf16"),
    ("hd40-s512-c", 32, 32, 32, 512, 40, True, "bf16"),
    ("hd128-s512-c", 32, 32, 32, 512, 128, True, "bf16"),
    ("hd256-s512-c", 32, 32, 32, 512, 256, True, "bf16"),
    ("hd64-s512", 32, 32, 32, 512, 64, False, "bf16"),
    ("hd128-s512", 32, 32, 32, 512, 128, False, "bf16"),
    ("hd32-s512-c", 32, 32, 32, 512, 32, True, "bf16"),
    ("hd192-s512-c", 32, 32, 32, 512, 192, True, "bf16"),
    ("hd64-s1024-c", 16, 32, 32, 1024, 64, True, "bf16"),
    ("hd128-s1024-c", 16, 32, 32, 1024, 128, True, "bf16"),
    ("hd64-s1024", 16, 32, 32, 1024, 64, False, "bf16"),
    ("hd64-gqa4-s512-c", 32, 32, 8, 512, 64, True, "bf16"),
    ("hd64-s512-c-fp16", 32, 32, 32, 512, 64, True, "fp16"),
    ("hd64-s4096-c", 4, 32, 32, 4096, 64, True, "bf16"),
    ("hd128-s4096-c", 4, 32, 32, 4096, 128, True, "bf16"),
    ("hd128-s4096", 4, 32, 32, 4096, 128, False, "bf16"),
    ("hd256-s4096-c", 4, 32, 32, 4096, 256, True, "bf16"),
    # second run: width 128 (hd72-128) at more head dims, lengths and layouts
    ("hd80-s512-c", 32, 32, 32, 512, 80, True, "bf16"),
    ("hd80-train-pass", 4, 32, 32, 256, 80, True, "bf16"),
    ("hd96-s1024", 16, 32, 32, 1024, 96, False, "bf16"),
    ("hd112-s512", 32, 32, 32, 512, 112, False, "bf16"),
    ("hd128-s512-c-fp16", 32, 32, 32, 512, 128, True, "fp16"),
    ("hd128-s1024", 16, 32, 32, 1024, 128, False, "bf16"),
    ("hd128-s2048-c", 8, 32, 32, 2048, 128, True, "bf16"),
    ("hd128-gqa8-s4096-c", 4, 32, 4, 4096, 128, True, "bf16"),
    ("hd128-s16384-c", 1, 32, 32, 16384, 128, True, "bf16"),
    ("hd96-s512-c", 32, 32, 32, 512, 96, True, "bf16"),
    ("hd80-s1024-c", 16, 32, 32, 1024, 80, True, "bf16"),
    # thirty-seventh session: width 64 not causal past 1024 keys, with the softmax under the last
    # P·V there now (attention_gluon.softmax_under_pv)
    ("hd64-s2048", 8, 32, 32, 2048, 64, False, "bf16"),
    ("hd56-gqa4-s2048", 8, 32, 8, 2048, 56, False, "fp16"),
    ("hd64-s4096", 4, 32, 32, 4096, 64, False, "bf16"),
    ("hd48-gqa8-s8192", 2, 32, 4, 8192, 48, False, "bf16"),
    ("hd64-s16384", 1, 32, 32, 16384, 64, False, "bf16"),
    ("hd32-s2048", 8, 32, 32, 2048, 32, False, "bf16"),
)
SETTINGS = ("plain", "pingpong")


def main(argv=None) -> int:
    parser = shapes_parser(__doc__, SHAPES)
    parser.add_argument("--no-backward", action="store_true", help="the forward alone")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    if refused(args, SHAPES):
        return 2
    from attention_ab import compare_settings, hopper

    from gpudoctor.kernels import attention_gluon

    if not hopper():
        return 2
    shipped = (dict(attention_gluon.PINGPONG_MIN_KEYS), dict(attention_gluon.PINGPONG_CAUSAL_MIN_KEYS))
    everywhere = dict.fromkeys(attention_gluon.BLOCK_N, 0)
    forced = {"plain": ({}, {}), "pingpong": (everywhere, everywhere), None: shipped}

    def apply(name):
        attention_gluon.PINGPONG_MIN_KEYS, attention_gluon.PINGPONG_CAUSAL_MIN_KEYS = forced[name]

    compare_settings(SHAPES, list(SETTINGS), apply, args.rounds, backward=not args.no_backward, out=args.out,
                     only=args.shapes, shipped=list(shipped))
    return 0


if __name__ == "__main__":
    sys.exit(main())
