"""The wide Gluon backward at head_dim 136-192 on fewer of its tiles' 256 columns
(attention_gluon_backward_wide.NARROW_COLUMNS): 136-160 on 160 and 168-192 on 192 ("c160",
shipped), every one on 192 ("c192"), or all 256 ("c256"); forward+backward through
flash_attention, cuDNN beside them, on Hopper; the settings take turns (attention_ab's loop). The
forward is the same in every setting (its spread is the noise); head dims 200 and 256 run on 256
columns under all three (controls).

    PYTHONPATH=. python3 bench/attention_gluon_backward_columns.py [--rounds 3] [--shapes hd176-gqa8-s2048-c ...] [--settings c160 c192 c256] [--out FILE]
"""

from __future__ import annotations

import sys

from ab_cli import run_settings

# (name, batch, heads, kv_heads, seq, head_dim, causal, dtype): 2^28-2^29 scores (16384 tokens x
# 32 query heads), where the twenty-second session's matrix (bench/attention_matrix.py) had
# forward+backward at head_dim 136-192 under 0.95x cuDNN (hd176 s2048 causal GQA 8:1, hd152/168
# s8192 GQA 4:1, hd184 s8192), and their neighbours.
SHAPES = (
    ("hd176-gqa8-s2048-c", 8, 32, 4, 2048, 176, True, "bf16"),
    ("hd168-gqa4-s8192", 2, 32, 8, 8192, 168, False, "bf16"),
    ("hd152-gqa4-s8192", 2, 32, 8, 8192, 152, False, "fp16"),
    ("hd184-s8192", 2, 32, 32, 8192, 184, False, "bf16"),
    ("hd192-s4096-c", 4, 32, 32, 4096, 192, True, "bf16"),
    ("hd160-s2048-c", 8, 32, 32, 2048, 160, True, "fp16"),
    ("hd136-s1024-c", 16, 32, 32, 1024, 136, True, "bf16"),
    ("hd144-s512-c", 32, 32, 32, 512, 144, True, "bf16"),
    ("hd136-gqa8-s4096-c", 4, 32, 4, 4096, 136, True, "bf16"),
    ("hd144-s2048-c", 8, 32, 32, 2048, 144, True, "bf16"),
    ("hd192-gqa8-s8192-c", 2, 32, 4, 8192, 192, True, "bf16"),
    ("hd176-gqa4-s16384-c", 1, 32, 8, 16384, 176, True, "fp16"),
    ("hd200-s4096", 4, 32, 32, 4096, 200, False, "bf16"),
    ("hd256-s4096-c", 4, 32, 32, 4096, 256, True, "bf16"),
)
# NARROW_COLUMNS by setting: head_dim up to 160 on 160 columns and up to 192 on 192, only the
# second, or every head_dim on 256 columns.
SETTINGS = {"c160": (160, 192), "c192": (192,), "c256": ()}


def main(argv=None) -> int:
    def make_apply():
        from gpudoctor.kernels import attention_gluon_backward_wide

        shipped = attention_gluon_backward_wide.NARROW_COLUMNS

        def apply(label):  # None: the shipped columns
            attention_gluon_backward_wide.NARROW_COLUMNS = shipped if label is None else SETTINGS[label]

        return apply

    return run_settings(__doc__, SHAPES, SETTINGS, make_apply, argv)


if __name__ == "__main__":
    sys.exit(main())
