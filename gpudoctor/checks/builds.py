"""What Triton's launcher and torch extension builds need from the machine before the first
kernel (issue 15): Python's C headers, and a host compiler new enough for the code being built."""

from __future__ import annotations

from packaging.version import Version

from ..model import Severity
from ..probes.compat_data import compat_tables
from .base import Skip, finding, fixes_for, judged_python, remedy_machine
from .toolchain import _compiler_named, build_paths


def check_python_headers_missing(python_headers, packages, system=None):
    builds = [what for what, installed in (("Triton's launcher", packages.triton is not None),
                                           ("torch extension builds", packages.get("torch") is not None)) if installed]
    if not builds:
        raise Skip("neither Triton nor torch is installed: nothing here builds against Python.h")
    if python_headers.present is None:
        raise Skip(python_headers.unknown_reason or "Python.h could not be examined")
    if python_headers.present:
        return []
    # Triton compiles its launcher at the first kernel of every run; an extension build is rarer.
    severity = None if packages.triton is not None else Severity.WARNING
    info = getattr(system, "info", None)
    return [finding(
        "python-headers-missing",
        f"Python {python_headers.version} ({python_headers.python}) has no Python.h in {python_headers.include_dir}: "
        f"{' and '.join(builds)} compile against it and fail with `fatal error: Python.h: No such file or directory`.",
        {"python": python_headers.python, "python_version": python_headers.version,
         "include_dir": python_headers.include_dir, "needed_by": builds},
        fixes_for("python-headers-missing", {"python_version": python_headers.version,
                                             "include_dir": python_headers.include_dir,
                                             "base_prefix": info.base_prefix if info else None,
                                             "package_manager": remedy_machine().distro_manager(system),
                                             **judged_python(system, packages)}),
        severity=severity,
    )]


def _torch_minimum(torch: Version) -> dict | None:
    """The row for this torch: the newest whose ``torch_from`` it has reached (rules/compat.toml
    says why a plain version and not a specifier); the local part (+cu130) does not count."""
    release = Version(torch.public)
    return next((row for row in compat_tables()["torch_min_compiler"] if release >= Version(row["torch_from"])), None)


def _judged(toolchain, packages):
    """(what is built, compiler, via, minimum major, source) for each build this machine would run."""
    judged = []
    if packages.triton is not None and toolchain.triton_cc:
        limits = compat_tables()["triton_launcher_min_compiler"]
        compiler = toolchain.compiler_at(toolchain.triton_cc) or next(
            (c for c in toolchain.compilers if c.via == "CC"), None)
        if compiler is not None and compiler.family in limits:
            via = "$CC" if toolchain.compiler_env.get("CC") else "gcc on PATH"
            judged.append(("Triton's launcher", compiler, via, limits[compiler.family], limits["source"]))
    torch = packages.version("torch")
    row = _torch_minimum(torch) if torch is not None else None
    if row is not None:
        cxx_value = toolchain.compiler_env.get("CXX")
        cxx = _compiler_named(toolchain, "CXX", cxx_value) if cxx_value else (
            toolchain.compiler_at(toolchain.default_gcc) if toolchain.default_gcc else None)
        if cxx is not None:
            judged.append(("torch C++ extensions", cxx, "$CXX" if cxx_value else "gcc on PATH (as c++)",
                           row.get(cxx.family), row["source"]))
        if toolchain.toolkits:  # nvcc's host compiler, for CUDA extensions
            path, compiler, via = build_paths(toolchain)[0]
            if compiler is not None:
                judged.append(("torch CUDA extensions (nvcc -ccbin)", compiler, via, row.get(compiler.family), row["source"]))
    return [j for j in judged if j[1].version is not None and j[3] is not None]


def check_host_compiler_too_old(toolchain, packages, system=None):
    if packages.triton is None and packages.get("torch") is None:
        raise Skip("neither Triton nor torch is installed: nothing here compiles against them")
    judged = _judged(toolchain, packages)
    if not judged:
        raise Skip("no compiler that Triton or torch extension builds would use was found with a known version")
    failing = [(what, c, via, minimum, source) for what, c, via, minimum, source in judged if c.version[0] < minimum]
    if not failing:
        return []
    what, compiler, via, _, source = failing[0]
    minimum = max(m for _, c, _, m, _ in failing if c.family == compiler.family)  # one compiler for every build
    family = compiler.family
    version = ".".join(map(str, compiler.version))
    described = "; ".join(f"{w}: {c.path} {'.'.join(map(str, c.version))} ({v}), needs {c.family} >= {m}"
                          for w, c, v, m, _ in failing)
    triton_fails = any(w == "Triton's launcher" for w, *_ in failing)
    severity = None if triton_fails else Severity.WARNING  # extension builds only fail when one is built
    return [finding(
        "host-compiler-too-old",
        f"{described}. Builds with it fail ("
        + ("Triton: `'for' loop initial declarations are only allowed in C99 mode`" if triton_fails else
           f"torch's headers: `We need {'GCC' if family == 'gcc' else 'Clang'} {minimum} or later`") + f"; from {source}).",
        {"compiler": compiler.path, "family": family, "version": version, "min_version": minimum, "via": via,
         "builds": {w: f"{c.path} {'.'.join(map(str, c.version))} ({v}) < {m}" for w, c, v, m, _ in failing},
         "torch": str(packages.version("torch")) if packages.version("torch") else None},
        fixes_for("host-compiler-too-old", {"compiler": "GCC" if family == "gcc" else "Clang", "min_version": minimum,
                                            "gcc_by_major": remedy_machine().gcc_by_major(toolchain),
                                            **judged_python(system, packages)}),
        severity=severity,
    )]

