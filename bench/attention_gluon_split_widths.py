"""The Gluon forward at SPLIT's narrower widths against the next wider one: head_dim 40-48 as 32 + 16
columns in every call ("w48") or at width 64 ("w64", as before the thirtieth session), or at 48
with the softmax under the last P·V in every call ("w48-upv", causal ones included:
attention_gluon.softmax_under_pv); head_dim 136-160 as 128 + 32 columns in every call ("w160")
or at width 192 (128 + 64, "w192"); head_dim 72-96 as 64 + 32 in every call ("w96") or at width
128 ("w128"); or as routed ("shipped": SPLIT_MIN_KEYS). cuDNN beside them,
on Hopper; the settings take turns (attention_ab's loop). A setting for one band leaves the other
as shipped. The backward is not touched: forward+backward shows the forward's share.

    PYTHONPATH=. python3 bench/attention_gluon_split_widths.py [--rounds 3] [--shapes hd40-s512-c ...] [--settings w48 w64] [--no-backward] [--out FILE]
"""

from __future__ import annotations

import sys

from ab_cli import run_settings

# (name, batch, heads, kv_heads, seq, head_dim, causal, dtype): 2^28 scores (16384 tokens x 32
# query heads) at the matrix's head dims of both bands, where it had them furthest behind cuDNN
# (hd40 s8192 not causal GQA 8:1, hd40-48 causal at 512-768 keys, hd144 s16384 not causal), and
# every length between.
SHAPES = (
    ("hd40-s512-c", 32, 32, 32, 512, 40, True, "bf16"),
    ("hd48-gqa8-s512-c", 32, 32, 4, 512, 48, True, "bf16"),
    ("hd40-s512", 32, 32, 32, 512, 40, False, "fp16"),
    ("hd48-s1024", 16, 32, 32, 1024, 48, False, "bf16"),
    ("hd40-s1024", 16, 32, 32, 1024, 40, False, "bf16"),
    ("hd40-gqa4-s2048", 8, 32, 8, 2048, 40, False, "bf16"),
    ("hd48-s2048-fp16", 8, 32, 32, 2048, 48, False, "fp16"),
    ("hd40-s3072", 4, 32, 32, 3072, 40, False, "bf16"),
    ("hd40-gqa8-s4096-fp16", 4, 32, 4, 4096, 40, False, "fp16"),
    ("hd40-s768-c", 16, 32, 32, 768, 40, True, "bf16"),
    ("hd48-s1024-c", 16, 32, 32, 1024, 48, True, "bf16"),
    ("hd40-gqa4-s2048-c", 8, 32, 8, 2048, 40, True, "bf16"),
    ("hd48-s4096", 4, 32, 32, 4096, 48, False, "bf16"),
    ("hd40-s4096-c-fp16", 4, 32, 32, 4096, 40, True, "fp16"),
    ("hd40-gqa8-s8192", 2, 32, 4, 8192, 40, False, "bf16"),
    ("hd48-gqa4-s8192-c", 2, 32, 8, 8192, 48, True, "bf16"),
    ("hd40-s16384-c", 1, 32, 32, 16384, 40, True, "bf16"),
    ("hd48-s16384", 1, 32, 32, 16384, 48, False, "fp16"),
    ("hd144-s512-c", 32, 32, 32, 512, 144, True, "bf16"),
    ("hd160-gqa8-s512", 32, 32, 4, 512, 160, False, "bf16"),
    ("hd136-s1024-c-fp16", 16, 32, 32, 1024, 136, True, "fp16"),
    ("hd152-gqa4-s2048", 8, 32, 8, 2048, 152, False, "bf16"),
    ("hd160-s2048-c", 8, 32, 32, 2048, 160, True, "bf16"),
    ("hd144-s4096", 4, 32, 32, 4096, 144, False, "bf16"),
    ("hd160-gqa4-s4096-c", 4, 32, 8, 4096, 160, True, "bf16"),
    ("hd136-s8192-fp16", 2, 32, 32, 8192, 136, False, "fp16"),
    ("hd152-s8192-c", 2, 32, 32, 8192, 152, True, "bf16"),
    ("hd144-s16384", 1, 32, 32, 16384, 144, False, "fp16"),
    ("hd160-gqa8-s16384-c", 1, 32, 4, 16384, 160, True, "bf16"),
    ("hd96-s512-c", 32, 32, 32, 512, 96, True, "bf16"),
    ("hd80-gqa4-s512", 32, 32, 8, 512, 80, False, "bf16"),
    ("hd88-s1024-c-fp16", 16, 32, 32, 1024, 88, True, "fp16"),
    ("hd72-gqa8-s2048", 8, 32, 4, 2048, 72, False, "bf16"),
    ("hd96-s2048-c", 8, 32, 32, 2048, 96, True, "bf16"),
    ("hd80-s4096", 4, 32, 32, 4096, 80, False, "bf16"),
    ("hd96-gqa4-s4096-c", 4, 32, 8, 4096, 96, True, "fp16"),
    ("hd88-s8192", 2, 32, 32, 8192, 88, False, "bf16"),
    ("hd80-s8192-c", 2, 32, 32, 8192, 80, True, "bf16"),
    ("hd96-s16384", 1, 32, 32, 16384, 96, False, "fp16"),
    ("hd72-gqa8-s16384-c", 1, 32, 4, 16384, 72, True, "bf16"),
)
# (attention_gluon.SPLIT_MIN_KEYS's routes set, the softmax under the last P·V at width 48 in every
# call) by setting; None: as shipped
SETTINGS = {"shipped": None, "w48": ({48: (0, 0)}, False), "w64": ({48: (None, None)}, False),
            "w48-upv": ({48: (0, 0)}, True), "w160": ({160: (0, 0)}, False), "w192": ({160: (None, None)}, False),
            "w96": ({96: (0, 0)}, False), "w128": ({96: (None, None)}, False)}


def main(argv=None) -> int:
    def make_apply():
        from gpudoctor.kernels import attention_gluon

        shipped = dict(attention_gluon.SPLIT_MIN_KEYS), attention_gluon.softmax_under_pv

        def under_pv_at_48(width, seq_k, causal, head_dim=None):
            return width == 48 or shipped[1](width, seq_k, causal, head_dim)

        def apply(label):  # None: the shipped routing
            routes = dict(shipped[0])
            under_pv = shipped[1]
            if label is not None and SETTINGS[label] is not None:
                changed, everywhere = SETTINGS[label]
                routes.update(changed)
                under_pv = under_pv_at_48 if everywhere else under_pv
            attention_gluon.SPLIT_MIN_KEYS = routes
            attention_gluon.softmax_under_pv = under_pv

        return apply

    return run_settings(__doc__, SHAPES, SETTINGS, make_apply, argv)


if __name__ == "__main__":
    sys.exit(main())
