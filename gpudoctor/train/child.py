"""The child process: ``python -m gpudoctor.train --json --preset X [--compile] [--peft]``.

Runs every stage on real kernels and prints one JSON document (protocol.py). The parent
(runner.py) launches it with a timeout, so a segfault, an illegal memory access or a hang here
costs this process, never the doctor.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import sys
import time

from .presets import CPU_PRESET, DEFAULT_GPU_PRESET, PRESETS
from .protocol import INSTALL_HINT, RESULT_SCHEMA, emit

_STARTED = time.perf_counter()


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m gpudoctor.train",
                                     description="gpudoctor's training pass (normally started by `gpudoctor check --train`)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON (what the parent reads)")
    parser.add_argument("--preset", choices=tuple(PRESETS), default=None,
                        help=f"model shapes (default: {DEFAULT_GPU_PRESET} on a GPU, {CPU_PRESET} without)")
    parser.add_argument("--compile", action="store_true", help="also run the step under torch.compile")
    parser.add_argument("--compile-backend", default=None, help="torch.compile backend (default: inductor on a GPU, aot_eager in interpreter mode)")
    parser.add_argument("--peft", action="store_true", help="also build the adapters with PEFT's LoraConfig")
    parser.add_argument("--lora-dropout", type=float, default=0.0, help="LoRA dropout for --peft (Unsloth wants 0)")
    parser.add_argument("--lora-bias", default="none", help="LoRA bias for --peft (Unsloth wants none)")
    parser.add_argument("--steps", type=int, default=None, help="training steps (default: the preset's)")
    parser.add_argument("--lr", type=float, default=None, help="AdamW learning rate (default: the preset's)")
    parser.add_argument("--skip-backends", action="store_true", help="skip the backend matrix")
    parser.add_argument("--full-matrix", action="store_true",
                        help="every backend (bitsandbytes and flash-attn in side processes, all SDPA backends, eager) "
                             "and a cold-cache compile; the default runs gpudoctor's kernels against the float64 "
                             "reference beside one fast torch backend each")
    parser.add_argument("--probe", metavar="CAPABILITY:BACKEND", help="only probe one backend (nf4:bitsandbytes, "
                        "attention:flash-attn) and print its matrix row; the pass runs third-party backends this way")
    parser.add_argument("--wait-for-go", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def _versions(torch, triton) -> dict:
    versions = {"python": platform.python_version(), "torch": torch.__version__, "triton": triton.__version__,
                "cuda": torch.version.cuda}
    from importlib import metadata

    for name in ("bitsandbytes", "flash-attn", "peft", "transformers"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return versions


def _device_info(torch) -> dict:
    if not torch.cuda.is_available():
        return {"type": "cpu", "name": platform.processor() or platform.machine()}
    props = torch.cuda.get_device_properties(0)
    return {"type": "cuda", "name": props.name, "capability": list(torch.cuda.get_device_capability(0)),
            "memory_bytes": props.total_memory}


def choose_preset(requested: str | None, on_gpu: bool, capability) -> tuple[str, str]:
    """(preset, note): interpreter mode always runs tiny; a bf16 preset on a pre-Ampere GPU runs
    its fp16 twin, since bf16 needs sm80."""
    if not on_gpu:
        note = "" if requested in (None, CPU_PRESET) else f"no GPU: ran {CPU_PRESET} instead of {requested}"
        return CPU_PRESET, note
    name = requested or DEFAULT_GPU_PRESET
    if PRESETS[name].dtype == "bfloat16" and capability and tuple(capability) < (8, 0):
        return "turing", f"sm{capability[0]}{capability[1]} has no bf16: ran turing (fp16) instead of {name}"
    return name, ""


def run(args) -> dict:
    result: dict = {"schema": RESULT_SCHEMA, "stages": []}
    from . import side_probes

    # Third-party backends import and run in their own processes while this one works: started
    # before torch's own import here, so theirs runs in parallel with it.
    full = args.full_matrix and not args.skip_backends
    side = side_probes.start(args.preset, side_probes.probably_gpu()) if full else {}
    emit("stage-start", id="import", title="import torch and triton")
    start = time.perf_counter()
    try:
        import torch
    except ImportError as exc:
        return _missing_extra(result, "torch", exc)
    on_gpu = torch.cuda.is_available()
    if not on_gpu:
        # Must precede the first @triton.jit definition, i.e. importing gpudoctor.kernels.
        os.environ["TRITON_INTERPRET"] = "1"
    try:
        import triton
    except ImportError as exc:
        return _missing_extra(result, "triton", exc)
    import_ms = round((time.perf_counter() - start) * 1000, 1)
    emit("stage-end", id="import", title="import torch and triton", status="pass", duration_ms=import_ms)

    device_info = _device_info(torch)
    preset_name, note = choose_preset(args.preset, on_gpu, device_info.get("capability"))
    preset = PRESETS[preset_name]
    device = "cuda" if on_gpu else "cpu"
    dtype = getattr(torch, preset.dtype)
    result.update(mode="gpu" if on_gpu else "interpreter", preset=preset_name, preset_note=note,
                  preset_shape={k: getattr(preset, k) for k in ("heads", "kv_heads", "head_dim", "layers", "ffn",
                                                                "seq", "batch", "steps", "dtype", "lora_rank")},
                  device=device_info, versions=_versions(torch, triton),
                  timings_ms={"process_to_import": round((start - _STARTED) * 1000, 1), "import_torch_triton": import_ms})
    emit("info", mode=result["mode"], preset=preset_name, device=device_info.get("name"), note=note)

    from . import jit, loop
    from .stages import StageRunner

    if on_gpu and not side and full:
        side = side_probes.start(preset_name, on_gpu)  # the device-node guess missed
    stages = StageRunner()
    if on_gpu:
        # The CUDA context (and torch's allocator) on its own line: otherwise the first stage to
        # touch the GPU would silently include it, e.g. in the "cold compile" time.
        stages.run("cuda-init", "create the CUDA context", lambda: _cuda_init(torch))
    stages.run("triton-jit", "Triton JIT: build a launcher, compile and launch a kernel (cold and warm cache)",
               lambda: jit.check(device, dtype, interpreted=not on_gpu, cold_compile=full))

    def training():
        build_start = time.perf_counter()
        model = loop.build_model(preset, device)
        build_ms = (time.perf_counter() - build_start) * 1000
        trained = loop.train(model, preset, device, steps=args.steps, lr=args.lr)
        detail = trained.to_json()
        detail["build_model_ms"] = round(build_ms, 1)  # launches only; the GPU work lands in checksum_ms
        steps = trained.step_ms
        if len(steps) > 2:
            detail["first_step_overhead_ms"] = round(steps[0] - statistics.median(steps[1:]), 1)
            detail["median_step_ms"] = round(statistics.median(steps[1:]), 3)
        return detail

    stages.run("training", f"QLoRA training, {preset.steps if args.steps is None else args.steps} steps "
               f"(NF4 base + Triton attention)", training, problems=lambda d: d["problems"])

    if not args.skip_backends:
        from . import matrix_attention, matrix_nf4
        from .backend import fastest

        # The main pass times its own backends first; a side probe times its kernels only after
        # `go` (sent by collect), so the two never time each other's kernels. Attention runs
        # first: its ~1.7 s overlaps the side probes still importing their libraries.
        # Default: gpudoctor's kernels against the float64 reference beside one fast torch backend
        # each (about 0.2 s warm); --full-matrix: every backend (issue 18: the full matrix cost
        # 2.3-2.9 s for attention and 0.8-3.5 s for NF4, mostly bitsandbytes' import).
        attention_order = matrix_attention.BACKENDS if full else matrix_attention.QUICK_BACKENDS
        nf4_order = matrix_nf4.BACKENDS if full else matrix_nf4.QUICK_BACKENDS

        def attention_backends():
            own = matrix_attention.probe(preset.batch, preset.heads, preset.kv_heads, preset.seq,
                                         preset.head_dim, dtype, device, backends=_own(attention_order, side))
            rows = _in_order(own, side_probes.collect(side, "attention"), attention_order)
            return _matrix_detail(rows, matrix_attention.BACKENDS, fastest)

        def nf4_backends():
            own = matrix_nf4.probe(preset.ffn, preset.dim, dtype, device, backends=_own(nf4_order, side))
            rows = _in_order(own, side_probes.collect(side, "nf4-dequant"), nf4_order)
            return _matrix_detail(rows, matrix_nf4.BACKENDS, fastest)

        stages.run("attention-backends", "attention backends (forward + backward)", attention_backends,
                   problems=_mismatches)
        stages.run("nf4-backends", "NF4 dequant backends", nf4_backends, problems=_mismatches)

    if args.compile:
        stages.run("compile", "torch.compile: graph breaks and compiled steps", lambda: _compile_stage(args, preset, device, on_gpu),
                   problems=lambda d: d.get("problems", []))
    if args.peft:
        stages.run("peft", "PEFT LoraConfig adapters and Unsloth's view of them", lambda: _peft_stage(args, preset, device),
                   problems=lambda d: d.get("problems", []))

    side_probes.stop(side)
    if on_gpu:
        result["peak_memory_bytes"] = int(torch.cuda.max_memory_allocated())
    result["stages"] = stages.stages
    result["timings_ms"]["child_total"] = round((time.perf_counter() - _STARTED) * 1000, 1)
    return result


def _cuda_init(torch) -> dict:
    torch.cuda.init()
    torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    return {"device": torch.cuda.get_device_name(0)}


def run_probe(args) -> dict:
    """``--probe CAPABILITY:BACKEND``: one matrix row, same seeded inputs as the main pass."""
    import torch

    torch_ms = (time.perf_counter() - _STARTED) * 1000
    capability, _, backend = args.probe.partition(":")
    from . import side_probes

    module = side_probes.EXTERNAL.get(({"nf4": "nf4-dequant"}.get(capability, capability), backend))
    if not (module and side_probes.probably_gpu() and importlib.util.find_spec(module)):
        module = None  # nothing to overlap; and without a GPU, TRITON_INTERPRET must precede the kernels
    if module:
        # What the inputs need (triton, gpudoctor's kernels) is imported here first, so the two
        # threads below never import the same modules; then the backend's own import (bitsandbytes:
        # 4.2-4.4 s) runs on a thread while this one creates the CUDA context and prepares the inputs.
        from . import matrix_attention, matrix_nf4  # noqa: F401
        from ..kernels import attention, nf4  # noqa: F401
        background = _import_in_background(module)
    on_gpu = torch.cuda.is_available()
    if not on_gpu:
        os.environ["TRITON_INTERPRET"] = "1"
    preset_name, _ = choose_preset(args.preset, on_gpu, list(torch.cuda.get_device_capability(0)) if on_gpu else None)
    preset = PRESETS[preset_name]
    dtype = getattr(torch, preset.dtype)
    device = "cuda" if on_gpu else "cpu"

    waited = {}

    def wait():
        # The main pass writes a line to our stdin when its GPU is idle (EOF also releases us).
        waited["ready_ms"] = (time.perf_counter() - _STARTED) * 1000
        if args.wait_for_go:
            sys.stdin.readline()
        waited["go_ms"] = (time.perf_counter() - _STARTED) * 1000

    if capability == "nf4":
        from . import matrix_nf4

        rows = matrix_nf4.probe(preset.ffn, preset.dim, dtype, device, backends=(backend,), before_timing=wait)
    elif capability == "attention":
        from . import matrix_attention

        rows = matrix_attention.probe(preset.batch, preset.heads, preset.kv_heads, preset.seq, preset.head_dim,
                                      dtype, device, backends=(backend,), before_timing=wait)
    else:
        raise SystemExit(f"unknown capability {capability!r} (nf4, attention)")
    if module and rows:
        thread, box = background
        thread.join()
        rows[0].notes += (f"; probe process: torch imported at {torch_ms:.0f} ms, {module} imported in "
                          f"{box.get('ms', 0):.0f} ms on a thread while the inputs were prepared")
        if "ready_ms" in waited:
            rows[0].notes += f", ready at {waited['ready_ms']:.0f} ms, go at {waited['go_ms']:.0f} ms"
    return {"rows": [r.to_json() for r in rows]}


def _import_in_background(module: str):
    """Import ``module`` on a thread; (thread, {"ms": duration}). A failure is left to the main
    thread's own import of it, which raises it again where the matrix records it."""
    import importlib
    import threading

    box: dict = {}

    def target():
        start = time.perf_counter()
        try:
            importlib.import_module(module)
        except BaseException:  # noqa: BLE001 - re-raised by the main thread's import
            pass
        box["ms"] = (time.perf_counter() - start) * 1000

    thread = threading.Thread(target=target, name=f"import {module}", daemon=True)
    thread.start()
    return thread, box


