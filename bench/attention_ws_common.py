"""What the two warp-specialization probes share (bench/attention_ws_probe.py, the forward, and
bench/attention_ws_backward_probe.py, dK/dV): the tensor-descriptor helper of their kernels, the
compile for sm90 without a GPU and its ptxas figures, the --compile-only table, the interpreter
re-run, and the GPU mode's machinery (the Hopper check, the environment, the watchdog, the rows'
JSON, a row's failure). Imported from the script's folder, as bench/attention_ptx_digest.py
imports bench/attention_ncu.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time

import triton
import triton.language as tl

LOG2_E = 1.4426950408889634
# sm90's largest shared memory one block can opt into (227 KB): a kernel asking for more compiles
# and then fails to launch with OutOfResources.
SM90_MAX_SHARED = 232448
# Triton picks its interpreter when @triton.jit runs; the kernels' loops must know it too.
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
# A row's error once a launch has left the CUDA context unusable.
BROKEN = "not run: an earlier launch broke the CUDA context"


@triton.jit
def head_descriptor(base, rows, stride_row, head_dim, BLOCK_ROWS: tl.constexpr, BLOCK_D: tl.constexpr):
    # One head's (rows x head_dim) matrix; a block reaching past head_dim or the last row loads
    # zeros and stores clipped, in the copy engine.
    return tl.make_tensor_descriptor(base, shape=[rows, head_dim], strides=[stride_row, 1],
                                     block_shape=[BLOCK_ROWS, BLOCK_D])


def block_width(head_dim: int) -> int:
    return 64 if head_dim <= 64 else 128 if head_dim <= 128 else 256


def one_line(text) -> str:
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    return lines[-1][:400] if lines else ""


# ----------------------------------------------------------------------------------------------
# --compile-only: sm90 without a GPU
# ----------------------------------------------------------------------------------------------


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
                raise RuntimeError(f"{one_line(error)}: {reasons[0][:300]}") from error
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
        row["ptxas_error"] = f"{type(error).__name__}: {one_line(error)}"
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
        raise RuntimeError(one_line(info) or "ptxas said nothing")
    return {"registers": int(registers.group(1)), "spill_stores": int(spills.group(1)),
            "spill_loads": int(spills.group(2))}


def compile_report(compile_sm90, variant, block_d: int, ttgir_dir: str | None = None,
                   ttgir_prefix: str = "") -> dict:
    """One --compile-only row: ``compile_sm90(variant, block_d)``'s figures, or its error."""
    row = {"block_d": block_d, "variant": variant.label, **dataclasses.asdict(variant)}
    started = time.perf_counter()
    try:
        compiled = compile_sm90(variant, block_d)
    except Exception as error:  # noqa: BLE001 - the pass's failure is the row's result
        row["error"] = f"{type(error).__name__}: {one_line(error)}"
        return row
    row["compile_s"] = round(time.perf_counter() - started, 2)
    row.update(compiled_figures(compiled))
    if ttgir_dir:
        os.makedirs(ttgir_dir, exist_ok=True)
        name = re.sub(r"[^\w]+", "_", f"{ttgir_prefix}hd{block_d}_{variant.label}")
        with open(os.path.join(ttgir_dir, name + ".ttgir"), "w") as handle:
            handle.write(compiled.asm["ttgir"])
    return row


def compile_only_table(compile_sm90, entries, heading: str, label_width: int,
                       ttgir_dir: str | None, json_path: str | None, ttgir_prefix: str = "") -> int:
    """--compile-only: compiles each (block_d, variant) of ``entries`` and prints a row for it."""
    if INTERPRETED:
        print("error: --compile-only needs TRITON_INTERPRET unset (the interpreter compiles nothing)")
        return 2
    print(f"sm90, compiled on this machine (no GPU), Triton {triton.__version__}, {heading}")
    print(f"{'block_d':>7}  {'variant':<{label_width}}{'result':<9}{'warps':>6}  {'setmaxnreg':<21}"
          f"{'smem B':>8}{'regs':>6}{'spill st/ld':>13}{'compile s':>10}")
    rows = []
    for block_d, variant in entries:
        row = compile_report(compile_sm90, variant, block_d, ttgir_dir, ttgir_prefix)
        rows.append(row)
        if "error" in row:
            print(f"{block_d:>7}  {variant.label:<{label_width}}failed   {row['error']}", flush=True)
            continue
        registers = (f"{row['registers']:>6}{row['spill_stores']:>7}/{row['spill_loads']:<5}"
                     if "registers" in row else f"  ptxas failed: {row['ptxas_error']}")
        note = "  over sm90's 227 KB: cannot launch" if row["shared"] > SM90_MAX_SHARED else ""
        print(f"{block_d:>7}  {variant.label:<{label_width}}{'compiled':<9}{row['total_warps']:>6}  "
              f"{row['setmaxnreg'] or '-':<21}{row['shared']:>8}{registers}"
              f"{row['compile_s']:>10}{note}", flush=True)
    if json_path:
        write_json(json_path, {"mode": "compile-only", "triton": triton.__version__, "rows": rows})
    return 0


