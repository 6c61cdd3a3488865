"""Remedies for Python packages: commands the user runs with their own installer (pip, conda),
never run by gpudoctor, which does not manage the user's Python environment."""

from __future__ import annotations

import re
from typing import Any, Mapping

from ..model import Fix, SuggestCommand
from .installer import pip, pip_words, python

TORCH_CUDA_INDEX = "https://download.pytorch.org/whl/cu126"


def _manual(summary: str, *commands: SuggestCommand) -> list[Fix]:
    return [Fix("manual", summary, commands)]


def torch_cpu_only(v: Mapping[str, Any]) -> list[Fix]:
    return _manual("Reinstall torch from a CUDA index (pick the CUDA your driver supports).",
                   pip(v, f"install --force-reinstall torch --index-url {TORCH_CUDA_INDEX}"))


def _on_windows(v: Mapping[str, Any]) -> bool:
    # A log's Windows paths (signature triton-missing-windows-path), or the judged interpreter's
    # own path (the static check's "python"): both detectors get the same fix.
    return any(re.match(r"[A-Za-z]:\\", str(v.get(key) or "")) for key in ("windows_path", "python"))


def triton_missing(v: Mapping[str, Any]) -> list[Fix]:
    spec = v.get("expected") or "triton"
    if _on_windows(v):
        # PyPI's triton has Linux wheels only; the Windows build is the triton-windows package
        # (github.com/triton-lang/triton-windows), whose X.Y releases match triton's.
        version = spec.partition("==")[2]
        major_minor = ".".join(version.split(".")[:2])
        if major_minor:
            return _manual(f"Install triton-windows, Triton's Windows build (PyPI has no Windows wheel of triton), "
                           f"the release matching torch's Triton {version}.",
                           pip(v, f'install "triton-windows=={major_minor}.*"'))
        return _manual("Install triton-windows, Triton's Windows build (PyPI has no Windows wheel of triton): the "
                       "release matching your torch (the table in its README, github.com/triton-lang/triton-windows), "
                       "e.g. `triton-windows<3.N`.", pip(v, 'install -U "triton-windows"'))
    return _manual(f"Install the Triton that torch pins ({spec}).", pip(v, f'install "{spec}"'))


def triton_version_mismatch(v: Mapping[str, Any]) -> list[Fix]:
    pinned = v.get("pinned") or (f"triton=={v['wanted']}" if v.get("wanted") not in (None, "", "?") else None)
    if pinned:
        return _manual(f"Install the Triton that torch pins ({pinned}).", pip(v, f'install "{pinned}"'))
    return _manual("Install the Triton version that this torch pins (`pip show torch` lists it under Requires).",
                   pip(v, "install --force-reinstall triton"))


def flash_attn_abi_mismatch(v: Mapping[str, Any]) -> list[Fix]:
    return _manual("Reinstall flash-attn built for this torch (a prebuilt wheel matching torch, CUDA and the C++ ABI, "
                   "or a build here).", pip(v, "install --force-reinstall --no-build-isolation --no-cache-dir flash-attn"))


def bitsandbytes_cuda_setup(v: Mapping[str, Any]) -> list[Fix]:
    summary = "Upgrade bitsandbytes (recent wheels bundle every CUDA version) and run `python -m bitsandbytes` to see what it finds"
    if v.get("bnb_cuda_version_set"):
        summary += "; unset BNB_CUDA_VERSION unless you built that library yourself"
    return _manual(summary + ".", pip(v, "install -U bitsandbytes"), python(v, "-m bitsandbytes"))


def duplicate_distributions(v: Mapping[str, Any]) -> list[Fix]:
    first = v.get("first") or "<package>"
    return [Fix("manual", f"`{pip_words(v, 'uninstall ' + first)}` until none is left, then install one copy "
                          "(likewise for the others); check PYTHONPATH and user site-packages (~/.local/lib).")]
