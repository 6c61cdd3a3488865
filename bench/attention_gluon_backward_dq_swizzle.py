"""The Gluon backward summing dQ with each dQ share staged for its TMA reduce-add in a float32 tile of
32-byte swizzle ("s32") or of 128-byte ("s128", shipped: attention_gluon_backward.DQ_SWIZZLE_BYTES,
where each of the share's 64-bit stores takes twice the shared-memory wavefronts it needs).
"s128-again" repeats "s128" in the same turns: how far two identical settings land apart is the
run's noise. Widths 64, 128 and 256 (the wide kernel stages its dQ chunks alike). Forward+backward
through flash_attention (deterministic=False), cuDNN beside them, on Hopper; the settings take turns
(attention_ab's loop). The forward is the same in every setting.

    PYTHONPATH=. python3 bench/attention_gluon_backward_dq_swizzle.py [--rounds 3] [--shapes hd128-s4096 ...] [--settings s32 s128 ...] [--out FILE]
"""

from __future__ import annotations

import sys

from ab_cli import module_settings, run_settings

# (name, batch, heads, kv_heads, seq, head_dim, causal, dtype): 2^28-2^29 scores (16384 tokens x
# 32 query heads), the matrix's (bench/attention_matrix.py) forward+backward cells under 1.00x in
# the thirty-first to thirty-third sessions and neighbours at each width.
SHAPES = (
    ("hd128-gqa4-s16384", 1, 32, 8, 16384, 128, False, "bf16"),
    ("hd128-s4096", 4, 32, 32, 4096, 128, False, "fp16"),
    ("hd128-s512-c", 32, 32, 32, 512, 128, True, "bf16"),
    ("hd112-gqa4-s16384", 1, 32, 8, 16384, 112, False, "fp16"),
    ("hd112-s512-c", 32, 32, 32, 512, 112, True, "fp16"),
    ("hd96-gqa8-s16384", 1, 32, 4, 16384, 96, False, "bf16"),
    ("hd64-s16384", 1, 32, 32, 16384, 64, False, "bf16"),
    ("hd56-s512", 32, 32, 32, 512, 56, False, "fp16"),
    ("hd48-s2048-c", 8, 32, 32, 2048, 48, True, "bf16"),
    ("hd232-gqa8-s16384-c", 1, 32, 4, 16384, 232, True, "fp16"),
    ("hd256-s4096-c", 4, 32, 32, 4096, 256, True, "bf16"),
    ("hd176-gqa4-s8192", 2, 32, 8, 8192, 176, False, "bf16"),
)
# DQ_SWIZZLE_BYTES by setting (None: the layout's default, 128 bytes at these widths)
SETTINGS = {"s128": None, "s32": 32, "s128-again": None}


def main(argv=None) -> int:
    make_apply = module_settings("gpudoctor.kernels.attention_gluon_backward", "DQ_SWIZZLE_BYTES", SETTINGS)
    return run_settings(__doc__, SHAPES, SETTINGS, make_apply, argv)


if __name__ == "__main__":
    sys.exit(main())