# ----------------------------------------------------------------------------------------------
# --interpret-check
# ----------------------------------------------------------------------------------------------


def rerun_interpreted(script: str) -> int:
    """The interpreter is chosen when @triton.jit runs, i.e. at import: start ``script``'s
    --interpret-check over with it, and return its exit status."""
    return subprocess.run([sys.executable, os.path.abspath(script), "--interpret-check"],
                          env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=1800).returncode


# ----------------------------------------------------------------------------------------------
# GPU mode
# ----------------------------------------------------------------------------------------------


def hopper_ready() -> bool:
    """On an sm90 GPU: float32 matmuls without TF32 (the references are float32) and an allocator
    for the device-side descriptors' per-launch scratch buffer. Elsewhere: says so, False."""
    import torch

    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        print("needs a Hopper (sm90) GPU; use --compile-only or --interpret-check here")
        return False
    torch.backends.cuda.matmul.allow_tf32 = False
    triton.set_allocator(scratch)
    return True


def scratch(size: int, alignment: int, stream):
    import torch

    return torch.empty(size, dtype=torch.int8, device="cuda")


def time_ms(run) -> float:
    return triton.testing.do_bench(run, warmup=25, rep=100, return_mode="median")


def is_fatal(error: Exception) -> bool:
    # After these the CUDA context is unusable: every later launch would fail the same way.
    text = str(error).lower()
    return "illegal" in text or "unspecified launch failure" in text or "misaligned" in text


def attempt(row: dict, work) -> bool:
    """Runs ``work()``; an exception becomes the row's error. True when that error left the CUDA
    context unusable."""
    try:
        work()
    except Exception as error:  # noqa: BLE001 - a backend refusing the shape, a failed compile or launch is a row
        row["error"] = f"{type(error).__name__}: {one_line(error)}"
        return is_fatal(error)
    return False


def chosen_shapes(table, names: list[str] | None):
    """The common fields of the rows of each shape (name, batch, heads, seq, head_dim, causal) in
    ``table``; only those in ``names`` when given."""
    for name, batch, heads, seq, head_dim, causal in table:
        if not names or name in names:
            yield {"shape": name, "batch": batch, "heads": heads, "seq": seq, "head_dim": head_dim,
                   "causal": causal}


def cuda_inputs(count: int, base: dict):
    """``count`` bf16 (batch, heads, seq, head_dim) tensors of a shape's ``base`` fields, the same
    on every run (seeded by seq + head_dim)."""
    import torch

    generator = torch.Generator(device="cuda").manual_seed(base["seq"] + base["head_dim"])
    return tuple(torch.randn(base["batch"], base["heads"], base["seq"], base["head_dim"], device="cuda",
                             dtype=torch.bfloat16, generator=generator) for _ in range(count))


def gqa_inputs(batch, heads, kv_heads, seq_q, seq_k, head_dim, dtype, seed, grad: bool = False):
    """q (batch, heads, seq_q, head_dim), k and v (batch, kv_heads, seq_k, head_dim), and with
    ``grad`` a gradient shaped like q, on the GPU, drawn in that order from a generator seeded
    with ``seed``."""
    import torch

    generator = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(batch, heads, seq_q, head_dim, device="cuda", dtype=dtype, generator=generator)
    k, v = (torch.randn(batch, kv_heads, seq_k, head_dim, device="cuda", dtype=dtype, generator=generator)
            for _ in range(2))
    if not grad:
        return q, k, v
    return q, k, v, torch.randn(batch, heads, seq_q, head_dim, device="cuda", dtype=dtype, generator=generator)


