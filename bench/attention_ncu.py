"""One forward+backward of gpudoctor's attention and of SDPA's cuDNN backend at a few shapes, for
Nsight Compute (`ncu`) to profile: what limits each kernel (issue 18). Run under ncu, e.g.
  ncu --section SpeedOfLight --section Occupancy --section LaunchStats --csv \\
      python bench/attention_ncu.py --head-dim 128
The script warms up (compiles) first, then marks the profiled calls with an NVTX range.

  python bench/attention_ncu.py --ptxas [--head-dims 64 128 256]

needs no GPU: it compiles the kernels for sm90 with Triton's own toolchain (its bundled ptxas)
and prints what ptxas allocated per kernel and tile shape (registers, spill bytes, stack frame)
and Triton's shared memory, for the shipped sm90 tiles and bench/attention.py's round-s3
candidates, with how many programs of each fit on one SM by those two figures."""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import re
import subprocess
import sys
import tempfile


# sm90 per SM: 64 K 32-bit registers, allocated per warp in units of 256; 228 KB of shared
# memory, 1 KB of it reserved per resident program; at most 64 warps.
_SM90_REGISTERS, _SM90_SHARED, _SM90_RESERVED, _SM90_WARPS = 65536, 233472, 1024, 64


def programs_per_sm(registers: int, shared: int, num_warps: int) -> int:
    per_warp = math.ceil(registers * 32 / 256) * 256
    by_registers = _SM90_REGISTERS // (per_warp * num_warps)
    by_shared = _SM90_SHARED // (shared + _SM90_RESERVED)
    return min(by_registers, by_shared, _SM90_WARPS // num_warps)


def _signature(kernel, constants, block_m, block_n, d_main, d_tail, has_tail, dtype="bf16"):
    """Argument types as a launch on contiguous (batch, heads, seq, head_dim) tensors with
    16-byte aligned strides would specialize them (last-dimension strides are 1)."""
    signature, constexprs, attrs = {}, {}, {}
    for index, name in enumerate(kernel.arg_names):
        if name in constants:
            signature[name], constexprs[name] = "constexpr", constants[name]
        elif name in ("LSE", "DELTA", "DQ_ACC"):
            signature[name], attrs[(index,)] = "*fp32", [["tt.divisibility", 16]]
        elif name.endswith("_DESC"):
            if constants.get("TMA") == 2:
                rows = block_m if name.split("_")[0] in ("Q", "O", "DO", "DQ") else block_n
                cols = d_tail if "TAIL" in name and has_tail else d_main
                signature[name] = f"tensordesc<{dtype}[1, 1, {rows}, {cols}]>"
            else:
                signature[name], constexprs[name] = "constexpr", None
        elif name.isupper():
            signature[name], attrs[(index,)] = f"*{dtype}", [["tt.divisibility", 16]]
        elif name in ("qk_scale", "softmax_scale"):
            signature[name] = "fp32"
        elif re.fullmatch(r"stride_\w+d", name):
            signature[name], constexprs[name] = "constexpr", 1
        else:
            signature[name] = "i32"
            if name.startswith("stride") or name in ("seq_q", "seq_k"):
                attrs[(index,)] = [["tt.divisibility", 16]]
    return signature, constexprs, attrs


def ptxas_report(kernel, constants, tiles, d_main, d_tail, has_tail) -> dict:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import get_ptxas

    signature, constexprs, attrs = _signature(kernel, constants, tiles.block_m, tiles.block_n,
                                              d_main, d_tail, has_tail)
    source = triton.compiler.ASTSource(fn=kernel, signature=signature, constexprs=constexprs,
                                       attrs=attrs)
    target = GPUTarget("cuda", 90, 32)
    options = triton.compiler.make_backend(target).parse_options(
        {"num_warps": tiles.num_warps, "num_stages": tiles.num_stages})
    compiled = triton.compile(source, target=target, options=options.__dict__)
    with tempfile.TemporaryDirectory() as folder:
        ptx = os.path.join(folder, "kernel.ptx")
        with open(ptx, "w") as handle:
            handle.write(compiled.asm["ptx"])
        info = subprocess.run([get_ptxas(90).path, "-arch=sm_90a", "-v", ptx, "-o",
                               os.path.join(folder, "kernel.cubin")],
                              capture_output=True, text=True).stderr
    registers = re.search(r"Used (\d+) registers", info)
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", info)
    stack = re.search(r"(\d+) bytes stack frame", info)
    if not registers:
        raise RuntimeError(info.strip().splitlines()[-1] if info.strip() else "ptxas said nothing")
    row = {"registers": int(registers.group(1)), "spill_stores": int(spills.group(1)),
           "spill_loads": int(spills.group(2)), "stack": int(stack.group(1)),
           "shared": compiled.metadata.shared}
    row["per_sm"] = programs_per_sm(row["registers"], row["shared"], tiles.num_warps)
    return row


def kernels_of(kernels, config):
    """(label, kernel, tiles, extra constants) of the three kernels one configuration launches."""
    return (("fwd", kernels._attention_forward_kernel, config.forward, {}),
            ("dkdv", kernels._attention_backward_dkdv_kernel, config.backward_dkdv,
             {"ATOMIC_DQ": False, "TMA_REDUCE": False}),
            ("dq", kernels._attention_backward_dq_kernel, config.backward_dq,
             {"COMPUTE_DELTA": config.delta_in_dq}))


def ptxas_main(head_dims) -> None:
    os.environ.pop("TRITON_INTERPRET", None)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from attention import _S3_TILES, S3_GUARD_SHAPES, SWEEP_SHAPES  # bench/attention.py's round s3

    from gpudoctor.kernels import attention as kernels

    print("sm90 (compiled on this machine, no GPU), bf16, causal, whole tiles; tma: 0 pointers, "
          "2 host descriptors")
    print(f"{'hd':>4} {'config':<22}{'kernel':<7}{'tiles':<13}{'tma':>4}{'regs':>6}"
          f"{'spill st/ld':>13}{'stack':>7}{'smem KB':>9}{'per SM':>7}")
    for head_dim in head_dims:
        shipped = kernels.select_config((9, 0), head_dim, 4096)
        bucket = 64 if head_dim <= 64 else 128 if head_dim <= 128 else 256
        configs = [("shipped", shipped)]
        varied = any(shape[5] == head_dim and shape[0] not in S3_GUARD_SHAPES for shape in SWEEP_SHAPES)
        configs += [(name, dataclasses.replace(shipped, **{field: tiles}))
                    for name, field, tiles in (_S3_TILES.get(bucket, []) if varied else [])]
        for name, config in configs:
            d_main, d_tail, has_tail = kernels.head_dim_slices(head_dim, config.split_head_dim,
                                                               config.tma != kernels.POINTERS)
            slices = kernels._slice_constants(head_dim, config)
            slices.pop("head_dim")
            for label, kernel, tiles, extra in kernels_of(kernels, config):
                if name != "shipped" and tiles == getattr(shipped, {"fwd": "forward", "dkdv":
                                                                    "backward_dkdv", "dq": "backward_dq"}[label]):
                    continue  # the candidate changes another kernel
                constants = dict(CAUSAL=True, BLOCK_M=tiles.block_m, BLOCK_N=tiles.block_n,
                                 CHECK_M=False, CHECK_N=False, INTERPRETED=False, TMA=config.tma,
                                 **slices, **extra)
                shape = f"{tiles.block_m}x{tiles.block_n} w{tiles.num_warps} s{tiles.num_stages}"
                try:
                    row = ptxas_report(kernel, constants, tiles, d_main, d_tail, has_tail)
                except Exception as error:  # noqa: BLE001 - reported, the rest still runs
                    print(f"{head_dim:>4} {name:<22}{label:<7}{shape:<13}{config.tma:>4}  failed: "
                          f"{str(error).strip().splitlines()[-1][:120] if str(error).strip() else type(error).__name__}")
                    continue
                print(f"{head_dim:>4} {name:<22}{label:<7}{shape:<13}{config.tma:>4}{row['registers']:>6}"
                      f"{row['spill_stores']:>7}/{row['spill_loads']:<5}{row['stack']:>7}"
                      f"{row['shared'] / 1024:>9.0f}{row['per_sm']:>7}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--kv-heads", type=int, help="grouped-query attention: this many K/V heads (default: --heads)")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--ptxas", action="store_true",
                        help="no GPU: registers, spills and shared memory per kernel for sm90")
    parser.add_argument("--head-dims", type=int, nargs="+", default=[40, 64, 80, 112, 128, 256])
    parser.add_argument("--full", action="store_true", help="not causal")
    parser.add_argument("--forward-only", action="store_true", help="no backward (torch.no_grad)")
    parser.add_argument("--deterministic", action="store_true",
                        help="flash_attention(deterministic=True): dQ from its own kernel, not summed")
    args = parser.parse_args()
    if args.ptxas:
        ptxas_main(args.head_dims)
        return
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from gpudoctor.kernels.attention import flash_attention

    shape = (args.batch, args.heads, args.seq, args.head_dim)
    kv_heads = args.kv_heads or args.heads
    causal = not args.full
    q = torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.randn((args.batch, kv_heads, args.seq, args.head_dim), device="cuda", dtype=torch.bfloat16,
                        requires_grad=True) for _ in range(2))
    grad = torch.randn(shape, device="cuda", dtype=torch.bfloat16)

    def both():
        with torch.set_grad_enabled(not args.forward_only):
            out = flash_attention(q, k, v, causal=causal, deterministic=args.deterministic)
            if not args.forward_only:
                out.backward(grad)
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=kv_heads != args.heads)
            if not args.forward_only:
                out.backward(grad)

    # The backward on this thread (not autograd's device thread), inside the NVTX range.
    with torch.autograd.set_multithreading_enabled(False):
        for _ in range(3):  # compile and warm up both
            both()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("profiled")
        both()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()

if __name__ == "__main__":
    main()
