"""The Gluon dK/dV kernels alone (attention_gluon_backward.backward_dkdv): device time per launch
and the host's time inside one call, for comparing two trees of the kernels (issue 18 item 1).

The sixteenth session used it to try the Gluon forward's cure for host time on the backward:
TMA descriptors made in the kernel instead of on the host. The host's time inside a call fell
(hd128 b4 s1024: 60-111 → 33-35 µs), but the kernels took 12-26 % longer in mid-size calls and
2-4 % at 4096 keys on the H200 (hd112 b16 s512 283 → 355 µs): each of a non-persistent grid's
thousands of programs made and fenced ten to twelve descriptors before its first copy, where the
persistent forward's 132 programs make five once. Not shipped (docs/benchmarks.md).

Per case: torch.profiler's device µs of the dK/dV kernel (mean of 20 launches), the ms per call
back to back (50 calls), and the host µs inside one call (median of those 50). Run it once per
tree, the trees taking turns, and compare figures of the same run only:

    PYTHONPATH=<tree> python3 bench/attention_gluon_backward_launch.py --out FILE [--label NAME]
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attention_mid_calls import _back_to_back_ms, _kernel_times, report_header, write_report  # noqa: E402

from gpudoctor.kernels import attention as A  # noqa: E402
from gpudoctor.kernels import attention_gluon_backward as GB  # noqa: E402

# (head_dim, batch, heads, seq, causal, summing dQ): 2^27-score calls where the routing is in
# question, 2^28 and long ones where the Gluon backward runs now, and width 256 (the wide kernel).
CASES = [(128, 4, 32, 1024, True, True), (128, 4, 32, 1024, False, True), (112, 16, 32, 512, True, True),
         (96, 2, 32, 1024, True, True), (64, 4, 32, 1024, True, True), (128, 4, 32, 4096, True, True),
         (128, 4, 32, 4096, True, False), (256, 4, 32, 1024, True, True), (256, 4, 32, 4096, True, True),
         (256, 4, 32, 4096, True, False)]


def _inputs(head_dim, batch, heads, seq, causal):
    generator = torch.Generator(device="cuda").manual_seed(0)
    q, k, v, grad = (torch.randn(batch, heads, seq, head_dim, device="cuda", dtype=torch.bfloat16,
                                 generator=generator) for _ in range(4))
    scale = head_dim ** -0.5
    config = A.config_for(q, k)
    out, lse = A.attention_forward(q, k, v, causal, scale, config)
    delta = (out.float() * grad.float()).sum(-1).reshape(lse.shape).contiguous()
    return grad, q, k, v, lse, delta, scale


def _kernel_us(run, calls=20) -> float:
    """Device µs per call of the dK/dV kernel (torch.profiler)."""
    return round(sum(us for name, us in _kernel_times(run, calls).items() if "dkdv" in name), 2)


def case(head_dim, batch, heads, seq, causal, summing) -> dict:
    grad, q, k, v, lse, delta, scale = _inputs(head_dim, batch, heads, seq, causal)

    def run():
        dq_sum = GB.dq_sum_buffer(q) if summing else None
        GB.backward_dkdv(grad, q, k, v, lse, delta, causal, scale, dq_sum)

    run()
    back_to_back, host_ms = _back_to_back_ms(run)
    return {"head_dim": head_dim, "batch": batch, "heads": heads, "seq": seq, "causal": causal,
            "summing_dq": summing, "kernel_us": _kernel_us(run), "back_to_back_ms": round(back_to_back, 4),
            "host_us": round(host_ms * 1e3, 2)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out")
    parser.add_argument("--label", default="")
    args = parser.parse_args(argv)
    report = report_header(label=args.label, cases=[])
    for head_dim, batch, heads, seq, causal, summing in CASES:
        row = case(head_dim, batch, heads, seq, causal, summing)
        report["cases"].append(row)
        print(f"{args.label:4s} hd{head_dim:<4}b{batch:<3}s{seq:<5}{'causal' if causal else 'full':7s}"
              f"{'sum' if summing else '   '} kernel {row['kernel_us']:8.1f} us  back-to-back "
              f"{row['back_to_back_ms']:.4f} ms  host {row['host_us']:6.1f} us", flush=True)
    write_report(args.out, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
