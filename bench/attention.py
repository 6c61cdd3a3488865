"""Benchmark gpudoctor's Triton FlashAttention against torch SDPA (flash, cuDNN, memory-efficient).

TFLOP/s by the FlashAttention convention: forward = 4 * batch * heads * seq_q * seq_k * head_dim,
backward = 2.5 x forward (so forward+backward = 3.5 x forward), causal counts half. Times are the
median of triton.testing.do_bench. Tokens per shape are fixed (batch * seq = 16k, 32 heads) so
every shape fills the GPU.

    python bench/attention.py --out bench/results/attention-h200.json [--sweep] [--host]
    python bench/attention.py --sweep-only --sweep --host --shapes hd40,hd256 --out ...
    python bench/attention.py --sweep-only --sweep --round s3 --out ...   (this round's candidates)

--sweep times whole configurations (see sweep_candidates) against every SDPA backend at the
shapes of SWEEP_SHAPES; --host shows where one call's time goes at the training pass's shape.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, replace

import torch
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention

from gpudoctor.kernels.attention import (
    DEVICE_DESCRIPTORS,
    HOST_DESCRIPTORS,
    POINTERS,
    KernelTiles,
    flash_attention,
    padded_width,
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


def make_inputs(batch, heads, kv_heads, seq, head_dim, mode, seed, dtype=torch.bfloat16):
    generator = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(batch, heads, seq, head_dim, device="cuda", dtype=dtype, generator=generator)
    k, v = (torch.randn(batch, kv_heads, seq, head_dim, device="cuda", dtype=dtype,
                        generator=generator) for _ in range(2))
    for tensor in (q, k, v):
        tensor.requires_grad_(mode == "fwd+bwd")
    return q, k, v


def measure(provider, batch, heads, seq, head_dim, causal, mode, config=None, kv_heads=None,
            dtype=torch.bfloat16):
    kv_heads = kv_heads or heads
    q, k, v = make_inputs(batch, heads, kv_heads, seq, head_dim, mode,
                          hash((provider, seq, head_dim, causal, mode)) % 2**31, dtype)
    try:
        run = make_runner(provider, q, k, v, causal, mode, config)
        milliseconds = time_ms(run, [q, k, v])
    except Exception as error:  # a backend that refuses a shape is a result, not a crash
        return {"error": f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"}
    flops = attention_flops(batch, heads, seq, head_dim, causal, mode)
    return {"ms": milliseconds, "tflops": flops / milliseconds / 1e9}


def check_against_sdpa(batch, heads, seq, head_dim, causal, kv_heads=None, dtype=torch.bfloat16):
    """Relative error of our output against SDPA-flash on the benchmark's own shape."""
    q, k, v = make_inputs(batch, heads, kv_heads or heads, seq, head_dim, "fwd", 1, dtype)
    ours = flash_attention(q, k, v, causal=causal).float()
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        theirs = scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=q.shape[1] != k.shape[1]).float()
    return ((ours - theirs).norm() / theirs.norm()).item()


# ----------------------------------------------------------------------------------------------
# --sweep: whole configurations (tiles, tensor descriptors, warp specialization, atomic dQ) at
# the shapes issue 18 found slowest, each SDPA backend beside them in the same run. Worker
# processes compile and check every candidate first (a candidate that fails to compile, crashes
# or disagrees with SDPA-math is not timed), then one process times them one after another.
# ----------------------------------------------------------------------------------------------

# (name, batch, heads, kv_heads, seq, head_dim, causal, dtype)
SWEEP_SHAPES = [
    ("hd80-train", 4, 32, 32, 256, 80, True, "bf16"),  # the training pass's own shape
    ("hd80", 4, 32, 32, 4096, 80, True, "bf16"),
    ("hd256", 4, 32, 32, 4096, 256, True, "bf16"),
    ("hd128-gqa4", 4, 32, 8, 4096, 128, True, "bf16"),
    ("hd128-gqa4-fp16", 4, 32, 8, 4096, 128, True, "fp16"),
    ("hd112-full", 4, 32, 32, 4096, 112, False, "bf16"),
    ("hd64-s1024", 16, 32, 32, 1024, 64, True, "bf16"),
    ("hd40", 4, 32, 32, 4096, 40, True, "bf16"),
    ("hd72", 4, 32, 32, 4096, 72, True, "bf16"),
    ("hd128-gqa8-s16k", 1, 32, 4, 16384, 128, True, "bf16"),
]


