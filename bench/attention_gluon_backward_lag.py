"""The Gluon backward at head_dim 40-128 summing dQ, each warpgroup's dQ share of a block computed
in the next block's step ("lag": attention_gluon_backward.DQ_SHARE_LAG at widths 64 and 128,
causal or not; shipped at 64, and at 128 in causal calls) or in the block's own ("same", as
before the thirty-third session). "same-again" repeats "same" in the same turns: how far two
identical settings land apart is the run's noise. Forward+backward through flash_attention
(deterministic=False), cuDNN beside them, on Hopper; the settings take turns (attention_ab's
loop). The forward is the same in every setting.

    PYTHONPATH=. python3 bench/attention_gluon_backward_lag.py [--rounds 3] [--shapes hd56-s512 ...] [--settings lag same ...] [--out FILE]
"""

from __future__ import annotations

import sys

from ab_cli import module_settings, run_settings

# (name, batch, heads, kv_heads, seq, head_dim, causal, dtype): 2^28-2^29 scores (16384 tokens x
# 32 query heads), the matrix's (bench/attention_matrix.py) cells at head_dim 40-128 whose backward
# took longer than cuDNN's in the thirtieth and thirty-first sessions' runs (5, 2), and neighbours:
# widths 64 and 128, on fewer columns (48, 96) too, causal or not, MHA and GQA, 512-16384 keys.
SHAPES = (
    ("hd56-s512", 32, 32, 32, 512, 56, False, "fp16"),
    ("hd112-s512-c", 32, 32, 32, 512, 112, True, "fp16"),
    ("hd128-s512-c", 32, 32, 32, 512, 128, True, "bf16"),
    ("hd88-s1024-c", 16, 32, 32, 1024, 88, True, "bf16"),
    ("hd40-s4096-c", 4, 32, 32, 4096, 40, True, "bf16"),
    ("hd48-s4096", 4, 32, 32, 4096, 48, False, "bf16"),
    ("hd128-s4096", 4, 32, 32, 4096, 128, False, "fp16"),
    ("hd128-gqa4-s8192-c", 2, 32, 8, 8192, 128, True, "bf16"),
    ("hd80-gqa8-s8192-c", 2, 32, 4, 8192, 80, True, "fp16"),
    ("hd72-gqa4-s8192", 2, 32, 8, 8192, 72, False, "bf16"),
    ("hd120-gqa8-s8192", 2, 32, 4, 8192, 120, False, "fp16"),
    ("hd104-s16384-c", 1, 32, 32, 16384, 104, True, "fp16"),
    ("hd64-s16384", 1, 32, 32, 16384, 64, False, "bf16"),
    ("hd48-gqa8-s1024", 16, 32, 4, 1024, 48, False, "fp16"),
    ("hd64-s2048", 8, 32, 32, 2048, 64, False, "bf16"),
    ("hd40-gqa4-s512", 32, 32, 8, 512, 40, False, "bf16"),
    # thirty-seventh session: width 128 not causal (same as shipped) at the matrix's grouped-query
    # cells under 1.00x (runs 10-12 of the thirty-sixth session) and neighbours
    ("hd128-gqa4-s16384", 1, 32, 8, 16384, 128, False, "bf16"),
    ("hd112-gqa4-s16384", 1, 32, 8, 16384, 112, False, "fp16"),
    ("hd128-gqa8-s16384", 1, 32, 4, 16384, 128, False, "bf16"),
    ("hd104-s8192", 2, 32, 32, 8192, 104, False, "bf16"),
    ("hd96-gqa4-s4096", 4, 32, 8, 4096, 96, False, "bf16"),
    ("hd128-gqa4-s2048", 8, 32, 8, 2048, 128, False, "fp16"),
)
# DQ_SHARE_LAG by setting: "lag" at both widths, causal or not
LAG_EVERYWHERE = {64: (True, True), 128: (True, True)}
SETTINGS = {"same": {}, "lag": LAG_EVERYWHERE, "same-again": {}}


def main(argv=None) -> int:
    make_apply = module_settings("gpudoctor.kernels.attention_gluon_backward", "DQ_SHARE_LAG", SETTINGS)
    return run_settings(__doc__, SHAPES, SETTINGS, make_apply, argv)


if __name__ == "__main__":
    sys.exit(main())
