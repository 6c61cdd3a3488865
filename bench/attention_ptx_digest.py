"""Digests of the attention kernels as compiled for sm90, to show a refactor leaves them unchanged.

Needs no GPU: Triton compiles each kernel (forward, dK/dV, dQ with and without delta-in-dQ,
causal or not, whole and ragged tiles) for sm90 at the shipped tiles of several head dims and
load modes, and this prints a SHA-256 of each PTX with its debug locations (.loc/.file lines,
comments, debug sections) removed. Equal digests before and after a change mean the GPU runs the
same instructions, so the change needs no new timing.

Usage: python bench/attention_ptx_digest.py --out A.json            (before the change)
       python bench/attention_ptx_digest.py --out B.json --compare A.json
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import re
import sys

# (head_dim, keys per head, load mode or None for the shipped one)
CASES = ((64, 4096, None), (80, 4096, None), (112, 4096, None), (128, 4096, None), (256, 4096, None),
         (72, 256, None), (80, 4096, "host"), (80, 4096, "device"), (128, 4096, "device"))


def _ptx_without_locations(kernel, constants, tiles, d_main, d_tail, has_tail) -> str:
    import triton
    from triton.backends.compiler import GPUTarget

    from attention_ncu import _signature

    signature, constexprs, attrs = _signature(kernel, constants, tiles.block_m, tiles.block_n,
                                              d_main, d_tail, has_tail)
    source = triton.compiler.ASTSource(fn=kernel, signature=signature, constexprs=constexprs, attrs=attrs)
    target = GPUTarget("cuda", 90, 32)
    options = triton.compiler.make_backend(target).parse_options(
        {"num_warps": tiles.num_warps, "num_stages": tiles.num_stages})
    ptx = triton.compile(source, target=target, options=options.__dict__).asm["ptx"]
    ptx = re.sub(r"\.section\s+\.debug\w*\s*\{.*?\}", "", ptx, flags=re.S)
    return "\n".join(line for line in ptx.splitlines() if not line.strip().startswith((".loc", ".file", "//")))


def digests() -> dict[str, str]:
    from attention_ncu import kernels_of

    from gpudoctor.kernels import attention as kernels

    modes = {"host": kernels.HOST_DESCRIPTORS, "device": kernels.DEVICE_DESCRIPTORS}
    found = {}
    for head_dim, seq_k, mode in CASES:
        shipped = kernels.select_config((9, 0), head_dim, seq_k)
        base = shipped if mode is None else dataclasses.replace(shipped, tma=modes[mode])
        for delta_in_dq in (False, True):
            config = dataclasses.replace(base, delta_in_dq=delta_in_dq)
            d_main, d_tail, has_tail = kernels.head_dim_slices(head_dim, config.split_head_dim,
                                                               config.tma != kernels.POINTERS)
            slices = kernels._slice_constants(head_dim, config)
            slices.pop("head_dim")
            for label, kernel, tiles, extra in kernels_of(kernels, config):
                if delta_in_dq and label != "dq":
                    continue  # delta-in-dQ changes the dQ kernel only
                for causal in (True, False):
                    constants = dict(CAUSAL=causal, BLOCK_M=tiles.block_m, BLOCK_N=tiles.block_n,
                                     CHECK_M=True, CHECK_N=True, INTERPRETED=False, TMA=config.tma,
                                     **slices, **extra)
                    key = (f"hd{head_dim} seq{seq_k} tma{config.tma} delta_in_dq{int(delta_in_dq)} "
                           f"{label} causal{int(causal)}")
                    text = _ptx_without_locations(kernel, constants, tiles, d_main, d_tail, has_tail)
                    found[key] = hashlib.sha256(text.encode()).hexdigest()[:16]
                    print(f"{key:<48} {found[key]}", flush=True)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--compare", help="digests of the code before the change")
    args = parser.parse_args()
    os.environ.pop("TRITON_INTERPRET", None)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    found = digests()
    with open(args.out, "w") as handle:
        json.dump(found, handle, indent=1)
    if not args.compare:
        return 0
    with open(args.compare) as handle:
        before = json.load(handle)
    changed = sorted(key for key in found if before.get(key) != found[key])
    print(f"{len(found) - len(changed)} of {len(found)} kernels compile to the same PTX; changed: "
          + (", ".join(changed) or "none"))
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
