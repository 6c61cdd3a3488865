"""The backward at head_dim 64 from fewer keys: the Gluon dK/dV kernel summing dQ from 1024 keys
as before the thirty-sixth session ("1024": attention.GLUON_MANY_SCORES_MIN_SEQ_AT {64: 1024}),
from 768 ("768"), or from 512 as every other head_dim ("512"), in calls of
GLUON_MANY_SCORES scores; below, the Triton dK/dV and dQ kernels. Settings whose bound falls on
the same side of a call's length run the same code there: how far they land apart is the run's
noise. Forward+backward through flash_attention (deterministic=False), cuDNN beside it, on
Hopper; the settings take turns (attention_ab's loop). The forward is the same in every setting.

    PYTHONPATH=. python3 bench/attention_gluon_backward_short.py [--rounds 3] [--shapes hd64-s1000-c ...] [--settings 1024 512 ...] [--out FILE]
"""

from __future__ import annotations

import sys

from ab_cli import run_settings, set_routing

# (name, batch, heads, kv_heads, seq, head_dim, causal, dtype): head_dim 64 from 512 to 1023 keys
# in 2^26-2^28 scores, ragged (a job's padded batches) and whole, causal or not, MHA and GQA.
SHAPES = (
    ("hd64-s1000-c", 8, 32, 32, 1000, 64, True, "bf16"),
    ("hd64-s1000", 8, 32, 32, 1000, 64, False, "bf16"),
    ("hd64-gqa4-s1000-c", 8, 32, 8, 1000, 64, True, "fp16"),
    ("hd64-s896-c", 8, 32, 32, 896, 64, True, "bf16"),
    ("hd64-s768-c", 16, 32, 32, 768, 64, True, "bf16"),
    ("hd64-s768", 16, 32, 32, 768, 64, False, "bf16"),
    ("hd64-s640-c", 16, 32, 32, 640, 64, True, "bf16"),
    ("hd64-s512-c", 32, 32, 32, 512, 64, True, "bf16"),
    ("hd64-s600", 16, 32, 32, 600, 64, False, "fp16"),
)
# GLUON_MANY_SCORES_MIN_SEQ_AT by setting
SETTINGS = {"1024": {64: 1024}, "768": {64: 768}, "512": {}}


def main(argv=None) -> int:
    def make_apply():
        from gpudoctor.kernels import attention

        shipped = attention.GLUON_MANY_SCORES_MIN_SEQ_AT

        def apply(label):  # None: as shipped
            set_routing(attention, "GLUON_MANY_SCORES_MIN_SEQ_AT", shipped if label is None else SETTINGS[label])

        return apply

    return run_settings(__doc__, SHAPES, SETTINGS, make_apply, argv)


if __name__ == "__main__":
    sys.exit(main())
