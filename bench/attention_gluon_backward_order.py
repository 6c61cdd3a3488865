"""The Gluon dK/dV kernels' causal program order (attention_gluon_backward.LONGEST_FIRST_HEADS):
launch order against heaviest-first within groups of KV heads, on Hopper, taking turns in one
process. Prints per shape the kernel's time (summing dQ, and not) in each order, fastest of
ROUNDS, and checks that dK/dV are bitwise the same in both orders (each program's work is
unchanged, only when it runs).

  python bench/attention_gluon_backward_order.py [--rounds 3] [--groups 0 8] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys

# (name, batch, heads, kv_heads, seq, head_dim), all causal
SHAPES = (
    ("hd128", 4, 32, 32, 4096, 128),
    ("hd128-gqa4", 4, 32, 8, 4096, 128),
    ("hd128-gqa8", 4, 32, 4, 4096, 128),
    ("hd128-s16k", 1, 16, 16, 16384, 128),
    ("hd64", 4, 32, 32, 4096, 64),
    ("hd64-gqa8", 4, 32, 4, 4096, 64),
    ("hd256", 4, 32, 32, 4096, 256),
    ("hd256-gqa8", 4, 32, 4, 4096, 256),
    # thirty-seventh session: grouped-query calls where Nsight Compute put our dK/dV kernel at 73 %
    # L2 hits against cuDNN's 96 % (hd128 GQA 8:1 s8192, run 18): fewer KV heads in flight
    ("hd128-gqa8-s8k", 2, 32, 4, 8192, 128),
    ("hd128-gqa8-s16k", 1, 32, 4, 16384, 128),
    ("hd128-gqa4-s16k", 1, 32, 8, 16384, 128),
    ("hd96-gqa8-s8k", 2, 32, 4, 8192, 96),
)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--groups", type=int, nargs="+", default=[0, 8])
    parser.add_argument("--shapes", nargs="*", help="these shapes' names only")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    import torch
    import triton

    from gpudoctor.kernels import attention, attention_gluon_backward
    from gpudoctor.kernels.attention import config_for

    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        print("needs a Hopper GPU (sm90)")
        return 2
    rows = []
    for name, batch, heads, kv_heads, seq, head_dim in SHAPES:
        if args.shapes and name not in args.shapes:
            continue
        generator = torch.Generator(device="cuda").manual_seed(seq + head_dim)
        q = torch.randn(batch, heads, seq, head_dim, device="cuda", dtype=torch.bfloat16, generator=generator)
        k, v = (torch.randn(batch, kv_heads, seq, head_dim, device="cuda", dtype=torch.bfloat16, generator=generator)
                for _ in range(2))
        grad = torch.randn(q.shape, device="cuda", dtype=torch.bfloat16, generator=generator)
        scale = head_dim ** -0.5
        out, lse = attention.attention_forward(q, k, v, True, scale, config_for(q, k))
        delta = (out.float() * grad.float()).sum(-1).reshape(batch * heads, seq).contiguous()
        dq_sum = attention_gluon_backward.dq_sum_buffer(q)
        row = {"shape": name, "batch": batch, "heads": heads, "kv_heads": kv_heads, "seq": seq,
               "head_dim": head_dim}
        results = {}
        for _ in range(args.rounds):
            for group in args.groups:
                attention_gluon_backward.LONGEST_FIRST_HEADS = group
                for summing in (True, False):
                    sums = dq_sum if summing else None
                    milliseconds = triton.testing.do_bench(
                        lambda: attention_gluon_backward.backward_dkdv(grad, q, k, v, lse, delta, True, scale, sums))
                    key = f"g{group}_{'summing' if summing else 'dkdv'}_ms"
                    row.setdefault(key, []).append(milliseconds)
                results[group] = attention_gluon_backward.backward_dkdv(grad, q, k, v, lse, delta, True, scale)
        first = results[args.groups[0]]
        row["dkdv_same_in_every_order"] = all(torch.equal(first[0], dk) and torch.equal(first[1], dv)
                                              for dk, dv in results.values())
        rows.append(row)
        print(f"{name:<12} " + "  ".join(f"{key[:-3]} {min(value):.3f}" for key, value in row.items()
                                          if key.endswith("_ms")) + f"  same {row['dkdv_same_in_every_order']}",
              flush=True)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "triton": triton.__version__, "rows": rows}, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
