"""Name what an exception in the child means, as data the parent turns into findings.

kinds: triton-jit (compile, launcher build, load; ``cause`` names the rule when the exception
alone shows it), oom, illegal-memory-access, cuda-error (the CUDA context is dead after these
two), nccl-timeout and nccl (a collective of the FSDP2 pass timed out or failed: torch's
``DistBackendError`` / the NCCL watchdog's and gloo's own wordings), missing-extra (torch/triton
not installed), error (anything else: a bug, reported as is).
"""

from __future__ import annotations

import os
import subprocess
import traceback


def _chain(exc: BaseException):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def classify(exc: BaseException) -> dict:
    text = "\n".join(f"{type(e).__name__}: {e}" for e in _chain(exc))
    failure = {
        "kind": "error",
        "cause": None,
        "error_type": type(exc).__name__,
        "message": (str(exc).strip().splitlines() or [type(exc).__name__])[0][:400],
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-6000:],
    }
    compiler = os.environ.get("CC")
    for e in _chain(exc):
        if isinstance(e, ModuleNotFoundError) and (e.name or "").split(".")[0] in ("torch", "triton"):
            failure.update(kind="missing-extra", cause=e.name.split(".")[0])
            return failure
        if isinstance(e, FileNotFoundError) and compiler and e.filename in (compiler, os.path.basename(compiler)):
            # subprocess could not even start $CC: Triton's launcher build dies before any compiler output.
            failure.update(kind="triton-jit", cause="c-compiler-missing", compiler=compiler)
            return failure
        if isinstance(e, subprocess.CalledProcessError):
            # The compiler ran and failed; its own output (above, on stderr) names the reason, and
            # the parent's log matcher reads it (e.g. `cannot find -lcuda`).
            failure.update(kind="triton-jit", command=[str(x) for x in (e.cmd or [])][:3])
            return failure
    lowered = text.lower()
    rules = _log_rules(text)
    if "failed to find c compiler" in lowered:
        failure.update(kind="triton-jit", cause="c-compiler-missing")
    elif "libcuda.so cannot found" in lowered:
        failure.update(kind="triton-jit", cause="libcuda-not-in-linker-cache")
    elif "out of memory" in lowered:
        failure.update(kind="oom")
    elif "nccl-timeout" in rules or _gloo_timed_out(lowered):
        failure.update(kind="nccl-timeout")
    elif (any(type(e).__name__ in ("DistBackendError", "DistNetworkError") for e in _chain(exc))
          or "nccl-failure" in rules):
        failure.update(kind="nccl")
    elif "illegal memory access" in lowered:
        failure.update(kind="illegal-memory-access")
    elif "compilationerror" in lowered or "triton" in lowered and ("ptxas" in lowered or "compil" in lowered):
        failure.update(kind="triton-jit")
    elif "cuda error" in lowered or "cudaerror" in lowered or "cuda_error" in lowered:
        failure.update(kind="cuda-error")
    return failure


def _log_rules(text: str) -> set[str]:
    """The rules the log signatures find in the exception's text: rules/signatures.toml owns the
    libraries' wordings (torch's NCCL watchdog, ``NCCL error in: ...``), here as in every log."""
    from ..logs import diagnose_lines

    return {finding.id for finding in diagnose_lines(text.splitlines(), source="<exception>")}


def _gloo_timed_out(lowered: str) -> bool:
    # gloo, the backend the FSDP pass runs on without GPUs (the CPU tests): "Timed out waiting
    # <ms>ms for recv operation to complete" (gloo/transport/tcp/unbound_buffer.cc). Not a log
    # signature: nccl-timeout's title and fixes are NCCL's, and no user trains on gloo.
    return "timed out waiting" in lowered and "for recv" in lowered


FATAL_KINDS = ("illegal-memory-access", "cuda-error")  # the CUDA context cannot be used after these
