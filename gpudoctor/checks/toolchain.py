"""Checks on compilers and CUDA toolkits."""

from __future__ import annotations

import posixpath

from ..knowledge import load_tables
from ..model import Fix, InstallPackage, SetEnv, Severity
from .base import Skip, finding


def check_c_compiler_missing(toolchain, packages, env):
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
        [Fix("manual", "Install gcc (`sudo apt install gcc`, or without root `conda install -c conda-forge gcc`), "
                       "or point CC at a working compiler.")],
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


def _distro_manager(system):
    info = system.info
    ids = {info.distro_id, *info.distro_like.split()} if info else set()
    if ids & {"ubuntu", "debian"}:
        return "apt"
    if ids & {"fedora", "rhel", "centos", "rocky", "almalinux"}:
        return "dnf"
    if ids & {"opensuse", "suse", "sles", "opensuse-leap", "opensuse-tumbleweed"}:
        return "zypper"
    if ids & {"arch", "manjaro"}:
        return "pacman"
    return None


_GCC_PACKAGES = {
    "apt": lambda n: (f"gcc-{n}", f"g++-{n}"),
    "dnf": lambda n: (f"gcc-toolset-{n}-gcc", f"gcc-toolset-{n}-gcc-c++"),
    "yum": lambda n: (f"devtoolset-{n}-gcc", f"devtoolset-{n}-gcc-c++"),
    "zypper": lambda n: (f"gcc{n}", f"gcc{n}-c++"),
    "pacman": lambda n: (f"gcc{n}",),
}


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
    compatible = sorted(
        (c for c in toolchain.compilers if c.family == family and c.version and c.version[0] <= limit and c.cxx),
        key=lambda c: c.version, reverse=True,
    )
    fixes = []
    if compatible and family == "gcc":
        cc, cxx = compatible[0].path, compatible[0].cxx
        fixes.append(Fix(
            "user", f"Use the installed {posixpath.basename(cc)} for CUDA builds (no root).",
            actions=(SetEnv("CC", cc), SetEnv("CXX", cxx), SetEnv("CUDAHOSTCXX", cxx), SetEnv("NVCC_CCBIN", cxx)),
            env={"CC": cc, "CXX": cxx, "CUDAHOSTCXX": cxx, "NVCC_CCBIN": cxx},
        ))
    manager = _distro_manager(system)
    if manager and family == "gcc":
        packages = _GCC_PACKAGES[manager](limit)
        fixes.append(Fix("system", f"Install gcc {limit} with {manager}.",
                         actions=(InstallPackage(manager, packages),)))
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
        [Fix("user", f"Export CUDA_HOME={candidate.root}.",
             actions=(SetEnv("CUDA_HOME", candidate.root), SetEnv("PATH", posixpath.join(candidate.root, "bin"), prepend=True)),
             env={"CUDA_HOME": candidate.root})],
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
    fixes = []
    if matching:
        fixes.append(Fix("user", f"Point CUDA_HOME at {matching[0].root}.",
                         actions=(SetEnv("CUDA_HOME", matching[0].root),), env={"CUDA_HOME": matching[0].root}))
    else:
        fixes.append(Fix("manual", f"Install a CUDA {torch_cuda[0]}.x toolkit, or a torch build for CUDA {toolkit.version[0]}."))
    return [finding(
        "cuda-version-mismatch",
        f"nvcc in {toolkit.root} is CUDA {toolkit.version[0]}.{toolkit.version[1]} but torch was built with CUDA "
        f"{torch_cuda[0]}.{torch_cuda[1]}: torch.utils.cpp_extension refuses to build extensions across CUDA majors.",
        {"toolkit": toolkit.root, "nvcc_cuda": f"{toolkit.version[0]}.{toolkit.version[1]}",
         "torch_cuda": f"{torch_cuda[0]}.{torch_cuda[1]}"},
        fixes,
    )]
