"""A warp-specialized FlashAttention forward for Hopper, as a standalone probe (issue 18 item 1).

Not gpudoctor's kernel: a forward over device-side tensor descriptors with one key loop
``tl.range(0, key_end, BLOCK_N, warp_specialize=WS)``, WS a constexpr so the same source runs
with and without Triton's Hopper warp specialization (a producer warp group issuing the copy
engine's loads, two consumer warp groups doing the matrix products and the softmax, each on half
of the BLOCK_M query rows). The questions: does Triton 3.6's warp specialization take our forward
past cuDNN's on an H200, and can it save a correct log-sum-exp? (The earlier attempt, commit
107878a, gave right non-causal outputs with a wrong LSE, and wrong causal outputs.)

Conventions follow gpudoctor/kernels/attention.py: layout (batch, heads, seq, head_dim), online
softmax in base 2 with ``qk_scale = softmax_scale * log2(e)``, and the saved LSE the base-2
log-sum-exp of the scaled scores, ``m + log2(l)``, one float32 per query row. head_dim runs in a
power-of-two block (64, 128, 256): the descriptors' shape is the true head_dim, so hd112 runs in
128-wide blocks that the copy engine zero-fills on load and clips on store.

Facts from triton-lang/triton this builds on: PR #7658, Hopper warp specialization of attention
works non-causal and only over device-side descriptors (tl.make_tensor_descriptor), sub-tiling
breaks it; issue #9728, on sm90 the warp-specialization pass fails on pointer loads + tl.dot
loops and on a causal two-loop descriptor kernel, one descriptor loop compiles. Hence one loop.

Where the wrong LSE comes from (read in the compiled TTGIR, `--ttgir DIR`, on this CPU box): the
Hopper data partitioning splits the 128 query rows between the consumers, and in the SECOND
consumer it rewrites ``offs_m = start_m + tl.arange(0, BLOCK_M)`` into
``splat(start_m + 64) + make_range(64, 128)``: the 64-row shift is applied twice. The output
tile goes through a descriptor whose coordinate is shifted once (right), but every pointer or
mask built from offs_m in that consumer is 64 rows too far: its LSE lands on the next block's
rows (or is masked off past seq_q) and rows 64..127 of every block are never written. A causal
mask ``start_m + arange >= start_n + offs_n`` comes out shifted the same way (seen in the TTGIR
of a one-loop causal variant compiled for this check; it would explain 107878a's wrong causal
outputs), while ``arange >= (start_n - start_m) + offs_n`` comes out right. Built as
``(LSE + start_m) + tl.arange(0, BLOCK_M)``, with the row mask ``arange < seq_q - start_m``, the
LSE pointers of the same consumer come out right in the TTGIR. The kernel's ROWS constexpr picks either
form (variants "rows=offsets", which should reproduce the bug under WS, and the default "base");
the GPU mode fills LSE with NaN first and counts wrong rows in each block's first and second
half, which tells the two apart.

Round 1 on the H200 (2026-11-23, bench/results/attention-ws-probe-h200-2026-11-23-s8-run1.*):
every rows=offsets variant left exactly half the LSE rows unwritten, the base form was right
everywhere; every WS variant with num_stages=3 returned NaN (a separate failure); WS with 1-2
stages gave 4-8% over the shipped forward at head_dim >= 112, still short of cuDNN.

Round 2 adds the CAUSAL forward (seq_q == seq_k): the one loop runs to
``min(start_m + BLOCK_M, seq_k)`` and masks with ``rows >= (start_n - start_m) + offs_n`` (the
form the TTGIR shows right in both consumers). On every key block: with the mask inside
``if start_n + BLOCK_N > start_m`` (the diagonal blocks only) the sm90 pass silently leaves the
loop unspecialized (4 warps, no setmaxnreg, spills: --compile-only lists those "mask=diagonal"
variants, the GPU mode does not run them).

Usage:
  python bench/attention_ws_probe.py --compile-only [--ttgir DIR]    no GPU: compiles every
      variant for sm90; per variant: compiled or the error, total warps, setmaxnreg, shared
      memory, ptxas registers and spills
  python bench/attention_ws_probe.py --interpret-check                no GPU: Triton's
      interpreter (which ignores warp_specialize) checks the kernel's math at small shapes
  python bench/attention_ws_probe.py [--json PATH] [--budget-s 85]    H200: checks each variant
      against SDPA-math in float32 (output and LSE) and times it against SDPA's cuDNN and flash
      backends and gpudoctor's shipped forward, in the same run
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

import triton
import triton.language as tl

LOG2_E = 1.4426950408889634
# sm90's largest shared memory one block can opt into (227 KB): a kernel asking for more compiles
# and then fails to launch with OutOfResources.
SM90_MAX_SHARED = 232448
ROWS = {"offsets": 0, "base": 1}
# Causal mask on every key block, or only inside `if start_n + BLOCK_N > start_m` (the blocks that
# cross the diagonal), both in the one loop.
MASKS = {"all": 0, "diagonal": 1}
# Triton picks its interpreter when @triton.jit runs; the kernel's loop must know it too.
_INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"


# ----------------------------------------------------------------------------------------------
# Kernel
# ----------------------------------------------------------------------------------------------


@triton.jit
def _head_descriptor(base, rows, stride_row, head_dim, BLOCK_ROWS: tl.constexpr, BLOCK_D: tl.constexpr):
    # One head's (rows x head_dim) matrix; a block reaching past head_dim or the last row loads
    # zeros and stores clipped, in the copy engine.
    return tl.make_tensor_descriptor(base, shape=[rows, head_dim], strides=[stride_row, 1],
                                     block_shape=[BLOCK_ROWS, BLOCK_D])


@triton.jit
def _key_block(acc, row_sum, row_max, q, k_desc, v_desc, start_n, start_m, rows, offs_n, seq_k,
               qk_scale, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CHECK_N: tl.constexpr,
               CAUSAL: tl.constexpr, MASK: tl.constexpr):
    """One key block of the online softmax (base 2): the running max, sum and accumulator."""
    k = k_desc.load([start_n, 0])
    scores = tl.dot(q, k.T)
    if CHECK_N:
        # Keys past seq_k load as zeros, so their scores are 0, not absent: mask them.
        scores = tl.where((start_n + offs_n)[None, :] < seq_k, scores, -1.0e6)
    if CAUSAL:
        # Query row start_m + r sees key start_n + c when r >= (start_n - start_m) + c. The row
        # range stands alone: under data partitioning each consumer's own share of it is the
        # only shift (start_m + rows would be shifted twice in the second consumer, see above).
        if MASK == 1:
            # Only the blocks that cross the diagonal: one branch inside the one loop.
            if start_n + BLOCK_N > start_m:
                scores = tl.where(rows[:, None] >= (start_n - start_m) + offs_n[None, :], scores, -1.0e6)
        else:
            scores = tl.where(rows[:, None] >= (start_n - start_m) + offs_n[None, :], scores, -1.0e6)
    new_max = tl.maximum(row_max, tl.max(scores, 1) * qk_scale)
    probs = tl.math.exp2(scores * qk_scale - new_max[:, None])
    correction = tl.math.exp2(row_max - new_max)
    row_sum = row_sum * correction + tl.sum(probs, 1)
    acc = acc * correction[:, None]
    v = v_desc.load([start_n, 0])
    acc = tl.dot(probs.to(v.dtype), v, acc)
    return acc, row_sum, new_max


@triton.jit
def _ws_forward_kernel(
    Q, K, V, O, LSE,
    stride_qb, stride_qh, stride_qm,
    stride_kb, stride_kh, stride_kn,
    stride_vb, stride_vh, stride_vn,
    stride_ob, stride_oh, stride_om,
    num_heads, seq_q, seq_k, qk_scale, head_dim,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
    WS: tl.constexpr, ROWS: tl.constexpr, CHECK_N: tl.constexpr, INTERPRETED: tl.constexpr,
    CAUSAL: tl.constexpr, MASK: tl.constexpr,
):
    start_m = tl.program_id(0) * BLOCK_M
    batch_head = tl.program_id(1)
    batch = (batch_head // num_heads).to(tl.int64)
    head = (batch_head % num_heads).to(tl.int64)
    q_desc = _head_descriptor(Q + batch * stride_qb + head * stride_qh, seq_q, stride_qm, head_dim,
                              BLOCK_M, BLOCK_D)
    k_desc = _head_descriptor(K + batch * stride_kb + head * stride_kh, seq_k, stride_kn, head_dim,
                              BLOCK_N, BLOCK_D)
    v_desc = _head_descriptor(V + batch * stride_vb + head * stride_vh, seq_k, stride_vn, head_dim,
                              BLOCK_N, BLOCK_D)
    o_desc = _head_descriptor(O + batch * stride_ob + head * stride_oh, seq_q, stride_om, head_dim,
                              BLOCK_M, BLOCK_D)
    lse_head = LSE + batch_head.to(tl.int64) * seq_q
    rows = tl.arange(0, BLOCK_M)
    if ROWS == 0:
        # The form 107878a used. Under Hopper warp specialization the second consumer's copy of
        # this comes out as splat(start_m + 64) + make_range(64, 128): 64 rows too far.
        offs_m = start_m + rows
        lse_ptrs = lse_head + offs_m
        row_in = offs_m < seq_q
    else:
        # The block's first row folded into the scalar base: each consumer's share of the range
        # is then its only shift.
        lse_ptrs = (lse_head + start_m) + rows
        row_in = rows < seq_q - start_m
    offs_n = tl.arange(0, BLOCK_N)
    if CAUSAL:
        # One loop up to the block's last row (seq_q == seq_k): a second loop for the diagonal
        # blocks breaks the sm90 warp-specialization pass (triton-lang/triton#9728).
        key_end = tl.minimum(start_m + BLOCK_M, seq_k)
    else:
        key_end = seq_k

    q = q_desc.load([start_m, 0])
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    row_sum = tl.zeros([BLOCK_M], dtype=tl.float32)
    row_max = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    if INTERPRETED:
        # Triton 3.6's interpreter turns range() bounds into int(1-element array), which NumPy
        # >= 2.4 refuses (as in gpudoctor/kernels/attention.py); it ignores warp_specialize anyway.
        start_n = 0
        while start_n < key_end:
            acc, row_sum, row_max = _key_block(acc, row_sum, row_max, q, k_desc, v_desc, start_n,
                                               start_m, rows, offs_n, seq_k, qk_scale, BLOCK_M,
                                               BLOCK_N, CHECK_N, CAUSAL, MASK)
            start_n += BLOCK_N
    else:
        for start_n in tl.range(0, key_end, BLOCK_N, warp_specialize=WS):
            start_n = tl.multiple_of(start_n, BLOCK_N)
            acc, row_sum, row_max = _key_block(acc, row_sum, row_max, q, k_desc, v_desc, start_n,
                                               start_m, rows, offs_n, seq_k, qk_scale, BLOCK_M,
                                               BLOCK_N, CHECK_N, CAUSAL, MASK)

    o_desc.store([start_m, 0], (acc / row_sum[:, None]).to(O.dtype.element_ty))
    tl.store(lse_ptrs, row_max + tl.math.log2(row_sum), mask=row_in)


# ----------------------------------------------------------------------------------------------
# Variants and shapes
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """One compiled form of the kernel: warp-specialized or not, its tiles, and which of the two
    LSE row forms it stores through (see the module's docstring)."""

    ws: bool
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int
    rows: str = "base"
    causal: bool = False
    mask: str = "all"  # causal only: see MASKS

    @property
    def label(self) -> str:
        name = f"{'ws' if self.ws else 'plain'} {self.block_m}x{self.block_n} w{self.num_warps} s{self.num_stages}"
        if self.causal:
            name += f" causal mask={self.mask}"
        return name + (" rows=offsets" if self.rows != "base" else "")


# Per head_dim block. Plain: gpudoctor's shipped sm90 forward tiles (8 warps). WS: 4 warps, which
# Triton turns into 12 (a 4-warp producer and two 4-warp consumers on 64 rows each); with 8 warps
# the sm90 pass leaves the loop unspecialized (8 warps, no setmaxnreg: --compile-only shows it).
# Shared memory bounds the stages: WS keeps Q, the K/V stages and the output tile in shared
# memory at once (hd256: 128x64 s2 needs 256 KB, over sm90's 227 KB).
VARIANTS = {
    64: (Variant(False, 128, 64, 8, 3),
         Variant(True, 128, 64, 4, 2), Variant(True, 128, 64, 4, 3), Variant(True, 128, 128, 4, 2),
         Variant(True, 256, 64, 4, 2), Variant(True, 128, 64, 4, 2, "offsets")),
    128: (Variant(False, 128, 128, 8, 3), Variant(False, 128, 64, 8, 3),
          Variant(True, 128, 64, 4, 2), Variant(True, 128, 64, 4, 3), Variant(True, 128, 128, 4, 2),
          Variant(True, 128, 128, 8, 3), Variant(True, 128, 64, 4, 2, "offsets")),
    256: (Variant(False, 128, 64, 8, 2),
          Variant(True, 128, 64, 4, 1), Variant(True, 128, 32, 4, 2), Variant(True, 128, 32, 4, 3),
          Variant(True, 128, 64, 4, 1, "offsets")),
}


def _causal(variant: Variant, mask: str) -> Variant:
    return dataclasses.replace(variant, causal=True, mask=mask)


# Causal: round 1's correct and fastest tiles, stages 1-2 only (every WS variant with 3 stages
# returned NaN on the H200 non-causal); the plain (unspecialized) loop beside them runs the same
# source. The mask on every key block: with the `if` (mask=diagonal) the sm90 pass silently
# leaves the loop unspecialized (4 warps, no setmaxnreg, 255 registers and up to 3 KB of spills:
# --compile-only), so those variants are compiled, not run.
CAUSAL_VARIANTS = {
    128: (_causal(Variant(False, 128, 128, 8, 3), "all"), _causal(Variant(False, 128, 64, 8, 3), "all"),
          _causal(Variant(True, 128, 128, 4, 2), "all"), _causal(Variant(True, 128, 64, 4, 2), "all")),
    256: (_causal(Variant(False, 128, 64, 8, 2), "all"),
          _causal(Variant(True, 128, 64, 4, 1), "all"), _causal(Variant(True, 128, 32, 4, 2), "all")),
}
CAUSAL_DIAGONAL_VARIANTS = {
    block_d: tuple(_causal(variant, "diagonal") for variant in variants if variant.ws)
    for block_d, variants in CAUSAL_VARIANTS.items()
}

# (name, batch, heads, seq, head_dim, causal), bf16: issue 18's slowest forward ratios, and the
# causal forms of the three long-sequence ones (hd112 runs in 128-wide blocks).
# Causal first: round 1 measured the others (bench/results/attention-ws-probe-h200-2026-11-23-s8-run1.*),
# and the budget drops the last shapes first.
SHAPES = (("hd128-causal", 4, 32, 4096, 128, True), ("hd112-causal", 4, 32, 4096, 112, True),
          ("hd256-causal", 4, 32, 4096, 256, True),
          ("hd128", 4, 32, 4096, 128, False), ("hd112", 4, 32, 4096, 112, False),
          ("hd64-s1024", 16, 32, 1024, 64, False), ("hd256", 4, 32, 4096, 256, False))


def block_width(head_dim: int) -> int:
    return 64 if head_dim <= 64 else 128 if head_dim <= 128 else 256


# ----------------------------------------------------------------------------------------------
# --compile-only: sm90 without a GPU
# ----------------------------------------------------------------------------------------------


def _constants(variant: Variant, block_d: int, check_n: bool = False) -> dict:
    return dict(BLOCK_M=variant.block_m, BLOCK_N=variant.block_n, BLOCK_D=block_d, WS=variant.ws,
                ROWS=ROWS[variant.rows], CHECK_N=check_n, INTERPRETED=_INTERPRETED,
                CAUSAL=variant.causal, MASK=MASKS[variant.mask])


def compile_sm90(variant: Variant, block_d: int):
    """Triton's compile for sm90 of the kernel as a launch on contiguous bf16 (batch, heads, seq,
    head_dim) tensors would specialize it (pointers and int arguments 16-divisible)."""
    pointers = {"LSE": "*fp32", "Q": "*bf16", "K": "*bf16", "V": "*bf16", "O": "*bf16"}
    return compile_kernel_sm90(_ws_forward_kernel, _constants(variant, block_d), pointers,
                               {"qk_scale"}, variant.num_warps, variant.num_stages)


def compile_kernel_sm90(kernel, constants: dict, pointers: dict, floats: set, num_warps: int,
                        num_stages: int):
    """Compile ``kernel`` for sm90 without a GPU: ``pointers`` maps pointer arguments to their
    Triton type, ``floats`` names the fp32 scalars; every other argument is an i32 that a launch
    would see 16-divisible (as the probes' shapes are)."""
    from triton.backends.compiler import GPUTarget

    signature, constexprs, attrs = {}, {}, {}
    for index, name in enumerate(kernel.arg_names):
        if name in constants:
            signature[name], constexprs[name] = "constexpr", constants[name]
        elif name in pointers:
            signature[name], attrs[(index,)] = pointers[name], [["tt.divisibility", 16]]
        elif name in floats:
            signature[name] = "fp32"
        else:
            signature[name], attrs[(index,)] = "i32", [["tt.divisibility", 16]]
    source = triton.compiler.ASTSource(fn=kernel, signature=signature, constexprs=constexprs,
                                       attrs=attrs)
    target = GPUTarget("cuda", 90, 32)
    options = triton.compiler.make_backend(target).parse_options(
        {"num_warps": num_warps, "num_stages": num_stages})
    # A failing MLIR pass writes its reason (an assertion, an error) and a whole reproducer to
    # file descriptor 2, not into the exception: keep it, and raise with the reason.
    with tempfile.TemporaryFile() as sink:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(sink.fileno(), 2)
        try:
            return triton.compile(source, target=target, options=options.__dict__)
        except Exception as error:
            sink.seek(0)
            said = sink.read().decode(errors="replace").splitlines()
            reasons = [line.strip() for line in said if "Assertion" in line or
                       ("error:" in line and "Failures have been detected" not in line)]
            if reasons:
                raise RuntimeError(f"{_one_line(error)}: {reasons[0][:300]}") from error
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def compiled_figures(compiled) -> dict:
    """Total warps, setmaxnreg (the registers each warp group asks for or gives back under warp
    specialization), shared memory, and ptxas's registers and spills."""
    ptx = compiled.asm["ptx"]
    found = re.findall(r"setmaxnreg\.(inc|dec)\.sync\.aligned\.u32\s+(\d+)", ptx)
    row = {"total_warps": compiled.metadata.num_warps,
           "setmaxnreg": " ".join(
               f"{kind} {'/'.join(sorted({count for k, count in found if k == kind}, key=int, reverse=True))}"
               for kind in ("inc", "dec") if any(k == kind for k, _ in found)),
           "shared": compiled.metadata.shared}
    try:
        row.update(ptxas_figures(ptx))
    except Exception as error:  # noqa: BLE001
        row["ptxas_error"] = f"{type(error).__name__}: {_one_line(error)}"
    return row


def ptxas_figures(ptx: str) -> dict:
    """Registers and spill bytes as Triton's bundled ptxas reports them for sm_90a. Under warp
    specialization the figure is the launch's per-thread budget; setmaxnreg then moves
    registers from the producer to the consumers at run time."""
    from triton.backends.nvidia.compiler import get_ptxas

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "kernel.ptx")
        with open(path, "w") as handle:
            handle.write(ptx)
        info = subprocess.run([get_ptxas(90).path, "-arch=sm_90a", "-v", path, "-o",
                               os.path.join(folder, "kernel.cubin")],
                              capture_output=True, text=True, timeout=300).stderr
    registers = re.search(r"Used (\d+) registers", info)
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", info)
    if not registers or not spills:
        raise RuntimeError(_one_line(info) or "ptxas said nothing")
    return {"registers": int(registers.group(1)), "spill_stores": int(spills.group(1)),
            "spill_loads": int(spills.group(2))}


