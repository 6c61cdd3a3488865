"""The Gluon dK/dV kernel's block order in grouped-query calls at head_dim 40-128
(attention_gluon_backward.walk; the wide kernel's: bench/attention_gluon_backward_walk.py): each
query head's blocks in turn ("walk0"), every head of the group at each block ("walk1"), and chunks
of 8, 16, 32 blocks, each head's part in turn ("walk3"-"walk5"; shipped since the thirty-sixth
session: chunks of 8 in causal GQA 8:1 calls at width 128 from 2048 keys, 0 elsewhere), or as
shipped ("routed"). "walk0-again" repeats "walk0" in the same turns: how far two identical
settings land apart is the run's noise.
Forward+backward through flash_attention (deterministic=False), cuDNN beside it, on Hopper; the
settings take turns (attention_ab's loop). The forward is the same in every setting.

    PYTHONPATH=. python3 bench/attention_gluon_backward_narrow_walk.py [--rounds 3] [--shapes hd128-gqa8-s8000-c ...] [--settings walk0 walk4 ...] [--out FILE]
"""

from __future__ import annotations

import sys

from ab_cli import run_settings

# (name, batch, heads, kv_heads, seq, head_dim, causal, dtype): 2^28-2^29 scores (16384 tokens x
# 32 query heads), grouped-query calls at widths 64 and 128, causal GQA 8:1 from 2048 keys first
# (forward+backward hd128 s8000 0.92-0.94x cuDNN in the thirty-sixth session's runs 1 and 5).
SHAPES = (
    ("hd128-gqa8-s8000-c", 2, 32, 4, 8000, 128, True, "bf16"),
    ("hd128-gqa8-s16384-c", 1, 32, 4, 16384, 128, True, "bf16"),
    ("hd128-gqa8-s4096-c", 4, 32, 4, 4096, 128, True, "fp16"),
    ("hd128-gqa8-s2048-c", 8, 32, 4, 2048, 128, True, "bf16"),
    ("hd128-gqa4-s16384-c", 1, 32, 8, 16384, 128, True, "bf16"),
    ("hd64-gqa8-s8192-c", 2, 32, 4, 8192, 64, True, "bf16"),
    ("hd64-gqa8-s16384-c", 1, 32, 4, 16384, 64, True, "fp16"),
    ("hd128-gqa8-s8192", 2, 32, 4, 8192, 128, False, "bf16"),
    # width 128 on fewer columns (attention_gluon_backward.columns), and GQA 16:1
    ("hd96-gqa8-s8192-c", 2, 32, 4, 8192, 96, True, "bf16"),
    ("hd112-gqa8-s4096-c", 4, 32, 4, 4096, 112, True, "fp16"),
    ("hd80-gqa8-s16384-c", 1, 32, 4, 16384, 80, True, "bf16"),
    ("hd128-gqa16-s4096-c", 4, 32, 2, 4096, 128, True, "bf16"),
)
SETTINGS = ("walk0", "walk1", "walk3", "walk4", "walk5", "routed", "walk0-again")


def main(argv=None) -> int:
    def make_apply():
        from gpudoctor.kernels import attention_gluon_backward

        def apply(label):  # None: the shipped rule (attention_gluon_backward.walk)
            attention_gluon_backward.WALK = int(label[4]) if label and label.startswith("walk") else None

        return apply

    return run_settings(__doc__, SHAPES, SETTINGS, make_apply, argv)


if __name__ == "__main__":
    sys.exit(main())
