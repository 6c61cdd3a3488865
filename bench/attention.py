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
    gqa = q.shape[1] != k.shape[1]
    if provider.startswith("triton"):
        def forward():
            return flash_attention(q, k, v, causal=causal, config=config)
    else:
        backend = SDPA_BACKENDS[provider]

        def forward():
            with sdpa_kernel(backend):
                return scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
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


def make_inputs(batch, heads, kv_heads, seq, head_dim, mode, seed):
    generator = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(batch, heads, seq, head_dim, device="cuda", dtype=torch.bfloat16,
                    generator=generator)
    k, v = (torch.randn(batch, kv_heads, seq, head_dim, device="cuda", dtype=torch.bfloat16,
                        generator=generator) for _ in range(2))
    for tensor in (q, k, v):
        tensor.requires_grad_(mode == "fwd+bwd")
    return q, k, v


def measure(provider, batch, heads, seq, head_dim, causal, mode, config=None, kv_heads=None):
    kv_heads = kv_heads or heads
    q, k, v = make_inputs(batch, heads, kv_heads, seq, head_dim, mode,
                          hash((provider, seq, head_dim, causal, mode)) % 2**31)
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


# ----------------------------------------------------------------------------------------------
# --sweep: tiles per kernel at the shapes the issue found slowest, compiled in parallel first.
# ----------------------------------------------------------------------------------------------

# (name, batch, heads, kv_heads, seq, head_dim, causal)
SWEEP_SHAPES = [
    ("hd80-train", 4, 32, 32, 256, 80, True),  # the training pass's own shape
    ("hd256", 4, 32, 32, 4096, 256, True),
    ("hd128-gqa4", 4, 32, 8, 4096, 128, True),
    ("hd112-full", 4, 32, 32, 4096, 112, False),
    ("hd64-s1024", 16, 32, 32, 1024, 64, True),
    ("hd40", 4, 32, 32, 4096, 40, True),
]
T = KernelTiles
SWEEP_TILES = {
    # forward: block_m queries x block_n keys; dK/dV: block_m queries walked per block_n keys;
    # dQ: block_m queries, walking block_n keys.
    "narrow": {
        "forward": [T(128, 64, 4, 3), T(128, 64, 8, 3), T(128, 128, 8, 3), T(128, 128, 8, 2),
                    T(64, 64, 4, 3), T(128, 32, 4, 4), T(64, 32, 4, 4), T(128, 64, 4, 4)],
        "backward_dkdv": [T(64, 128, 8, 3), T(32, 128, 4, 3), T(32, 64, 4, 3), T(64, 64, 4, 3),
                          T(32, 128, 8, 3), T(16, 64, 4, 4), T(64, 128, 4, 2)],
        "backward_dq": [T(128, 64, 8, 3), T(128, 32, 4, 5), T(64, 64, 4, 3), T(64, 32, 4, 3),
                        T(128, 32, 8, 3), T(64, 64, 4, 4)],
    },
    "wide": {  # head_dim > 128
        "forward": [T(64, 64, 4, 2), T(128, 64, 8, 2), T(128, 32, 8, 2), T(128, 32, 8, 3),
                    T(64, 32, 4, 3), T(128, 64, 8, 1), T(64, 64, 8, 2)],
        "backward_dkdv": [T(32, 32, 4, 2), T(16, 64, 4, 2), T(32, 64, 8, 2), T(16, 64, 8, 2),
                          T(32, 64, 4, 2), T(64, 64, 8, 1), T(16, 32, 4, 3)],
        "backward_dq": [T(64, 32, 8, 2), T(64, 64, 8, 2), T(128, 32, 8, 2), T(64, 32, 4, 2),
                        T(32, 64, 4, 2), T(128, 64, 8, 1)],
    },
}


def sweep_jobs():
    """Every (shape, kernel, candidate config) the sweep times, the default tiles first."""
    jobs = []
    for shape in SWEEP_SHAPES:
        head_dim = shape[5]
        base = select_config(torch.cuda.get_device_capability(), head_dim)
        tiles = SWEEP_TILES["wide" if head_dim > 128 else "narrow"]
        jobs.append((shape, "default", base))
        for kernel, candidates in tiles.items():
            for candidate in candidates:
                if candidate != getattr(base, kernel) and _legal(kernel, candidate):
                    jobs.append((shape, kernel, replace(base, **{kernel: candidate})))
    return jobs


def _legal(kernel, tiles):
    """The causal split into off-diagonal and diagonal loops needs the outer tile to be a whole
    number of inner tiles (outer: block_m for the forward and dQ, block_n for dK/dV)."""
    if kernel == "backward_dkdv":
        return tiles.block_n % tiles.block_m == 0
    return tiles.block_m % tiles.block_n == 0


def _run_job(shape, kernel, config):
    """Time one job; its forward or forward+backward only (the kernel it varies)."""
    _, batch, heads, kv_heads, seq, head_dim, causal = shape
    mode = "fwd" if kernel == "forward" else "fwd+bwd"
    row = measure("triton", batch, heads, seq, head_dim, causal, mode, config, kv_heads)
    if kernel == "default" and "error" not in row:
        row["fwd_only"] = measure("triton", batch, heads, seq, head_dim, causal, "fwd", config,
                                  kv_heads)
    return row


