"""16-byte rows in the Triton attention kernels at head dims that are multiples of 8 but not 16,
as shipped ("shipped": strides and head_dim rounded to their proven multiple of 8, attention.
_row_align; the delta kernel zeroing dQ's float32 sums in the same launch), as before the
twenty-eighth session ("before": 2-byte loads there, a fill kernel for the sums), and half-way
("aligned": the aligned rows, the fill kernel kept); cuDNN beside them, on Hopper; the settings
take turns (attention_ab's loop). Forward+backward is the figure: at 16384 tokens the Gluon
kernels run all but the delta kernel; in small calls (2^25 scores and fewer, under 1024 keys)
the Triton forward and the one-launch backward run on pointers. The forward rows (the Gluon
forward alone) do not change: a control. With "before" and "aligned" no plan replays the Gluon
backward summing dQ (attention_plan._SummingGluonBackward takes the sums from the delta launch), so
their do_bench figures carry the general path's host time; the device figures do not.

    PYTHONPATH=. python3 bench/attention_aligned_rows.py [--rounds 3] [--shapes hd72-s512 ...] [--settings before shipped] [--out FILE]
"""

from __future__ import annotations

import sys

from ab_cli import run_settings

# (name, batch, heads, kv_heads, seq, head_dim, causal, dtype): the matrix's MHA cells at 512-1024
# keys that stayed under cuDNN forward+backward (twenty-seventh session, run 3: 0.93-0.98x) with
# 16384 tokens x 32 heads, head dims off multiples of 16 at other lengths; small calls ("b4":
# pointer kernels), the training pass's call; controls at 64/80/128.
SHAPES = (
    ("hd56-s512", 32, 32, 32, 512, 56, False, "fp16"),
    ("hd72-s512", 32, 32, 32, 512, 72, False, "bf16"),
    ("hd72-s1024-c", 16, 32, 32, 1024, 72, True, "fp16"),
    ("hd88-s1024-c", 16, 32, 32, 1024, 88, True, "bf16"),
    ("hd40-s512-c", 32, 32, 32, 512, 40, True, "bf16"),
    ("hd104-s8192", 2, 32, 32, 8192, 104, False, "bf16"),
    ("hd232-gqa8-s4096-c", 4, 32, 4, 4096, 232, True, "bf16"),
    ("hd112-s512-c", 32, 32, 32, 512, 112, True, "fp16"),
    ("hd128-s512-c", 32, 32, 32, 512, 128, True, "bf16"),
    ("hd64-s1024-c", 16, 32, 32, 1024, 64, True, "bf16"),
    ("b4-hd72-s512-c", 4, 32, 32, 512, 72, True, "bf16"),
    ("b4-hd40-s512-c", 4, 32, 32, 512, 40, True, "bf16"),
    ("b4-hd104-s512", 4, 32, 32, 512, 104, False, "bf16"),
    ("b4-hd56-s256-c", 4, 32, 32, 256, 56, True, "fp16"),
    ("b8-hd88-s256-c", 8, 32, 32, 256, 88, True, "bf16"),
    ("b4-hd136-s512-c", 4, 32, 32, 512, 136, True, "bf16"),
    ("train-hd80-s256-c", 4, 32, 32, 256, 80, True, "bf16"),
    ("b4-hd64-s512-c", 4, 32, 32, 512, 64, True, "bf16"),
)
# (attention.ALIGNED_ROW_ELEMENTS, attention.DELTA_ZEROES_DQ_SUM); None: as shipped.
SETTINGS = {"shipped": None, "before": (1, False), "aligned": (8, False)}


def main(argv=None) -> int:
    def make_apply():
        from gpudoctor.kernels import attention

        shipped = (attention.ALIGNED_ROW_ELEMENTS, attention.DELTA_ZEROES_DQ_SUM)

        def apply(label):  # None: as shipped
            setting = (SETTINGS[label] if label else None) or shipped
            attention.ALIGNED_ROW_ELEMENTS, attention.DELTA_ZEROES_DQ_SUM = setting

        return apply

    return run_settings(__doc__, SHAPES, SETTINGS, make_apply, argv)


if __name__ == "__main__":
    sys.exit(main())
