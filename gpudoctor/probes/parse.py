"""Pure parsers from command output and file text to values. Unit-tested on real captures."""

from __future__ import annotations

import json
import re

_KERNEL_MODULE = re.compile(r"Kernel Module(?:\s+for\s+\S+)?\s+(\d+(?:\.\d+)+)")
_LDCONFIG_LINE = re.compile(r"^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S.*?)\s*$")
_NVCC_RELEASE = re.compile(r"release (\d+)\.(\d+)")
_GCC_LIMIT = re.compile(r"#if\s+__GNUC__\s*>\s*(\d+)")
_CLANG_LIMIT = re.compile(r"__clang_major__\s*>=\s*(\d+)\)[^\n]*\n#error -- unsupported clang version")
_CLANG_VERSION = re.compile(r"clang version (\d+)\.(\d+)")
_DOTTED = re.compile(r"^(\d+)(?:\.(\d+))?(?:\.(\d+))?")
_SO_VERSION = re.compile(r"^libcuda\.so\.(\d+\.\d+(?:\.\d+)?)$")


def kernel_module_version(text: str) -> str | None:
    """From /proc/driver/nvidia/version: 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05 ...'
    or 'NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04 ...'."""
    match = _KERNEL_MODULE.search(text)
    return match.group(1) if match else None


def ldconfig_entries(text: str) -> list[tuple[str, str, str]]:
    """From `ldconfig -p`: (soname, flags, path) per line; the header and junk lines are skipped."""
    entries = []
    for line in text.splitlines():
        match = _LDCONFIG_LINE.match(line)
        if match:
            entries.append((match.group(1), match.group(2), match.group(3)))
    return entries


def nvcc_release(text: str) -> tuple[int, int] | None:
    """From `nvcc --version`: '... Cuda compilation tools, release 12.4, V12.4.131'."""
    match = _NVCC_RELEASE.search(text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def cuda_version_json(text: str) -> tuple[int, int] | None:
    """From a toolkit's version.json: {"cuda": {"version": "12.4.1"}}."""
    try:
        value = json.loads(text)["cuda"]["version"]
    except (ValueError, KeyError, TypeError):
        return None
    return dotted(value)[:2] if dotted(value) else None


_CUDA_H_VERSION = re.compile(r"^#define\s+CUDA_VERSION\s+(\d+)\s*$", re.MULTILINE)


def cuda_header_version(text: str) -> tuple[int, int] | None:
    """From a toolkit's include/cuda.h: '#define CUDA_VERSION 13000' -> (13, 0)."""
    match = _CUDA_H_VERSION.search(text)
    return cuda_from_int(int(match.group(1))) if match else None


def host_compiler_limits(text: str) -> dict[str, int]:
    """From include/crt/host_config.h: the newest gcc and clang majors nvcc accepts."""
    limits: dict[str, int] = {}
    match = _GCC_LIMIT.search(text)
    if match:
        limits["gcc"] = int(match.group(1))
    match = _CLANG_LIMIT.search(text)
    if match:
        limits["clang"] = int(match.group(1)) - 1
    return limits


def compiler_version(family: str, text: str) -> tuple[int, ...] | None:
    """gcc: output of `-dumpfullversion -dumpversion` ('13.3.0'); clang: `--version`."""
    if family == "clang":
        match = _CLANG_VERSION.search(text)
        return (int(match.group(1)), int(match.group(2))) if match else None
    first = text.strip().splitlines()[0] if text.strip() else ""
    return dotted(first)


def dotted(text: str) -> tuple[int, ...] | None:
    match = _DOTTED.match(text.strip())
    if not match:
        return None
    return tuple(int(g) for g in match.groups() if g is not None)


def libcuda_file_version(name: str) -> str | None:
    """'libcuda.so.580.95.05' -> '580.95.05' (libcuda.so.1 is the soname, not a version)."""
    match = _SO_VERSION.match(name)
    return match.group(1) if match else None


def cuda_from_int(value: int | None) -> tuple[int, int] | None:
    """NVML/CUDA encode versions as 1000*major + 10*minor (13000 -> 13.0)."""
    if not value:
        return None
    return (value // 1000, (value % 1000) // 10)
