"""A warp-specialized dK/dV attention backward for Hopper, as a standalone probe (issue 18 item 1).

Not gpudoctor's kernel: one program per key block of one head, one loop over the query blocks
``tl.range(..., warp_specialize=WS)`` over device-side tensor descriptors, WS a constexpr so the
same source runs with and without Triton's Hopper warp specialization. The products are those
of gpudoctor's own dK/dV kernel (``_dkdv_program`` and ``_backward_dkdv_query_block`` in
gpudoctor/kernels/attention.py), per query block:

    P^T  = exp2(K Q^T * qk_scale - lse)       lse: the forward's base-2 log-sum-exp per row
    dV  += P^T dO
    dP^T = V dO^T
    dS^T = P^T * (dP^T - delta)               delta = rowsum(O * dO) per query row
    dK  += dS^T Q                             dK scaled by softmax_scale at the end

lse and delta are inputs, computed by this script with torch (not by a kernel of its own). The
question: does the warp-specialized loop make the dK/dV kernel faster than gpudoctor's shipped
one, and how far is it from cuDNN's whole backward?

Every row or column index is written as "scalar base + arange", never "arange shifted by a
runtime scalar": under data partitioning (two consumer warp groups, each on half of the BLOCK_N
key rows here) Triton 3.6 rewrites ``start + tl.arange(0, 128)`` in the second consumer as
``splat(start + 64) + make_range(64, 128)``, shifting it twice (found in the forward probe's
TTGIR, confirmed on the H200: bench/attention_ws_probe.py). So the lse and delta pointers are
``(LSE + row_base + start_m) + arange`` and the causal mask is
``key_rows <= (start_m - start_n) + query_cols``, with the partitioned key range on its own.

Causal: one loop from the query block holding the key block's first row to the end, the mask on
every block (a second loop breaks the sm90 warp-specialization pass, triton-lang/triton#9728;
an ``if`` inside the loop made the forward probe's pass leave the loop unspecialized).

Usage:
  python bench/attention_ws_backward_probe.py --compile-only [--ttgir DIR]   no GPU: compiles
      every variant for sm90; per variant: compiled or the error, total warps, setmaxnreg,
      shared memory, ptxas registers and spills
  python bench/attention_ws_backward_probe.py --interpret-check              no GPU: Triton's
      interpreter (which ignores warp_specialize) checks the kernel's math at small shapes
  python bench/attention_ws_backward_probe.py [--json PATH] [--budget-s 75]  H200: checks dK,
      dV of each variant against float32 autograd of SDPA-math, times them against gpudoctor's
      dK/dV kernel (torch.profiler inside the shipped backward) and cuDNN's whole backward
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from dataclasses import dataclass

import triton
import triton.language as tl

# What both probes use: compile for sm90, ptxas figures, the watchdog, the environment.
from attention_ws_common import (BROKEN, INTERPRETED, LOG2_E, RunLog, block_width,
                                 chosen_shapes, compile_kernel_sm90, compile_only_table, cuda_inputs,
                                 environment_line, head_descriptor, hopper_ready, probe_main,
                                 rerun_interpreted, time_ms)

# lse/delta loads inside the loop: pointer loads (ROW_LOADS 0) or a [1, BLOCK_M] block of a
# (batch * heads, seq_q) descriptor (1), in case the pass refuses pointer loads in the loop
# (triton-lang/triton#9728 saw it fail on pointer loads + tl.dot loops).
ROW_LOADS = {"pointers": 0, "descriptor": 1}


# ----------------------------------------------------------------------------------------------
# Kernel
# ----------------------------------------------------------------------------------------------


@triton.jit
def _query_rows(base, row_desc, batch_head, start_m, query_cols, seq_q, other,
                BLOCK_M: tl.constexpr, CHECK_M: tl.constexpr, ROW_LOADS: tl.constexpr):
    """One query block's lse or delta (float32, BLOCK_M). Rows past seq_q: ``other``."""
    if ROW_LOADS == 1:
        # The copy engine zero-fills rows past seq_q: the caller's tile loads make those rows
        # of Q and dO zero too; lse needs +inf there (see below), so CHECK_M still masks.
        values = tl.reshape(row_desc.load([batch_head, start_m]), [BLOCK_M])
        if CHECK_M:
            values = tl.where(query_cols < seq_q - start_m, values, other)
    elif CHECK_M:
        values = tl.load((base + start_m) + query_cols, mask=query_cols < seq_q - start_m, other=other)
    else:
        values = tl.load((base + start_m) + query_cols)
    return values


