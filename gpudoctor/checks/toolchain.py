"""Checks on compilers and CUDA toolkits."""

from __future__ import annotations

from ..knowledge import load_tables
from ..model import Severity
from .base import Skip, finding, fixes_for, remedy_machine


def check_c_compiler_missing(toolchain, packages, env, system=None):
    if toolchain.triton_cc and toolchain.triton_cc_exists:
        return []
    if not env.get("PATH") and not env.get("CC"):
        raise Skip("PATH is unknown, so the compiler lookup cannot be replayed")
    severity = None if packages.triton else Severity.WARNING
    if toolchain.triton_cc:
        message = f"CC={toolchain.triton_cc!r} does not exist or is not executable; Triton builds its launcher with it."
    else:
        message = "No C compiler: CC is unset and neither gcc nor clang is on PATH; Triton cannot build its launcher."
    return [finding(
        "c-compiler-missing", message, {"CC": toolchain.compiler_env.get("CC"), "triton": bool(packages.triton)},
        fixes_for("c-compiler-missing", {"cc": toolchain.triton_cc, "c_compilers": remedy_machine().c_compilers(toolchain),
                                         "package_manager": remedy_machine().distro_manager(system)}),
        severity=severity,
    )]


def _compiler_named(toolchain, name: str, value: str):
    """The probed compiler an env variable names: probed under that variable, or at that path,
    or (a bare name like ``gcc-12``) found on PATH under that name."""
    for compiler in toolchain.compilers:
        if compiler.via == name or value in (compiler.path, *compiler.aliases):  # one entry per file
            return compiler
    for compiler in toolchain.compilers:
        if "/" not in value and compiler.via == f"PATH:{value}":
            return compiler
    return None


def _nvcc_default(toolchain):
    """nvcc without -ccbin: NVCC_CCBIN (nvcc reads it itself), else the gcc on PATH."""
    value = toolchain.compiler_env.get("NVCC_CCBIN")
    if value:
        return _compiler_named(toolchain, "NVCC_CCBIN", value), "NVCC_CCBIN"
    if toolchain.default_gcc:
        return toolchain.compiler_at(toolchain.default_gcc), "gcc on PATH"
    return None, None


def build_paths(toolchain):
    """Each way CUDA code gets built, with the host compiler nvcc gets on it: [(path, compiler,
    via)]. torch's cpp_extension passes ``-ccbin $CC`` when CC is set (torch/utils/cpp_extension.py,
    unix_cuda_flags); CMake passes CUDAHOSTCXX as CMAKE_CUDA_HOST_COMPILER; a bare nvcc takes
    NVCC_CCBIN, else the gcc on PATH. One compiler judged per path (issue 13 item 5: a refused CC
    passed the check when CUDAHOSTCXX named a supported g++)."""
    default = _nvcc_default(toolchain)
    paths = []
    for path, variable in (("torch extensions", "CC"), ("CMake", "CUDAHOSTCXX")):
        value = toolchain.compiler_env.get(variable)
        compiler, via = (_compiler_named(toolchain, variable, value), f"${variable}") if value else default
        paths.append((path, compiler, via))
    paths.append(("bare nvcc", *default))
    return paths


def _limit(toolkit, family: str):
    limit = toolkit.max_gcc if family == "gcc" else toolkit.max_clang
    source = toolkit.limits_source
    if limit is None and toolkit.version:
        table = load_tables()["cuda_max_host_compiler"][family]
        value = table.get(f"{toolkit.version[0]}.{toolkit.version[1]}")
        limit, source = (int(value), "tables.toml (host_config.h unreadable)") if value else (None, None)
    return limit, source


