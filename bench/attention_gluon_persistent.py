"""The Gluon forward persistent (one program per SM looping over units of work,
attention_gluon.PERSISTENT) against one program per unit, the Triton forward and cuDNN, on Hopper,
taking turns in one process. Per shape it checks that both launches give bitwise the same output
and log-sum-exp (each tile's work is the same, only which program does it changes), then prints
the fastest of ROUNDS forward timings, and forward+backward through flash_attention with the Triton
forward / the Gluon one (persistent), each with the shipped backward, beside cuDNN's. At head_dim
136-192 the forward also runs at width 256 (attention_gluon.SPLIT without 160 and 192: how it
ran before the fourteenth session), column "w256".

  python bench/attention_gluon_persistent.py [--rounds 3] [--shapes hd128-s1024 ...] [--dtype fp16] [--json OUT]
"""

from __future__ import annotations

import dataclasses
import json
import sys

from ab_cli import refused, shapes_parser

# (name, batch, heads, kv_heads, seq, head_dim, causal)
SHAPES = (
    ("hd128-s512", 32, 32, 32, 512, 128, True),
    ("hd128-s1024", 16, 32, 32, 1024, 128, True),
    ("hd128-s1024-nc", 16, 32, 32, 1024, 128, False),
    ("hd128-s2048", 8, 32, 32, 2048, 128, True),
    ("hd128-s4096", 4, 32, 32, 4096, 128, True),
    ("hd128-s4096-nc", 4, 32, 32, 4096, 128, False),
    ("hd128-gqa4-s1024", 16, 32, 8, 1024, 128, True),
    ("hd64-s1024", 16, 32, 32, 1024, 64, True),
    ("hd64-s1024-nc", 16, 32, 32, 1024, 64, False),
    ("hd64-s4096", 4, 32, 32, 4096, 64, True),
    ("hd96-s1024", 16, 32, 32, 1024, 96, True),
    ("hd40-s4096", 4, 32, 32, 4096, 40, True),
    ("hd192-s1024", 16, 32, 32, 1024, 192, True),
    ("hd256-s1024", 16, 32, 32, 1024, 256, True),
    ("hd256-s1024-nc", 16, 32, 32, 1024, 256, False),
    ("hd256-s4096", 4, 32, 32, 4096, 256, True),
    # the training pass's shape, and the head dims the first run left out
    ("hd80-s256", 4, 32, 32, 256, 80, True),
    ("hd128-s256", 4, 32, 32, 256, 128, True),
    ("hd64-s512", 32, 32, 32, 512, 64, True),
    ("hd32-s1024", 16, 32, 32, 1024, 32, True),
    ("hd32-s4096", 4, 32, 32, 4096, 32, True),
    ("hd48-s1024", 16, 32, 32, 1024, 48, True),
    ("hd72-s1024", 16, 32, 32, 1024, 72, True),
    ("hd80-s1024", 16, 32, 32, 1024, 80, True),
    ("hd80-s4096", 4, 32, 32, 4096, 80, True),
    ("hd80-s4096-nc", 4, 32, 32, 4096, 80, False),
    ("hd88-s4096", 4, 32, 32, 4096, 88, True),
    ("hd112-s1024-nc", 16, 32, 32, 1024, 112, False),
    ("hd64-gqa8-s4096", 4, 32, 4, 4096, 64, True),
    ("hd128-gqa8-s4096", 4, 32, 4, 4096, 128, True),
    ("hd160-s1024", 16, 32, 32, 1024, 160, True),
    ("hd192-s4096", 4, 32, 32, 4096, 192, True),
    # fewer programs: batch 4 at 1024 keys, where the tenth session's forward made a step slower
    ("hd128-s1024-b4", 4, 32, 32, 1024, 128, True),
    ("hd64-s1024-b4", 4, 32, 32, 1024, 64, True),
    ("hd256-s512", 16, 32, 32, 512, 256, True),
    ("hd96-s512", 32, 32, 32, 512, 96, True),
    # width 192 (head_dim 136-192 as 128 + 64 columns), fourteenth session
    ("hd136-s1024", 16, 32, 32, 1024, 136, True),
    ("hd176-s1024", 16, 32, 32, 1024, 176, True),
    ("hd192-s1024-nc", 16, 32, 32, 1024, 192, False),
    ("hd192-s512", 32, 32, 32, 512, 192, True),
    ("hd160-s4096", 4, 32, 32, 4096, 160, True),
    ("hd192-gqa4-s2048", 8, 32, 8, 2048, 192, True),
)


