"""Benchmark gpudoctor's Triton FlashAttention against torch SDPA (flash, cuDNN, memory-efficient).

TFLOP/s by the FlashAttention convention: forward = 4 * batch * heads * seq_q * seq_k * head_dim,
backward = 2.5 x forward (so forward+backward = 3.5 x forward), causal counts half. Times are the
median of triton.testing.do_bench. Tokens per shape are fixed (batch * seq = 16k, 32 heads) so
every shape fills the GPU.

    python bench/attention.py --out bench/results/attention-h200.json [--sweep]
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import platform
import subprocess
import sys
import time
from dataclasses import asdict, replace

import torch
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention

from gpudoctor.kernels.attention import (
    KernelTiles,
    flash_attention,
    select_config,
)

SDPA_BACKENDS = {
    "sdpa-flash": SDPBackend.FLASH_ATTENTION,
    "sdpa-cudnn": SDPBackend.CUDNN_ATTENTION,
    "sdpa-efficient": SDPBackend.EFFICIENT_ATTENTION,
}


def attention_flops(batch, heads, seq, head_dim, causal, mode):
    forward = 4 * batch * heads * seq * seq * head_dim
    if causal:
        forward /= 2
    return forward * (3.5 if mode == "fwd+bwd" else 1.0)


def make_runner(provider, q, k, v, causal, mode, config=None):
    """A no-argument callable doing one forward (or forward+backward) with ``provider``."""
    grad_out = torch.randn_like(q)
    if provider.startswith("triton"):
        def forward():
            return flash_attention(q, k, v, causal=causal, config=config)
    else:
        backend = SDPA_BACKENDS[provider]

        def forward():
            with sdpa_kernel(backend):
                return scaled_dot_product_attention(q, k, v, is_causal=causal)
    if mode == "fwd":
        def run():
            with torch.no_grad():
                return forward()
    else:
        def run():
            forward().backward(grad_out)
    return run


def time_ms(run, inputs):
    return triton.testing.do_bench(run, warmup=25, rep=100, grad_to_none=inputs,
                                   return_mode="median")


def measure(provider, batch, heads, seq, head_dim, causal, mode, config=None):
    torch.manual_seed(hash((provider, seq, head_dim, causal, mode)) % 2**31)
    shape = (batch, heads, seq, head_dim)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16,
                           requires_grad=mode == "fwd+bwd") for _ in range(3))
    try:
        run = make_runner(provider, q, k, v, causal, mode, config)
        milliseconds = time_ms(run, [q, k, v])
    except Exception as error:  # a backend that refuses a shape is a result, not a crash
        return {"error": f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"}
    flops = attention_flops(batch, heads, seq, head_dim, causal, mode)
    return {"ms": milliseconds, "tflops": flops / milliseconds / 1e9}


def check_against_sdpa(batch, heads, seq, head_dim, causal):
    """Relative error of our output against SDPA-flash on the benchmark's own shape."""
    q, k, v = (torch.randn(batch, heads, seq, head_dim, device="cuda", dtype=torch.bfloat16)
               for _ in range(3))
    ours = flash_attention(q, k, v, causal=causal).float()
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        theirs = scaled_dot_product_attention(q, k, v, is_causal=causal).float()
    return ((ours - theirs).norm() / theirs.norm()).item()


def sweep_candidates(head_dim):
    """Tile variants around the defaults, for the sm90 table (only used with --sweep)."""
    base = select_config(torch.cuda.get_device_capability(), head_dim)
    forward = [KernelTiles(128, 64, 4, 3), KernelTiles(128, 64, 8, 3), KernelTiles(128, 128, 8, 3),
               KernelTiles(128, 128, 8, 2), KernelTiles(64, 64, 4, 3)]
    dkdv = [KernelTiles(32, 128, 4, 5), KernelTiles(64, 128, 8, 3), KernelTiles(32, 64, 4, 3),
            KernelTiles(64, 64, 4, 3)]
    dq = [KernelTiles(128, 32, 4, 5), KernelTiles(64, 64, 4, 3), KernelTiles(128, 64, 8, 3),
          KernelTiles(64, 32, 4, 3)]
    candidates = [("fwd", replace(base, forward=tiles)) for tiles in forward]
    candidates += [("fwd+bwd", replace(base, backward_dkdv=tiles)) for tiles in dkdv]
    candidates += [("fwd+bwd", replace(base, backward_dq=tiles)) for tiles in dq]
    return candidates


