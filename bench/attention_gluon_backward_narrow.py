"""The Gluon backward at head_dim 72-96 on 96 of width 128's columns and 104-112 on 112
(attention_gluon_backward.NARROW_COLUMNS) or on all 128; head_dim 80 summing dQ in that kernel
(attention.GLUON_SUMMED_DQ_HEAD_DIMS) or in the Triton backward's 64 + 16 columns; head_dim 40-48 on
48 of width 64's columns (32 + 16) or on all 64. Settings: "n96-hd80" (96 columns, hd80 in the
Gluon kernel: shipped in the thirty-first session until n48), "n96" (96 columns, hd80 in the Triton
backward), "n128" (as before that session), "n48" (n96-hd80 and 48 columns at width 64 in causal
calls: shipped from later in that session until n112), "n48-all" (48 columns causal or not),
"n112" (n48 and head_dim 104-112 on 112 columns: the score products contract over 64 + 32 + 16, dK and
dV on all 128, attention_gluon_backward.gradient_parts: thirty-fourth session),
"n112-same" (n112 with each dQ share in its own block at width 128, attention_gluon_backward.DQ_SHARE_LAG,
for causal calls: ptxas spills more scalars on 112 columns with the lag).
Forward+backward through flash_attention (deterministic=False: the Gluon kernel sums dQ), cuDNN
beside them, on Hopper; the settings take turns (attention_ab's loop). The forward is the same in
every setting (its spread is the noise).

    PYTHONPATH=. python3 bench/attention_gluon_backward_narrow.py [--rounds 3] [--shapes hd96-s512-c ...] [--settings n96-hd80 n128 ...] [--out FILE]
"""

from __future__ import annotations

import sys

from ab_cli import run_settings, set_routing

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
    # head_dim 40-48 (width 64 but in n48's causal calls and n48-all's): the matrix's
    # forward+backward cells under 1.01x in the thirty-first session's run 2, and their neighbours
    ("hd48-s4096", 4, 32, 32, 4096, 48, False, "bf16"),
    ("hd48-s8192-c", 2, 32, 32, 8192, 48, True, "fp16"),
    ("hd48-s2048-c", 8, 32, 32, 2048, 48, True, "bf16"),
    ("hd40-gqa8-s8192", 2, 32, 4, 8192, 40, False, "bf16"),
    ("hd40-gqa4-s512", 32, 32, 8, 512, 40, False, "bf16"),
    ("hd48-gqa8-s512-c", 32, 32, 4, 512, 48, True, "fp16"),
    ("hd40-gqa8-s16384-c", 1, 32, 4, 16384, 40, True, "fp16"),
    ("hd40-s4096-c", 4, 32, 32, 4096, 40, True, "bf16"),
    ("hd48-gqa4-s1024-c", 16, 32, 8, 1024, 48, True, "bf16"),
    # head_dim 104-112 (n112, n112-same): the matrix's forward+backward cells under 1.00x in the
    # thirty-first to thirty-third sessions (hd112 s16384 and s4096 GQA 4:1 not causal, s512
    # causal) and their neighbours
    ("hd112-gqa4-s16384", 1, 32, 8, 16384, 112, False, "fp16"),
    ("hd112-gqa4-s4096", 4, 32, 8, 4096, 112, False, "bf16"),
    ("hd112-s512-c", 32, 32, 32, 512, 112, True, "fp16"),
    ("hd104-s8192", 2, 32, 32, 8192, 104, False, "bf16"),
    ("hd104-s16384-c", 1, 32, 32, 16384, 104, True, "bf16"),
    ("hd112-gqa8-s8192-c", 2, 32, 4, 8192, 112, True, "fp16"),
    ("hd104-gqa8-s1024", 16, 32, 4, 1024, 104, False, "bf16"),
    ("hd112-s2048-c", 8, 32, 32, 2048, 112, True, "bf16"),
)
# (the narrow kernel's NARROW_COLUMNS, whether head_dim 80 sums dQ in it, NARROW_CAUSAL_ONLY, whether
# the dQ shares lag at width 128 in causal calls) by setting
SETTINGS = {"n96-hd80": ({128: (96,)}, True, {64}, True), "n96": ({128: (96,)}, False, {64}, True),
            "n128": ({}, False, {64}, True), "n48": ({64: (48,), 128: (96,)}, True, {64}, True),
            "n48-all": ({64: (48,), 128: (96,)}, True, set(), True),
            "n112": ({64: (48,), 128: (96, 112)}, True, {64}, True),
            "n112-same": ({64: (48,), 128: (96, 112)}, True, {64}, False)}


def main(argv=None) -> int:
    def make_apply():
        from gpudoctor.kernels import attention, attention_gluon_backward

        shipped = (attention_gluon_backward.NARROW_COLUMNS, attention.GLUON_SUMMED_DQ_HEAD_DIMS,
                   attention_gluon_backward.NARROW_CAUSAL_ONLY, attention_gluon_backward.DQ_SHARE_LAG)

        def apply(label):  # None: as shipped
            if label is None:
                narrow, summed, causal_only, lag = shipped
            else:
                narrow, hd80, causal_only, causal_lag = SETTINGS[label]
                summed = tuple(sorted({*shipped[1], 80} if hd80 else set(shipped[1]) - {80}))
                lag = {**shipped[3], 128: (causal_lag, shipped[3].get(128, (False, False))[1])}
            attention_gluon_backward.NARROW_COLUMNS = narrow
            attention_gluon_backward.NARROW_CAUSAL_ONLY = causal_only
            attention_gluon_backward.DQ_SHARE_LAG = lag
            set_routing(attention, "GLUON_SUMMED_DQ_HEAD_DIMS", summed)

        return apply

    return run_settings(__doc__, SHAPES, SETTINGS, make_apply, argv)


if __name__ == "__main__":
    sys.exit(main())
