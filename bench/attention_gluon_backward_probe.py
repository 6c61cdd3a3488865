"""The warp-specialized Gluon dK/dV kernel (gpudoctor.kernels.attention_gluon_backward) against the
Triton dK/dV kernel and SDPA on Hopper (issue 18 item 1: the backward is ~3/4 of a training step).

Usage:
  python bench/attention_gluon_backward_probe.py --compile-only      (no GPU: registers, spills)
  python bench/attention_gluon_backward_probe.py --json OUT.json [--shapes NAME ...] [--skip-check]

GPU mode: first a correctness table (dK, dV from the Gluon kernel against the Triton backward and
a float32 reference, ragged lengths, GQA, both dtypes), then per shape, in the same run: the
backward alone with the Gluon dK/dV and with the Triton one, the Gluon dK/dV kernel alone, and
forward+backward through flash_attention (the shipped forward with: the Gluon dK/dV, the Triton
backward, the Gluon kernel summing dQ; and Triton only) against cuDNN and SDPA-flash. A deadlocked
kernel ends the run after 120 s on one row with the rows so far written
(attention_ws_common.Watchdog).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attention_ws_common import (  # noqa: E402
    RunLog,
    attempt,
    environment_line,
    gqa_inputs,
    one_line,
    ptxas_figures,
    time_ms,
)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# (name, batch, heads, kv_heads, seq_q, seq_k, head_dim, causal, dtype)
CHECKS = (
    ("hd128-c-s1000", 2, 4, 4, 1000, 1000, 128, True, "bfloat16"),
    ("hd128-nc-s777x1300", 2, 4, 4, 777, 1300, 128, False, "float16"),
    ("hd64-c-s1024", 2, 4, 4, 1024, 1024, 64, True, "bfloat16"),
    ("hd32-nc-s300", 1, 4, 4, 300, 300, 32, False, "bfloat16"),
    ("hd80-c-s640", 1, 4, 4, 640, 640, 80, True, "float16"),
    ("hd112-c-gqa4-s1100", 1, 8, 2, 1100, 1100, 112, True, "bfloat16"),
    ("hd96-nc-gqa8-s512", 1, 8, 1, 512, 512, 96, False, "bfloat16"),
    ("hd40-c-s129", 2, 2, 2, 129, 129, 40, True, "float16"),
    ("hd128-c-s64", 1, 2, 2, 64, 64, 128, True, "bfloat16"),
    # width 256: attention_gluon_backward_wide
    ("hd256-c-s1000", 2, 4, 4, 1000, 1000, 256, True, "bfloat16"),
    ("hd256-nc-s777x1300", 1, 4, 4, 777, 1300, 256, False, "float16"),
    ("hd256-c-gqa4-s700", 1, 8, 2, 700, 700, 256, True, "bfloat16"),
    ("hd192-nc-gqa8-s513", 1, 8, 1, 513, 513, 192, False, "bfloat16"),
    ("hd160-c-s129", 2, 2, 2, 129, 129, 160, True, "float16"),
    ("hd256-nc-s1300x300", 1, 4, 2, 1300, 300, 256, False, "bfloat16"),
    ("hd256-c-s64", 1, 2, 2, 64, 64, 256, True, "bfloat16"),
)
# (name, batch, heads, kv_heads, seq, head_dim, causal)
SHAPES = (
    ("hd128-c", 4, 32, 32, 4096, 128, True),
    ("hd128-nc", 4, 32, 32, 4096, 128, False),
    ("hd128-gqa4", 4, 32, 8, 4096, 128, True),
    ("hd112-nc", 4, 32, 32, 4096, 112, False),
    ("hd96-c", 4, 32, 32, 4096, 96, True),
    ("hd80-c", 4, 32, 32, 4096, 80, True),
    ("hd64-c", 4, 32, 32, 4096, 64, True),
    ("hd64-nc", 4, 32, 32, 4096, 64, False),
    ("hd40-c", 4, 32, 32, 4096, 40, True),
    ("hd128-c-s1024", 4, 32, 32, 1024, 128, True),
    ("hd128-c-s2048", 4, 32, 32, 2048, 128, True),
    ("hd128-nc-s2048", 4, 32, 32, 2048, 128, False),
    ("hd128-c-s16k", 1, 16, 16, 16384, 128, True),
    ("hd256-c", 4, 32, 32, 4096, 256, True),
    ("hd256-nc", 4, 32, 32, 4096, 256, False),
    ("hd256-gqa4", 4, 32, 8, 4096, 256, True),
    ("hd256-c-s2048", 4, 32, 32, 2048, 256, True),
    ("hd256-c-s1024", 4, 32, 32, 1024, 256, True),
    ("hd256-c-s512", 4, 32, 32, 512, 256, True),
    ("hd256-nc-s1024", 4, 32, 32, 1024, 256, False),
    ("hd256-c-s16k", 1, 16, 16, 16384, 256, True),
    # the rest of the 256 bucket: the wide kernel computes them at width 256, the Triton
    # kernels as 128 + a power-of-two tail (136, 160) or padded (224)
    ("hd136-c", 4, 32, 32, 4096, 136, True),
    ("hd160-c", 4, 32, 32, 4096, 160, True),
    ("hd192-c", 4, 32, 32, 4096, 192, True),
    ("hd224-c", 4, 32, 32, 4096, 224, True),
    ("hd192-c-s1024", 4, 32, 32, 1024, 192, True),
    ("hd72-c", 4, 32, 32, 4096, 72, True),
    ("hd88-c", 4, 32, 32, 4096, 88, True),
    ("hd88-nc", 4, 32, 32, 4096, 88, False),
    ("hd72-nc", 4, 32, 32, 4096, 72, False),
    ("hd80-nc", 4, 32, 32, 4096, 80, False),
    ("hd104-c", 4, 32, 32, 4096, 104, True),
    ("hd120-c", 4, 32, 32, 4096, 120, True),
    ("hd144-c", 4, 32, 32, 4096, 144, True),
    ("hd152-c", 4, 32, 32, 4096, 152, True),
    # below GLUON_MIN_SEQ with more programs, and batch 4 at 1024 keys at hd64 (thirteenth session)
    ("hd128-c-s1024-b16", 16, 32, 32, 1024, 128, True),
    ("hd128-nc-s1024-b16", 16, 32, 32, 1024, 128, False),
    ("hd128-c-s512-b32", 32, 32, 32, 512, 128, True),
    ("hd64-c-s1024-b16", 16, 32, 32, 1024, 64, True),
    ("hd64-c-s1024", 4, 32, 32, 1024, 64, True),
)


def compile_only() -> int:
    from gpudoctor.kernels import attention_gluon_backward, attention_gluon_backward_wide

    print("sm90, compiled without a GPU: registers per thread at launch (setmaxnreg moves them), spills, shared")
    for width in attention_gluon_backward.WIDTHS:
        for causal in (True, False):
            started = time.perf_counter()
            compiled = attention_gluon_backward.compile_sm90(width, causal)
            figures = ptxas_figures(compiled.asm["ptx"])
            print(f"width {width:>3} causal {causal!s:<5} {figures} shared {compiled.metadata.shared} "
                  f"({time.perf_counter() - started:.1f} s)")
    for causal in (True, False):
        started = time.perf_counter()
        compiled = attention_gluon_backward_wide.compile_sm90(causal)
        figures = ptxas_figures(compiled.asm["ptx"])
        print(f"width 256 (wide) causal {causal!s:<5} {figures} shared {compiled.metadata.shared} "
              f"({time.perf_counter() - started:.1f} s)")
    return 0


def check_rows(log: RunLog) -> None:
    import torch

    from gpudoctor.kernels import attention, attention_gluon_backward
    from gpudoctor.kernels.attention import config_for, reference_attention

    print(f"{'check':<22} {'dk vs triton':>12} {'dv vs triton':>12} {'dk vs fp32':>10} {'dv vs fp32':>10} "
          f"{'triton dk vs fp32':>17} {'atomic dq rel':>13} {'dkdv same':>9} {'repeat same':>11}")
    for name, batch, heads, kv_heads, seq_q, seq_k, head_dim, causal, dtype_name in CHECKS:
        row = {"shape": name, "variant": "check"}
        log.rows.append(row)
        log.watchdog.start(row)
        dtype = getattr(torch, dtype_name)
        q, k, v, grad = gqa_inputs(batch, heads, kv_heads, seq_q, seq_k, head_dim, dtype, seq_q + head_dim, grad=True)
        scale = head_dim ** -0.5

        def work():
            config = dataclasses.replace(config_for(q, k), gluon_forward=False, gluon_backward=False,
                                         fused_backward=False)
            out, lse = attention.attention_forward(q, k, v, causal, scale, config)
            _, dk_t, dv_t = attention.attention_backward(grad, q, k, v, out, lse, causal, scale, config)
            delta = (out.float() * grad.float()).sum(-1).reshape(batch * heads, seq_q).contiguous()
            dk_g, dv_g = attention_gluon_backward.backward_dkdv(grad, q, k, v, lse, delta, causal, scale)
            leaves = [t.detach().float().requires_grad_() for t in (q, k, v)]
            reference_attention(*leaves, causal=causal, dtype=torch.float32).backward(grad.float())
            dq_r, dk_r, dv_r = leaves[0].grad, leaves[1].grad, leaves[2].grad
            if attention_gluon_backward.sums_dq(head_dim):
                dq_sum = attention_gluon_backward.dq_sum_buffer(q)
                dk_a, dv_a = attention_gluon_backward.backward_dkdv(grad, q, k, v, lse, delta, causal, scale,
                                                                    dq_sum)
                dq_a = dq_sum.view(q.shape)
                row["atomic_dq_vs_fp32"] = ((dq_a - dq_r).norm() / dq_r.norm()).item()
                row["atomic_dk_same"] = bool(torch.equal(dk_a, dk_g) and torch.equal(dv_a, dv_g))
            # Run to run: the same bits (no atomics in dK/dV).
            dk_again, dv_again = attention_gluon_backward.backward_dkdv(grad, q, k, v, lse, delta, causal, scale)
            row["dkdv_repeat_same"] = bool(torch.equal(dk_again, dk_g) and torch.equal(dv_again, dv_g))
            torch.cuda.synchronize()
            row.update({"dk_vs_triton": (dk_g.float() - dk_t.float()).abs().max().item(),
                        "dv_vs_triton": (dv_g.float() - dv_t.float()).abs().max().item(),
                        "dk_vs_fp32": (dk_g.float() - dk_r).abs().max().item(),
                        "dv_vs_fp32": (dv_g.float() - dv_r).abs().max().item(),
                        "triton_dk_vs_fp32": (dk_t.float() - dk_r).abs().max().item(),
                        "triton_dv_vs_fp32": (dv_t.float() - dv_r).abs().max().item()})

        fatal = attempt(row, work)
        log.save()
        print(f"{name:<22} {row.get('dk_vs_triton', float('nan')):>12.4f} {row.get('dv_vs_triton', float('nan')):>12.4f} "
              f"{row.get('dk_vs_fp32', float('nan')):>10.4f} {row.get('dv_vs_fp32', float('nan')):>10.4f} "
              f"{row.get('triton_dk_vs_fp32', float('nan')):>17.4f} {row.get('atomic_dq_vs_fp32', float('nan')):>13.5f} "
              f"{row.get('atomic_dk_same', '-')!s:>9} {row.get('dkdv_repeat_same', '-')!s:>11} "
              f"{row.get('error', '')}", flush=True)
        if fatal:
            raise SystemExit(3)
    log.watchdog.start(None)


def timing_rows(log: RunLog, names) -> None:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from gpudoctor.kernels import attention, attention_gluon_backward
    from gpudoctor.kernels.attention import config_for, flash_attention

    for name, batch, heads, kv_heads, seq, head_dim, causal in SHAPES:
        if names and name not in names:
            continue
        row = {"shape": name, "variant": "timing", "batch": batch, "heads": heads, "kv_heads": kv_heads,
               "seq": seq, "head_dim": head_dim, "causal": causal}
        log.rows.append(row)
        log.watchdog.start(row)
        q, k, v, grad = gqa_inputs(batch, heads, kv_heads, seq, seq, head_dim, torch.bfloat16, seq + head_dim,
                                   grad=True)
        scale = head_dim ** -0.5
        shipped = config_for(q, k)
        with_gluon = dataclasses.replace(shipped, gluon_backward=True, gluon_atomic_dq=False)
        with_atomic = dataclasses.replace(shipped, gluon_backward=True, gluon_atomic_dq=True)
        without = dataclasses.replace(shipped, gluon_backward=False, gluon_atomic_dq=False)
        triton_only = dataclasses.replace(shipped, gluon_forward=False, gluon_backward=False, gluon_atomic_dq=False)
        out, lse = attention.attention_forward(q, k, v, causal, scale, shipped)
        delta = (out.float() * grad.float()).sum(-1).reshape(batch * heads, seq).contiguous()

        def backward(config, deterministic=True):
            return lambda: attention.attention_backward(grad, q, k, v, out, lse, causal, scale, config,
                                                        deterministic)

        def forward_backward(config, deterministic=True):
            leaves = [t.detach().requires_grad_() for t in (q, k, v)]
            return lambda: flash_attention(*leaves, causal=causal, config=config,
                                           deterministic=deterministic).backward(grad)

        def sdpa(backend):
            leaves = [t.detach().requires_grad_() for t in (q, k, v)]

            def run():
                with sdpa_kernel(backend):
                    F.scaled_dot_product_attention(*leaves, is_causal=causal,
                                                   enable_gqa=heads != kv_heads).backward(grad)
            return run

        runs = [("bwd_gluon", backward(with_gluon)), ("bwd_triton", backward(without)),
                ("dkdv_gluon", lambda: attention_gluon_backward.backward_dkdv(grad, q, k, v, lse, delta, causal,
                                                                              scale)),
                ("bwd_atomic", backward(with_atomic, False)),
                ("fwdbwd_gluon", forward_backward(with_gluon)), ("fwdbwd_triton_bwd", forward_backward(without)),
                ("fwdbwd_atomic", forward_backward(with_atomic, False)),
                ("fwdbwd_triton", forward_backward(triton_only)),
                ("cudnn_fwdbwd", sdpa(SDPBackend.CUDNN_ATTENTION)),
                ("flash_fwdbwd", sdpa(SDPBackend.FLASH_ATTENTION)),
                ("bwd_gluon_again", backward(with_gluon))]
        if not attention_gluon_backward.sums_dq(head_dim):  # the same runs as bwd_gluon, fwdbwd_gluon
            runs = [(label, run) for label, run in runs if "atomic" not in label]
        fatal = False
        for label, run in runs:
            def timed(run=run, label=label):
                row[f"{label}_ms"] = time_ms(run)
            fatal = attempt(row, timed)
            if fatal:
                break
        best = min(row.get(f"{backend}_fwdbwd_ms", float("inf")) for backend in ("cudnn", "flash"))
        if "bwd_gluon_ms" in row and "bwd_triton_ms" in row:
            row["bwd_gluon_x_triton"] = row["bwd_triton_ms"] / row["bwd_gluon_ms"]
        for label in ("fwdbwd_gluon", "fwdbwd_triton_bwd", "fwdbwd_atomic", "fwdbwd_triton"):
            if f"{label}_ms" in row and best < float("inf"):
                row[f"{label}_x_best_sdpa"] = best / row[f"{label}_ms"]
        log.save()
        print(one_line(row), flush=True)
        if fatal:
            raise SystemExit(3)
    log.watchdog.start(None)


def host_rows(log: RunLog) -> None:
    """Host time per backward call where the GPU's work is small (b1 h2 s1024 hd128 causal): calls
    queued without a synchronisation, so the wall time per call is the host's."""
    import torch

    from gpudoctor.kernels import attention
    from gpudoctor.kernels.attention import config_for

    q, k, v, grad = gqa_inputs(1, 2, 2, 1024, 1024, 128, torch.bfloat16, 1, grad=True)
    scale = 128 ** -0.5
    shipped = config_for(q, k)
    out, lse = attention.attention_forward(q, k, v, True, scale, shipped)
    row = {"shape": "host-b1-h2-s1024", "variant": "host"}
    log.rows.append(row)
    for label, config in (("gluon", dataclasses.replace(shipped, gluon_backward=True)),
                          ("triton", dataclasses.replace(shipped, gluon_backward=False))):
        for _ in range(20):
            attention.attention_backward(grad, q, k, v, out, lse, True, scale, config)
        torch.cuda.synchronize()
        started = time.perf_counter()
        for _ in range(200):
            attention.attention_backward(grad, q, k, v, out, lse, True, scale, config)
        row[f"{label}_host_us"] = (time.perf_counter() - started) / 200 * 1e6
        torch.cuda.synchronize()
    print(f"host us per backward call (b1 h2 s1024 hd128): Gluon dK/dV {row['gluon_host_us']:.1f}, "
          f"Triton {row['triton_host_us']:.1f}", flush=True)
    log.save()