def _shipped_config(shape):
    """The config flash_attention picks for a sweep shape (its size decides the one-launch backward)."""
    _, batch, heads, _, seq, head_dim, _, _ = shape
    return select_config(torch.cuda.get_device_capability(), head_dim, seq, batch * heads * seq * seq)


# Shapes that also get tile variants of the host-descriptor config.
FULL_SWEEP = {"hd80", "hd128-gqa4", "hd256", "hd64-s1024"}
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
T = KernelTiles


def sweep_candidates(shape):
    """(name, config) pairs: the shipped config first, then variants of it (a variant equal to
    an earlier one is left out). Loads: pointers, host-side or device-side tensor descriptors.
    With --round s3 (this session's round): delta computed in the dQ kernel, and on top of that
    the tiles that compile for sm90 without spills or with two programs per SM (registers and
    shared memory read off ptxas on the CPU; see _S3_TILES)."""
    if ROUND == "s3":
        return _s3_candidates(shape)
    if ROUND == "s4":
        return _s4_candidates(shape)
    if ROUND == "s6":
        base = _shipped_config(shape)
        return _s6_candidates(base)
    head_dim = shape[5]
    base = _shipped_config(shape)
    host = replace(base, tma=HOST_DESCRIPTORS)
    options = [("shipped", base), ("pointer", replace(base, tma=POINTERS)), ("tma-host", host),
               ("tma-device", replace(base, tma=DEVICE_DESCRIPTORS))]
    if padded_width(head_dim, replace(base, tma=POINTERS)) != head_dim:
        # head dims the pointer kernels pad: the descriptor kernels with and without the split
        options += [("tma-host-nosplit", replace(host, split_head_dim=False)),
                    ("tma-device-nosplit", replace(base, tma=DEVICE_DESCRIPTORS, split_head_dim=False))]
    if shape[0] in FULL_SWEEP:
        if head_dim <= 128:
            options += [("host-fwd-128x64w8s3", replace(host, forward=T(128, 64, 8, 3))),
                        ("host-fwd-128x128w8s2", replace(host, forward=T(128, 128, 8, 2))),
                        ("host-fwd-64x64w4s3", replace(host, forward=T(64, 64, 4, 3))),
                        ("host-dkdv-64x128w8s2", replace(host, backward_dkdv=T(64, 128, 8, 2))),
                        ("host-dq-128x64w8s2", replace(host, backward_dq=T(128, 64, 8, 2))),
                        ("host-atomic", replace(host, atomic_dq=True))]
        else:
            options += [("host-fwd-128x32w8s3", replace(host, forward=T(128, 32, 8, 3))),
                        ("host-dq-64x64w8s2", replace(host, backward_dq=T(64, 64, 8, 2)))]
    return _unique_with_repeat(options, base)


def _unique_with_repeat(options, base):
    unique, seen = [], []
    for name, config in options:
        if config not in seen:
            unique.append((name, config))
            seen.append(config)
    # The shipped config once more, timed last: the spread between the two is the noise.
    return unique + [("shipped-again", base)]


# Round s3 tile variants per head_dim bucket (what runs: 40 -> the 64 kernels, 112 -> 128).
# Picked from `bench/attention_ncu.py --ptxas` (sm90 compiled on the CPU by Triton 3.6 and its
# ptxas; bench/results/attention-h200-2026-11-23-s3-ptxas-sm90.txt), registers / spill bytes /
# shared memory, programs per SM:
# - forward hd128: shipped 128x128 w8 s3 255 / 0 / 224 KB, one per SM; 64x64 w4 s2 164 / 0 /
#   80 KB, two; 64x32 w4 s3 128 / 0 / 64 KB, three: programs whose softmax and matrix products
#   the SM can interleave between them (no warp specialization needed);
# - dQ hd128: shipped 128x64 w8 s3 207 / 0 / 160 KB, one; 64x64 w4 s2 176 / 0 / 96 KB and
#   64x32 w4 s3 156 / 0 / 80 KB, two;
# - dK/dV hd128: shipped 64x128 w8 s3 spills 188 bytes; s1 16, s2 180;
# - forward hd256 (host descriptors): 64x32 w4 s2 200 / 0 / 96 KB, two per SM;
# - dK/dV hd256 (host descriptors): shipped 64x64 w8 s1 spills 288 bytes; 32x64 w8 s2 8-12,
#   64x64 w8 s2 192 (32x32 w8 s2: 988, left out; spill bytes move by a few between compiles);
# - forward hd64: 64x64 w4 s3 123 / 0 / 56 KB and s2 126 / 0 / 40 KB, four per SM (shipped
#   128x64 w8 s3: two).
_S3_TILES = {
    64: [("fwd-64x64w4s3", "forward", T(64, 64, 4, 3)),
         ("fwd-64x64w4s2", "forward", T(64, 64, 4, 2))],
    128: [("fwd-64x64w4s2", "forward", T(64, 64, 4, 2)),
          ("fwd-64x32w4s3", "forward", T(64, 32, 4, 3)),
          ("dkdv-64x128w8s1", "backward_dkdv", T(64, 128, 8, 1)),
          ("dkdv-64x128w8s2", "backward_dkdv", T(64, 128, 8, 2)),
          ("dq-64x64w4s2", "backward_dq", T(64, 64, 4, 2)),
          ("dq-64x32w4s3", "backward_dq", T(64, 32, 4, 3))],
    256: [("fwd-64x32w4s2", "forward", T(64, 32, 4, 2)),
          ("dkdv-32x64w8s2", "backward_dkdv", T(32, 64, 8, 2)),
          ("dkdv-64x64w8s2", "backward_dkdv", T(64, 64, 8, 2))],
}


