"""The Gluon backward at head_dim 72-96 on 96 of width 128's columns
(attention_gluon_backward.NARROW_COLUMNS, "n96", shipped) or on all 128 ("n128", as before the
thirty-first session); and head_dim 80 summing dQ in that kernel too ("n96-hd80": 80 added to
attention.GLUON_SUMMED_DQ_HEAD_DIMS, which left it to the Triton backward's 64 + 16 columns);
forward+backward through flash_attention (deterministic=False: the Gluon kernel sums dQ), cuDNN
beside them, on Hopper; the settings take turns (attention_ab's loop). The forward is the same in
every setting (its spread is the noise).

    PYTHONPATH=. python3 bench/attention_gluon_backward_narrow.py [--rounds 3] [--shapes hd96-s512-c ...] [--settings n96 n128 n96-hd80] [--out FILE]
"""

from __future__ import annotations

import sys

from ab_cli import run_settings

# (name, batch, heads, kv_heads, seq, head_dim, causal, dtype): 2^28-2^29 scores (16384 tokens x
# 32 query heads), the thirtieth session's forward shapes at head_dim 72-96 and the matrix's
# (bench/attention_matrix.py) forward+backward cells under 1.00x there (hd80 s8192 causal GQA 8:1
# fp16, hd96 s16384 not causal GQA 8:1).
SHAPES = (
    ("hd96-s512-c", 32, 32, 32, 512, 96, True, "bf16"),
    ("hd88-gqa4-s512", 32, 32, 8, 512, 88, False, "bf16"),
    ("hd88-s1024-c", 16, 32, 32, 1024, 88, True, "fp16"),
    ("hd72-gqa8-s2048", 8, 32, 4, 2048, 72, False, "bf16"),
    ("hd96-s2048-c", 8, 32, 32, 2048, 96, True, "bf16"),
    ("hd72-s4096", 4, 32, 32, 4096, 72, False, "bf16"),
    ("hd96-gqa4-s4096-c", 4, 32, 8, 4096, 96, True, "fp16"),
    ("hd88-s8192", 2, 32, 32, 8192, 88, False, "bf16"),
    ("hd96-gqa8-s16384", 1, 32, 4, 16384, 96, False, "bf16"),
    ("hd72-gqa8-s16384-c", 1, 32, 4, 16384, 72, True, "bf16"),
    # head_dim 80: the Triton backward (64 + 16 columns) in n96 and n128, the Gluon kernel on 96
    # columns summing dQ in n96-hd80
    ("hd80-gqa8-s8192-c", 2, 32, 4, 8192, 80, True, "fp16"),
    ("hd80-s4096", 4, 32, 32, 4096, 80, False, "bf16"),
    ("hd80-s2048-c", 8, 32, 32, 2048, 80, True, "bf16"),
    ("hd80-gqa4-s512-c", 32, 32, 8, 512, 80, True, "fp16"),
)
# (the narrow kernel's NARROW_COLUMNS, head dims added to GLUON_SUMMED_DQ_HEAD_DIMS) by setting
SETTINGS = {"n96": ({128: 96}, ()), "n128": ({}, ()), "n96-hd80": ({128: 96}, (80,))}


def main(argv=None) -> int:
    def make_apply():
        from gpudoctor.kernels import attention, attention_gluon_backward

        shipped = (attention_gluon_backward.NARROW_COLUMNS, attention.GLUON_SUMMED_DQ_HEAD_DIMS)

        def apply(label):  # None: as shipped
            narrow, summed = shipped if label is None else (SETTINGS[label][0], shipped[1] + SETTINGS[label][1])
            attention_gluon_backward.NARROW_COLUMNS = narrow
            if attention.GLUON_SUMMED_DQ_HEAD_DIMS != summed:
                attention.GLUON_SUMMED_DQ_HEAD_DIMS = summed
                attention._select_config.cache_clear()  # it remembers each head_dim's routing

        return apply

    return run_settings(__doc__, SHAPES, SETTINGS, make_apply, argv)


if __name__ == "__main__":
    sys.exit(main())