def alternate_rows(log: RunLog, names, rounds: int) -> None:
    """Forward+backward at each shape with Triton only, the Gluon forward, the Gluon forward and
    dK/dV, that with dQ summed in the dK/dV kernel, and cuDNN, in ``rounds`` rounds taking turns:
    one sample each is not enough where runs disagree."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from gpudoctor.kernels import attention_gluon_backward
    from gpudoctor.kernels.attention import config_for, flash_attention

    for name, batch, heads, kv_heads, seq, head_dim, causal in SHAPES:
        if names and name not in names:
            continue
        q, k, v, grad = gqa_inputs(batch, heads, kv_heads, seq, seq, head_dim, torch.bfloat16, seq + head_dim,
                                   grad=True)
        shipped = config_for(q, k)
        # Each config says its backward whole: the shipped one may sum dQ in the Gluon kernel.
        configs = {"triton": dataclasses.replace(shipped, gluon_forward=False, gluon_backward=False,
                                                 gluon_atomic_dq=False),
                   "gluon_fwd": dataclasses.replace(shipped, gluon_forward=True, gluon_backward=False,
                                                    gluon_atomic_dq=False),
                   "gluon_fwd_bwd": dataclasses.replace(shipped, gluon_forward=True, gluon_backward=True,
                                                        gluon_atomic_dq=False),
                   # dQ summed in the dK/dV kernel: run as flash_attention(deterministic=False)
                   "gluon_summed_dq": dataclasses.replace(shipped, gluon_forward=True, gluon_backward=True,
                                                          gluon_atomic_dq=True),
                   # the same with the shipped forward (Triton outside attention.GLUON_FORWARD_*)
                   "shipped_fwd_summed_dq": dataclasses.replace(shipped, gluon_backward=True, gluon_atomic_dq=True)}
        if not attention_gluon_backward.sums_dq(head_dim):  # the same runs as gluon_fwd_bwd
            del configs["gluon_summed_dq"], configs["shipped_fwd_summed_dq"]
        leaves = [t.detach().requires_grad_() for t in (q, k, v)]
        runs = {label: (lambda config=config: flash_attention(*leaves, causal=causal, config=config,
                                                               deterministic=not config.gluon_atomic_dq)
                        .backward(grad)) for label, config in configs.items()}

        def cudnn():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                F.scaled_dot_product_attention(*leaves, is_causal=causal, enable_gqa=heads != kv_heads).backward(grad)
        runs["cudnn"] = cudnn
        row = {"shape": name, "variant": "alternate", **{f"{label}_ms": [] for label in runs}}
        log.rows.append(row)
        log.watchdog.start(row)
        for _ in range(rounds):
            for label, run in runs.items():
                row[f"{label}_ms"].append(time_ms(run))
        log.save()
        print(f"{name:<15} " + "  ".join(f"{label} " + " ".join(f"{t:.3f}" for t in row[f"{label}_ms"])
                                         for label in runs), flush=True)
    log.watchdog.start(None)


def print_table(rows) -> None:
    print("ms (do_bench median); bwd g/t = Triton backward's time / with the Gluon dK/dV; x sdpa = best SDPA / ours")
    print(f"{'shape':<15} {'bwd g':>7} {'bwd t':>7} {'g/t':>5} {'dkdv g':>7} {'bwd at':>7} {'f+b g':>7} "
          f"{'f+b tbwd':>8} {'f+b at':>7} {'f+b tri':>7} {'cudnn':>7} {'flash':>7} {'g x sdpa':>8} {'tbwd x sdpa':>11} {'at x sdpa':>9}")
    for row in rows:
        if row.get("variant") != "timing":
            continue

        def cell(key, spec):
            return format(row[key], spec) if key in row else "-"
        print(f"{row['shape']:<15} {cell('bwd_gluon_ms', '7.3f'):>7} {cell('bwd_triton_ms', '7.3f'):>7} "
              f"{cell('bwd_gluon_x_triton', '5.2f'):>5} {cell('dkdv_gluon_ms', '7.3f'):>7} {cell('bwd_atomic_ms', '7.3f'):>7} "
              f"{cell('fwdbwd_gluon_ms', '7.3f'):>7} {cell('fwdbwd_triton_bwd_ms', '8.3f'):>8} {cell('fwdbwd_atomic_ms', '7.3f'):>7} "
              f"{cell('fwdbwd_triton_ms', '7.3f'):>7} {cell('cudnn_fwdbwd_ms', '7.3f'):>7} {cell('flash_fwdbwd_ms', '7.3f'):>7} "
              f"{cell('fwdbwd_gluon_x_best_sdpa', '8.2f'):>8} {cell('fwdbwd_triton_bwd_x_best_sdpa', '11.2f'):>11} "
              f"{cell('fwdbwd_atomic_x_best_sdpa', '9.2f'):>9} "
              f"{row.get('error', '')}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile-only", action="store_true")
    parser.add_argument("--json", help="write the GPU rows here")
    parser.add_argument("--shapes", nargs="*", help=f"of {[shape[0] for shape in SHAPES]}")
    parser.add_argument("--skip-check", action="store_true", help="timings only")
    parser.add_argument("--alternate", type=int, metavar="ROUNDS",
                        help="instead: forward+backward of three configs taking turns, ROUNDS rounds per shape")
    args = parser.parse_args(argv)
    if args.compile_only:
        return compile_only()
    import torch

    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        print("needs a Hopper GPU (sm90); --compile-only runs anywhere")
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    log = RunLog(args.json, time.perf_counter(), 120.0)
    print(environment_line(log.environment), flush=True)
    if args.alternate:
        alternate_rows(log, args.shapes, args.alternate)
        log.save()
        return 0
    if not args.skip_check:
        check_rows(log)
    host_rows(log)
    timing_rows(log, args.shapes)
    print_table(log.rows)
    log.save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