def _one_line(text: str) -> str:
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    return lines[-1][:400] if lines else ""


def compile_report(variant: Variant, block_d: int, ttgir_dir: str | None = None) -> dict:
    row = {"block_d": block_d, "variant": variant.label, **dataclasses.asdict(variant)}
    started = time.perf_counter()
    try:
        compiled = compile_sm90(variant, block_d)
    except Exception as error:  # noqa: BLE001 - the pass's failure is the row's result
        row["error"] = f"{type(error).__name__}: {_one_line(error)}"
        return row
    row["compile_s"] = round(time.perf_counter() - started, 2)
    row.update(compiled_figures(compiled))
    if ttgir_dir:
        os.makedirs(ttgir_dir, exist_ok=True)
        name = re.sub(r"[^\w]+", "_", f"hd{block_d}_{variant.label}")
        with open(os.path.join(ttgir_dir, name + ".ttgir"), "w") as handle:
            handle.write(compiled.asm["ttgir"])
    return row


def compile_only_main(ttgir_dir: str | None, json_path: str | None) -> int:
    if _INTERPRETED:
        print("error: --compile-only needs TRITON_INTERPRET unset (the interpreter compiles nothing)")
        return 2
    print(f"sm90, compiled on this machine (no GPU), Triton {triton.__version__}, bf16")
    print(f"{'block_d':>7}  {'variant':<40}{'result':<9}{'warps':>6}  {'setmaxnreg':<21}"
          f"{'smem B':>8}{'regs':>6}{'spill st/ld':>13}{'compile s':>10}")
    rows = []
    every = [(block_d, variant) for table in (VARIANTS, CAUSAL_VARIANTS, CAUSAL_DIAGONAL_VARIANTS)
             for block_d, variants in table.items() for variant in variants]
    for block_d, variant in every:
        row = compile_report(variant, block_d, ttgir_dir)
        rows.append(row)
        if "error" in row:
            print(f"{block_d:>7}  {variant.label:<40}failed   {row['error']}", flush=True)
            continue
        registers = (f"{row['registers']:>6}{row['spill_stores']:>7}/{row['spill_loads']:<5}"
                     if "registers" in row else f"  ptxas failed: {row['ptxas_error']}")
        note = "  over sm90's 227 KB: cannot launch" if row["shared"] > SM90_MAX_SHARED else ""
        print(f"{block_d:>7}  {variant.label:<40}{'compiled':<9}{row['total_warps']:>6}  "
              f"{row['setmaxnreg'] or '-':<21}{row['shared']:>8}{registers}"
              f"{row['compile_s']:>10}{note}", flush=True)
    if json_path:
        _write_json(json_path, {"mode": "compile-only", "triton": triton.__version__, "rows": rows})
    return 0