def _agreement(shape, config, reference):
    """max |ours - SDPA math in fp32| over out, dq, dk, dv on a slice of the shape."""
    _, _, heads, kv_heads, _, head_dim, causal = shape
    # 512: whole tiles like the timed shapes, so the same compiled kernels are checked.
    q, k, v = make_inputs(1, heads, kv_heads, 512, head_dim, "fwd+bwd", 7)
    grad = torch.randn(q.shape, device="cuda", dtype=q.dtype,
                       generator=torch.Generator(device="cuda").manual_seed(8))
    out = flash_attention(q, k, v, causal=causal, config=config)
    out.backward(grad)
    ours = [out.detach(), q.grad, k.grad, v.grad]
    if reference is None:
        q32, k32, v32 = (t.detach().float().requires_grad_() for t in (q, k, v))
        with sdpa_kernel(SDPBackend.MATH):
            ref = scaled_dot_product_attention(q32, k32, v32, is_causal=causal,
                                               enable_gqa=heads != kv_heads)
        ref.backward(grad.float())
        reference = [ref.detach(), q32.grad, k32.grad, v32.grad]
    error = max(((a.float() - b).abs().max() / b.abs().max()).item() for a, b in zip(ours, reference))
    return error, reference


def compile_worker(index, workers):
    """Run one call of every index-th job: fills the shared Triton cache in parallel."""
    for number, (shape, kernel, config) in enumerate(sweep_jobs()):
        if number % workers == index:
            _, batch, heads, kv_heads, seq, head_dim, causal = shape
            try:
                q, k, v = make_inputs(batch, heads, kv_heads, seq, head_dim, "fwd+bwd", 0)
                flash_attention(q, k, v, causal=causal, config=config).sum().backward()
            except Exception as error:  # noqa: BLE001 - the timing pass records it
                print(f"compile {shape[0]} {kernel}: {type(error).__name__}", flush=True)


def run_sweep(results, deadline, workers):
    start = time.time()
    processes = [subprocess.Popen([sys.executable, __file__, "--compile-worker", f"{i}/{workers}"])
                 for i in range(workers)]
    for process in processes:
        process.wait()
    print(f"sweep: parallel compile {time.time() - start:.1f} s over {workers} processes",
          flush=True)
    references = {}
    done_sdpa = set()
    for shape, kernel, config in sweep_jobs():
        if time.time() > deadline:
            print("sweep: out of time budget, stopping", flush=True)
            return
        name, batch, heads, kv_heads, seq, head_dim, causal = shape
        if name not in done_sdpa:  # every SDPA backend at this shape, same run, before our tiles
            done_sdpa.add(name)
            for provider in SDPA_BACKENDS:
                for mode in ("fwd", "fwd+bwd"):
                    row = measure(provider, batch, heads, seq, head_dim, causal, mode, None, kv_heads)
                    row.update(shape=name, kernel=provider, mode=mode)
                    results.append(row)
                    print(f"sweep {name:<12}{provider:<14}{mode:8s}{row.get('ms', float('nan')):8.3f} ms "
                          f"{row.get('error', '')}", flush=True)
        row = _run_job(shape, kernel, config)
        try:
            row["max_rel_error"], references[shape] = _agreement(shape, config, references.get(shape))
        except Exception as error:  # noqa: BLE001
            row["agreement_error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"
        row.update(shape=name, kernel=kernel, config=asdict(config))
        results.append(row)
        fwd_only = row.get("fwd_only", {}).get("ms")
        print(f"sweep {name:<12}{kernel:<14}{row.get('ms', float('nan')):8.3f} ms "
              f"{row.get('tflops', float('nan')):6.0f} TF err {row.get('max_rel_error', float('nan')):.1e} "
              f"{row.get('error', '')} {getattr(config, kernel) if kernel != 'default' else f'fwd {fwd_only}'}",
              flush=True)


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
    parser.add_argument("--sweep-seconds", type=float, default=240)
    parser.add_argument("--sweep-only", action="store_true", help="skip the main table")
    parser.add_argument("--compile-workers", type=int, default=12)
    parser.add_argument("--compile-worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.compile_worker:
        index, workers = map(int, args.compile_worker.split("/"))
        compile_worker(index, workers)
        return
    if not torch.cuda.is_available():
        sys.exit("bench/attention.py needs a CUDA GPU")

    env = environment()
    print(json.dumps(env), flush=True)
    providers = ["triton", "sdpa-flash", "sdpa-cudnn", "sdpa-efficient"]
    rows, sweep_rows = [], []
    for head_dim in ([] if args.sweep_only else args.head_dims):
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
    try:
        if args.sweep:
            run_sweep(sweep_rows, time.time() + args.sweep_seconds, args.compile_workers)
    finally:  # what was measured before a failure is still written
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
