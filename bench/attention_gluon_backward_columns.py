"""The wide Gluon backward at head_dim 136-224 on fewer of its tiles' 256 columns
(attention_gluon_backward_wide.NARROW_COLUMNS): 136-160 on 160, 168-192 on 192 and 200-224 on 224
("c224", shipped), as the twenty-fourth session left it, 200-224 on 256 ("c160"), every one up to
192 on 192 ("c192"), or all 256 ("c256"); summing dQ, K's and V's operands as routed
(attention_gluon_backward_wide.kv_each_block), or "-hoisted" out of the loop everywhere (as before
the twenty-sixth session), or worked out in "-each" block everywhere;
forward+backward through flash_attention, cuDNN beside them, on Hopper; the settings take turns
(attention_ab's loop). The forward is the same in every setting (its spread is the noise); head
dims 232-256 run on 256 columns in every setting (controls for the columns, not for hoisting).

    PYTHONPATH=. python3 bench/attention_gluon_backward_columns.py [--rounds 3] [--shapes hd176-gqa8-s2048-c ...] [--settings c224 c160 c160-hoisted ...] [--out FILE]
"""

from __future__ import annotations

import sys

from ab_cli import module_settings, run_settings

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
    # head_dim 200-224, where the twenty-fifth session's matrix (bench/attention_matrix.py, run 6)
    # had forward+backward under 0.97x cuDNN, and their neighbours; hd232 on 256 columns (control)
    ("hd200-s8192", 2, 32, 32, 8192, 200, False, "bf16"),
    ("hd216-gqa8-s4096-c", 4, 32, 4, 4096, 216, True, "fp16"),
    ("hd200-gqa8-s1024-c", 16, 32, 4, 1024, 200, True, "fp16"),
    ("hd216-s16384-c", 1, 32, 32, 16384, 216, True, "bf16"),
    ("hd208-gqa4-s8192-c", 2, 32, 8, 8192, 208, True, "fp16"),
    ("hd224-s4096", 4, 32, 32, 4096, 224, False, "fp16"),
    ("hd224-s2048-c", 8, 32, 32, 2048, 224, True, "fp16"),
    ("hd224-gqa4-s8192-c", 2, 32, 8, 8192, 224, True, "bf16"),
    ("hd208-s512-c", 32, 32, 32, 512, 208, True, "fp16"),
    ("hd216-gqa8-s2048", 8, 32, 4, 2048, 216, False, "bf16"),
    ("hd232-gqa8-s4096-c", 4, 32, 4, 4096, 232, True, "bf16"),
    ("hd256-gqa8-s512-c", 32, 32, 4, 512, 256, True, "bf16"),
    ("hd248-gqa8-s16384-c", 1, 32, 4, 16384, 248, True, "bf16"),
    ("hd256-s8192-c", 2, 32, 32, 8192, 256, True, "bf16"),
    # GQA 4:1 and MHA cells the matrix had lower after this session's change (run 6), one round
    ("hd248-gqa4-s4096-c", 4, 32, 8, 4096, 248, True, "fp16"),
    ("hd248-gqa4-s1024-c", 16, 32, 8, 1024, 248, True, "bf16"),
    ("hd232-gqa4-s1024-c", 16, 32, 8, 1024, 232, True, "fp16"),
    ("hd208-gqa4-s4096", 4, 32, 8, 4096, 208, False, "bf16"),
    ("hd208-gqa4-s2048-c", 8, 32, 8, 2048, 208, True, "bf16"),
    ("hd240-s4096", 4, 32, 32, 4096, 240, False, "bf16"),
)
# (NARROW_COLUMNS, HOISTED_KV) by setting: head_dim up to 160 on 160 columns, up to 192 on 192 and
# up to 224 on 224; the first two; only 192; or every head_dim on 256 columns; K's and V's
# operands as routed (None), hoisted everywhere (True) or worked out in each block (False).
SETTINGS = {"c224": ((160, 192, 224), None), "c160": ((160, 192), None), "c192": ((192,), None),
            "c256": ((), None), "c224-each": ((160, 192, 224), False), "c224-hoisted": ((160, 192, 224), True),
            "c160-each": ((160, 192), False), "c160-hoisted": ((160, 192), True)}


def main(argv=None) -> int:
    make_apply = module_settings("gpudoctor.kernels.attention_gluon_backward_wide", ("NARROW_COLUMNS", "HOISTED_KV"),
                                 SETTINGS)
    return run_settings(__doc__, SHAPES, SETTINGS, make_apply, argv)


if __name__ == "__main__":
    sys.exit(main())
