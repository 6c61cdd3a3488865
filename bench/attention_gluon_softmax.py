"""The Gluon forward's softmax, settings forced at every width and length, cuDNN beside them, on
Hopper: the key loop waiting for the last block's P·V before the softmax (as ptxas placed it
before the twenty-third session) or after it (attention_gluon.SOFTMAX_UNDER_PV_MIN_KEYS; calls
not causal only: in causal rows both settings run the same kernel, where runs 2-4 of the
twenty-third session still forced it), and the softmax's exp2 on the SFU alone (MUFU.EX2) or
one score of every two or four by a cubic on the FMA pipes instead (attention_gluon.EXP2_POLY,
FlashAttention-4's software exp2). The settings take turns (attention_ab's loop: what each row
says is there; max_abs_diff: each setting's output against the first's).

    PYTHONPATH=. python3 bench/attention_gluon_softmax.py [--rounds 3] [--shapes hd64-s4096 ...]
        [--settings wait-first under-pv] [--out FILE]
"""

from __future__ import annotations

import sys

from ab_cli import refused, shapes_parser

# (name, batch, heads, kv_heads, seq, head_dim, causal, dtype): 2^28 scores; widths 32 and 64
# first, where the SFU's exp2 takes as long as the products (a score's 2 x 2 x 64 flops at
# 4096 a clock an SM against one exp2 at 16).
SHAPES = (
    ("hd64-s4096", 4, 32, 32, 4096, 64, False, "bf16"),
    ("hd48-s4096", 4, 32, 32, 4096, 48, False, "bf16"),
    ("hd64-s16384", 1, 32, 32, 16384, 64, False, "bf16"),
    ("hd32-s4096", 4, 32, 32, 4096, 32, False, "bf16"),
    ("hd56-gqa4-s8192", 2, 32, 8, 8192, 56, False, "fp16"),
    ("hd64-s4096-c", 4, 32, 32, 4096, 64, True, "bf16"),
    ("hd64-s512-c", 32, 32, 32, 512, 64, True, "bf16"),
    ("hd40-s1024-c", 16, 32, 32, 1024, 40, True, "fp16"),
    ("hd64-s1024", 16, 32, 32, 1024, 64, False, "bf16"),
    ("hd96-s4096", 4, 32, 32, 4096, 96, False, "bf16"),
    ("hd128-s4096", 4, 32, 32, 4096, 128, False, "bf16"),
    ("hd128-s512-c", 32, 32, 32, 512, 128, True, "bf16"),
    ("hd80-s512-c", 32, 32, 32, 512, 80, True, "bf16"),
    ("hd256-s4096", 4, 32, 32, 4096, 256, False, "bf16"),
    ("hd176-s4096-c", 4, 32, 32, 4096, 176, True, "bf16"),
    ("hd128-gqa8-s8192-c", 2, 32, 4, 8192, 128, True, "bf16"),
    ("hd80-train-pass", 4, 32, 32, 256, 80, True, "bf16"),
    # second run: not causal at more head dims, lengths, layouts and fp16
    ("hd40-s512", 32, 32, 32, 512, 40, False, "bf16"),
    ("hd64-s512", 32, 32, 32, 512, 64, False, "bf16"),
    ("hd72-gqa4-s2048", 8, 32, 8, 2048, 72, False, "fp16"),
    ("hd112-s1024", 16, 32, 32, 1024, 112, False, "bf16"),
    ("hd128-gqa8-s16384", 1, 32, 4, 16384, 128, False, "bf16"),
    ("hd160-s4096", 4, 32, 32, 4096, 160, False, "fp16"),
    ("hd200-s2048", 8, 32, 32, 2048, 200, False, "bf16"),
    ("hd32-s512", 32, 32, 32, 512, 32, False, "fp16"),
    ("hd64-gqa8-s8192", 2, 32, 4, 8192, 64, False, "fp16"),
    ("hd128-s8192-c", 2, 32, 32, 8192, 128, True, "bf16"),
    # thirty-seventh session: not causal at widths 32-64 between 512 and 4096 keys, never measured
    # before (SOFTMAX_UNDER_PV_MIN_KEYS had been set from the rows at 512 and 4096)
    ("hd64-s2048", 8, 32, 32, 2048, 64, False, "bf16"),
    ("hd64-s3072", 5, 32, 32, 3072, 64, False, "bf16"),
    ("hd64-s1536", 10, 32, 32, 1536, 64, False, "fp16"),
    ("hd64-gqa8-s1024", 16, 32, 4, 1024, 64, False, "bf16"),
    ("hd56-s512-fp16", 32, 32, 32, 512, 56, False, "fp16"),
    ("hd56-gqa4-s2048", 8, 32, 8, 2048, 56, False, "bf16"),
    ("hd56-s1024", 16, 32, 32, 1024, 56, False, "bf16"),
    ("hd48-gqa8-s1024", 16, 32, 4, 1024, 48, False, "fp16"),
    ("hd48-s2048", 8, 32, 32, 2048, 48, False, "bf16"),
    ("hd40-gqa4-s2048", 8, 32, 8, 2048, 40, False, "fp16"),
    ("hd40-s1024", 16, 32, 32, 1024, 40, False, "bf16"),
    ("hd32-s2048", 8, 32, 32, 2048, 32, False, "bf16"),
    ("hd32-s1024", 16, 32, 32, 1024, 32, False, "fp16"),
)
# (SOFTMAX_UNDER_PV, EXP2_POLY: one score of every n by the cubic, 0 none). The first run
# (twenty-third session, run 1) had the wait first in all three, named sfu, poly4, poly2.
SETTINGS = {"wait-first": (False, 0), "under-pv": (True, 0), "under-pv-poly4": (True, 4),
            "wait-first-poly4": (False, 4), "wait-first-poly2": (False, 2), "wait-first-again": (False, 0)}


def main(argv=None) -> int:
    parser = shapes_parser(__doc__, SHAPES, SETTINGS)
    parser.add_argument("--backward", action="store_true", help="forward+backward too (the backward is unchanged)")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    if refused(args, SHAPES, SETTINGS):
        return 2
    from attention_ab import compare_settings, hopper

    from gpudoctor.kernels import attention_gluon

    if not hopper():
        return 2
    shipped = (dict(attention_gluon.SOFTMAX_UNDER_PV_MIN_KEYS), dict(attention_gluon.EXP2_POLY))

    def apply(name):
        if name:  # every width and length
            under_pv, poly = SETTINGS[name]
            attention_gluon.SOFTMAX_UNDER_PV_MIN_KEYS = dict.fromkeys(attention_gluon.BLOCK_N, 0) if under_pv else {}
            attention_gluon.EXP2_POLY = dict.fromkeys(attention_gluon.BLOCK_N, poly)
        else:
            attention_gluon.SOFTMAX_UNDER_PV_MIN_KEYS, attention_gluon.EXP2_POLY = shipped

    compare_settings(SHAPES, args.settings, apply, args.rounds, backward=args.backward, out=args.out,
                     only=args.shapes, all_settings=SETTINGS, shipped=list(shipped))
    return 0


if __name__ == "__main__":
    sys.exit(main())
