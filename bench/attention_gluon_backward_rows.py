"""Query rows per block of the Gluon dK/dV kernel at width 64 (head_dim 40-64): 64 against 128,
as FlashAttention-3 tiles its head_dim 64 backward (128 queries x 128 keys), measured in one process
with the two taking turns, beside cuDNN's backward (issue 18 item 1: hd64 forward+backward was
0.83-0.99x of cuDNN on the device, its dK/dV kernel moving more memory for less tensor-pipe time).

Per case and setting (attention_gluon_backward.QUERY_ROWS[64]): torch.profiler's device µs of the
dK/dV kernel alone (mean of 20 launches, summing dQ or not), and of the whole backward as
flash_attention's autograd runs it with the Gluon kernel summing dQ (every kernel of
``out.backward``, autograd's accumulation into .grad left out), against cuDNN's backward measured
the same way. dK, dV (and dQ's sums) of the two settings are compared as well: summing dQ the order
of the adds differs, so dQ is compared to a tolerance. Run on an sm90 GPU:

    PYTHONPATH=. python3 bench/attention_gluon_backward_rows.py [--out FILE] [--rounds 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attention_mid_calls import _kernel_times, device_total, report_header, write_report  # noqa: E402

from gpudoctor.kernels import attention as A  # noqa: E402
from gpudoctor.kernels import attention_gluon_backward as GB  # noqa: E402

WIDTH = 64
SETTINGS = (64, 128)
# (head_dim, batch, heads, kv_heads, seq, causal): mid-size calls (2^26-2^27 scores), long ones,
# GQA, the other head dims of width 64.
CASES = [(64, 4, 32, 32, 1024, True), (64, 4, 32, 32, 1024, False), (64, 16, 32, 32, 512, True),
         (64, 4, 32, 32, 4096, True), (64, 4, 32, 32, 4096, False), (64, 4, 32, 8, 4096, True),
         (40, 4, 32, 32, 4096, True), (56, 4, 32, 32, 1024, True), (48, 32, 32, 32, 512, False)]


def _inputs(head_dim, batch, heads, kv_heads, seq):
    generator = torch.Generator(device="cuda").manual_seed(head_dim + seq)
    q, grad = (torch.randn(batch, heads, seq, head_dim, device="cuda", dtype=torch.bfloat16, generator=generator)
               for _ in range(2))
    k, v = (torch.randn(batch, kv_heads, seq, head_dim, device="cuda", dtype=torch.bfloat16, generator=generator)
            for _ in range(2))
    return q, k, v, grad


def _device_us(run, calls=20, only=None) -> float:
    return device_total(_kernel_times(run, calls), only)


def case(head_dim, batch, heads, kv_heads, seq, causal, rounds) -> dict:
    q, k, v, grad = _inputs(head_dim, batch, heads, kv_heads, seq)
    scale = head_dim ** -0.5
    config = A.config_for(q, k)
    out, lse = A.attention_forward(q, k, v, causal, scale, config)
    delta = (out.float() * grad.float()).sum(-1).reshape(lse.shape).contiguous()
    gluon_config = dataclasses.replace(A.config_for(q, k, backward=True), gluon_backward=True,
                                       gluon_atomic_dq=True, fused_backward=False)
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    autograd_out = A.flash_attention(*leaves, causal=causal, config=gluon_config, deterministic=False)
    cudnn_leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        cudnn_out = scaled_dot_product_attention(*cudnn_leaves, is_causal=causal, enable_gqa=kv_heads != heads)

    def kernel(summing):
        def run():
            GB.backward_dkdv(grad, q, k, v, lse, delta, causal, scale, GB.dq_sum_buffer(q) if summing else None)
        return run

    results, samples = {}, {rows: {"dkdv_us": [], "dkdv_sum_us": [], "backward_us": []} for rows in SETTINGS}
    cudnn = []
    for index in range(rounds):
        for rows in (SETTINGS if index % 2 == 0 else SETTINGS[::-1]):
            GB.QUERY_ROWS[WIDTH] = rows
            if rows not in results:
                dq_sum = GB.dq_sum_buffer(q)
                dk, dv = GB.backward_dkdv(grad, q, k, v, lse, delta, causal, scale)
                sum_dk, sum_dv = GB.backward_dkdv(grad, q, k, v, lse, delta, causal, scale, dq_sum)
                results[rows] = (dk, dv, sum_dk, sum_dv, dq_sum)
            samples[rows]["dkdv_us"].append(_device_us(kernel(False), only="dkdv"))
            samples[rows]["dkdv_sum_us"].append(_device_us(kernel(True), only="dkdv"))
            samples[rows]["backward_us"].append(
                _device_us(lambda: autograd_out.backward(grad, retain_graph=True)))
        cudnn.append(_device_us(lambda: cudnn_out.backward(grad, retain_graph=True)))
    GB.QUERY_ROWS[WIDTH] = SETTINGS[-1]

    def apart(a, b):
        return round(((a.float() - b.float()).abs().max() / b.float().abs().max()).item(), 6)

    first, second = results[SETTINGS[0]], results[SETTINGS[1]]
    row = {"head_dim": head_dim, "batch": batch, "heads": heads, "kv_heads": kv_heads, "seq": seq, "causal": causal,
           "apart": {"dk": apart(second[0], first[0]), "dv": apart(second[1], first[1]),
                     "dk_summing": apart(second[2], first[2]), "dv_summing": apart(second[3], first[3]),
                     "dq_sum": apart(second[4], first[4])},
           "rounds": {str(rows): values for rows, values in samples.items()}, "cudnn_backward_us": cudnn}
    for rows in SETTINGS:
        for key, values in samples[rows].items():
            row[f"{key}_{rows}"] = statistics.median(values)
    row["cudnn_us"] = statistics.median(cudnn)
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--causal-only", action="store_true", help="the causal cases only")
    parser.add_argument("--label", default="", help="a name for this tree, printed and kept")
    args = parser.parse_args(argv)
    report = report_header(label=args.label, settings=SETTINGS, cases=[])
    print("case                      dkdv 64/128 us      summing 64/128 us   backward 64/128 us   cuDNN   "
          "x cuDNN 64/128   apart dk dv dq")
    for head_dim, batch, heads, kv_heads, seq, causal in CASES:
        if args.causal_only and not causal:
            continue
        row = case(head_dim, batch, heads, kv_heads, seq, causal, args.rounds)
        report["cases"].append(row)
        name = f"{args.label}hd{head_dim} b{batch} h{heads}:{kv_heads} s{seq} {'causal' if causal else 'full'}"
        print(f"{name:26s}{row['dkdv_us_64']:8.1f} {row['dkdv_us_128']:8.1f}   {row['dkdv_sum_us_64']:8.1f} "
              f"{row['dkdv_sum_us_128']:8.1f}   {row['backward_us_64']:8.1f} {row['backward_us_128']:8.1f}  "
              f"{row['cudnn_us']:7.1f}  {row['cudnn_us'] / row['backward_us_64']:.3f} "
              f"{row['cudnn_us'] / row['backward_us_128']:.3f}   {row['apart']['dk']:.1e} {row['apart']['dv']:.1e} "
              f"{row['apart']['dq_sum']:.1e}", flush=True)
    write_report(args.out, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
