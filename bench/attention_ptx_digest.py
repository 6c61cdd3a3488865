"""Digests of the attention kernels as compiled for sm90, to show a refactor leaves them unchanged.

Needs no GPU: Triton compiles each kernel (forward, dK/dV, dQ with and without delta-in-dQ,
causal or not, whole and ragged tiles) for sm90 at the shipped tiles of several head dims and
load modes, and this prints a SHA-256 of each PTX with its debug locations (.loc/.file lines,
comments, debug sections, inlined functions' scope labels) removed, and of its machine code (the
SASS of Triton's cubin, without addresses). Equal machine code before and after a change means the
GPU runs the same instructions, so the change needs no new timing; the PTX alone can differ while
the machine code does not (moving code into a @triton.jit helper can reorder a few instructions
and renumber registers, which ptxas then allocates and schedules the same way).

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
import subprocess
import sys
import tempfile

# Compiles of a kernel whose machine code differs from the one before the change, before it counts
# as changed (see digests).
RECOMPILES = 4
# (head_dim, keys per head, load mode or None for the shipped one)
CASES = ((64, 4096, None), (80, 4096, None), (112, 4096, None), (128, 4096, None), (256, 4096, None),
         (72, 256, None), (80, 4096, "host"), (80, 4096, "device"), (128, 4096, "device"))


def _compile(kernel, constants, tiles, d_main, d_tail, has_tail):
    import triton
    from triton.backends.compiler import GPUTarget

    from attention_ncu import _signature

    signature, constexprs, attrs = _signature(kernel, constants, tiles.block_m, tiles.block_n,
                                              d_main, d_tail, has_tail)
    source = triton.compiler.ASTSource(fn=kernel, signature=signature, constexprs=constexprs, attrs=attrs)
    target = GPUTarget("cuda", 90, 32)
    options = triton.compiler.make_backend(target).parse_options(
        {"num_warps": tiles.num_warps, "num_stages": tiles.num_stages})
    return triton.compile(source, target=target, options=options.__dict__)


def _ptx_without_locations(compiled) -> str:
    ptx = re.sub(r"\.section\s+\.debug\w*\s*\{.*?\}", "", compiled.asm["ptx"], flags=re.S)
    # $L__tmpN: labels that mark inlined functions' debug scopes (no branch goes to them); they
    # move whenever code moves between @triton.jit functions.
    return "\n".join(line for line in ptx.splitlines()
                     if not line.strip().startswith((".loc", ".file", "//"))
                     and not re.fullmatch(r"\$L__tmp\d+:", line.strip()))


def _sass(compiled) -> str:
    """The machine code ptxas made of it (Triton's own cubin, disassembled by the cuobjdump
    Triton ships), without the address comments."""
    from triton.backends.nvidia.compiler import get_ptxas

    cuobjdump = os.path.join(os.path.dirname(get_ptxas(90).path), "cuobjdump")
    with tempfile.TemporaryDirectory() as folder:
        cubin = os.path.join(folder, "kernel.cubin")
        with open(cubin, "wb") as handle:
            handle.write(compiled.asm["cubin"])
        listing = subprocess.run([cuobjdump, "-sass", cubin], capture_output=True, text=True,
                                 check=True, timeout=120).stdout
    lines = (re.sub(r"/\*[0-9a-f]{4,}\*/", "", line).strip() for line in listing.splitlines())
    return "\n".join(line for line in lines if line and not re.fullmatch(r"/\*[0-9a-f]*\*/", line))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def digests(before: dict | None = None) -> dict[str, dict]:
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
                    compiled = _compile(kernel, constants, tiles, d_main, d_tail, has_tail)
                    found[key] = {"ptx": _digest(_ptx_without_locations(compiled)),
                                  "sass": _digest(_sass(compiled))}
                    wanted = (before or {}).get(key, {}).get("sass")
                    for _ in range(RECOMPILES if wanted and wanted != found[key]["sass"] else 0):
                        # ptxas does not always make the same machine code of one PTX (seen for
                        # the spilling hd256 dK/dV kernel: two digests over two compiles of the
                        # code before a change); compile again, past Triton's cache.
                        with tempfile.TemporaryDirectory() as cache:
                            os.environ["TRITON_CACHE_DIR"] = cache
                            try:
                                again = _digest(_sass(_compile(kernel, constants, tiles, d_main,
                                                               d_tail, has_tail)))
                            finally:
                                os.environ.pop("TRITON_CACHE_DIR")
                        found[key].setdefault("sass_recompiled", []).append(again)
                        if again == wanted:
                            found[key]["sass"] = again
                            break
                    print(f"{key:<48} ptx {found[key]['ptx']} sass {found[key]['sass']}", flush=True)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--compare", help="digests of the code before the change")
    args = parser.parse_args()
    os.environ.pop("TRITON_INTERPRET", None)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    before = None
    if args.compare:
        with open(args.compare) as handle:
            before = json.load(handle)
    found = digests(before)
    with open(args.out, "w") as handle:
        json.dump(found, handle, indent=1)
    if not args.compare:
        return 0
    same = [key for key in found if before.get(key, {}).get("ptx") == found[key]["ptx"]]
    same_sass = sorted(key for key in found if key not in same
                       and before.get(key, {}).get("sass") == found[key]["sass"])
    changed = sorted(key for key in found if key not in same and key not in same_sass)
    print(f"{len(same)} of {len(found)} kernels compile to the same PTX; {len(same_sass)} more to the "
          f"same machine code from another PTX: " + (", ".join(same_sass) or "none") + "; changed: "
          + (", ".join(changed) or "none"))
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
