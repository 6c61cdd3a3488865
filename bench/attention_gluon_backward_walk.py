"""The wide Gluon backward's block order in grouped-query calls (attention_gluon_backward_wide.walk):
each query head's blocks in turn ("walk0"), every head of the group at each block ("walk1"), that
from the last block ("walk2"), and chunks of 8, 16, 32 blocks, each head's part in turn
("walk3"-"walk5"), forward+backward through flash_attention, cuDNN beside them, on Hopper; the
settings take turns (attention_ab's loop). The forward is the same in every setting (its spread
is the noise).

    PYTHONPATH=. python3 bench/attention_gluon_backward_walk.py [--rounds 3] [--shapes hd256-gqa8-s4096-c ...] [--settings walk0 ...] [--out FILE]
"""

from __future__ import annotations

import sys

from ab_cli import run_settings

# (name, batch, heads, kv_heads, seq, head_dim, causal, dtype): 2^28-2^29 scores (16384 tokens x
# 32 query heads), where the twenty-second session's matrix (bench/attention_matrix.py) had the
# wide backward furthest behind cuDNN: causal GQA 8:1 from 2048 keys.
SHAPES = (
    ("hd256-gqa8-s4096-c", 4, 32, 4, 4096, 256, True, "bf16"),
    ("hd232-gqa8-s4096-c", 4, 32, 4, 4096, 232, True, "bf16"),
    ("hd192-gqa8-s8192-c", 2, 32, 4, 8192, 192, True, "bf16"),
    ("hd248-gqa8-s16384-c", 1, 32, 4, 16384, 248, True, "bf16"),
    ("hd224-gqa4-s8192-c", 2, 32, 8, 8192, 224, True, "bf16"),
    ("hd176-gqa4-s16384-c", 1, 32, 8, 16384, 176, True, "fp16"),
    ("hd256-gqa8-s2048-c", 8, 32, 4, 2048, 256, True, "fp16"),
    ("hd176-gqa8-s4096-c", 4, 32, 4, 4096, 176, True, "fp16"),
    ("hd160-gqa8-s2048-c", 8, 32, 4, 2048, 160, True, "bf16"),
    ("hd208-gqa8-s2048-c", 8, 32, 4, 2048, 208, True, "fp16"),
    ("hd200-gqa8-s4096-c", 4, 32, 4, 4096, 200, True, "bf16"),
    ("hd176-gqa8-s8192-c", 2, 32, 4, 8192, 176, True, "fp16"),
    ("hd256-gqa8-s8192-c", 2, 32, 4, 8192, 256, True, "bf16"),
    ("hd200-gqa8-s16384-c", 1, 32, 4, 16384, 200, True, "bf16"),
    ("hd256-gqa16-s8192-c", 2, 32, 2, 8192, 256, True, "bf16"),
    ("hd256-s4096-c", 4, 32, 32, 4096, 256, True, "bf16"),
    ("hd256-gqa8-s8192", 2, 32, 4, 8192, 256, False, "bf16"),
    ("hd200-gqa4-s4096", 4, 32, 8, 4096, 200, False, "bf16"),
)
# "-g8": with causal programs heaviest first in groups of 8 KV heads
# (attention_gluon_backward_wide.LONGEST_FIRST_HEADS), against launch order (shipped).
SETTINGS = ("walk0", "walk2", "walk3", "walk4", "walk5", "walk0-g8", "walk4-g8")


def main(argv=None) -> int:
    def make_apply():
        from gpudoctor.kernels import attention_gluon_backward_wide

        shipped_order = attention_gluon_backward_wide.LONGEST_FIRST_HEADS

        def apply(label):  # None: the shipped rule (attention_gluon_backward_wide.walk) and order
            walk, _, group = (label or "").partition("-g")
            attention_gluon_backward_wide.WALK = int(walk[-1]) if walk else None
            attention_gluon_backward_wide.LONGEST_FIRST_HEADS = int(group) if group else shipped_order

        return apply

    return run_settings(__doc__, SHAPES, SETTINGS, make_apply, argv)


if __name__ == "__main__":
    sys.exit(main())
