"""The Gluon forward's key loop with the blocks no mask reaches run apart from the masked ones at
a tile's end ("last", shipped: attention_gluon.MASKED_BLOCKS_LAST, in causal calls that mask a
ragged seq_k and at MASKED_BLOCKS_LAST_WIDTHS), the same at every width from 96 ("last-wide", as
in the thirty-fifth session), or every block through the causal and ragged-length masks
("every", as before it, where ptxas turned the masks into selects over every score of every
block). "last-again" repeats "last" in the same turns: how far two identical settings land apart
is the run's noise. Forward and forward+backward through flash_attention (deterministic=False),
cuDNN beside them, on Hopper; the settings take turns (attention_ab's loop). The backward is the
same in every setting.

    PYTHONPATH=. python3 bench/attention_gluon_masked_last.py [--rounds 3] [--shapes hd64-s1000-c ...] [--settings last every ...] [--no-backward] [--out FILE]
"""

from __future__ import annotations

import sys

from ab_cli import run_settings

# (name, batch, heads, kv_heads, seq, head_dim, causal, dtype): causal calls at each width, whole
# and ragged lengths (a job's padded batches), MHA and GQA; ragged calls not causal; and a call
# with neither mask (the same code in every setting).
SHAPES = (
    ("hd64-s1000-c", 8, 32, 32, 1000, 64, True, "bf16"),
    ("hd64-s1024-c", 8, 32, 32, 1024, 64, True, "bf16"),
    ("hd48-s2048-c", 8, 32, 32, 2048, 48, True, "bf16"),
    ("hd96-s1000-c", 8, 32, 32, 1000, 96, True, "fp16"),
    ("hd128-s1000-c", 8, 32, 32, 1000, 128, True, "bf16"),
    ("hd128-s4096-c", 4, 32, 32, 4096, 128, True, "bf16"),
    ("hd128-gqa4-s8192-c", 2, 32, 8, 8192, 128, True, "fp16"),
    ("hd80-s256-c-train", 4, 32, 32, 256, 80, True, "bf16"),
    ("hd192-s2000-c", 4, 32, 32, 2000, 192, True, "bf16"),
    ("hd256-s4096-c", 4, 32, 32, 4096, 256, True, "bf16"),
    ("hd64-s16384-c", 1, 32, 32, 16384, 64, True, "bf16"),
    ("hd128-s1000", 8, 32, 32, 1000, 128, False, "bf16"),
    ("hd64-s4000", 4, 32, 32, 4000, 64, False, "bf16"),
    ("hd64-s4096", 4, 32, 32, 4096, 64, False, "bf16"),
    # causal at widths 96-256 without the seq_k mask (thirty-sixth session: whole, or ragged
    # self-attention, attention_gluon.checks_seq_k)
    ("hd96-s4096-c", 4, 32, 32, 4096, 96, True, "bf16"),
    ("hd128-s2000-c", 4, 32, 32, 2000, 128, True, "bf16"),
    ("hd160-s4096-c", 4, 32, 32, 4096, 160, True, "bf16"),
    ("hd144-gqa4-s2048-c", 8, 32, 8, 2048, 144, True, "fp16"),
    ("hd192-s4096-c", 4, 32, 32, 4096, 192, True, "bf16"),
    ("hd192-gqa8-s16384-c", 1, 32, 4, 16384, 192, True, "bf16"),
    ("hd256-s2000-c", 4, 32, 32, 2000, 256, True, "bf16"),
    ("hd232-gqa8-s8192-c", 2, 32, 4, 8192, 232, True, "bf16"),
    # width 256 at short lengths (the thirty-sixth session's matrix: hd256 causal GQA 8:1 s512
    # forward 0.98 -> 0.91x, hd240 1.05 -> 0.99)
    ("hd256-gqa8-s512-c", 32, 32, 4, 512, 256, True, "bf16"),
    ("hd240-gqa8-s512-c", 32, 32, 4, 512, 240, True, "fp16"),
    ("hd256-s512-c", 32, 32, 32, 512, 256, True, "bf16"),
    ("hd256-s1024-c", 16, 32, 32, 1024, 256, True, "bf16"),
    ("hd224-gqa4-s1024-c", 16, 32, 8, 1024, 224, True, "bf16"),
    ("hd256-s1500-c", 4, 32, 32, 1500, 256, True, "bf16"),
)
# (MASKED_BLOCKS_LAST, MASKED_BLOCKS_LAST_WIDTHS) by setting; None: the widths as shipped
SETTINGS = {"last": (True, None), "every": (False, None), "last-wide": (True, (96, 128, 160, 192, 256)),
            "last-again": (True, None)}


def main(argv=None) -> int:
    def make_apply():
        from gpudoctor.kernels import attention_gluon

        shipped = (attention_gluon.MASKED_BLOCKS_LAST, attention_gluon.MASKED_BLOCKS_LAST_WIDTHS)

        def apply(label):  # None: as shipped
            on, widths = shipped if label is None else SETTINGS[label]
            attention_gluon.MASKED_BLOCKS_LAST = on
            attention_gluon.MASKED_BLOCKS_LAST_WIDTHS = shipped[1] if widths is None else widths

        return apply

    return run_settings(__doc__, SHAPES, SETTINGS, make_apply, argv)


if __name__ == "__main__":
    sys.exit(main())