# ----------------------------------------------------------------------------------------------
# Launch, reference and checks (GPU mode and --interpret-check)
# ----------------------------------------------------------------------------------------------


def _scratch(size: int, alignment: int, stream):
    import torch

    return torch.empty(size, dtype=torch.int8, device="cuda")


def ws_forward(q, k, v, variant: Variant, softmax_scale: float, lse_fill: float | None = None):
    """(out, lse), lse float32 (batch * heads, seq_q). ``lse_fill`` (NaN for the checks) makes
    rows the kernel never writes show as wrong; the timed calls leave it empty."""
    import torch

    batch, heads, seq_q, head_dim = q.shape
    seq_k = k.shape[2]
    out = torch.empty_like(q)
    if lse_fill is None:
        lse = torch.empty((batch * heads, seq_q), device=q.device, dtype=torch.float32)
    else:
        lse = torch.full((batch * heads, seq_q), lse_fill, device=q.device, dtype=torch.float32)
    grid = (-(-seq_q // variant.block_m), batch * heads)
    _ws_forward_kernel[grid](
        q, k, v, out, lse,
        q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2), out.stride(0), out.stride(1), out.stride(2),
        heads, seq_q, seq_k, softmax_scale * LOG2_E, head_dim,
        num_warps=variant.num_warps, num_stages=variant.num_stages,
        **_constants(variant, block_width(head_dim), seq_k % variant.block_n != 0))
    return out, lse


def reference(q, k, v, softmax_scale: float, causal: bool = False):
    """SDPA-math in float32, one batch element at a time: (out, base-2 LSE of the scaled
    scores as (batch * heads, seq_q)); causal: query i sees keys 0..i (seq_q == seq_k)."""
    import torch

    outs, lses = [], []
    for index in range(q.shape[0]):
        scores = torch.matmul(q[index].float(), k[index].float().transpose(-1, -2)) * softmax_scale
        if causal:
            hidden = torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).triu(1)
            scores.masked_fill_(hidden, float("-inf"))
        lses.append(torch.logsumexp(scores, dim=-1) * LOG2_E)
        outs.append(torch.matmul(torch.softmax(scores, dim=-1), v[index].float()))
        del scores
    return torch.stack(outs), torch.cat(lses)


