"""The wide Gluon backward's causal grouped-query programs split by query heads
(attention_gluon_backward_wide.splits): as shipped ("shipped"), unsplit, every program walking
all of its KV head's query heads ("h0"), or at most 4 or 2 query heads a program in every causal
grouped-query call ("h4", "h2"; their float32 dK and dV summed after the kernel), "h4-w4" as h4
walking chunks of 16 blocks (walk 4); forward+backward through flash_attention, cuDNN beside
them, on Hopper; the settings take turns (attention_ab's loop). The forward is the same in every
setting (its spread is the noise); the calls not causal and MHA are controls (never split).

    PYTHONPATH=. python3 bench/attention_gluon_backward_split.py [--rounds 3] [--shapes hd256-gqa8-s4096-c ...] [--settings h0 h4 ...] [--out FILE]
"""

from __future__ import annotations

import sys

from ab_cli import run_settings

# (name, batch, heads, kv_heads, seq, head_dim, causal, dtype): 2^28-2^29 scores (16384 tokens x
# 32 query heads), where the twenty-fourth session's matrix had forward+backward at head_dim
# 200-256 furthest behind cuDNN (causal GQA 8:1: hd232 s4096, hd248 s16384, hd216 s1024,
# hd256 s512/s2048), their neighbours on 160 and 192 columns, GQA 16:1 and 4:1, and controls.
SHAPES = (
    ("hd256-gqa8-s4096-c", 4, 32, 4, 4096, 256, True, "bf16"),
    ("hd232-gqa8-s4096-c", 4, 32, 4, 4096, 232, True, "bf16"),
    ("hd248-gqa8-s16384-c", 1, 32, 4, 16384, 248, True, "bf16"),
    ("hd216-gqa8-s1024-c", 16, 32, 4, 1024, 216, True, "fp16"),
    ("hd256-gqa8-s2048-c", 8, 32, 4, 2048, 256, True, "fp16"),
    ("hd256-gqa8-s512-c", 32, 32, 4, 512, 256, True, "bf16"),
    ("hd200-gqa8-s8192-c", 2, 32, 4, 8192, 200, True, "bf16"),
    ("hd192-gqa8-s8192-c", 2, 32, 4, 8192, 192, True, "bf16"),
    ("hd176-gqa8-s2048-c", 8, 32, 4, 2048, 176, True, "bf16"),
    ("hd136-gqa8-s4096-c", 4, 32, 4, 4096, 136, True, "bf16"),
    ("hd256-gqa16-s8192-c", 2, 32, 2, 8192, 256, True, "bf16"),
    ("hd224-gqa4-s4096-c", 4, 32, 8, 4096, 224, True, "bf16"),
    ("hd256-gqa8-s4096", 4, 32, 4, 4096, 256, False, "bf16"),
    ("hd256-s4096-c", 4, 32, 32, 4096, 256, True, "bf16"),
    # where the matrix after the split had them under 0.95 or lower than before (run 6)
    ("hd200-gqa8-s1024-c", 16, 32, 4, 1024, 200, True, "fp16"),
    ("hd216-gqa8-s4096-c", 4, 32, 4, 4096, 216, True, "fp16"),
    ("hd208-gqa8-s2048-c", 8, 32, 4, 2048, 208, True, "bf16"),
    ("hd240-gqa8-s512-c", 32, 32, 4, 512, 240, True, "fp16"),
    # still under 0.95x after the twenty-sixth session's change (K's and V's operands each block
    # in split programs, which took most of their spills away)
    ("hd232-gqa8-s16384-c", 1, 32, 4, 16384, 232, True, "fp16"),
    ("hd248-gqa4-s4096-c", 4, 32, 8, 4096, 248, True, "fp16"),
)
# (query heads a split program walks (None: never split), walk or None as routed); "shipped": the
# shipped rule (attention_gluon_backward_wide.splits)
SETTINGS = {"shipped": None, "h0": (None, None), "h4": (4, None), "h2": (2, None), "h4-w4": (4, 4)}


def main(argv=None) -> int:
    def make_apply():
        from gpudoctor.kernels import attention_gluon_backward_wide as wide

        shipped = (wide.SPLIT_MIN_GROUP, wide.SPLIT, wide.WALK)

        def apply(label):  # None: the shipped splits
            if SETTINGS.get(label) is None:
                wide.SPLIT_MIN_GROUP, wide.SPLIT, wide.WALK = shipped
                return
            heads, walk = SETTINGS[label]
            wide.SPLIT_MIN_GROUP = shipped[0] if heads else 1 << 30
            wide.SPLIT, wide.WALK = heads, walk

        return apply

    return run_settings(__doc__, SHAPES, SETTINGS, make_apply, argv)


if __name__ == "__main__":
    sys.exit(main())