def check_nvcc_host_compiler_unsupported(toolchain, system=None):
    toolkit = toolchain.active_toolkit() or (toolchain.toolkits[0] if toolchain.toolkits else None)
    if toolkit is None:
        raise Skip("no CUDA toolkit (nvcc) on this machine")
    judged = [(path, compiler, via) for path, compiler, via in build_paths(toolchain)
              if compiler is not None and compiler.version is not None]
    if not judged:
        raise Skip("nvcc's host compiler not found or its version unknown")
    failing, families = [], {}
    for path, compiler, via in judged:
        limit, source = _limit(toolkit, compiler.family)
        if limit is None:
            raise Skip(f"the {compiler.family} limit of the toolkit in {toolkit.root} is unknown")
        if compiler.version[0] > limit:
            failing.append((path, compiler, via, limit, source))
            families.setdefault(compiler.family, limit)
    if not failing:
        return []
    _, compiler, via, limit, source = failing[0]
    family = compiler.family
    cuda = ".".join(map(str, toolkit.version or ()))
    evidence = {"toolkit": toolkit.root, "cuda": cuda, "compiler": compiler.path,
                "compiler_version": ".".join(map(str, compiler.version)), "limit": limit, "limit_source": source,
                "via": via, "build_paths": {p: f"{c.path} {'.'.join(map(str, c.version))} ({v})"
                                            for p, c, v, _, _ in failing}}
    fixes = fixes_for("nvcc-host-compiler-unsupported", {"limit": limit, "family": family,
                                                         "gcc_by_major": remedy_machine().gcc_by_major(toolchain),
                                                         "package_manager": remedy_machine().distro_manager(system)})
    # one entry per compiler: three paths that all take the gcc on PATH name it once
    groups: dict[str, list[str]] = {}
    for p, c, v, _, _ in failing:
        groups.setdefault(f"{c.path} {'.'.join(map(str, c.version))} ({v})", []).append(p)
    where = "; ".join(f"{', '.join(paths)}: {compiler}" for compiler, paths in groups.items())
    passing = [p for p, _, _ in judged if p not in evidence["build_paths"]]
    return [finding(
        "nvcc-host-compiler-unsupported",
        f"CUDA {cuda} in {toolkit.root} accepts {family} <= {limit} (from {source}), but nvcc would get a newer "
        f"host compiler on {len(failing)} of {len(judged)} build paths ({where}): those builds of CUDA extensions "
        f"will fail with `unsupported GNU version! gcc versions later than {limit} are not supported!`"
        + (f" ({', '.join(passing)}: supported)." if passing else "."),
        evidence, fixes,
    )]


def check_cuda_home_missing(toolchain, packages):
    if not toolchain.toolkits:
        raise Skip("no CUDA toolkit installed (only needed to build CUDA extensions)")
    root = toolchain.cpp_extension_toolkit
    if root and toolchain.active_toolkit() is not None:
        return []
    candidate = toolchain.toolkits[0]
    if root:
        message = (f"torch.utils.cpp_extension would take {root} as CUDA_HOME (from {toolchain.cpp_extension_via}), "
                   f"but no CUDA toolkit is there; the toolkit is at {candidate.root}. Extension builds will not find "
                   "CUDA's headers and libraries.")
    else:
        message = (f"A CUDA toolkit exists at {candidate.root}, but CUDA_HOME is unset, nvcc is not on PATH and "
                   "/usr/local/cuda does not exist: extension builds fail with `CUDA_HOME environment variable is not set`.")
    return [finding(
        "cuda-home-missing", message, {"toolkit": candidate.root, "CUDA_HOME": root},
        fixes_for("cuda-home-missing", {"toolkit": candidate.root}),
    )]


def check_cuda_version_mismatch(toolchain, packages):
    torch_cuda = packages.torch_cuda
    if torch_cuda is None:
        raise Skip("no CUDA build of torch installed")
    toolkit = toolchain.active_toolkit()
    if toolkit is None or toolkit.version is None:
        raise Skip("no CUDA toolkit that extension builds would use")
    if toolkit.version[0] == torch_cuda[0]:
        return []
    matching = [t for t in toolchain.toolkits if t.version and t.version[0] == torch_cuda[0]]
    fixes = fixes_for("cuda-version-mismatch", {"matching_toolkit": matching[0].root if matching else None,
                                                "torch_cuda": f"{torch_cuda[0]}.x", "nvcc_cuda": f"{toolkit.version[0]}.x"})
    return [finding(
        "cuda-version-mismatch",
        f"nvcc in {toolkit.root} is CUDA {toolkit.version[0]}.{toolkit.version[1]} but torch was built with CUDA "
        f"{torch_cuda[0]}.{torch_cuda[1]}: torch.utils.cpp_extension refuses to build extensions across CUDA majors.",
        {"toolkit": toolkit.root, "nvcc_cuda": f"{toolkit.version[0]}.{toolkit.version[1]}",
         "torch_cuda": f"{torch_cuda[0]}.{torch_cuda[1]}"},
        fixes,
    )]
