"""One forward+backward of gpudoctor's attention and of SDPA's cuDNN backend at a few shapes, for
Nsight Compute (`ncu`) to profile: what limits each kernel (issue 18). Run under ncu, e.g.
  ncu --section SpeedOfLight --section Occupancy --section LaunchStats --csv \\
      python bench/attention_ncu.py --head-dim 128
The script warms up (compiles) first, then marks the profiled calls with an NVTX range."""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from gpudoctor.kernels.attention import flash_attention


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--batch", type=int, default=2)
    args = parser.parse_args()
    shape = (args.batch, args.heads, args.seq, args.head_dim)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    grad = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):  # compile and warm up both
        flash_attention(q, k, v, causal=True).backward(grad)
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(grad)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("profiled")
    flash_attention(q, k, v, causal=True).backward(grad)
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(grad)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()


if __name__ == "__main__":
    main()
