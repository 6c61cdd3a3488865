"""The Gluon forward with two, three and four slots in its K and V rings (attention_gluon.KV_STAGES)
at widths 32 and 64, cuDNN beside them, on Hopper; the settings take turns (attention_ab's loop:
what each row says is there).

    PYTHONPATH=. python3 bench/attention_gluon_kv_stages.py [--rounds 3] [--shapes hd64-s512-c ...] [--out FILE]
"""

from __future__ import annotations

import sys

from ab_cli import refused, shapes_parser

# (name, batch, heads, kv_heads, seq, head_dim, causal, dtype): 2^28 scores
SHAPES = (
    ("hd64-s512-c", 32, 32, 32, 512, 64, True, "bf16"),
    ("hd64-s512", 32, 32, 32, 512, 64, False, "bf16"),
    ("hd40-s512-c", 32, 32, 32, 512, 40, True, "bf16"),
    ("hd40-s512", 32, 32, 32, 512, 40, False, "bf16"),
    ("hd32-s512-c", 32, 32, 32, 512, 32, True, "bf16"),
    ("hd48-s1024-c", 16, 32, 32, 1024, 48, True, "bf16"),
    ("hd64-s1024-c", 16, 32, 32, 1024, 64, True, "bf16"),
    ("hd64-s1024", 16, 32, 32, 1024, 64, False, "bf16"),
    ("hd32-s1024-c", 16, 32, 32, 1024, 32, True, "bf16"),
    ("hd64-s2048-c", 8, 32, 32, 2048, 64, True, "bf16"),
    ("hd64-s4096-c", 4, 32, 32, 4096, 64, True, "bf16"),
    ("hd64-s4096", 4, 32, 32, 4096, 64, False, "bf16"),
    ("hd32-s4096-c", 4, 32, 32, 4096, 32, True, "bf16"),
    ("hd64-gqa4-s512-c", 32, 32, 8, 512, 64, True, "bf16"),
    ("hd64-gqa8-s4096-c", 4, 32, 4, 4096, 64, True, "bf16"),
    ("hd64-s512-c-fp16", 32, 32, 32, 512, 64, True, "fp16"),
    ("hd64-s16384-c", 1, 32, 32, 16384, 64, True, "bf16"),
    # thirty-seventh session: not causal past 1024 keys, with the softmax under the last P·V there
    # now (attention_gluon.softmax_under_pv), which releases each K slot later
    ("hd64-s2048", 8, 32, 32, 2048, 64, False, "bf16"),
    ("hd64-s3072", 5, 32, 32, 3072, 64, False, "bf16"),
    ("hd48-s2048", 8, 32, 32, 2048, 48, False, "bf16"),
    ("hd56-gqa4-s2048", 8, 32, 8, 2048, 56, False, "fp16"),
    ("hd32-s2048", 8, 32, 32, 2048, 32, False, "bf16"),
    ("hd64-gqa8-s8192", 2, 32, 4, 8192, 64, False, "bf16"),
    ("hd64-s16384", 1, 32, 32, 16384, 64, False, "bf16"),
)
# KV_STAGES at every length: two slots (shipped before), three, four at widths 32-64.
SETTINGS = {"kv2": {}, "kv3": {32: 3, 48: 3, 64: 3}, "kv4": {32: 4, 48: 4, 64: 4}}


def main(argv=None) -> int:
    parser = shapes_parser(__doc__, SHAPES, SETTINGS)
    parser.add_argument("--no-backward", action="store_true", help="the forward alone")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    if refused(args, SHAPES, SETTINGS):
        return 2
    from attention_ab import compare_settings, hopper

    from gpudoctor.kernels import attention_gluon

    if not hopper():
        return 2
    shipped = (dict(attention_gluon.KV_STAGES), dict(attention_gluon.KV_STAGES_MAX_KEYS),
               attention_gluon.KV_STAGES_MIN_HEAD_DIM)

    def apply(name):
        # A setting holds at every length (name None: the shipped routing).
        forced = (SETTINGS[name], dict.fromkeys(attention_gluon.BLOCK_N, 1 << 31), 0) if name else shipped
        attention_gluon.KV_STAGES, attention_gluon.KV_STAGES_MAX_KEYS, attention_gluon.KV_STAGES_MIN_HEAD_DIM = forced

    compare_settings(SHAPES, args.settings, apply, args.rounds, backward=not args.no_backward, out=args.out,
                     only=args.shapes, all_settings=SETTINGS, shipped=list(shipped))
    return 0


if __name__ == "__main__":
    sys.exit(main())
