"""The Gluon forward in causal calls with a ragged seq_k and no more queries than keys: without the
mask of the keys past seq_k, which the causal mask hides from every stored row ("covers", shipped:
attention_gluon.CAUSAL_MASK_COVERS_SEQ_K), or with it as before the thirty-sixth session
("masks": both masks' selects in the masked blocks, and the key loop in two parts wherever
ragged, attention_gluon.masked_last). "covers-again" repeats "covers" in the same turns: how far
two identical settings land apart is the run's noise. Forward and forward+backward through
flash_attention (deterministic=False), cuDNN beside them, on Hopper; the settings take turns
(attention_ab's loop). The backward is the same in every setting.

    PYTHONPATH=. python3 bench/attention_gluon_causal_covers.py [--rounds 3] [--shapes hd64-s1000-c ...] [--settings covers masks ...] [--out FILE]
"""

from __future__ import annotations

import sys

from ab_cli import module_settings, run_settings

# (name, batch, heads, kv_heads, seq, head_dim, causal, dtype): ragged causal self-attention at
# each width (a job's padded batches: lengths that are no multiple of the key block), MHA and GQA,
# 64- and 128-key blocks; and two calls with the same code in every setting (whole, not causal).
SHAPES = (
    ("hd64-s1000-c", 8, 32, 32, 1000, 64, True, "bf16"),
    ("hd64-s1024-c", 8, 32, 32, 1024, 64, True, "bf16"),
    ("hd40-s1000-c", 8, 32, 32, 1000, 40, True, "bf16"),
    ("hd64-s700-c", 16, 32, 32, 700, 64, True, "bf16"),
    ("hd80-gqa4-s3000-c", 4, 32, 8, 3000, 80, True, "fp16"),
    ("hd96-s1000-c", 8, 32, 32, 1000, 96, True, "fp16"),
    ("hd128-s1000-c", 8, 32, 32, 1000, 128, True, "bf16"),
    ("hd128-gqa8-s8000-c", 2, 32, 4, 8000, 128, True, "bf16"),
    ("hd192-s2000-c", 4, 32, 32, 2000, 192, True, "bf16"),
    ("hd256-s1500-c", 4, 32, 32, 1500, 256, True, "bf16"),
    ("hd64-s16000-c", 1, 32, 32, 16000, 64, True, "bf16"),
    ("hd128-s1000", 8, 32, 32, 1000, 128, False, "bf16"),
)
# CAUSAL_MASK_COVERS_SEQ_K by setting
SETTINGS = {"covers": True, "masks": False, "covers-again": True}


def main(argv=None) -> int:
    make_apply = module_settings("gpudoctor.kernels.attention_gluon", "CAUSAL_MASK_COVERS_SEQ_K", SETTINGS)
    return run_settings(__doc__, SHAPES, SETTINGS, make_apply, argv)


if __name__ == "__main__":
    sys.exit(main())