FULL_MATRIX_HINT = "python -m gpudoctor.train --full-matrix (or GPUDOCTOR_TRAIN_MATRIX=full gpudoctor check --train)"


def _matrix_detail(rows: list, every_backend: tuple[str, ...], fastest) -> dict:
    """The matrix stage's detail; backends it did not run are named, never shown as passed."""
    detail = {"rows": [r.to_json() for r in rows], "fastest": fastest(rows)}
    measured = {row.backend for row in rows}
    not_run = [name for name in every_backend if name not in measured]
    if not_run:
        detail["not_run"] = not_run
        detail["not_run_reason"] = f"not measured by default (seconds each); all of them: {FULL_MATRIX_HINT}"
    return detail


def _own(backends: tuple[str, ...], side: dict) -> tuple[str, ...]:
    """The backends this process measures: all but those a side probe measures."""
    return tuple(b for b in backends if not any(backend == b for _, backend in side))


def _in_order(own: list, external: dict, order: tuple[str, ...]) -> list:
    by_name = {row.backend: row for row in own}
    by_name.update(external)
    return [by_name[name] for name in order if name in by_name]


def _mismatches(detail: dict) -> list[str]:
    return [f"{row['backend']}: {row['reason']}" for row in detail["rows"] if row["status"] == "mismatch"]


