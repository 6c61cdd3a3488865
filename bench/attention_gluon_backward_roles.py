"""The wide Gluon backward (head_dim 136-256, summing dQ) with its score products split by keys
(each warpgroup S and dP for 32 keys: "by-keys", as before the thirty-second session) or by
warpgroup ("roles": warpgroup 0 S and P for all 64 keys, warpgroup 1 dP and dS;
attention_gluon_backward_wide.SCORE_ROLES; "roles-each" with K's and V's operands worked out in
each block everywhere, HOISTED_KV False; "det-by-keys" and "det-roles" with dQ from the Triton
dQ kernel, the route of deterministic=True). "by-keys-again" repeats "by-keys" in the same turns:
how far two identical settings land apart is the run's noise. Forward+backward through
flash_attention (deterministic=False), cuDNN beside them, on Hopper; the settings take turns
(attention_ab's loop). The forward is the same in every setting.

    PYTHONPATH=. python3 bench/attention_gluon_backward_roles.py [--rounds 3] [--shapes hd232-gqa8-s4096-c ...] [--settings by-keys roles ...] [--out FILE]
"""

from __future__ import annotations

import sys

from ab_cli import run_settings, set_routing

# (name, batch, heads, kv_heads, seq, head_dim, causal, dtype): 2^28-2^29 scores (16384 tokens x
# 32 query heads), the matrix's (bench/attention_matrix.py) forward+backward cells under 0.96x in
# the thirty-first session's run 2, and one or two of each column count (160, 192, 224, 256), split
# (causal GQA 8:1 below 8192 keys) and chunked walk (from 8192), short and long.
SHAPES = (
    ("hd232-gqa8-s4096-c", 4, 32, 4, 4096, 232, True, "bf16"),
    ("hd232-gqa8-s8192", 2, 32, 4, 8192, 232, False, "bf16"),
    ("hd248-gqa8-s16384-c", 1, 32, 4, 16384, 248, True, "bf16"),
    ("hd240-s4096", 4, 32, 32, 4096, 240, False, "bf16"),
    ("hd256-s8192-c", 2, 32, 32, 8192, 256, True, "bf16"),
    ("hd256-gqa8-s512-c", 32, 32, 4, 512, 256, True, "bf16"),
    ("hd208-gqa4-s4096", 4, 32, 8, 4096, 208, False, "bf16"),
    ("hd216-s16384-c", 1, 32, 32, 16384, 216, True, "bf16"),
    ("hd168-gqa4-s8192", 2, 32, 8, 8192, 168, False, "bf16"),
    ("hd184-s8192", 2, 32, 32, 8192, 184, False, "fp16"),
    ("hd192-s1024-c", 16, 32, 32, 1024, 192, True, "bf16"),
    ("hd144-s2048-c", 8, 32, 32, 2048, 144, True, "bf16"),
)
# (SCORE_ROLES, HOISTED_KV, whether the kernel sums dQ) by setting; "roles-each": K's and V's
# operands worked out in each block everywhere (kv_each_block's rule was measured by keys);
# "det-*": dQ from the Triton dQ kernel (attention.GLUON_SUMMED_DQ_BUCKETS empty), the route
# deterministic=True takes at these head dims
SETTINGS = {"by-keys": (False, None, True), "roles": (True, None, True), "roles-each": (True, False, True),
            "by-keys-again": (False, None, True), "det-by-keys": (False, None, False),
            "det-roles": (True, None, False)}


def main(argv=None) -> int:
    def make_apply():
        from gpudoctor.kernels import attention, attention_gluon_backward_wide

        wide = attention_gluon_backward_wide
        shipped = (wide.SCORE_ROLES, wide.HOISTED_KV, attention.GLUON_SUMMED_DQ_BUCKETS)

        def apply(label):  # None: as shipped
            if label is None:
                wide.SCORE_ROLES, wide.HOISTED_KV, buckets = shipped
            else:
                wide.SCORE_ROLES, wide.HOISTED_KV, summed = SETTINGS[label]
                buckets = shipped[2] if summed else ()
            set_routing(attention, "GLUON_SUMMED_DQ_BUCKETS", buckets)

        return apply

    return run_settings(__doc__, SHAPES, SETTINGS, make_apply, argv)


if __name__ == "__main__":
    sys.exit(main())