def compare(out, lse, ref_out, ref_lse, block_m: int) -> dict:
    """Output: max |err| / max |ref| < 0.02. LSE: per-row |err| / max(|ref|, 1) < 1e-3; a NaN
    (never written) row counts as wrong. The wrong LSE rows are split by where they sit in
    their BLOCK_M block: the first or the second consumer's half under warp specialization."""
    import torch

    out_err = ((out.float() - ref_out).abs().max() / ref_out.abs().max()).item()
    relative = (lse - ref_lse).abs() / ref_lse.abs().clamp_min(1.0)
    wrong = ~(relative < 1e-3)  # NaN compares False: wrong
    position = torch.arange(lse.shape[1], device=lse.device) % block_m
    first_half = position < block_m // 2
    finite = relative[torch.isfinite(relative)]
    return {"out_err": out_err, "out_ok": out_err < 0.02,
            "lse_err": finite.max().item() if finite.numel() else float("nan"),
            "lse_ok": not bool(wrong.any()),
            "lse_wrong_rows_first_half": int(wrong[:, first_half].sum()),
            "lse_wrong_rows_second_half": int(wrong[:, ~first_half].sum()),
            "lse_unwritten_rows": int(torch.isnan(lse).sum()),
            "lse_rows": lse.numel()}


# ----------------------------------------------------------------------------------------------
# --interpret-check: the kernel's math on the CPU
# ----------------------------------------------------------------------------------------------


