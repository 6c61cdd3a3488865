"""Triton's JIT, proven step by step: build a launcher-like C extension exactly as Triton does
(its own ``compile_module_from_src``: $CC, else gcc, else clang; on a GPU linked against libcuda
with Triton's own flags), then compile and launch gpudoctor's NF4 kernel with a cold cache (a
temporary TRITON_CACHE_DIR) and again with that cache warm.

Why a probe before the real kernels: on a machine without the unversioned libcuda.so or with a
broken $CC, every Triton kernel fails at its first launch with a compiler error; the probe turns
that into one precise failure, and its compiler output lands on stderr for the log matcher.
"""

from __future__ import annotations

import contextlib
import os
import tempfile

import torch

PROBE_MODULE = "gpudoctor_launcher_probe"

# Launcher-shaped: a CPython extension module; on a GPU it also calls into libcuda, so the link
# needs the same library Triton's launcher needs.
_PROBE_SOURCE = """
#include <Python.h>
%(cuda_decl)s
static PyObject* probe(PyObject* self, PyObject* args) {
  %(cuda_call)s
}
static PyMethodDef methods[] = {{"probe", probe, METH_NOARGS, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "%(name)s", NULL, -1, methods};
PyMODINIT_FUNC PyInit_%(name)s(void) { return PyModule_Create(&module); }
"""
_CUDA_DECL = "extern int cuDriverGetVersion(int*);"
_CUDA_CALL = "int v = 0; cuDriverGetVersion(&v); return PyLong_FromLong(v);"
_CPU_CALL = "return PyLong_FromLong(0);"


@contextlib.contextmanager
def temporary_triton_cache():
    """A fresh, empty TRITON_CACHE_DIR for the block (Triton reads the variable at each lookup)."""
    previous = os.environ.get("TRITON_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="gpudoctor-triton-cache-") as path:
        os.environ["TRITON_CACHE_DIR"] = path
        try:
            yield path
        finally:
            if previous is None:
                os.environ.pop("TRITON_CACHE_DIR", None)
            else:
                os.environ["TRITON_CACHE_DIR"] = previous


def build_launcher_probe(on_gpu: bool) -> dict:
    """Compile and import the probe with Triton's build function; raises what Triton would raise."""
    import time

    from triton.runtime.build import compile_module_from_src

    kwargs: dict = {}
    if on_gpu:
        from triton.backends.nvidia import driver as nvidia_driver

        # library_dirs() finds libcuda the way Triton does (TRITON_LIBCUDA_PATH, ldconfig -p,
        # LD_LIBRARY_PATH) and raises its own "libcuda.so cannot found!" when it cannot.
        kwargs = dict(library_dirs=nvidia_driver.library_dirs(), include_dirs=list(nvidia_driver.include_dirs),
                      libraries=list(nvidia_driver.libraries))
    source = _PROBE_SOURCE % {"name": PROBE_MODULE, "cuda_decl": _CUDA_DECL if on_gpu else "",
                              "cuda_call": _CUDA_CALL if on_gpu else _CPU_CALL}
    start = time.perf_counter()
    with temporary_triton_cache():
        module = compile_module_from_src(src=source, name=PROBE_MODULE, **kwargs)
    build_ms = (time.perf_counter() - start) * 1000
    return {"launcher_build_ms": round(build_ms, 1), "compiler": os.environ.get("CC") or "gcc/clang from PATH",
            "libraries": kwargs.get("libraries", []), "driver_version_from_probe": module.probe() if on_gpu else None}


def _dequant_once(device, dtype) -> None:
    from ..kernels import nf4 as nf4_kernels

    weight = torch.randn(256, 256, device=device).to(dtype)
    packed, state = nf4_kernels.quantize_nf4(weight)
    out = nf4_kernels.dequantize_nf4(packed, state, dtype=dtype)
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
    if not torch.isfinite(out).all():
        raise RuntimeError("the NF4 kernel launched but wrote non-finite values")


def nf4_compile_times(device, dtype) -> dict:
    """Cold (empty cache dir: full compile + launcher build) and warm (same dir, in-memory cache
    dropped: what a second process pays) first-launch times of gpudoctor's NF4 kernel."""
    import time

    from ..kernels import nf4 as nf4_kernels

    kernels = _jit_functions(nf4_kernels)
    times = {}
    with temporary_triton_cache():
        for label in ("cold", "warm"):
            for kernel in kernels:
                kernel.device_caches.clear()  # forget compiled kernels held in memory
            start = time.perf_counter()
            _dequant_once(device, dtype)
            times[f"{label}_ms"] = round((time.perf_counter() - start) * 1000, 1)
    for kernel in kernels:
        kernel.device_caches.clear()  # the next launch reloads from the user's own cache
    return times


def _jit_functions(module) -> list:
    """The module's @triton.jit kernels (found by what they hold, not by private names)."""
    return [value for value in vars(module).values() if hasattr(value, "device_caches")]


def check(device, dtype, interpreted: bool, cold_compile: bool = False) -> dict:
    """The launcher build, then gpudoctor's NF4 kernel launched. ``cold_compile`` also times a
    compile with an empty cache (about 1 s on the H200, so only with the full matrix); without
    it the kernel is launched with the Triton cache in use, which proves the same JIT path: a
    cold cache compiles there, a warm one loads the cached binary and its launcher."""
    import time

    result = {"launcher": build_launcher_probe(on_gpu=not interpreted)}
    if interpreted:
        # No compile in the interpreter: launch the kernel interpreted to prove the Python path.
        start = time.perf_counter()
        _dequant_once(device, dtype)
        result["interpreted_launch_ms"] = round((time.perf_counter() - start) * 1000, 1)
        result["nf4_compile"] = "not applicable: TRITON_INTERPRET=1 runs kernels in Python"
    elif cold_compile:
        result["nf4_compile"] = nf4_compile_times(device, dtype)
    else:
        start = time.perf_counter()
        _dequant_once(device, dtype)
        first_ms = round((time.perf_counter() - start) * 1000, 1)
        result["nf4_first_launch_ms"] = first_ms
        result["nf4_compile"] = (f"NF4 kernel first launch {first_ms} ms with the Triton cache in use "
                                 f"(a cold-cache compile is timed only with the full backend matrix)")
    return result