@triton.jit
def _query_block(dk, dv, k, v, q_desc, do_desc, lse_base, delta_base, lse_desc, delta_desc,
                 batch_head, start_m, start_n, key_rows, query_cols, seq_q, qk_scale,
                 BLOCK_M: tl.constexpr, CAUSAL: tl.constexpr, CHECK_M: tl.constexpr,
                 ROW_LOADS: tl.constexpr):
    """One query block's share of dK and dV (gpudoctor's _backward_dkdv_query_block, one
    head_dim slice, descriptors only)."""
    q = q_desc.load([start_m, 0])
    do = do_desc.load([start_m, 0])
    # lse = +inf makes P^T exactly 0 for rows past the end of the sequence (their Q loaded as 0).
    lse = _query_rows(lse_base, lse_desc, batch_head, start_m, query_cols, seq_q, float("inf"),
                      BLOCK_M, CHECK_M, ROW_LOADS)
    delta = _query_rows(delta_base, delta_desc, batch_head, start_m, query_cols, seq_q, 0.0,
                        BLOCK_M, CHECK_M, ROW_LOADS)
    scores_t = tl.dot(k, tl.trans(q))
    probs_t = tl.math.exp2(scores_t * qk_scale - lse[None, :])
    if CAUSAL:
        # Key start_n + r sees query start_m + c when r <= (start_m - start_n) + c: the key
        # range (the one the consumers split) stands alone.
        probs_t = tl.where(key_rows[:, None] <= (start_m - start_n) + query_cols[None, :], probs_t, 0.0)
    dv = tl.dot(probs_t.to(do.dtype), do, dv)
    dprobs_t = tl.dot(v, tl.trans(do))
    dscores_t = (probs_t * (dprobs_t - delta[None, :])).to(q.dtype)
    dk = tl.dot(dscores_t, q, dk)
    return dk, dv