def interpret_check_main() -> int:
    """Triton's interpreter runs the kernel on CPU tensors (it ignores warp_specialize and
    num_warps, so this checks the math and both row forms, not the compiled WS code)."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        # The interpreter is chosen when @triton.jit runs, i.e. at import: start over with it.
        return subprocess.run([sys.executable, os.path.abspath(__file__), "--interpret-check"],
                              env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=1800).returncode
    import torch

    # float16: the interpreter's bfloat16 dots return garbage in Triton 3.6 (errors ~1e9, seen
    # here and in tests/kernels/test_attention.py); the GPU mode runs bfloat16.
    failures = 0
    cases = ((1, 2, 256, 256, 64), (1, 1, 200, 200, 112), (1, 1, 128, 128, 256))
    for batch, heads, seq_q, seq_k, head_dim in cases:
        generator = torch.Generator().manual_seed(seq_q + head_dim)
        q = torch.randn(batch, heads, seq_q, head_dim, generator=generator).to(torch.float16)
        k, v = (torch.randn(batch, heads, seq_k, head_dim, generator=generator).to(torch.float16)
                for _ in range(2))
        scale = 1.0 / math.sqrt(head_dim)
        ref_out, ref_lse = reference(q, k, v, scale)
        causal_out, causal_lse = reference(q, k, v, scale, causal=True)
        variants = [Variant(False, 64, 64, 4, 2, rows) for rows in ROWS]
        # Causal: both mask forms, and a key block narrower than the query block (two key
        # blocks cross each diagonal).
        variants += [_causal(Variant(False, 64, block_n, 4, 2), mask)
                     for block_n in (64, 32) for mask in MASKS]
        for variant in variants:
            expected = (causal_out, causal_lse) if variant.causal else (ref_out, ref_lse)
            out, lse = ws_forward(q, k, v, variant, scale, lse_fill=float("nan"))
            result = compare(out, lse, *expected, variant.block_m)
            ok = result["out_ok"] and result["lse_ok"]
            failures += not ok
            print(f"b{batch} h{heads} sq{seq_q} sk{seq_k} hd{head_dim} {variant.label}: "
                  f"out err {result['out_err']:.4f}, lse err {result['lse_err']:.2e}, "
                  f"{'ok' if ok else 'WRONG'}", flush=True)
    print("interpreter check: " + ("all right" if not failures else f"{failures} wrong"))
    return 1 if failures else 0


# ----------------------------------------------------------------------------------------------
# GPU mode
# ----------------------------------------------------------------------------------------------


def _time_ms(run) -> float:
    return triton.testing.do_bench(run, warmup=25, rep=100, return_mode="median")


def _fatal(error: Exception) -> bool:
    # After these the CUDA context is unusable: every later launch would fail the same way.
    text = str(error).lower()
    return "illegal" in text or "unspecified launch failure" in text or "misaligned" in text


class _Watchdog:
    """A kernel that deadlocks (a warp-specialized loop whose barriers never complete) would
    hang the run past the device's time limit with nothing written: after ``limit_s`` on one
    row this writes the rows so far, names the row, and ends the process."""

    def __init__(self, limit_s: float, save):
        import threading

        self.limit_s, self.save, self.row, self.since = limit_s, save, None, time.monotonic()
        threading.Thread(target=self._watch, daemon=True).start()

    def start(self, row: dict) -> None:
        self.row, self.since = row, time.monotonic()

    def _watch(self) -> None:
        while True:
            time.sleep(1.0)
            if self.row is not None and time.monotonic() - self.since > self.limit_s:
                self.row["error"] = f"hung: no answer in {self.limit_s:.0f} s (process ended)"
                print(f"{self.row['shape']:<13}{self.row['variant']:<40}{self.row['error']}", flush=True)
                self.save()
                os._exit(3)


def _environment() -> dict:
    import torch

    try:
        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        driver = "unknown"
    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "gpu": torch.cuda.get_device_name(), "driver": driver, "torch": torch.__version__,
            "triton": triton.__version__, "cudnn": torch.backends.cudnn.version(),
            "python": platform.python_version(), "dtype": "bf16"}


def _write_json(path: str, payload: dict) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as handle:
        json.dump(payload, handle, indent=1)


def _print_row(row: dict) -> None:
    if "error" in row:
        print(f"{row['shape']:<13}{row['variant']:<40}{row['error']}", flush=True)
        return
    ratio = f"{row['ratio_best_sdpa']:.2f}x" if row.get("ratio_best_sdpa") else "-"
    checked = ""
    if "out_ok" in row:
        checked = (f"{'y' if row['out_ok'] else 'n'} ({row['out_err']:.4f})  "
                   f"{'y' if row['lse_ok'] else 'n'} (wrong rows {row['lse_wrong_rows_first_half']}"
                   f"/{row['lse_wrong_rows_second_half']} of {row['lse_rows']}, unwritten "
                   f"{row['lse_unwritten_rows']}, max rel {row['lse_err']:.1e})")
    print(f"{row['shape']:<13}{row['variant']:<40}{row['ms']:>8.3f}{ratio:>8}  {checked}", flush=True)


def _run_baseline(row: dict, run) -> None:
    try:
        row["ms"] = _time_ms(run)
    except Exception as error:  # noqa: BLE001 - a backend refusing the shape is a row
        row["error"] = f"{type(error).__name__}: {_one_line(error)}"
        row["fatal"] = _fatal(error)


def _run_variant(row: dict, variant: Variant, q, k, v, scale, ref_out, ref_lse) -> None:
    import torch

    try:
        first = time.perf_counter()
        out, lse = ws_forward(q, k, v, variant, scale, lse_fill=float("nan"))  # compiles
        torch.cuda.synchronize()
        row["first_call_s"] = round(time.perf_counter() - first, 2)
        row.update(compare(out, lse, ref_out, ref_lse, variant.block_m))
        del out, lse
        row["ms"] = _time_ms(lambda: ws_forward(q, k, v, variant, scale))
    except Exception as error:  # noqa: BLE001 - a failed compile or launch is a row
        row["error"] = f"{type(error).__name__}: {_one_line(error)}"
        row["fatal"] = _fatal(error)


def gpu_main(json_path: str | None, budget_s: float, row_limit_s: float, shapes: list[str] | None) -> int:
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention

    from gpudoctor.kernels.attention import flash_attention

    started = time.perf_counter()
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        print("needs a Hopper (sm90) GPU; use --compile-only or --interpret-check here")
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False  # the reference is float32, not TF32
    triton.set_allocator(_scratch)  # device-side descriptors live in a per-launch scratch buffer
    environment = _environment()
    rows: list[dict] = []
    payload = {"environment": environment, "rows": rows}

    def save() -> None:
        payload["wall_s"] = round(time.perf_counter() - started, 1)
        if json_path:
            _write_json(json_path, payload)

    watchdog = _Watchdog(row_limit_s, save)
    print(f"{environment['gpu']}, driver {environment['driver']}, torch {environment['torch']}, "
          f"Triton {environment['triton']}, bf16; ratio = best SDPA ms / ms (>1 faster)")
    print(f"{'shape':<13}{'variant':<40}{'ms':>8}{'ratio':>8}  out ok (err)  lse ok (wrong rows in "
          f"the 1st/2nd half of each block)")
    broken = None  # set once a launch has left the CUDA context unusable
    for name, batch, heads, seq, head_dim, causal in SHAPES:
        if shapes and name not in shapes:
            continue
        base = {"shape": name, "batch": batch, "heads": heads, "seq": seq, "head_dim": head_dim,
                "causal": causal}
        labels = ["sdpa-cudnn", "sdpa-flash", "gpudoctor-shipped"]
        variants = (CAUSAL_VARIANTS if causal else VARIANTS)[block_width(head_dim)]
        if broken:
            for label in labels + [variant.label for variant in variants]:
                rows.append({**base, "variant": label, "error": broken})
                _print_row(rows[-1])
            continue
        generator = torch.Generator(device="cuda").manual_seed(seq + head_dim)
        q, k, v = (torch.randn(batch, heads, seq, head_dim, device="cuda", dtype=torch.bfloat16,
                               generator=generator) for _ in range(3))
        scale = 1.0 / math.sqrt(head_dim)
        ref_out, ref_lse = reference(q, k, v, scale, causal)

        def sdpa(backend):
            def run():
                with sdpa_kernel(backend), torch.no_grad():
                    return scaled_dot_product_attention(q, k, v, is_causal=causal)
            return run

        def shipped():
            with torch.no_grad():
                return flash_attention(q, k, v, causal=causal)

        runs = {"sdpa-cudnn": sdpa(SDPBackend.CUDNN_ATTENTION),
                "sdpa-flash": sdpa(SDPBackend.FLASH_ATTENTION), "gpudoctor-shipped": shipped}
        baseline_rows = []
        for label in labels:
            row = {**base, "variant": label}
            rows.append(row)
            baseline_rows.append(row)
            if broken:
                row["error"] = broken
                continue
            watchdog.start(row)
            _run_baseline(row, runs[label])
            if row.pop("fatal", False):
                broken = "not run: an earlier launch broke the CUDA context"
        best_sdpa = min((row["ms"] for row in baseline_rows[:2] if "ms" in row), default=None)
        for row in baseline_rows:
            if "ms" in row and best_sdpa:
                row["ratio_best_sdpa"] = best_sdpa / row["ms"]
            _print_row(row)

        for variant in variants:
            row = {**base, "variant": variant.label, **dataclasses.asdict(variant)}
            rows.append(row)
            if broken:
                row["error"] = broken
            elif time.perf_counter() - started > budget_s:
                row["error"] = f"not run: past the {budget_s:.0f} s budget"
            else:
                watchdog.start(row)
                _run_variant(row, variant, q, k, v, scale, ref_out, ref_lse)
                if row.pop("fatal", False):
                    broken = "not run: an earlier launch broke the CUDA context"
                elif "ms" in row and best_sdpa:
                    row["ratio_best_sdpa"] = best_sdpa / row["ms"]
            watchdog.start(None)
            _print_row(row)
            save()  # as it goes: a crash keeps the rows so far
        watchdog.start(None)
        del q, k, v, ref_out, ref_lse
        if not broken:
            torch.cuda.empty_cache()
    save()
    print(f"total {payload['wall_s']} s")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(__doc__.splitlines()[-10:]))
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--compile-only", action="store_true",
                      help="no GPU: compile each variant for sm90 and report warps, registers, spills")
    mode.add_argument("--interpret-check", action="store_true",
                      help="no GPU: check the kernel's math in Triton's interpreter")
    parser.add_argument("--ttgir", metavar="DIR", help="with --compile-only: write each variant's TTGIR here")
    parser.add_argument("--json", metavar="PATH", help="write the rows as JSON")
    parser.add_argument("--budget-s", type=float, default=85.0,
                        help="GPU mode: variants not started by then become 'not run' rows (default 85)")
    parser.add_argument("--row-limit-s", type=float, default=60.0,
                        help="GPU mode: a row (compile, check, timing) taking longer is taken for a "
                             "hang: the rows so far are written and the process ends (default 60)")
    parser.add_argument("--shapes", nargs="+", choices=[shape[0] for shape in SHAPES],
                        help="GPU mode: only these shapes")
    args = parser.parse_args()
    if args.ttgir and not args.compile_only:
        parser.error("--ttgir goes with --compile-only")
    if args.compile_only:
        return compile_only_main(args.ttgir, args.json)
    if args.interpret_check:
        return interpret_check_main()
    return gpu_main(args.json, args.budget_s, args.row_limit_s, args.shapes)


if __name__ == "__main__":
    sys.exit(main())