def _s3_candidates(shape):
    label, head_dim = shape[0], shape[5]
    base = _shipped_config(shape)
    delta = replace(base, delta_in_dq=True)
    options = [("shipped", base), ("delta-in-dq", delta)]
    bucket = 64 if head_dim <= 64 else 128 if head_dim <= 128 else 256
    if label not in S3_GUARD_SHAPES:
        for name, field, tiles in _S3_TILES.get(bucket, []):
            options.append((f"delta+{name}", replace(delta, **{field: tiles})))
    return _unique_with_repeat(options, base)


def _s4_candidates(shape):
    """Round s4 (fifth session): the two s3 results worth keeping, each timed again and apart.
    hd256 forward+backward ran 12.99 ms with delta-in-dq plus a two-stage 64x64 dK/dV tile
    against 14.30 / 14.32 shipped (delta-in-dq alone 14.22): is it the tile? And delta-in-dq
    alone at GQA 8:1, seq 16k: 19.72 against 17.79 / 17.93."""
    head_dim = shape[5]
    base = _shipped_config(shape)
    delta = replace(base, delta_in_dq=True)
    options = [("shipped", base), ("delta-in-dq", delta)]
    if head_dim > 128:
        options += [("dkdv-64x64w8s2", replace(base, backward_dkdv=T(64, 64, 8, 2))),
                    ("delta+dkdv-64x64w8s2", replace(delta, backward_dkdv=T(64, 64, 8, 2)))]
    return _unique_with_repeat(options, base)


def _s6_candidates(base):
    """Round s6 (sixth session): the shipped config launched directly (gpudoctor/kernels/launch.py)
    against the same config through Triton's JITFunction.run (``jitrun``), at every sweep shape."""
    return [("shipped", base), ("jitrun", base), ("shipped-again", base)]


# Shapes timed in round s3 only for the shipped config and delta-in-dq (no tile variants):
# the guard that nothing gets slower, and fp16.
S3_GUARD_SHAPES = {"hd80-train", "hd80", "hd72", "hd128-gqa8-s16k", "hd128-gqa4-fp16"}
ROUND = os.environ.get("ATTENTION_SWEEP_ROUND", "")


def sweep_jobs(names=None):
    return [(shape, name, config) for shape in SWEEP_SHAPES if not names or shape[0] in names
            for name, config in sweep_candidates(shape)]


def _job_key(shape, name):
    return f"{shape[0]}/{name}"


def _agreement(shape, config):
    """max |ours - SDPA math in fp32| / max |ref| over out, dq, dk, dv, on batch 1 and two KV
    heads of the shape (same sequence, so the same compiled kernels run)."""
    _, _, heads, kv_heads, seq, head_dim, causal, dtype = shape
    group = heads // kv_heads
    # Capped: SDPA-math's float32 scores at 16k would take tens of GB per worker. The sequence
    # is a run-time argument, so the same compiled kernels run at 4096 (whole tiles either way).
    q, k, v = make_inputs(1, 2 * group, 2, min(seq, 4096), head_dim, "fwd+bwd", 7, DTYPES[dtype])
    grad = torch.randn(q.shape, device="cuda", dtype=q.dtype,
                       generator=torch.Generator(device="cuda").manual_seed(8))
    out = flash_attention(q, k, v, causal=causal, config=config)
    out.backward(grad)
    ours = [out.detach(), q.grad, k.grad, v.grad]
    q32, k32, v32 = (t.detach().float().requires_grad_() for t in (q, k, v))
    with sdpa_kernel(SDPBackend.MATH):
        ref = scaled_dot_product_attention(q32, k32, v32, is_causal=causal, enable_gqa=group > 1)
    ref.backward(grad.float())
    reference = [ref.detach(), q32.grad, k32.grad, v32.grad]
    return max(((a.float() - b).abs().max() / b.abs().max()).item() for a, b in zip(ours, reference))