@triton.jit
def _ws_dkdv_kernel(
    Q, K, V, DO, DK, DV, LSE, DELTA,
    stride_qb, stride_qh, stride_qm,
    stride_kb, stride_kh, stride_kn,
    stride_vb, stride_vh, stride_vn,
    stride_dob, stride_doh, stride_dom,
    stride_dkb, stride_dkh, stride_dkn,
    stride_dvb, stride_dvh, stride_dvn,
    num_heads, seq_q, seq_k, qk_scale, softmax_scale, head_dim,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
    WS: tl.constexpr, CAUSAL: tl.constexpr, CHECK_M: tl.constexpr, ROW_LOADS: tl.constexpr,
    INTERPRETED: tl.constexpr,
):
    start_n = tl.program_id(0) * BLOCK_N
    batch_head = tl.program_id(1)
    batch = (batch_head // num_heads).to(tl.int64)
    head = (batch_head % num_heads).to(tl.int64)
    q_desc = head_descriptor(Q + batch * stride_qb + head * stride_qh, seq_q, stride_qm, head_dim,
                              BLOCK_M, BLOCK_D)
    do_desc = head_descriptor(DO + batch * stride_dob + head * stride_doh, seq_q, stride_dom,
                               head_dim, BLOCK_M, BLOCK_D)
    k_desc = head_descriptor(K + batch * stride_kb + head * stride_kh, seq_k, stride_kn, head_dim,
                              BLOCK_N, BLOCK_D)
    v_desc = head_descriptor(V + batch * stride_vb + head * stride_vh, seq_k, stride_vn, head_dim,
                              BLOCK_N, BLOCK_D)
    dk_desc = head_descriptor(DK + batch * stride_dkb + head * stride_dkh, seq_k, stride_dkn,
                               head_dim, BLOCK_N, BLOCK_D)
    dv_desc = head_descriptor(DV + batch * stride_dvb + head * stride_dvh, seq_k, stride_dvn,
                               head_dim, BLOCK_N, BLOCK_D)
    row_base = batch_head.to(tl.int64) * seq_q
    if ROW_LOADS == 1:
        # (batch * heads, seq_q): one row per head; seq_q % 4 == 0 (rows 16-byte aligned).
        lse_desc = tl.make_tensor_descriptor(LSE, shape=[tl.num_programs(1), seq_q],
                                             strides=[seq_q, 1], block_shape=[1, BLOCK_M])
        delta_desc = tl.make_tensor_descriptor(DELTA, shape=[tl.num_programs(1), seq_q],
                                               strides=[seq_q, 1], block_shape=[1, BLOCK_M])
    else:
        lse_desc, delta_desc = LSE, DELTA  # never read
    key_rows = tl.arange(0, BLOCK_N)
    query_cols = tl.arange(0, BLOCK_M)

    k = k_desc.load([start_n, 0])
    v = v_desc.load([start_n, 0])
    dk = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    if CAUSAL:
        # Queries before start_n see none of this block's keys (seq_q == seq_k).
        query_start = (start_n // BLOCK_M) * BLOCK_M
    else:
        query_start = 0
    if INTERPRETED:
        # Triton 3.6's interpreter turns range() bounds into int(1-element array), which NumPy
        # >= 2.4 refuses (as in gpudoctor/kernels/attention.py); it ignores warp_specialize anyway.
        start_m = query_start
        while start_m < seq_q:
            dk, dv = _query_block(dk, dv, k, v, q_desc, do_desc, LSE + row_base, DELTA + row_base,
                                  lse_desc, delta_desc, batch_head, start_m, start_n, key_rows,
                                  query_cols, seq_q, qk_scale, BLOCK_M, CAUSAL, CHECK_M, ROW_LOADS)
            start_m += BLOCK_M
    else:
        for start_m in tl.range(query_start, seq_q, BLOCK_M, warp_specialize=WS):
            start_m = tl.multiple_of(start_m, BLOCK_M)
            dk, dv = _query_block(dk, dv, k, v, q_desc, do_desc, LSE + row_base, DELTA + row_base,
                                  lse_desc, delta_desc, batch_head, start_m, start_n, key_rows,
                                  query_cols, seq_q, qk_scale, BLOCK_M, CAUSAL, CHECK_M, ROW_LOADS)

    dk_desc.store([start_n, 0], (dk * softmax_scale).to(DK.dtype.element_ty))
    dv_desc.store([start_n, 0], dv.to(DV.dtype.element_ty))


# ----------------------------------------------------------------------------------------------
# Variants and shapes
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """One compiled form of the kernel: warp-specialized or not, its tiles (block_n key rows per
    program, block_m query rows per loop step), causal or not, and how lse/delta are loaded."""

    ws: bool
    block_n: int
    block_m: int
    num_warps: int
    num_stages: int
    causal: bool = False
    row_loads: str = "pointers"

    @property
    def label(self) -> str:
        name = (f"{'ws' if self.ws else 'plain'} n{self.block_n} m{self.block_m} "
                f"w{self.num_warps} s{self.num_stages}")
        if self.causal:
            name += " causal"
        return name + (f" rows={self.row_loads}" if self.row_loads != "pointers" else "")


def _variants(block_d: int, causal: bool) -> tuple[Variant, ...]:
    # Plain: 8 warps on 128 key rows, 3 stages (the shipped sm90 dK/dV tile at head_dim 128,
    # there on pointers, here on descriptors). WS: 4 warps, which Triton's sm90 pass turns into
    # a producer and two consumers of 64 key rows each (12 warps), 2 stages (the forward probe's
    # WS variants with 3 stages returned NaN on the H200); 1 stage at head_dim 64 only (it
    # spills at 128: --compile-only). rows=descriptor: lse and delta through descriptors.
    variants = [Variant(False, 128, 64, 8, 3, causal), Variant(True, 128, 64, 4, 2, causal),
                Variant(True, 128, 64, 4, 2, causal, "descriptor")]
    if block_d == 64:
        variants.append(Variant(True, 128, 64, 4, 1, causal))
    return tuple(variants)


VARIANTS = {(block_d, causal): _variants(block_d, causal) for block_d in (64, 128)
            for causal in (False, True)}
# Compiled, not run: 128 query rows per step at head_dim 64 trips an assertion in the sm90
# pass (WSLowerToken.cpp, processProducerCommitOp), causal or not; the others are slower or
# spill (plain 2 stages; WS 1 stage at head_dim 128).
COMPILE_ONLY_VARIANTS = {
    (64, False): (Variant(True, 128, 128, 4, 2), Variant(True, 128, 128, 4, 2, True)),
    (128, False): (Variant(False, 128, 64, 8, 2), Variant(True, 128, 64, 4, 1),
                   Variant(True, 128, 64, 4, 1, True)),
}

# (name, batch, heads, seq, head_dim, causal), bf16, as the brief asks.
SHAPES = (("hd128", 4, 32, 4096, 128, False), ("hd64", 4, 32, 4096, 64, False),
          ("hd128-causal", 4, 32, 4096, 128, True), ("hd64-causal", 4, 32, 4096, 64, True))


def _constants(variant: Variant, block_d: int, check_m: bool = False) -> dict:
    return dict(BLOCK_M=variant.block_m, BLOCK_N=variant.block_n, BLOCK_D=block_d, WS=variant.ws,
                CAUSAL=variant.causal, CHECK_M=check_m, ROW_LOADS=ROW_LOADS[variant.row_loads],
                INTERPRETED=INTERPRETED)


# ----------------------------------------------------------------------------------------------
# --compile-only: sm90 without a GPU
# ----------------------------------------------------------------------------------------------


def compile_sm90(variant: Variant, block_d: int):
    pointers = {name: "*bf16" for name in ("Q", "K", "V", "DO", "DK", "DV")}
    pointers.update(LSE="*fp32", DELTA="*fp32")
    return compile_kernel_sm90(_ws_dkdv_kernel, _constants(variant, block_d), pointers,
                               {"qk_scale", "softmax_scale"}, variant.num_warps, variant.num_stages)


def compile_only_main(ttgir_dir: str | None, json_path: str | None) -> int:
    every = [(block_d, variant) for table in (VARIANTS, COMPILE_ONLY_VARIANTS)
             for (block_d, _), variants in table.items() for variant in variants]
    return compile_only_table(compile_sm90, every, "bf16, dK/dV", 42, ttgir_dir, json_path, "dkdv_")


# ----------------------------------------------------------------------------------------------
# Launch, reference and checks (GPU mode and --interpret-check)
# ----------------------------------------------------------------------------------------------


def ws_dkdv(q, k, v, do, lse, delta, variant: Variant, softmax_scale: float):
    """(dk, dv) of the probe kernel; lse (base 2) and delta float32 (batch * heads, seq_q)."""
    import torch

    batch, heads, seq_q, head_dim = q.shape
    seq_k = k.shape[2]
    if variant.causal and seq_q != seq_k:
        raise ValueError("causal needs seq_q == seq_k")
    if variant.row_loads == "descriptor" and seq_q % 4:
        raise ValueError("rows=descriptor needs seq_q % 4 == 0 (16-byte rows)")
    dk, dv = torch.empty_like(k), torch.empty_like(v)
    grid = (-(-seq_k // variant.block_n), batch * heads)
    _ws_dkdv_kernel[grid](
        q, k, v, do, dk, dv, lse, delta,
        q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2), do.stride(0), do.stride(1), do.stride(2),
        dk.stride(0), dk.stride(1), dk.stride(2), dv.stride(0), dv.stride(1), dv.stride(2),
        heads, seq_q, seq_k, softmax_scale * LOG2_E, softmax_scale, head_dim,
        num_warps=variant.num_warps, num_stages=variant.num_stages,
        **_constants(variant, block_width(head_dim), seq_q % variant.block_m != 0))
    return dk, dv


@dataclass(frozen=True)
class Reference:
    """Float32 autograd of SDPA-math on the bf16 inputs, and what the kernels take from a
    forward: out in the inputs' dtype, lse (base 2) and delta = rowsum(out * do), float32
    (batch * heads, seq_q)."""

    dq: object
    dk: object
    dv: object
    out: object
    lse: object
    delta: object


def reference(q, k, v, do, softmax_scale: float, causal: bool) -> Reference:
    """One batch element at a time (the float32 scores of b4 h32 s4096 are 8.6 GB at once)."""
    import torch

    dqs, dks, dvs, outs, lses = [], [], [], [], []
    for index in range(q.shape[0]):
        q32, k32, v32 = (t[index].float().requires_grad_() for t in (q, k, v))
        scores = torch.matmul(q32, k32.transpose(-1, -2)) * softmax_scale
        if causal:
            hidden = torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).triu(1)
            scores = scores.masked_fill(hidden, float("-inf"))
        out = torch.matmul(torch.softmax(scores, dim=-1), v32)
        dq, dk, dv = torch.autograd.grad(out, (q32, k32, v32), do[index].float())
        lses.append((torch.logsumexp(scores.detach(), dim=-1) * LOG2_E))
        dqs.append(dq), dks.append(dk), dvs.append(dv), outs.append(out.detach())
        del scores, out
    out = torch.stack(outs).to(q.dtype)
    delta = (out.float() * do.float()).sum(-1).reshape(-1, q.shape[2]).contiguous()
    return Reference(torch.stack(dqs), torch.stack(dks), torch.stack(dvs), out,
                     torch.cat(lses).contiguous(), delta)


def relative_error(value, expected) -> float:
    return ((value.float() - expected).abs().max() / expected.abs().max()).item()


def compare(dk, dv, ref: Reference) -> dict:
    """max |err| / max |ref| < 0.02 for dK and for dV."""
    dk_err, dv_err = relative_error(dk, ref.dk), relative_error(dv, ref.dv)
    return {"dk_err": dk_err, "dv_err": dv_err, "ok": dk_err < 0.02 and dv_err < 0.02}


# ----------------------------------------------------------------------------------------------
# --interpret-check: the kernel's math on the CPU
# ----------------------------------------------------------------------------------------------


def interpret_check_main() -> int:
    """Triton's interpreter runs the kernel on CPU tensors (it ignores warp_specialize and
    num_warps: this checks the math, the masks and both row loads, not the compiled WS code)."""
    if not INTERPRETED:
        return rerun_interpreted(__file__)
    import torch

    # float16: the interpreter's bfloat16 dots return garbage in Triton 3.6 (see the forward
    # probe); the GPU mode runs bfloat16.
    failures = 0
    cases = ((1, 2, 128, 64), (1, 1, 200, 112), (1, 1, 96, 128))  # 200: a query/key tail
    for batch, heads, seq, head_dim in cases:
        generator = torch.Generator().manual_seed(seq + head_dim)
        q, k, v, do = (torch.randn(batch, heads, seq, head_dim, generator=generator).to(torch.float16)
                       for _ in range(4))
        scale = 1.0 / math.sqrt(head_dim)
        for causal in (False, True):
            ref = reference(q, k, v, do, scale, causal)
            variants = [Variant(False, 32, 16, 4, 1, causal), Variant(False, 16, 32, 4, 1, causal),
                        Variant(False, 32, 16, 4, 1, causal, "descriptor")]
            for variant in variants:
                dk, dv = ws_dkdv(q, k, v, do, ref.lse, ref.delta, variant, scale)
                result = compare(dk, dv, ref)
                failures += not result["ok"]
                print(f"b{batch} h{heads} s{seq} hd{head_dim} {variant.label}: dk err "
                      f"{result['dk_err']:.4f}, dv err {result['dv_err']:.4f}, "
                      f"{'ok' if result['ok'] else 'WRONG'}", flush=True)
    print("interpreter check: " + ("all right" if not failures else f"{failures} wrong"))
    return 1 if failures else 0


# ----------------------------------------------------------------------------------------------
# GPU mode
# ----------------------------------------------------------------------------------------------


def kernel_ms(run, iterations: int = 10) -> dict:
    """Device time per call of each kernel ``run`` launches (torch.profiler, CUDA activity only,
    so no CPU op double-counts its kernels), in ms, by kernel name."""
    import torch

    run()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
        for _ in range(iterations):
            run()
        torch.cuda.synchronize()
    kernels = {}
    for event in profile.key_averages():
        device_us = getattr(event, "self_device_time_total", None)
        if device_us is None:
            device_us = getattr(event, "self_cuda_time_total", 0)
        if device_us > 0:
            kernels[event.key[:120]] = round(device_us / iterations / 1000, 4)
    return kernels


def _print_row(row: dict) -> None:
    if "error" in row:
        print(f"{row['shape']:<13}{row['variant']:<42}{row['error']}", flush=True)
        return
    vs_shipped = f"{row['vs_shipped_dkdv']:.2f}x" if row.get("vs_shipped_dkdv") else "-"
    vs_cudnn = f"{row['vs_cudnn_backward']:.2f}x" if row.get("vs_cudnn_backward") else "-"
    checked = ""
    if "ok" in row:
        checked = f"{'y' if row['ok'] else 'n'} (dk {row['dk_err']:.4f}, dv {row['dv_err']:.4f})"
    kernels = ""
    if "dkdv_kernel_ms" in row:
        kernels = f"  dK/dV kernel {row['dkdv_kernel_ms']:.3f} of {row['device_ms']:.3f} ms on the device"
    elif "device_ms" in row:
        kernels = f"  device {row['device_ms']:.3f} ms"
    print(f"{row['shape']:<13}{row['variant']:<42}{row['ms']:>8.3f}{vs_shipped:>9}{vs_cudnn:>9}  "
          f"{checked}{kernels}", flush=True)


def _time_kernels(row: dict, run) -> None:
    """The row's ms (do_bench median of one call) and its kernels' device times."""
    row["ms"] = time_ms(run)
    kernels = kernel_ms(run)
    row["kernels_ms"] = kernels
    row["device_ms"] = round(sum(kernels.values()), 4)


def gpu_main(json_path: str | None, budget_s: float, row_limit_s: float, shapes: list[str] | None) -> int:
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention

    from gpudoctor.kernels.attention import attention_backward, select_config

    started = time.perf_counter()
    if not hopper_ready():
        return 2
    log = RunLog(json_path, started, row_limit_s, kind="dK/dV backward")
    rows, save = log.rows, log.save
    print(f"{environment_line(log.environment)}. ms: do_bench median of one call; device: its kernels' "
          f"time (torch.profiler). vs ship: the shipped dK/dV kernel's device ms / device ms; "
          f"vs cuDNN: cuDNN's whole backward (dQ too) device ms / device ms")
    print(f"{'shape':<13}{'variant':<42}{'ms':>8}{'vs ship':>9}{'vs cuDNN':>9}  dK, dV ok (max rel err)")
    broken = None  # set once a launch has left the CUDA context unusable
    for base in chosen_shapes(SHAPES, shapes):
        seq, head_dim, causal = base["seq"], base["head_dim"], base["causal"]
        variants = VARIANTS[(block_width(head_dim), causal)]
        labels = ["gpudoctor-shipped backward", "sdpa-cudnn backward", "sdpa-flash backward"]
        reason = log.skip_reason(broken, budget_s)
        if reason:
            for label in labels + [variant.label for variant in variants]:
                rows.append({**base, "variant": label, "error": reason})
                _print_row(rows[-1])
            continue
        q, k, v, do = cuda_inputs(4, base)
        scale = 1.0 / math.sqrt(head_dim)
        ref = reference(q, k, v, do, scale, causal)

        # The shipped backward as flash_attention's autograd runs it (its sm90 config, not
        # deterministic), on the reference's out and lse; its dK/dV kernel's share from the profiler.
        config = select_config(torch.cuda.get_device_capability(), head_dim, seq)
        shipped_row = {**base, "variant": labels[0], "config": str(config.backward_dkdv)}

        def shipped():
            return attention_backward(do, q, k, v, ref.out, ref.lse, causal, scale, config,
                                      deterministic=False)

        def shipped_work():
            _, dk, dv = shipped()
            shipped_row.update(compare(dk, dv, ref))
            _time_kernels(shipped_row, shipped)
            dkdv = [ms for kernel, ms in shipped_row["kernels_ms"].items() if "dkdv" in kernel]
            if dkdv:
                shipped_row["dkdv_kernel_ms"] = sum(dkdv)

        baselines = [shipped_row]
        rows.append(shipped_row)
        if log.measure(shipped_row, shipped_work):
            broken = BROKEN

        # SDPA's backward alone: autograd.grad on a kept graph, the forward run once before.
        for label, backend in ((labels[1], SDPBackend.CUDNN_ATTENTION), (labels[2], SDPBackend.FLASH_ATTENTION)):
            row = {**base, "variant": label}
            rows.append(row)
            baselines.append(row)
            if broken:
                row["error"] = broken
                continue

            def sdpa_work(row=row, backend=backend):
                inputs = [t.detach().clone().requires_grad_() for t in (q, k, v)]
                with sdpa_kernel(backend):
                    out = scaled_dot_product_attention(*inputs, is_causal=causal)

                def backward():
                    return torch.autograd.grad(out, inputs, do, retain_graph=True)

                _, dk, dv = backward()
                row.update(compare(dk, dv, ref))
                _time_kernels(row, backward)

            if log.measure(row, sdpa_work):
                broken = BROKEN
        # Ratios of device times (torch.profiler), so that host overheads do not enter them.
        shipped_dkdv = shipped_row.get("dkdv_kernel_ms")
        cudnn_backward = baselines[1].get("device_ms")
        for row in baselines:
            _print_row(row)
        save()

        for variant in variants:
            row = {**base, "variant": variant.label, **dataclasses.asdict(variant)}
            rows.append(row)
            reason = log.skip_reason(broken, budget_s)
            if reason:
                row["error"] = reason
            else:
                def variant_work(row=row, variant=variant):
                    first = time.perf_counter()
                    dk, dv = ws_dkdv(q, k, v, do, ref.lse, ref.delta, variant, scale)  # compiles
                    torch.cuda.synchronize()
                    row["first_call_s"] = round(time.perf_counter() - first, 2)
                    row.update(compare(dk, dv, ref))
                    del dk, dv
                    _time_kernels(row, lambda: ws_dkdv(q, k, v, do, ref.lse, ref.delta, variant, scale))

                if log.measure(row, variant_work):
                    broken = BROKEN
                elif row.get("device_ms"):
                    if shipped_dkdv:
                        row["vs_shipped_dkdv"] = shipped_dkdv / row["device_ms"]
                    if cudnn_backward:
                        row["vs_cudnn_backward"] = cudnn_backward / row["device_ms"]
            _print_row(row)
            save()  # as it goes: a crash keeps the rows so far
        del q, k, v, do, ref
        if not broken:
            torch.cuda.empty_cache()
    return log.finish()


def main() -> int:
    # 75: a shape started just before it still runs its baselines (a cold compile of the
    # shipped backward's kernels included), and the whole run must stay under 120 s.
    return probe_main(__doc__, [shape[0] for shape in SHAPES], 75.0,
                      "GPU mode: shapes and variants not started by then become 'not run' rows "
                      "(default 75)", compile_only_main, interpret_check_main, gpu_main)


if __name__ == "__main__":
    sys.exit(main())
