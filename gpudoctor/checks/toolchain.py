"""Checks on compilers and CUDA toolkits."""

from __future__ import annotations

from ..knowledge import load_tables
from ..model import Severity
from ..remedies import fixes_for
from ..remedies.machine import c_compilers, distro_manager, gcc_by_major
from .base import Skip, finding


def check_c_compiler_missing(toolchain, packages, env, system):
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
        fixes_for("c-compiler-missing", {"cc": toolchain.triton_cc, "c_compilers": c_compilers(toolchain),
                                         "package_manager": distro_manager(system)}),
        severity=severity,
    )]


def _host_compiler_for_nvcc(toolchain):
    """nvcc uses -ccbin (NVCC_CCBIN / CUDAHOSTCXX as torch and CMake pass them), else gcc on PATH."""
    for name in ("NVCC_CCBIN", "CUDAHOSTCXX"):
        value = toolchain.compiler_env.get(name)
        if value:
            for compiler in toolchain.compilers:
                if compiler.via == name or compiler.path == value:
                    return compiler, name
            return None, name
    if toolchain.default_gcc:
        return toolchain.compiler_at(toolchain.default_gcc), "gcc on PATH"
    return None, None


def check_nvcc_host_compiler_unsupported(toolchain, system):
    toolkit = toolchain.active_toolkit() or (toolchain.toolkits[0] if toolchain.toolkits else None)
    if toolkit is None:
        raise Skip("no CUDA toolkit (nvcc) on this machine")
    compiler, via = _host_compiler_for_nvcc(toolchain)
    if compiler is None or compiler.version is None:
        raise Skip("nvcc's host compiler not found or its version unknown")
    family = compiler.family
    limit = toolkit.max_gcc if family == "gcc" else toolkit.max_clang
    source = toolkit.limits_source
    if limit is None and toolkit.version:
        table = load_tables()["cuda_max_host_compiler"][family]
        value = table.get(f"{toolkit.version[0]}.{toolkit.version[1]}")
        limit, source = (int(value), "tables.toml (host_config.h unreadable)") if value else (None, None)
    if limit is None:
        raise Skip(f"the host-compiler limit of the toolkit in {toolkit.root} is unknown")
    major = compiler.version[0]
    evidence = {"toolkit": toolkit.root, "cuda": ".".join(map(str, toolkit.version or ())), "compiler": compiler.path,
                "compiler_version": ".".join(map(str, compiler.version)), "limit": limit, "limit_source": source, "via": via}
    if major <= limit:
        return []
    fixes = fixes_for("nvcc-host-compiler-unsupported", {"limit": limit, "family": family,
                                                         "gcc_by_major": gcc_by_major(toolchain),
                                                         "package_manager": distro_manager(system)})
    return [finding(
        "nvcc-host-compiler-unsupported",
        f"CUDA {evidence['cuda']} in {toolkit.root} accepts {family} <= {limit} (from {source}), but nvcc would use "
        f"{compiler.path} {evidence['compiler_version']} ({via}): builds of CUDA extensions will fail with "
        f"`unsupported GNU version! gcc versions later than {limit} are not supported!`.",
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