def _compile_stage(args, preset, device, on_gpu) -> dict:
    from . import compiled, loop
    from .data import cycle_batches

    model = loop.build_model(preset, device)
    tokens = cycle_batches(preset.vocab, preset.batch, preset.seq, 1, device)[0]
    detail = compiled.explain(model, tokens)
    backend = args.compile_backend or ("inductor" if on_gpu else "aot_eager")
    start = time.perf_counter()
    trained = loop.train(model, preset, device, steps=args.steps, lr=args.lr,
                         step_fn=compiled.compiled_step(model, backend))
    detail.update(backend=backend, training=trained.to_json(), compile_and_train_ms=round((time.perf_counter() - start) * 1000, 1))
    problems = list(trained.problems())
    if detail["graph_breaks"]:
        problems.append(f"{detail['graph_breaks']} graph breaks: {detail['break_reasons'][:3]}")
    detail["problems"] = problems
    return detail


def _peft_stage(args, preset, device) -> dict:
    from .unsloth_prediction import predict

    try:
        from . import peft_adapters

        return peft_adapters.run(preset, device, lora_dropout=args.lora_dropout, bias=args.lora_bias)
    except ModuleNotFoundError as exc:
        if exc.name != "peft":
            raise
    # No PEFT: still say what Unsloth would make of this config on gpudoctor's own adapters.
    from .model import LORA_TARGETS

    return {"peft_version": None, "skipped": "peft is not installed (pip install peft)",
            "unsloth": predict(args.lora_dropout, args.lora_bias, False, [set(LORA_TARGETS)] * preset.layers)}


def _missing_extra(result: dict, name: str, exc: ImportError) -> dict:
    failure = {"kind": "missing-extra", "cause": name, "message": str(exc), "hint": INSTALL_HINT}
    result["stages"] = [{"id": "import", "title": f"import {name}", "status": "error", "failure": failure, "duration_ms": 0.0}]
    emit("stage-end", **result["stages"][0])
    return result


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.probe:
        result = run_probe(args)
        sys.stdout.write(json.dumps(result, default=str) + "\n")
        return 0
    # Everything a library prints goes to stderr while we work; stdout carries only the result.
    real_stdout = os.dup(1)
    os.dup2(2, 1)
    try:
        result = run(args)
    finally:
        sys.stdout.flush()
        os.dup2(real_stdout, 1)
        os.close(real_stdout)
    if args.json:
        sys.stdout.write(json.dumps(result, default=str) + "\n")
    else:
        from .display import print_child_result

        print_child_result(result)
    sys.stdout.flush()
    failed = any(s["status"] in ("fail", "error") for s in result["stages"])
    return 1 if failed else 0
