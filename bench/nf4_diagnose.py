"""Where does the NF4 dequantizer's time go? A diagnostic companion to bench/nf4.py (issue 4).

bench/nf4.py times every path with triton.testing.do_bench, which "flushes" L2 before each call
by zeroing a 256 MB buffer: the L2 is then full of *dirty* lines that the timed kernel has to
write back to DRAM while it runs. This script times the same calls under three cache states,
side by side with references moving the same number of bytes, so that a fixed cost can be told
apart from a bandwidth limit:

    zero-flush   do_bench's own flush (L2 full of dirty lines)
    read-flush   256 MB read before each call (L2 full of clean lines: nothing to write back)
    rotating     no flush; calls cycle over enough input/output copies that nothing is in L2

References per shape: a device-to-device copy of the same total bytes (half read, half written),
the output written alone by a Triton kernel with the same tile and stores, and bitsandbytes.

Usage: python bench/nf4_diagnose.py --out diag.json [--profile-target SHAPE]
       (--profile-target only launches the kernels once each, for `ncu`.)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch
import triton

from gpudoctor.kernels import nf4

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from nf4 import BYTES_PER_ELEMENT, copy_bandwidth_tbs, environment, store_only  # noqa: E402

SHAPES = [(4096, 14336), (4096, 4096), (1024, 4096)]
FLUSH_BYTES = 256 * 1000 * 1000
VARIANTS = [
    {},
    {"_pair_lut": 1},
    {"_pair_lut": 1, "_elements_per_program": 4096},
    {"_pair_lut": 1, "_packed_vector_bytes": 8},
    {"_pair_lut": 1, "_elements_per_program": 1024},
    {"_pair_lut": 1, "_elements_per_program": 4096, "_num_warps": 8},
]


def timed(fn, flush, reps: int = 200) -> float:
    """Median microseconds of fn() between two CUDA events, `flush()` (if any) before each."""
    for _ in range(10):
        if flush:
            flush()
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        if flush:
            flush()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) * 1e3


def flushes():
    cache = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    sink = torch.empty((), dtype=torch.int64, device="cuda")
    return {
        "zero-flush": lambda: cache.zero_(),
        "read-flush": lambda: torch.sum(cache, dim=0, out=sink),
    }


def rotating(make_call, copies: int):
    """A callable that cycles over `copies` independent (input, output) sets."""
    calls = [make_call() for _ in range(copies)]
    state = {"i": 0}

    def run():
        calls[state["i"] % copies]()
        state["i"] += 1

    return run


def shape_cases(shape, bnb):
    n = shape[0] * shape[1]
    weight = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    packed, state = bnb.functional.quantize_4bit(weight, quant_type="nf4", compress_statistics=True)
    state.dtype = torch.bfloat16
    del weight
    copy_bytes = int(n * BYTES_PER_ELEMENT / 2)

    def ours(**knobs):
        def make():
            p = packed.clone()
            out = torch.empty(shape, device="cuda", dtype=torch.bfloat16)
            return lambda: nf4.dequantize_nf4(p, state, torch.bfloat16, out=out, **knobs)
        return make

    def bitsandbytes():
        p = packed.clone()
        return lambda: bnb.functional.dequantize_4bit(p, state, quant_type="nf4")

    def copy_same_bytes():
        src = torch.empty(copy_bytes, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        return lambda: dst.copy_(src)

    def write_only():
        return store_only(torch.empty(shape, device="cuda", dtype=torch.bfloat16))

    cases = {"copy_same_bytes": copy_same_bytes, "write_only_triton": write_only, "bitsandbytes": bitsandbytes}
    for knobs in VARIANTS:
        label = ",".join(f"{k.strip('_')}={v}" for k, v in knobs.items()) or "shipped"
        cases[f"gpudoctor[{label}]"] = ours(**knobs)
    return cases, packed, state


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out")
    parser.add_argument("--profile-target", help="ROWSxCOLS: launch each case once (for ncu) and exit")
    args = parser.parse_args(argv)
    import bitsandbytes as bnb
    import bitsandbytes.functional  # noqa: F401

    if args.profile_target:
        shape = tuple(int(x) for x in args.profile_target.split("x"))
        cases, _, _ = shape_cases(shape, bnb)
        for name in ("write_only_triton", "gpudoctor[shipped]", "gpudoctor[pair_lut=1]"):
            call = cases[name]()
            call()  # compile / warm
            torch.cuda.synchronize()
            call()
            torch.cuda.synchronize()
        return 0

    report = {"environment": environment(), "copy_1GiB": copy_bandwidth_tbs(), "results": []}
    flush = flushes()
    for shape in SHAPES:
        cases, packed, state = shape_cases(shape, bnb)
        expected = bnb.functional.dequantize_4bit(packed, state, quant_type="nf4").view(torch.int16)
        n = shape[0] * shape[1]
        copies = max(2, int(3 * 60e6 // (n * BYTES_PER_ELEMENT)) + 1)  # > 3x the 50 MB L2 in total
        row = {"shape": list(shape), "rotating_copies": copies, "us": {}, "exact": {}}
        for name, make in cases.items():
            if name.startswith("gpudoctor"):
                out = torch.full(shape, float("nan"), device="cuda", dtype=torch.bfloat16)
                knobs = {}
                label = name[len("gpudoctor["):-1]
                if label != "shipped":
                    for item in label.split(","):
                        key, value = item.split("=")
                        knobs["_" + key] = int(value) if value.isdigit() else value
                try:
                    nf4.dequantize_nf4(packed, state, torch.bfloat16, out=out, **knobs)
                    row["exact"][name] = bool(torch.equal(out.view(torch.int16), expected))
                except Exception as error:  # noqa: BLE001 - a variant that fails is a result
                    row["exact"][name] = repr(error)[:200]
                    continue
            call = make()
            row["us"][name] = {
                "zero-flush": timed(call, flush["zero-flush"]),
                "read-flush": timed(call, flush["read-flush"]),
                "rotating": timed(rotating(make, copies), None),
            }
        report["results"].append(row)
        print(f"== {shape[0]}x{shape[1]}  ({n * BYTES_PER_ELEMENT / 1e6:.1f} MB moved)")
        for name, t in row["us"].items():
            print(f"  {name:58s} " + "  ".join(f"{mode} {v:7.2f}" for mode, v in t.items())
                  + f"  {row['exact'].get(name, '')}")
    print(f"copy 1 GiB: {report['copy_1GiB']['tb_per_s']:.2f} TB/s")
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(report, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