def check_worker(index, workers, names, out_dir):
    """Compile and check every index-th job; results go to a JSON file the timing pass reads.
    A CUDA error leaves this process's context unusable: record it and stop."""
    results = {}
    path = os.path.join(out_dir, f"attention-check-{index}.json")
    for number, (shape, name, config) in enumerate(sweep_jobs(names)):
        if number % workers != index:
            continue
        _, batch, heads, kv_heads, seq, head_dim, causal, dtype = shape
        start = time.time()
        try:
            q, k, v = make_inputs(batch, heads, kv_heads, seq, head_dim, "fwd+bwd", 0, DTYPES[dtype])
            flash_attention(q, k, v, causal=causal, config=config).sum().backward()
            error = _agreement(shape, config)
            results[_job_key(shape, name)] = {"ok": error < 0.02, "max_rel_error": error,
                                              "check_s": round(time.time() - start, 1)}
        except Exception as exc:  # noqa: BLE001 - recorded, the job is then skipped
            message = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:200] if str(exc).strip() else ''}"
            results[_job_key(shape, name)] = {"ok": False, "error": message}
            if "CUDA" in message or "cuda" in message:
                break
        finally:
            with open(path, "w") as handle:
                json.dump(results, handle)


def run_sweep(results, timing_seconds, workers, names, check_seconds):
    import tempfile

    start = time.time()
    out_dir = tempfile.mkdtemp(prefix="attention-sweep-")
    names_arg = ",".join(names or [])
    processes = [subprocess.Popen([sys.executable, __file__, "--check-worker", f"{i}/{workers}",
                                   "--check-dir", out_dir, "--shapes", names_arg])
                 for i in range(workers)]
    for process in processes:  # a worker stuck in a kernel is stopped; its rest goes unchecked
        try:
            process.wait(timeout=max(1.0, start + check_seconds - time.time()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            print(f"sweep: check worker {process.pid} stopped after {check_seconds:.0f} s", flush=True)
    checks = {}
    for i in range(workers):
        try:
            with open(os.path.join(out_dir, f"attention-check-{i}.json")) as handle:
                checks.update(json.load(handle))
        except (OSError, ValueError):
            pass
    print(f"sweep: compile and check {time.time() - start:.1f} s over {workers} processes",
          flush=True)
    deadline = time.time() + timing_seconds
    done_sdpa = set()
    for shape, name, config in sweep_jobs(names):
        if time.time() > deadline:
            print("sweep: out of time budget, stopping", flush=True)
            return
        label, batch, heads, kv_heads, seq, head_dim, causal, dtype = shape
        if label not in done_sdpa:  # every SDPA backend at this shape, same run, before ours
            done_sdpa.add(label)
            for provider in SDPA_BACKENDS:
                for mode in ("fwd", "fwd+bwd"):
                    row = measure(provider, batch, heads, seq, head_dim, causal, mode, None, kv_heads,
                                  DTYPES[dtype])
                    row.update(shape=label, kernel=provider, mode=mode)
                    results.append(row)
        check = checks.get(_job_key(shape, name), {"ok": False, "error": "not checked (worker died)"})
        row = {"shape": label, "kernel": name, "config": asdict(config), "check": check}
        if check.get("ok"):
            from gpudoctor.kernels import launch

            launch.enabled = name != "jitrun"  # the s6 round's Triton-launch variant
            row["fwd"] = measure("triton", batch, heads, seq, head_dim, causal, "fwd", config, kv_heads,
                                 DTYPES[dtype])
            row["fwd+bwd"] = measure("triton", batch, heads, seq, head_dim, causal, "fwd+bwd", config,
                                     kv_heads, DTYPES[dtype])
            launch.enabled = True
        results.append(row)
        print(f"sweep {label:<16}{name:<22}"
              f"{row.get('fwd', {}).get('ms', math.nan):8.3f}{row.get('fwd+bwd', {}).get('ms', math.nan):9.3f} ms "
              f"err {check.get('max_rel_error', math.nan):.1e} {check.get('error', '')}", flush=True)


def print_sweep_table(rows):
    """Per shape: best SDPA backend, the shipped config and the fastest candidate, fwd and
    fwd+bwd, with ratios (best SDPA time / ours: above 1 means faster than every backend)."""
    by_shape = {}
    for row in rows:
        by_shape.setdefault(row["shape"], []).append(row)
    print("\nshape            mode     best-sdpa        ms   shipped   x   best-candidate              ms    x")
    for label, shape_rows in by_shape.items():
        for mode in ("fwd", "fwd+bwd"):
            sdpa = [(r["ms"], r["kernel"]) for r in shape_rows
                    if r["kernel"] in SDPA_BACKENDS and r["mode"] == mode and "ms" in r]
            ours = [(r[mode]["ms"], r["kernel"]) for r in shape_rows
                    if mode in r and "ms" in r[mode]]
            if not sdpa or not ours:
                continue
            best_sdpa, best_ours = min(sdpa), min(ours)
            shipped = next((ms for ms, name in ours if name == "shipped"), math.nan)
            print(f"{label:<17}{mode:8s} {best_sdpa[1]:<12}{best_sdpa[0]:8.3f} {shipped:8.3f} "
                  f"{best_sdpa[0] / shipped:5.2f}  {best_ours[1]:<22}{best_ours[0]:8.3f} "
                  f"{best_sdpa[0] / best_ours[0]:5.2f}")


# ----------------------------------------------------------------------------------------------
# --host: where the time of one small call goes (the training pass's shape is launch-bound).
# ----------------------------------------------------------------------------------------------


# --host: our backward variants beside SDPA at the training pass's shape.
# "triton" = as shipped (select_config: the one-launch backward for attention matrices up to
# FUSED_BACKWARD_MAX_SCORES elements on sm90); "triton-split-backward" = the table's tiles with the
# backward as three launches (delta pass, dK/dV, dQ: the code before the eighth session);
# "triton-fused-backward" = one launch on the dK/dV tiles' stages.
# ("triton-fused-backward-s1", one launch on one pipeline stage, was timed in the eighth session's
# first run and then found to return wrong dQ on the H200: dropped, its timings void.)
HOST_PROVIDERS = ("triton", "triton-split-backward", "triton-fused-backward", "sdpa-cudnn", "sdpa-flash")


def _host_variant(provider, head_dim, seq):
    """(provider make_runner takes, config) for a --host provider."""
    from gpudoctor.kernels.attention import DESCRIPTOR_MIN_SEQ, _select_config

    # The table's tiles without the one-launch backward (select_config's short-sequence choice).
    table = _select_config(torch.cuda.get_device_capability(), head_dim, seq >= DESCRIPTOR_MIN_SEQ)
    if provider == "triton-split-backward":
        return "triton", table
    if provider == "triton-fused-backward":
        return "triton", replace(table, fused_backward=True)
    return provider, None


def host_profile(batch=4, heads=32, seq=256, head_dim=80, causal=True, rounds=3):
    """Per provider: do_bench's median (the figure of the main table), one call timed as the
    training pass times it (events around a single call, the GPU idle before it; median of 21),
    the same call back to back (mean of 200, host-bound), and the device time of its kernels
    (torch.profiler); the providers take turns, ``rounds`` times, and each figure is the median
    over rounds. Every provider also runs with autograd's engine on the calling thread
    (torch.autograd.set_multithreading_enabled(False): no GIL handoff to the engine's device
    thread), as ``<provider> 1-thread``. Then cProfile of our calls."""
    import cProfile
    import io
    import pstats

    report = {}
    samples = {}
    q, k, v = make_inputs(batch, heads, heads, seq, head_dim, "fwd+bwd", 3)
    for round_index in range(rounds):
        order = HOST_PROVIDERS if round_index % 2 == 0 else HOST_PROVIDERS[::-1]
        for provider in order:
            name, config = _host_variant(provider, head_dim, seq)
            for threads in ("", " 1-thread"):
                with torch.autograd.set_multithreading_enabled(not threads):
                    for mode in ("fwd", "fwd+bwd") if not threads else ("fwd+bwd",):
                        samples.setdefault(f"{provider}{threads} {mode}", []).append(
                            _host_sample(name, config, q, k, v, causal, mode,
                                         profile=round_index == 0 and not threads))
    for key, runs in samples.items():
        figures = {field: statistics.median(run[field] for run in runs)
                   for field in ("do_bench_ms", "single_call_ms", "back_to_back_ms")}
        first = next((run for run in runs if run["kernels_us"]), runs[0])
        report[key] = {**figures, "rounds": runs, "device_us_per_call": first["device_us_per_call"],
                       "kernels_us": first["kernels_us"]}
        print(f"host {key:<28} do_bench {figures['do_bench_ms']:.3f} ms, single "
              f"{figures['single_call_ms']:.3f} ms, back-to-back {figures['back_to_back_ms']:.3f} ms, "
              f"device {runs[0]['device_us_per_call']:.1f} us", flush=True)
    for mode in ("fwd", "fwd+bwd", "1-thread fwd+bwd"):
        threads = " 1-thread" if mode.startswith("1-thread") else ""
        mode = mode.split()[-1]
        best = min(report[f"{p}{threads} {mode}"]["do_bench_ms"] for p in ("sdpa-cudnn", "sdpa-flash"))
        best_b2b = min(report[f"{p}{threads} {mode}"]["back_to_back_ms"] for p in ("sdpa-cudnn", "sdpa-flash"))
        for provider in (p + threads for p in HOST_PROVIDERS if p.startswith("triton")):
            row = report[f"{provider} {mode}"]
            row["ratio_to_best_sdpa"] = round(best / row["do_bench_ms"], 3)
            row["back_to_back_ratio_to_best_sdpa"] = round(best_b2b / row["back_to_back_ms"], 3)
            print(f"host {provider:<20}{mode:8s} x best SDPA: do_bench {row['ratio_to_best_sdpa']:.2f}, "
                  f"back-to-back {row['back_to_back_ratio_to_best_sdpa']:.2f}", flush=True)
    # The training pass's own measurement (gpudoctor.train.matrix_attention: the median of 5
    # calls, CUDA events around each), same shape, same run.
    from gpudoctor.train import matrix_attention

    for row in matrix_attention.probe(batch, heads, heads, seq, head_dim, torch.bfloat16, "cuda",
                                      backends=("gpudoctor-triton", "sdpa-flash", "sdpa-cudnn")):
        report[f"training-pass probe {row.backend}"] = {
            "status": row.status, "forward_ms": row.forward_ms, "backward_ms": row.backward_ms,
            "errors": row.errors}
        print(f"host training-pass probe {row.backend:<18}{row.status:8s} fwd {row.forward_ms} ms, "
              f"bwd {row.backward_ms} ms", flush=True)
    for mode in ("fwd", "fwd+bwd"):
        run = make_runner("triton", q, k, v, causal, mode)
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(200):
            run()
        profiler.disable()
        torch.cuda.synchronize()
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(16)
        report[f"cprofile triton {mode}"] = text.getvalue()
    return report


# (batch, seq): the limit's neighbourhood at batch 4, and the same attention-matrix sizes at batch 16
# (FUSED_BACKWARD_MAX_SCORES assumes the trade depends on the size, not on batch or length).
# (head_dim, batch, seq, causal, kv_heads, dtype), 32 query heads. "grid": the limit's
# neighbourhood at batch 4 and the same attention-matrix sizes at batch 16, causal bf16
# (FUSED_BACKWARD_MAX_SCORES assumes the trade depends on the size, not on batch or length);
# "extra": what the grid leaves out, at and under the limit (GQA, not causal, fp16).
FUSED_SWEEP_CASES = {
    "grid": [(head_dim, batch, seq, True, 32, torch.bfloat16) for head_dim in (64, 80, 128)
             for batch, seq in ((4, 256), (4, 512), (4, 1024), (4, 2048), (16, 512), (16, 1024))],
    "extra": [(128, 4, 512, True, 8, torch.bfloat16), (128, 4, 256, True, 4, torch.bfloat16),
              (80, 4, 512, False, 32, torch.bfloat16), (64, 4, 512, False, 8, torch.bfloat16),
              (80, 4, 256, True, 32, torch.float16), (128, 4, 512, True, 32, torch.float16),
              (256, 4, 256, True, 32, torch.bfloat16), (96, 4, 512, True, 32, torch.bfloat16)],
    # four times the limit (2^27 scores), where the shipped path is the Gluon forward and the
    # three-launch backward; fourteenth session
    "4x": [(head_dim, batch, seq, True, 32, torch.bfloat16) for head_dim in (64, 80, 96, 128)
           for batch, seq in ((4, 1024), (16, 512))] + [(64, 4, 1024, True, 8, torch.bfloat16),
                                                       (80, 4, 1024, False, 32, torch.bfloat16)],
}


def fused_sweep(cases="grid", heads=32, rounds=2):
    """Where the one-launch backward stops paying (FUSED_BACKWARD_MAX_SCORES): forward+backward of
    the shipped path (``triton``), the split and the fused backward beside cuDNN and SDPA-flash
    per case of FUSED_SWEEP_CASES;
    do_bench's median and back to back (mean of 100), providers in turn, order reversed every
    other round, each figure the median over rounds."""
    rows = []
    providers = ("triton", "triton-split-backward", "triton-fused-backward", "sdpa-cudnn", "sdpa-flash")
    for head_dim, batch, seq, causal, kv_heads, dtype in FUSED_SWEEP_CASES[cases]:
        q, k, v = make_inputs(batch, heads, kv_heads, seq, head_dim, "fwd+bwd", seq + head_dim, dtype)
        samples = {}
        for round_index in range(rounds):
            for provider in providers if round_index % 2 == 0 else providers[::-1]:
                name, config = _host_variant(provider, head_dim, seq)
                run = make_runner(name, q, k, v, causal, "fwd+bwd", config)
                for _ in range(3):
                    run()
                torch.cuda.synchronize()
                do_bench_ms = time_ms(run, [q, k, v])
                begin = time.perf_counter()
                for _ in range(100):
                    run()
                torch.cuda.synchronize()
                back_to_back = (time.perf_counter() - begin) / 100 * 1000
                samples.setdefault(provider, []).append((do_bench_ms, back_to_back))
        row = {"head_dim": head_dim, "seq": seq, "batch": batch, "heads": heads, "kv_heads": kv_heads,
               "causal": causal, "dtype": str(dtype).replace("torch.", "")}
        for provider, runs in samples.items():
            row[provider] = {"do_bench_ms": statistics.median(r[0] for r in runs),
                             "back_to_back_ms": statistics.median(r[1] for r in runs), "rounds": runs}
        best = min(row[p]["do_bench_ms"] for p in ("sdpa-cudnn", "sdpa-flash"))
        split, fused, shipped = row["triton-split-backward"], row["triton-fused-backward"], row["triton"]
        row["shipped_x_best_sdpa"] = round(best / shipped["do_bench_ms"], 3)
        row["fused_over_split"] = round(split["do_bench_ms"] / fused["do_bench_ms"], 3)
        label = (f"hd{head_dim:<4}b{batch:<3}seq{seq:<6}kv{kv_heads:<3}{'causal' if causal else 'full':7s}"
                 f"{row['dtype']:9s}")
        print(f"fused-sweep {label} fwd+bwd ms: shipped {shipped['do_bench_ms']:.3f} split {split['do_bench_ms']:.3f} "
              f"fused {fused['do_bench_ms']:.3f} cudnn {row['sdpa-cudnn']['do_bench_ms']:.3f} "
              f"flash {row['sdpa-flash']['do_bench_ms']:.3f} | fused/split x{row['fused_over_split']:.2f}, "
              f"shipped x best SDPA {row['shipped_x_best_sdpa']:.2f}, "
              f"fused x best SDPA {best / fused['do_bench_ms']:.2f}, split x best {best / split['do_bench_ms']:.2f} "
              f"| back-to-back split {split['back_to_back_ms']:.3f} fused {fused['back_to_back_ms']:.3f}",
              flush=True)
        rows.append(row)
    return rows


def _host_sample(provider, config, q, k, v, causal, mode, profile):
    from gpudoctor.train.timing import median_ms

    run = make_runner(provider, q, k, v, causal, mode, config)
    for _ in range(5):
        run()
    torch.cuda.synchronize()
    do_bench_ms = time_ms(run, [q, k, v])
    single_ms = median_ms(run, "cuda", repeats=21)  # as the training pass times a call
    begin = time.perf_counter()
    for _ in range(200):
        run()
    torch.cuda.synchronize()
    back_to_back = (time.perf_counter() - begin) / 200 * 1000
    kernels = {}
    if profile:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(20):
                run()
            torch.cuda.synchronize()
        for event in prof.key_averages():
            device_us = getattr(event, "self_device_time_total", None)
            if device_us is None:
                device_us = getattr(event, "self_cuda_time_total", 0)
            if device_us > 0:
                kernels[event.key[:80]] = round(device_us / 20, 2)
    return {"do_bench_ms": do_bench_ms, "single_call_ms": single_ms,
            "back_to_back_ms": back_to_back, "device_us_per_call": round(sum(kernels.values()), 2),
            "kernels_us": kernels}


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
    parser.add_argument("--kv-heads", type=int, help="grouped-query attention: KV heads (default: --heads)")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bf16", help="the main table's inputs")
    parser.add_argument("--sweep", action="store_true", help="also time whole-config candidates")
    parser.add_argument("--sweep-seconds", type=float, default=240, help="timing budget")
    parser.add_argument("--check-seconds", type=float, default=300, help="compile-and-check budget")
    parser.add_argument("--sweep-only", action="store_true", help="skip the main table")
    parser.add_argument("--shapes", default="", help="sweep only these shape names (comma-separated)")
    parser.add_argument("--host", action="store_true", help="profile one call at the training shape")
    parser.add_argument("--fused-rounds", type=int, default=2, help="rounds of --fused-sweep")
    parser.add_argument("--fused-sweep", nargs="?", const="grid", choices=sorted(FUSED_SWEEP_CASES),
                        help="split against one-launch backward (FUSED_BACKWARD_MAX_SCORES): the size "
                             "grid (default) or the extra cases")
    parser.add_argument("--compile-workers", type=int, default=12)
    parser.add_argument("--round", default="", help="candidate set: '' (issue 18's), 's3', 's4', 's6'")
    parser.add_argument("--check-worker", help=argparse.SUPPRESS)
    parser.add_argument("--check-dir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.kv_heads is not None and (args.kv_heads < 1 or args.heads % args.kv_heads):
        parser.error(f"--kv-heads {args.kv_heads} must divide --heads {args.heads}")
    names = [name for name in args.shapes.split(",") if name]
    if args.round:  # read by the check workers too (they inherit the environment)
        os.environ["ATTENTION_SWEEP_ROUND"] = args.round
        global ROUND
        ROUND = args.round
    if args.check_worker:
        index, workers = map(int, args.check_worker.split("/"))
        check_worker(index, workers, names, args.check_dir)
        return
    if not torch.cuda.is_available():
        sys.exit("bench/attention.py needs a CUDA GPU")

    env = environment()
    print(json.dumps(env), flush=True)
    providers = ["triton", "sdpa-flash", "sdpa-cudnn", "sdpa-efficient"]
    rows, sweep_rows, host, fused_rows = [], [], {}, []
    for head_dim in ([] if args.sweep_only else args.head_dims):
        for seq in args.seqs:
            batch = max(1, args.tokens // seq)
            for causal in (True, False):
                error = check_against_sdpa(batch, args.heads, seq, head_dim, causal, args.kv_heads,
                                           DTYPES[args.dtype])
                for mode in ("fwd", "fwd+bwd"):
                    variants = [(p, None) for p in providers]
                    if head_dim % 64:  # the head_dim split against plain padding, measured
                        base = select_config(torch.cuda.get_device_capability(), head_dim)
                        variants.append(("triton-padded", replace(base, split_head_dim=False)))
                    for provider, config in variants:
                        row = measure(provider, batch, args.heads, seq, head_dim, causal, mode,
                                      config, args.kv_heads, DTYPES[args.dtype])
                        row.update(provider=provider, head_dim=head_dim, seq=seq, batch=batch,
                                   heads=args.heads, kv_heads=args.kv_heads or args.heads, dtype=args.dtype,
                                   causal=causal, mode=mode)
                        if provider == "triton":
                            row["rel_err_vs_sdpa_flash"] = error
                        rows.append(row)
                        print(f"hd{head_dim:<4}seq{seq:<6}{'causal' if causal else 'full':7s}"
                              f"{mode:8s}{provider:15s}"
                              f"{row.get('tflops', float('nan')):8.1f} {row.get('error', '')}",
                              flush=True)
    try:
        if args.host:
            host = host_profile()
        if args.fused_sweep:
            fused_rows = fused_sweep(args.fused_sweep, rounds=args.fused_rounds)
        if args.sweep:
            run_sweep(sweep_rows, args.sweep_seconds, args.compile_workers, names,
                      args.check_seconds)
    finally:  # what was measured before a failure is still written
        if args.out:
            with open(args.out, "w") as handle:
                json.dump({"environment": env, "results": rows, "sweep": sweep_rows, "host": host,
                           "fused_sweep": fused_rows}, handle, indent=1)
    if rows:
        print_table(rows)
    if sweep_rows:
        print_sweep_table(sweep_rows)


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