def run_sweep(results, deadline):
    seq, causal = 4096, True
    batch, heads = 16384 // seq, 32
    for head_dim in (64, 80, 128):
        for mode, config in sweep_candidates(head_dim):
            if time.time() > deadline:
                print("sweep: out of time budget, stopping", flush=True)
                return
            row = measure("triton", batch, heads, seq, head_dim, causal, mode, config)
            row.update(head_dim=head_dim, seq=seq, causal=causal, mode=mode,
                       config=asdict(config))
            results.append(row)
            print(f"sweep hd{head_dim} {mode:7s} {row.get('tflops', float('nan')):7.1f} "
                  f"{row.get('error', '')} fwd={config.forward} dkdv={config.backward_dkdv} "
                  f"dq={config.backward_dq}", flush=True)


def environment():
    try:
        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        driver = "unknown"
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "gpu": torch.cuda.get_device_name(),
        "capability": list(torch.cuda.get_device_capability()),
        "driver": driver,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "triton": triton.__version__,
        "python": platform.python_version(),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write all results as JSON here")
    parser.add_argument("--head-dims", type=int, nargs="+", default=[64, 80, 96, 128])
    parser.add_argument("--seqs", type=int, nargs="+", default=[1024, 4096, 16384])
    parser.add_argument("--tokens", type=int, default=16384, help="batch * seq per shape")
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--sweep", action="store_true", help="also time tile variants")
    parser.add_argument("--sweep-seconds", type=float, default=150)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("bench/attention.py needs a CUDA GPU")

    env = environment()
    print(json.dumps(env), flush=True)
    providers = ["triton", "sdpa-flash", "sdpa-cudnn", "sdpa-efficient"]
    rows, sweep_rows = [], []
    for head_dim in args.head_dims:
        for seq in args.seqs:
            batch = max(1, args.tokens // seq)
            for causal in (True, False):
                error = check_against_sdpa(batch, args.heads, seq, head_dim, causal)
                for mode in ("fwd", "fwd+bwd"):
                    variants = [(p, None) for p in providers]
                    if head_dim % 64:  # the head_dim split against plain padding, measured
                        base = select_config(torch.cuda.get_device_capability(), head_dim)
                        variants.append(("triton-padded", replace(base, split_head_dim=False)))
                    for provider, config in variants:
                        row = measure(provider, batch, args.heads, seq, head_dim, causal, mode,
                                      config)
                        row.update(provider=provider, head_dim=head_dim, seq=seq, batch=batch,
                                   heads=args.heads, causal=causal, mode=mode)
                        if provider == "triton":
                            row["rel_err_vs_sdpa_flash"] = error
                        rows.append(row)
                        print(f"hd{head_dim:<4}seq{seq:<6}{'causal' if causal else 'full':7s}"
                              f"{mode:8s}{provider:15s}"
                              f"{row.get('tflops', float('nan')):8.1f} {row.get('error', '')}",
                              flush=True)
    if args.sweep:
        run_sweep(sweep_rows, time.time() + args.sweep_seconds)

    if args.out:
        with open(args.out, "w") as handle:
            json.dump({"environment": env, "results": rows, "sweep": sweep_rows}, handle,
                      indent=1)
    print_table(rows)


def print_table(rows):
    """TFLOP/s, ours and each SDPA backend, with our ratio to SDPA-flash and to cuDNN."""
    table = {}
    for row in rows:
        key = (row["head_dim"], row["seq"], row["causal"], row["mode"])
        table.setdefault(key, {})[row["provider"]] = row.get("tflops", math.nan)
    print("\nhd  seq    mask   mode     triton  padded  flash  cudnn  effic  x_flash x_cudnn")
    for (head_dim, seq, causal, mode), by_provider in sorted(table.items()):
        ours = by_provider.get("triton", math.nan)
        flash = by_provider.get("sdpa-flash", math.nan)
        cudnn = by_provider.get("sdpa-cudnn", math.nan)
        print(f"{head_dim:<4}{seq:<7}{'causal' if causal else 'full':7s}{mode:8s}"
              f"{ours:7.0f} {by_provider.get('triton-padded', math.nan):7.0f}"
              f"{flash:7.0f}{cudnn:7.0f}{by_provider.get('sdpa-efficient', math.nan):7.0f}"
              f"{ours / flash:8.2f}{ours / cudnn:8.2f}")


if __name__ == "__main__":
    main()
