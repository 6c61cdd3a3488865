"""Remedies for compilers and CUDA toolkits."""

from __future__ import annotations

import posixpath
from typing import Any, Mapping

from ..model import Fix, InstallPackage, SetEnv, SuggestCommand

# The distro packages of gcc N, per package manager. dnf: RHEL/Rocky/Alma's gcc-toolset, the
# form GPU clusters run (Fedora's own gccN compat packages are rarer); the log path used to
# say gcc{N}, the check gcc-toolset-N-gcc: the check's form wins.
GCC_PACKAGES = {
    "apt": lambda n: (f"gcc-{n}", f"g++-{n}"),
    "dnf": lambda n: (f"gcc-toolset-{n}-gcc", f"gcc-toolset-{n}-gcc-c++"),
    "yum": lambda n: (f"devtoolset-{n}-gcc", f"devtoolset-{n}-gcc-c++"),
    "zypper": lambda n: (f"gcc{n}", f"gcc{n}-c++"),
    "pacman": lambda n: (f"gcc{n}",),
}
C_COMPILER_PACKAGES = {"apt": ("gcc",), "dnf": ("gcc",), "yum": ("gcc",), "zypper": ("gcc",), "pacman": ("gcc",)}


def c_compiler_missing(v: Mapping[str, Any]) -> list[Fix]:
    """Point CC at a compiler that works when there is one (a user fix: no root, it leads
    somewhere); install gcc only when there is none."""
    fixes = []
    working = [c for c in v.get("c_compilers") or () if c != v.get("cc")]
    if working:
        fixes.append(Fix("user", f"Point CC at the working compiler {working[0]}.", (SetEnv("CC", working[0]),)))
    manager = v.get("package_manager")
    if manager in C_COMPILER_PACKAGES:
        fixes.append(Fix("system", f"Install gcc with {manager}.", (InstallPackage(manager, C_COMPILER_PACKAGES[manager]),)))
    if not working:
        fixes.append(Fix("manual", "Without root: install a compiler into your conda environment.",
                         (SuggestCommand("conda install -c conda-forge gcc"),)))
    return fixes


def nvcc_host_compiler_unsupported(v: Mapping[str, Any]) -> list[Fix]:
    limit = v.get("limit")
    if limit is None and str(v.get("gcc_limit", "")).isdigit():  # nvcc's own message, from a log
        limit = int(v["gcc_limit"])
    family = v.get("family", "gcc")
    if not isinstance(limit, int):
        return [Fix("manual", "Build CUDA code with a host compiler this CUDA toolkit supports (CC, CXX, CUDAHOSTCXX, "
                              "NVCC_CCBIN); `gpudoctor check` names the limit and the compilers installed.",
                    (SuggestCommand("gpudoctor check"),))]
    fixes = []
    usable = sorted((m for m, (_, gxx) in (v.get("gcc_by_major") or {}).items() if m <= limit and gxx), reverse=True)
    if usable and family == "gcc":
        cc, cxx = v["gcc_by_major"][usable[0]]
        fixes.append(Fix("user", f"Use the installed {posixpath.basename(cc)} for CUDA builds (no root).",
                         (SetEnv("CC", cc), SetEnv("CXX", cxx), SetEnv("CUDAHOSTCXX", cxx), SetEnv("NVCC_CCBIN", cxx))))
    manager = v.get("package_manager")
    if manager in GCC_PACKAGES and family == "gcc":
        fixes.append(Fix("system", f"Install gcc {limit} with {manager}.", (InstallPackage(manager, GCC_PACKAGES[manager](limit)),)))
    if not fixes:
        fixes.append(Fix("manual", f"Install a {family} {limit} or older and build CUDA code with it "
                                   "(CC, CXX, CUDAHOSTCXX, NVCC_CCBIN)."))
    return fixes


def cuda_home_missing(v: Mapping[str, Any]) -> list[Fix]:
    root = v.get("toolkit")
    if not root:
        return [Fix("manual", "Install a CUDA toolkit matching torch.version.cuda and set CUDA_HOME to its root, or "
                              "install a prebuilt wheel of the package.")]
    # PATH too: extension builds also call `nvcc` by name; the summary says so.
    return [Fix("user", f"Export CUDA_HOME={root} and put {root}/bin on PATH.",
                (SetEnv("CUDA_HOME", root), SetEnv("PATH", posixpath.join(root, "bin"), prepend=True)))]


def cuda_version_mismatch(v: Mapping[str, Any]) -> list[Fix]:
    matching, torch_cuda, nvcc_cuda = v.get("matching_toolkit"), v.get("torch_cuda"), v.get("nvcc_cuda")
    if matching:
        return [Fix("user", f"Point CUDA_HOME at {matching}.", (SetEnv("CUDA_HOME", matching),))]
    return [Fix("manual", f"Install a CUDA {torch_cuda or 'torch.version.cuda'} toolkit, or a torch build for CUDA "
                          f"{nvcc_cuda or 'your toolkit'}.")]
