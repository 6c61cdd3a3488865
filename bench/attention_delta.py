"""The backward's delta kernel (attention.launch_delta) as shipped ("shipped": rows proven 16-byte
aligned where the strides allow, dQ's float32 sums zeroed in the same launch), as before the
twenty-eighth session ("before": 2-byte loads at head dims that are multiples of 8 but not 16, a
fill kernel for the sums), and half-way ("aligned": the aligned loads, the fill kernel kept);
cuDNN beside them, on Hopper; the settings take turns (attention_ab's loop). Forward+backward is
the figure (the forward does not change: its rows are a control).

    PYTHONPATH=. python3 bench/attention_delta.py [--rounds 3] [--shapes hd72-s512 ...] [--settings before shipped] [--out FILE]
"""

from __future__ import annotations

import sys

from ab_cli import run_settings

# (name, batch, heads, kv_heads, seq, head_dim, causal, dtype): the matrix's MHA cells at 512-1024
# keys that stayed under cuDNN forward+backward (twenty-seventh session, run 3: 0.93-0.98x) with
# 16384 tokens x 32 heads, head dims off multiples of 16 at other lengths, and controls at 64/128.
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
)
# (attention.DELTA_ROW_ALIGN, attention.DELTA_ZEROES_DQ_SUM); None: as shipped.
SETTINGS = {"shipped": None, "before": (1, False), "aligned": (8, False)}


def main(argv=None) -> int:
    def make_apply():
        from gpudoctor.kernels import attention

        shipped = (attention.DELTA_ROW_ALIGN, attention.DELTA_ZEROES_DQ_SUM)

        def apply(label):  # None: as shipped
            attention.DELTA_ROW_ALIGN, attention.DELTA_ZEROES_DQ_SUM = (SETTINGS[label] if label else None) or shipped

        return apply

    return run_settings(__doc__, SHAPES, SETTINGS, make_apply, argv)


if __name__ == "__main__":
    sys.exit(main())