def main(argv=None) -> int:
    parser = shapes_parser(__doc__, SHAPES)
    parser.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    if refused(args, SHAPES):
        return 2
    import torch
    import torch.nn.functional as F
    import triton
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from attention_ab import hopper

    from gpudoctor.kernels import attention, attention_gluon
    from gpudoctor.kernels.attention import config_for, flash_attention

    if not hopper():
        return 2

    def time_ms(run):
        return triton.testing.do_bench(run, warmup=25, rep=100, return_mode="median")

    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    rows = []
    print("forward ms (fastest of rounds) and forward+backward ms; x = cuDNN's time / ours")
    print(f"{'shape':<17} {'fwd tri':>8} {'one/unit':>8} {'persist':>8} {'w256':>8} {'cudnn':>8} {'x tri':>6} {'x pers':>6}"
          f" | {'f+b tri':>8} {'f+b glu':>8} {'cudnn':>8} {'x tri':>6} {'x glu':>6}")
    for name, batch, heads, kv_heads, seq, head_dim, causal in SHAPES:
        if args.shapes and name not in args.shapes:
            continue
        generator = torch.Generator(device="cuda").manual_seed(seq + head_dim)
        q = torch.randn(batch, heads, seq, head_dim, device="cuda", dtype=dtype, generator=generator)
        k, v = (torch.randn(batch, kv_heads, seq, head_dim, device="cuda", dtype=dtype, generator=generator)
                for _ in range(2))
        grad = torch.randn(q.shape, device="cuda", dtype=dtype, generator=generator)
        scale = head_dim ** -0.5
        shipped = config_for(q, k)
        triton_config = dataclasses.replace(shipped, gluon_forward=False)
        gluon_config = dataclasses.replace(shipped, gluon_forward=True)
        gqa = heads != kv_heads

        def gluon(persistent):
            attention_gluon.PERSISTENT = persistent
            return attention_gluon.attention_forward(q, k, v, causal, scale)

        split = dict(attention_gluon.SPLIT)

        def at_width_256():
            attention_gluon.SPLIT = {width: parts for width, parts in split.items() if width <= 128}
            try:
                return attention_gluon.attention_forward(q, k, v, causal, scale)
            finally:
                attention_gluon.SPLIT = split

        one, persistent = gluon(False), gluon(True)
        same = bool(torch.equal(one[0], persistent[0]) and torch.equal(one[1], persistent[1]))
        split_width = attention_gluon.forward_width(head_dim, seq, causal) in split
        expected = attention.reference_attention(q, k, v, causal=causal, dtype=torch.float32) \
            if seq * seq * batch * heads <= 2 ** 32 else None
        error = (((persistent[0].float() - expected).norm() / expected.norm()).item()
                 if expected is not None else None)
        del expected
        leaves = [t.detach().requires_grad_() for t in (q, k, v)]

        def cudnn_forward():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION), torch.no_grad():
                F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)

        def cudnn_both():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                F.scaled_dot_product_attention(*leaves, is_causal=causal, enable_gqa=gqa).backward(grad)

        def both(config):
            attention_gluon.PERSISTENT = True
            flash_attention(*leaves, causal=causal, config=config,
                            deterministic=not config.gluon_atomic_dq).backward(grad)

        runs = {"fwd_triton": lambda: attention.attention_forward(q, k, v, causal, scale, triton_config),
                "fwd_one_per_unit": lambda: gluon(False),
                "fwd_persistent": lambda: gluon(True),
                **({"fwd_width256": at_width_256} if split_width else {}),
                "fwd_cudnn": cudnn_forward,
                "fwdbwd_triton_fwd": lambda: both(triton_config),
                "fwdbwd_gluon_fwd": lambda: both(gluon_config),
                "fwdbwd_cudnn": cudnn_both}
        row = {"shape": name, "batch": batch, "heads": heads, "kv_heads": kv_heads, "seq": seq,
               "head_dim": head_dim, "causal": causal, "bitwise_same": same, "rel_error": error,
               "shipped_gluon_forward": shipped.gluon_forward, **{f"{label}_ms": [] for label in runs}}
        for _ in range(args.rounds):
            for label, run in runs.items():
                row[f"{label}_ms"].append(time_ms(run))
        attention_gluon.PERSISTENT = True
        rows.append(row)
        best = {label: min(row[f"{label}_ms"]) for label in runs}
        width_256 = f"{best['fwd_width256']:8.3f}" if split_width else f"{'-':>8}"
        print(f"{name:<17} {best['fwd_triton']:8.3f} {best['fwd_one_per_unit']:8.3f} {best['fwd_persistent']:8.3f}"
              f" {width_256} {best['fwd_cudnn']:8.3f} {best['fwd_cudnn'] / best['fwd_triton']:6.2f}"
              f" {best['fwd_cudnn'] / best['fwd_persistent']:6.2f} | {best['fwdbwd_triton_fwd']:8.3f}"
              f" {best['fwdbwd_gluon_fwd']:8.3f} {best['fwdbwd_cudnn']:8.3f}"
              f" {best['fwdbwd_cudnn'] / best['fwdbwd_triton_fwd']:6.2f}"
              f" {best['fwdbwd_cudnn'] / best['fwdbwd_gluon_fwd']:6.2f}"
              f"{'' if same else '  NOT BITWISE SAME'} err {error if error is None else round(error, 5)}",
              flush=True)
        if args.json:
            with open(args.json, "w") as handle:
                json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                           "triton": triton.__version__, "dtype": args.dtype, "rounds": args.rounds, "rows": rows}, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
