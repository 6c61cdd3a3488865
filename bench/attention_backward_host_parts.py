"""What each piece of the Gluon backward's general path costs on the host (issue 18 item 1: the
backward that sums dQ in the Gluon kernel runs ``attention.attention_backward`` in Python on every
call, no plan replays it, and on the H200's slower hosts a forward+backward there took 0.6-0.9 ms
of host time against cuDNN's 0.3-0.5, sixteenth and seventeenth sessions).

Each piece is called alone in a loop (µs a call, median of rounds) at a call so small (batch 1,
2 heads, 1024 keys) that the GPU's work never fills the queue, so these are host costs, beside the
whole backward of the Gluon path, the three-launch Triton one and the one-launch one, all
unplanned. Run on an sm90 GPU:

    PYTHONPATH=. python3 bench/attention_backward_host_parts.py [--out FILE] [--rounds 7] [--calls 300]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attention_host_parts import per_call_us  # noqa: E402
from attention_mid_calls import report_header, write_report  # noqa: E402

from gpudoctor.kernels import attention as A  # noqa: E402
from gpudoctor.kernels import attention_gluon as G  # noqa: E402
from gpudoctor.kernels import attention_gluon_backward as GB  # noqa: E402


def parts(head_dim=64, seq=1024, causal=True, calls=300, rounds=7) -> dict:
    q, k, v, grad = (torch.randn(1, 2, seq, head_dim, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    scale = head_dim ** -0.5
    shipped = A.config_for(q, k)
    gluon = dataclasses.replace(shipped, gluon_backward=True, gluon_atomic_dq=True, fused_backward=False)
    triton_backward = dataclasses.replace(shipped, gluon_backward=False, gluon_atomic_dq=False, fused_backward=False)
    fused = dataclasses.replace(triton_backward, fused_backward=True, tma=A.POINTERS)
    out, lse = A.attention_forward(q, k, v, causal, scale, shipped)
    delta = torch.empty_like(lse)
    dq_sum = GB.dq_sum_buffer(q)
    width = G.kernel_width(head_dim)
    rows = GB.query_rows(width)

    def backward(config):
        return lambda: A.attention_backward(grad, q, k, v, out, lse, causal, scale, config, deterministic=False)

    def delta_launch():
        A.launch_delta(out, grad, delta)

    pieces = {
        "backward, Gluon summing dQ": backward(gluon),
        "backward, Triton three launches": backward(triton_backward),
        "backward, one launch (unplanned)": backward(fused),
        "usable_config": lambda: A.usable_config(gluon, q, k, v, grad, out),
        "_gluon_backward_runs": lambda: A._gluon_backward_runs(grad, q, k, v),
        "grad_out.contiguous()": lambda: grad.contiguous(),
        "empty_like(lse) (delta)": lambda: torch.empty_like(lse),
        "empty_like(k) (dk or dv)": lambda: torch.empty_like(k, memory_format=torch.contiguous_format),
        "dq_sum_buffer (zeros)": lambda: GB.dq_sum_buffer(q),
        "delta kernel launch": delta_launch,
        "one Q/K/V-shaped descriptor": lambda: G._descriptor(q, rows, width),
        "the dQ descriptor": lambda: GB._dq_descriptor(dq_sum, width // 2, rows),
        "backward_dkdv (7 descriptors, launch)": lambda: GB.backward_dkdv(grad, q, k, v, lse, delta, causal, scale,
                                                                        dq_sum),
        "dq_sum.view().to(dtype)": lambda: dq_sum.view(q.shape).to(q.dtype),
        "nothing": lambda: None,
    }
    return {name: round(per_call_us(piece, calls, rounds), 2) for name, piece in pieces.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args(argv)
    report = report_header(cases={})
    for head_dim in (64, 128):
        result = parts(head_dim, calls=args.calls, rounds=args.rounds)
        report["cases"][f"hd{head_dim}"] = result
        for name, us in result.items():
            print(f"hd{head_dim:<4}{name:42s}{us:9.2f} us", flush=True)
    write_report(args.out, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