def describe_environment() -> dict:
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


def environment_line(environment: dict) -> str:
    return (f"{environment['gpu']}, driver {environment['driver']}, torch {environment['torch']}, "
            f"Triton {environment['triton']}, bf16")


def write_json(path: str, payload: dict) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as handle:
        json.dump(payload, handle, indent=1)


class Watchdog:
    """A kernel that deadlocks (a warp-specialized loop whose barriers never complete) would
    hang the run past the device's time limit with nothing written: after ``limit_s`` on one
    row this writes the rows so far, names the row, and ends the process."""

    def __init__(self, limit_s: float, save):
        import threading

        self.limit_s, self.save, self.row, self.since = limit_s, save, None, time.monotonic()
        threading.Thread(target=self._watch, daemon=True).start()

    def start(self, row: dict | None) -> None:
        self.row, self.since = row, time.monotonic()

    def _watch(self) -> None:
        while True:
            time.sleep(1.0)
            if self.row is not None and time.monotonic() - self.since > self.limit_s:
                self.row["error"] = f"hung: no answer in {self.limit_s:.0f} s (process ended)"
                print(f"{self.row['shape']:<13}{self.row['variant']:<40}{self.row['error']}", flush=True)
                self.save()
                os._exit(3)


class RunLog:
    """The GPU mode's rows and their JSON (``environment``, ``fields``, ``rows``, ``wall_s``),
    written as they come by ``save`` so that a crash or the watchdog keeps the rows so far."""

    def __init__(self, json_path: str | None, started: float, row_limit_s: float, **fields):
        self.json_path, self.started = json_path, started
        self.environment = describe_environment()
        self.rows: list[dict] = []
        self.payload = {"environment": self.environment, **fields, "rows": self.rows}
        self.watchdog = Watchdog(row_limit_s, self.save)

    def save(self) -> None:
        self.payload["wall_s"] = round(time.perf_counter() - self.started, 1)
        if self.json_path:
            write_json(self.json_path, self.payload)

    def skip_reason(self, broken: str | None, budget_s: float) -> str | None:
        """Why a row or shape is not started: the CUDA context is broken, or the budget spent."""
        if broken:
            return broken
        if time.perf_counter() - self.started > budget_s:
            return f"not run: past the {budget_s:.0f} s budget"
        return None

    def measure(self, row: dict, work) -> bool:
        """``attempt(row, work)`` under the watchdog: True when the CUDA context is left broken."""
        self.watchdog.start(row)
        try:
            return attempt(row, work)
        finally:
            self.watchdog.start(None)

    def finish(self) -> int:
        self.save()
        print(f"total {self.payload['wall_s']} s")
        return 0


# ----------------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------------


def probe_main(doc: str, shape_names: list[str], budget_s: float, budget_help: str,
               compile_only_main, interpret_check_main, gpu_main) -> int:
    """The probes' shared command line: --compile-only, --interpret-check or the GPU mode."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(doc.splitlines()[-10:]))
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--compile-only", action="store_true",
                      help="no GPU: compile each variant for sm90 and report warps, registers, spills")
    mode.add_argument("--interpret-check", action="store_true",
                      help="no GPU: check the kernel's math in Triton's interpreter")
    parser.add_argument("--ttgir", metavar="DIR", help="with --compile-only: write each variant's TTGIR here")
    parser.add_argument("--json", metavar="PATH", help="write the rows as JSON")
    parser.add_argument("--budget-s", type=float, default=budget_s, help=budget_help)
    parser.add_argument("--row-limit-s", type=float, default=60.0,
                        help="GPU mode: a row (compile, check, timing) taking longer is taken for a "
                             "hang: the rows so far are written and the process ends (default 60)")
    parser.add_argument("--shapes", nargs="+", choices=shape_names, help="GPU mode: only these shapes")
    args = parser.parse_args()
    if args.ttgir and not args.compile_only:
        parser.error("--ttgir goes with --compile-only")
    if args.compile_only:
        return compile_only_main(args.ttgir, args.json)
    if args.interpret_check:
        return interpret_check_main()
    return gpu_main(args.json, args.budget_s, args.row_limit_s, args.shapes)
