"""Benchmark gpudoctor's fused NF4 dequantization against bitsandbytes (issue 4).

For each shape: median time of (a) gpudoctor.kernels.nf4.dequantize_nf4 (one Triton launch),
(b) bitsandbytes.functional.dequantize_4bit, (c) an Unsloth-style path (Unsloth's
fast_dequantize: bitsandbytes' C functions called directly through ctypes into preallocated
buffers: cdequantize_blockwise_fp32 for the nested absmax, `+= offset`, then
cdequantize_blockwise_{bf16,fp16}_nf4). All three are timed the same way, with
triton.testing.do_bench (CUDA events, L2 flushed before every call, median). Bandwidth counts
2.516 bytes per element (0.5 packed + 1/64 absmax code + 2 output); the device's copy bandwidth is
measured in the same run (a large device-to-device copy, bytes read + written).

Usage: python bench/nf4.py --out results.json [--sweep]
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import platform
import statistics
import subprocess
import sys

import torch
import triton
import triton.language as tl
import triton.testing

from gpudoctor.kernels import nf4

SHAPES = [(2048, 8192), (1024, 4096), (4096, 14336), (4096, 4096), (14336, 4096)]
# Model shapes outside the set above (issue 18): phi-2's MLP (2560x10240, where the kernel ran at
# 0.73 of a copy), and small, launch-bound ones (odd sizes, a LoRA-sized and a tiny projection).
EXTRA_SHAPES = [(2560, 10240), (10240, 2560), (4097, 37), (256, 1024), (1000, 1000), (2560, 2560)]
# Quantizer bit-identity against bitsandbytes for fp32 input (where 1-4 bytes used to differ).
QUANTIZER_SHAPES = [(4096, 4096), (2560, 10240), (4096, 8192)]
BYTES_PER_ELEMENT = 0.5 + 1 / 64 + 2  # = 2.515625, the 2.516
# Launch variants timed with --sweep (private knobs of dequantize_nf4), the shipped default first.
SWEEP = [
    {},
    # One-tile kernel, other tile sizes and warp counts (the 2560x10240 gap).
    {"_programs_per_sm": 0, "_elements_per_program": 4096},
    {"_programs_per_sm": 0, "_elements_per_program": 8192},
    {"_programs_per_sm": 0, "_elements_per_program": 4096, "_num_warps": 8},
    {"_programs_per_sm": 0, "_elements_per_program": 1024},
    # The shipped one-tile-per-program kernel spelled out (so a run whose default differs still
    # times it), and with an L1 evict-first hint on the packed loads.
    {"_programs_per_sm": 0, "_elements_per_program": 2048},
    {"_programs_per_sm": 0, "_elements_per_program": 2048, "_packed_evict": "evict_first"},
    # One 8-byte gather per packed byte from a 256-entry pair table (21% fewer instructions,
    # measured slower: the 2 KiB table spans 16 L1 lines where the 16-entry one fits in one).
    {"_pair_lut": True},
    # The persistent, double-buffered kernel (slower on the H200, see docs/benchmarks.md): tile
    # size x programs per SM (counts chosen so all programs fit on an SM at once), warps, hints.
    {"_programs_per_sm": 8, "_elements_per_program": 2048},
    {"_programs_per_sm": 12, "_elements_per_program": 2048},
    {"_programs_per_sm": 16, "_elements_per_program": 1024},
    {"_programs_per_sm": 4, "_elements_per_program": 4096},
    {"_programs_per_sm": 6, "_elements_per_program": 4096},
    {"_programs_per_sm": 8, "_elements_per_program": 4096},
    {"_programs_per_sm": 10, "_elements_per_program": 4096},
    {"_programs_per_sm": 8, "_elements_per_program": 4096, "_packed_evict": "evict_first"},
    {"_programs_per_sm": 8, "_elements_per_program": 4096, "_store_cache": ".cs"},
    {"_programs_per_sm": 4, "_elements_per_program": 8192, "_num_warps": 8},
    {"_programs_per_sm": 4, "_elements_per_program": 8192, "_num_warps": 4},
]


@triton.jit
def _store_only_kernel(out_ptr, n_elements, BLOCK: tl.constexpr):
    # The output-write half of the dequantizer alone (same tile, same 16-byte stores): a floor.
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.full([BLOCK], 1.0, out_ptr.dtype.element_ty), mask=offsets < n_elements)


@triton.jit
def _empty_kernel(out_ptr):
    pass


def empty_launch() -> dict:
    """The floor for launch-bound shapes: an empty Triton kernel, timed by both harnesses."""
    out = torch.empty(1, device="cuda")

    def run():
        _empty_kernel[(1,)](out)

    return {"do_bench_us": median_us(run), "read_flush_us": read_flush_us(run)}


def quantizer_vs_bitsandbytes(bnb, shape) -> dict:
    """Packed bytes that differ from bitsandbytes for fp32 input: with the approximate reciprocal
    (the shipped quantizer) and with the correctly rounded one (the control)."""
    weight = torch.randn(shape, device="cuda", dtype=torch.float32)
    packed_ref, state_ref = bnb.functional.quantize_4bit(weight, quant_type="nf4", compress_statistics=True)
    row = {"shape": list(shape), "dtype": "float32"}
    for label, exact in (("approx_reciprocal", False), ("exact_reciprocal", True)):
        packed, state = nf4.quantize_nf4(weight, _exact_reciprocal=exact)
        row[label] = {"differing_packed_bytes": int((packed != packed_ref).sum()),
                      "differing_absmax_codes": int((state.absmax != state_ref.absmax).sum())}
        if not exact:
            row["differing_elements"] = differing_elements(weight, packed, packed_ref)
    return row


def differing_elements(weight, packed, packed_ref, limit: int = 12) -> list[dict]:
    """Each element whose 4-bit code differs: its value, block absmax, both reciprocals, the
    normalized value each gives, both codes and the nearest NF4 threshold (in ulps)."""
    flat = weight.reshape(-1).float()
    thresholds = torch.tensor(nf4.NF4_THRESHOLDS, dtype=torch.float32, device=flat.device)
    rows = []
    for byte in torch.nonzero(packed.reshape(-1) != packed_ref.reshape(-1)).reshape(-1)[:limit].tolist():
        ours, theirs = int(packed.reshape(-1)[byte]), int(packed_ref.reshape(-1)[byte])
        for nibble, shift in ((0, 4), (1, 0)):
            if (ours >> shift) & 15 == (theirs >> shift) & 15:
                continue
            index = 2 * byte + nibble
            x = flat[index]
            block = flat[(index // 64) * 64:(index // 64) * 64 + 64]
            absmax = block.abs().max().reshape(1)
            approx = nf4._approx_reciprocal(absmax)
            exact = 1.0 / absmax
            normalized = {"x_times_approx": float((x * approx)[0]), "x_times_exact": float((x * exact)[0]),
                          "x_div_absmax": float((x / absmax)[0]), "float64": float(x.double() / absmax.double()[0])}
            nearest = thresholds[(thresholds - normalized["x_times_approx"]).abs().argmin()]
            ulp = float(torch.nextafter(nearest, torch.tensor(2.0, device=nearest.device)) - nearest)
            rows.append({"element": index, "x": float(x), "x_hex": float(x).hex(), "absmax": float(absmax[0]),
                         "reciprocal_approx_hex": float(approx[0]).hex(), "reciprocal_exact_hex": float(exact[0]).hex(),
                         "normalized": normalized, "nearest_threshold": float(nearest),
                         "distance_ulps": (normalized["x_times_approx"] - float(nearest)) / ulp,
                         "code_ours": (ours >> shift) & 15, "code_bitsandbytes": (theirs >> shift) & 15})
    return rows


def store_only(out: torch.Tensor):
    n = out.numel()
    return lambda: _store_only_kernel[(triton.cdiv(n, 2048),)](out, n, BLOCK=2048, num_warps=4)


def median_us(fn) -> float:
    return triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median") * 1e3


_READ_FLUSH: list = []


def read_flush_us(fn, reps: int = 200) -> float:
    """Median microseconds of fn() with L2 emptied by *reading* 256 MB before each call.
    do_bench empties it by zeroing 256 MB, which leaves the L2 full of dirty lines that the
    timed call must write back to DRAM (bench/nf4_diagnose.py measures that cost: a copy of
    4096x14336's bytes takes 39-40 us after a zeroing flush, 36.4 us after a reading one)."""
    if not _READ_FLUSH:
        _READ_FLUSH.append(torch.empty(64_000_000, dtype=torch.int32, device="cuda"))
        _READ_FLUSH.append(torch.empty((), dtype=torch.int64, device="cuda"))
    cache, sink = _READ_FLUSH
    for _ in range(10):
        torch.sum(cache, dim=0, out=sink)
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for start, end in zip(starts, ends):
        torch.sum(cache, dim=0, out=sink)
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(start.elapsed_time(end) for start, end in zip(starts, ends)) * 1e3


def copy_same_bytes(n_elements: int) -> dict:
    """A device-to-device copy moving as many bytes (read + written) as the dequantization of
    n_elements, timed both ways: the memory floor for this size under the same harness."""
    src = torch.empty(int(n_elements * BYTES_PER_ELEMENT / 2), dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return {"do_bench_us": median_us(lambda: dst.copy_(src)), "read_flush_us": read_flush_us(lambda: dst.copy_(src))}


def copy_bandwidth_tbs() -> dict:
    n = 1 << 30  # 1 GiB each way: far larger than the 50 MB L2
    src = torch.randint(0, 256, (n,), dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    t = median_us(lambda: dst.copy_(src))
    return {"bytes_each_way": n, "median_us": t, "tb_per_s": 2 * n / (t * 1e-6) / 1e12}


def environment() -> dict:
    info = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "triton": triton.__version__,
        "python": platform.python_version(),
    }
    try:
        info["driver"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as error:
        info["driver"] = f"unknown ({error})"
    try:
        import bitsandbytes

        info["bitsandbytes"] = bitsandbytes.__version__
    except Exception as error:  # noqa: BLE001 - report why, carry on without it
        info["bitsandbytes"] = f"not importable ({error!r})"
    return info


def unsloth_style(bnb, packed, state, out, out_absmax):
    """Unsloth's fast_dequantize path: bitsandbytes' C entry points (names and argument order as
    bitsandbytes 0.50 backends/cuda/ops.py declares them: code, A, absmax, out, blocksize, n,
    stream) called directly into preallocated buffers."""
    lib = bnb.cextension.lib
    dequant_absmax = lib.cdequantize_blockwise_fp32
    dequant_weight = lib.cdequantize_blockwise_bf16_nf4 if out.dtype == torch.bfloat16 else lib.cdequantize_blockwise_fp16_nf4
    state2 = state.state2
    pointers = [ctypes.c_void_p(t.data_ptr()) for t in (state2.code, state.absmax, state2.absmax, out_absmax, packed, out)]
    code2_p, qabsmax_p, absmax2_p, out_absmax_p, packed_p, out_p = pointers
    n_absmax = ctypes.c_int32(state.absmax.numel())
    n = ctypes.c_int32(out.numel())
    blocksize2 = ctypes.c_int32(state2.blocksize)
    blocksize = ctypes.c_int32(state.blocksize)
    offset = state.offset

    def run():
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        dequant_absmax(code2_p, qabsmax_p, absmax2_p, out_absmax_p, blocksize2, n_absmax, stream)
        out_absmax.add_(offset)
        dequant_weight(None, packed_p, out_absmax_p, out_p, blocksize, n, stream)

    return run


def bench_shape(shape, bnb, copy_tbs, sweep: bool) -> dict:
    print(f"shape {shape}", file=sys.stderr, flush=True)
    rows, cols = shape
    n = rows * cols
    weight = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    if bnb is not None:
        packed, state = bnb.functional.quantize_4bit(weight, quant_type="nf4", compress_statistics=True)
    else:
        packed, state = nf4.quantize_nf4(weight)
    del weight
    result = {"shape": list(shape), "elements": n, "bytes_moved": n * BYTES_PER_ELEMENT,
              "copy_same_bytes": copy_same_bytes(n)}
    for dtype in (torch.bfloat16, torch.float16):
        name = "bf16" if dtype == torch.bfloat16 else "fp16"
        out = torch.empty(shape, device="cuda", dtype=dtype)
        ours = median_us(lambda: nf4.dequantize_nf4(packed, state, dtype, out=out))
        entry = {"gpudoctor_us": ours, "gpudoctor_tb_per_s": n * BYTES_PER_ELEMENT / (ours * 1e-6) / 1e12}
        entry["fraction_of_copy"] = entry["gpudoctor_tb_per_s"] / copy_tbs
        entry["gpudoctor_read_flush_us"] = read_flush_us(lambda: nf4.dequantize_nf4(packed, state, dtype, out=out))
        if bnb is not None:
            state.dtype = dtype
            expected = bnb.functional.dequantize_4bit(packed, state, quant_type="nf4")
            out.fill_(float("nan"))
            nf4.dequantize_nf4(packed, state, dtype, out=out)
            entry["bit_exact_vs_bitsandbytes"] = bool(torch.equal(out.view(torch.int16), expected.view(torch.int16)))
            entry["bitsandbytes_us"] = median_us(lambda: bnb.functional.dequantize_4bit(packed, state, quant_type="nf4"))
            entry["bitsandbytes_read_flush_us"] = read_flush_us(
                lambda: bnb.functional.dequantize_4bit(packed, state, quant_type="nf4"))
            out_absmax = torch.empty(state.absmax.numel(), device="cuda", dtype=torch.float32)
            reference_out = torch.empty_like(out)
            unsloth = unsloth_style(bnb, packed, state, reference_out, out_absmax)
            unsloth()
            entry["unsloth_style_bit_exact_vs_bitsandbytes"] = bool(torch.equal(reference_out.view(torch.int16), expected.view(torch.int16)))
            entry["unsloth_style_us"] = median_us(unsloth)
            entry["speedup_vs_bitsandbytes"] = entry["bitsandbytes_us"] / ours
            entry["speedup_vs_unsloth_style"] = entry["unsloth_style_us"] / ours
        if sweep and dtype == torch.bfloat16:
            entry["sweep"] = []
            for knobs in SWEEP:
                # Every variant is checked bit for bit against the default before it is timed.
                try:
                    out.fill_(float("nan"))
                    nf4.dequantize_nf4(packed, state, dtype, out=out, **knobs)
                    same = bool(torch.equal(out.view(torch.int16), nf4.dequantize_nf4(packed, state, dtype).view(torch.int16)))
                    t = median_us(lambda: nf4.dequantize_nf4(packed, state, dtype, out=out, **knobs))
                    entry["sweep"].append({"knobs": knobs, "us": t, "same_output_as_default": same})
                except Exception as error:  # noqa: BLE001 - a variant that fails to compile is a result too
                    entry["sweep"].append({"knobs": knobs, "us": float("inf"), "error": repr(error)[:300]})
            # What writing the output alone costs: a floor for any dequantizer of this shape.
            entry["write_only_fill_us"] = median_us(lambda: out.fill_(1.0))
            entry["write_only_triton_us"] = median_us(store_only(out))
        result[name] = entry
    return result


def knob_label(knobs: dict) -> str:
    """Short name of a sweep variant, e.g. 'k8,t4096,w4' (programs per SM, tile, warps)."""
    if not knobs:
        return "default"
    short = {"_programs_per_sm": "k", "_elements_per_program": "t", "_num_warps": "w", "_packed_evict": "ld:",
             "_store_cache": "st:"}
    return ",".join(f"{short.get(k, k)}{v}" for k, v in knobs.items())


def markdown_table(results: list[dict], copy: dict) -> str:
    lines = [
        f"copy bandwidth (1 GiB d2d, read+write): {copy['tb_per_s']:.2f} TB/s",
        "",
        "| shape | gpudoctor bf16 (us) | TB/s | % of copy | bitsandbytes (us) | speedup | Unsloth-style (us) | speedup | gpudoctor fp16 (us) | bit-exact bf16/fp16 |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in results:
        b, h = r["bf16"], r["fp16"]
        bnb_cells = (
            f"{b['bitsandbytes_us']:.1f} | {b['speedup_vs_bitsandbytes']:.2f}x | "
            f"{b['unsloth_style_us']:.1f} | {b['speedup_vs_unsloth_style']:.2f}x"
            if "bitsandbytes_us" in b else "n/a | n/a | n/a | n/a"
        )
        exact = f"{b.get('bit_exact_vs_bitsandbytes', 'n/a')}/{h.get('bit_exact_vs_bitsandbytes', 'n/a')}"
        lines.append(
            f"| {r['shape'][0]}x{r['shape'][1]} | {b['gpudoctor_us']:.1f} | {b['gpudoctor_tb_per_s']:.2f} | "
            f"{100 * b['fraction_of_copy']:.0f}% | {bnb_cells} | {h['gpudoctor_us']:.1f} | {exact} |"
        )
    lines += [
        "",
        "Same shapes, bf16, against a copy of the same bytes; do_bench (zeroing flush) / read flush:",
        "",
        "| shape | gpudoctor (us) | bitsandbytes (us) | speedup | copy of the same bytes (us) | gpudoctor / copy time |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        b, c = r["bf16"], r["copy_same_bytes"]
        bnb = (b.get("bitsandbytes_us"), b.get("bitsandbytes_read_flush_us"))
        bnb_cells = (f"{bnb[0]:.1f} / {bnb[1]:.1f} | {bnb[0] / b['gpudoctor_us']:.2f}x / "
                     f"{bnb[1] / b['gpudoctor_read_flush_us']:.2f}x") if bnb[0] else "n/a | n/a"
        lines.append(
            f"| {r['shape'][0]}x{r['shape'][1]} | {b['gpudoctor_us']:.1f} / {b['gpudoctor_read_flush_us']:.1f} | "
            f"{bnb_cells} | {c['do_bench_us']:.1f} / {c['read_flush_us']:.1f} | "
            f"{b['gpudoctor_us'] / c['do_bench_us']:.2f} / {b['gpudoctor_read_flush_us'] / c['read_flush_us']:.2f} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="path of the JSON results file")
    parser.add_argument("--sweep", action="store_true", help="also time other tile sizes / warp counts")
    parser.add_argument("--shapes", choices=("all", "extra"), default="all",
                        help="extra: only the issue-18 shapes (phi-2's MLP and small ones)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench/nf4.py needs a CUDA GPU", file=sys.stderr)
        return 2
    try:
        import bitsandbytes as bnb
        import bitsandbytes.functional  # noqa: F401
    except Exception as error:  # noqa: BLE001
        print(f"bitsandbytes not importable ({error!r}): timing gpudoctor alone", file=sys.stderr)
        bnb = None
    env = environment()
    copy = copy_bandwidth_tbs()
    shapes = EXTRA_SHAPES if args.shapes == "extra" else SHAPES + EXTRA_SHAPES
    results = [bench_shape(shape, bnb, copy["tb_per_s"], args.sweep) for shape in shapes]
    quantizer = [quantizer_vs_bitsandbytes(bnb, shape) for shape in QUANTIZER_SHAPES] if bnb else []
    report = {"environment": env, "copy_bandwidth": copy, "bytes_per_element": BYTES_PER_ELEMENT,
              "empty_launch": empty_launch(), "quantizer_fp32_vs_bitsandbytes": quantizer,
              "timing": "triton.testing.do_bench median, L2 flushed (zeroed) before each call; *_read_flush_us: median between CUDA events, 256 MB read before each call", "results": results}
    with open(args.out, "w") as handle:
        json.dump(report, handle, indent=2)
    if args.sweep:
        for r in results:
            best = min(r["bf16"]["sweep"], key=lambda s: s["us"])
            print(f"sweep {r['shape']} (write-only: torch fill_ {r['bf16']['write_only_fill_us']:.1f} us, "
                  f"Triton stores {r['bf16']['write_only_triton_us']:.1f} us): "
                  + ", ".join(f"{knob_label(s['knobs'])}={s['us']:.1f}{'' if s.get('same_output_as_default', False) else ' (DIFFERS/ERROR)'}"
                              for s in r["bf16"]["sweep"]) + f"  best={knob_label(best['knobs'])}")
    print(json.dumps(env))
    print("empty Triton kernel launch:", json.dumps(report["empty_launch"]))
    for row in quantizer:
        print("quantizer fp32 vs bitsandbytes:", json.dumps(row))
    print(markdown_table(results, copy))
    return 0


if __name__ == "__main__":
    sys.exit(main())
