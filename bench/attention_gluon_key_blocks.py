"""The Gluon forward's key blocks at widths 32-128 in causal calls: as shipped ("shipped": 64 keys
a block up to attention_gluon.NARROW_KEY_BLOCKS_MAX_KEYS), 128 keys a block ("n128"), or 64 at
every length with twice the K/V slots (the same bytes, "n64"), the same slots ("n64-slots1"), or
the consumers taking turns ("n64-pp"); cuDNN beside them, on Hopper; the settings take turns
(attention_ab's loop). The calls not causal are controls (never narrowed).

    PYTHONPATH=. python3 bench/attention_gluon_key_blocks.py [--rounds 3] [--shapes hd64-s512-c ...] [--settings n128 n64] [--no-backward] [--out FILE]
"""

from __future__ import annotations

import sys

from ab_cli import run_settings

# (name, batch, heads, kv_heads, seq, head_dim, causal, dtype): 2^28 scores (16384 tokens x 32
# query heads), where the matrix and the A/B benches had the causal forward furthest behind cuDNN
# (512 keys at head_dim 40-128, GQA 8:1 and 4:1 among them), longer calls to see where a change
# stops paying (768 and 640 keys: 1.5 x 2^27 and 1.25 x 2^27 scores), the training pass's call,
# and a control.
SHAPES = (
    ("hd64-s512-c", 32, 32, 32, 512, 64, True, "bf16"),
    ("hd40-s512-c", 32, 32, 32, 512, 40, True, "bf16"),
    ("hd32-s512-c", 32, 32, 32, 512, 32, True, "bf16"),
    ("hd48-gqa8-s512-c", 32, 32, 4, 512, 48, True, "bf16"),
    ("hd64-s512-c-fp16", 32, 32, 32, 512, 64, True, "fp16"),
    ("hd80-gqa4-s512-c", 32, 32, 8, 512, 80, True, "bf16"),
    ("hd96-s512-c", 32, 32, 32, 512, 96, True, "fp16"),
    ("hd128-s512-c", 32, 32, 32, 512, 128, True, "bf16"),
    ("hd128-gqa8-s512-c", 32, 32, 4, 512, 128, True, "bf16"),
    ("hd64-s768-c", 16, 32, 32, 768, 64, True, "bf16"),
    ("hd40-s768-c", 16, 32, 32, 768, 40, True, "bf16"),
    ("hd128-s768-c", 16, 32, 32, 768, 128, True, "bf16"),
    ("hd96-gqa4-s640-c", 16, 32, 8, 640, 96, True, "fp16"),
    ("hd48-s1024-c", 16, 32, 32, 1024, 48, True, "bf16"),
    ("hd64-s1024-c", 16, 32, 32, 1024, 64, True, "bf16"),
    ("hd128-s1024-c", 16, 32, 32, 1024, 128, True, "bf16"),
    ("hd64-s2048-c", 8, 32, 32, 2048, 64, True, "bf16"),
    ("hd128-s2048-c", 8, 32, 32, 2048, 128, True, "bf16"),
    ("hd64-s4096-c", 4, 32, 32, 4096, 64, True, "bf16"),
    ("hd128-s4096-c", 4, 32, 32, 4096, 128, True, "bf16"),
    ("train-hd80-s256-c", 4, 32, 32, 256, 80, True, "bf16"),
    ("hd64-s512", 32, 32, 32, 512, 64, False, "bf16"),
)
# (NARROW_KEY_BLOCKS_MAX_KEYS, NARROW_KEY_BLOCK_SLOTS, PINGPONG_CAUSAL_MIN_KEYS or None as
# shipped); "n128": none narrowed; "shipped": the shipped routing; "n64-pp": the consumers taking
# turns at widths 48-128 too.
EVERY_LENGTH = dict.fromkeys((32, 48, 64, 96, 128), 1 << 31)  # BLOCK_N's widths of 128 keys
SETTINGS = {"shipped": None, "n128": ({}, 2, None), "n64": (EVERY_LENGTH, 2, None),
            "n64-slots1": (EVERY_LENGTH, 1, None), "n64-pp": (EVERY_LENGTH, 2, {48: 0, 64: 0, 96: 0, 128: 0})}


def main(argv=None) -> int:
    def make_apply():
        from gpudoctor.kernels import attention_gluon

        shipped = (dict(attention_gluon.NARROW_KEY_BLOCKS_MAX_KEYS), attention_gluon.NARROW_KEY_BLOCK_SLOTS,
                   dict(attention_gluon.PINGPONG_CAUSAL_MIN_KEYS))

        def apply(label):  # None: the shipped routing
            limits, slots, turns = (SETTINGS[label] if label else None) or shipped
            attention_gluon.NARROW_KEY_BLOCKS_MAX_KEYS, attention_gluon.NARROW_KEY_BLOCK_SLOTS = dict(limits), slots
            attention_gluon.PINGPONG_CAUSAL_MIN_KEYS = dict(turns if turns is not None else shipped[2])

        return apply

    return run_settings(__doc__, SHAPES, SETTINGS, make_apply, argv)


if __name__ == "__main__":
    sys.exit(main())
