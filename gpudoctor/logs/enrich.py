"""Machine-specific fixes: name the real paths of *this* machine in a fix.

A log says `cannot find -lcuda`; the fix needs the directory where libcuda.so.1 lives here.
A log says `gcc versions later than 12`; the fix needs a gcc-N <= 12 installed here. These
lookups are small and injectable: pass a ``MachineFacts`` (tests do), a gpudoctor Host (the
lead's probes answer), or nothing (no lookups at all: a log from another machine).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..model import Fix, InstallPackage, MakeDir, RootCommand, SetEnv, Symlink
from ..paths import GpudoctorDirs

_USUAL_LIBCUDA_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib64",
    "/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib/wsl/lib",
    "/usr/local/nvidia/lib64",
    "/usr/local/nvidia/lib",
)
_GCC_NAME = re.compile(r"^gcc-(\d{1,2})$")

LOCAL = "local"  # host value meaning: look at this machine with glob/which, without gpudoctor.host


@dataclass(frozen=True)
class MachineFacts:
    libcuda_dirs: tuple[str, ...] = ()  # directories holding the real driver's libcuda.so.1
    gcc_by_major: Mapping[int, tuple[str, str | None]] = field(default_factory=dict)  # major -> (gcc, g++)
    package_manager: str | None = None  # apt | dnf | yum | zypper | pacman
    dirs: GpudoctorDirs = field(default_factory=GpudoctorDirs.from_env)


def _local_libcuda_dirs() -> tuple[str, ...]:
    found = []
    for directory in _USUAL_LIBCUDA_DIRS:
        path = os.path.join(directory, "libcuda.so.1")
        if os.path.exists(path) and "/stubs" not in directory:
            found.append(directory)
    return tuple(found)


def _local_gccs() -> dict[int, tuple[str, str | None]]:
    compilers: dict[int, tuple[str, str | None]] = {}
    for directory in dict.fromkeys(os.environ.get("PATH", "/usr/bin").split(os.pathsep)):
        for path in glob.glob(os.path.join(glob.escape(directory), "gcc-[0-9]*")):
            match = _GCC_NAME.match(os.path.basename(path))
            if match and os.access(path, os.X_OK):
                major = int(match.group(1))
                gxx = os.path.join(directory, f"g++-{major}")
                compilers.setdefault(major, (path, gxx if os.access(gxx, os.X_OK) else None))
    return compilers


def _local_package_manager() -> str | None:
    for manager, binary in (("apt", "apt-get"), ("dnf", "dnf"), ("yum", "yum"), ("zypper", "zypper"), ("pacman", "pacman")):
        if shutil.which(binary):
            return manager
    return None


def _facts_from_probes(host: Any) -> MachineFacts:
    """Use the lead's probes when given a gpudoctor Host."""
    from ..probes.libcuda import probe_libcuda
    from ..probes.toolchain import probe_toolchain

    libcuda = tuple(d.path for d in probe_libcuda(host).real_dirs())
    gccs: dict[int, tuple[str, str | None]] = {}
    for compiler in probe_toolchain(host).compilers:
        if compiler.family == "gcc" and compiler.version:
            major = compiler.version[0]
            gxx = compiler.path.replace("gcc", "g++")
            gccs.setdefault(major, (compiler.path, gxx if host.which(gxx) else None))
    return MachineFacts(libcuda, gccs, _local_package_manager(), GpudoctorDirs.from_env(host.env))


def local_facts() -> MachineFacts:
    return MachineFacts(_local_libcuda_dirs(), _local_gccs(), _local_package_manager())


def machine_facts(host: Any) -> MachineFacts | None:
    """``host``: None (no lookups), a MachineFacts (used as is), LOCAL, or a gpudoctor Host."""
    if host is None or isinstance(host, MachineFacts):
        return host
    if host == LOCAL:
        return local_facts()
    try:
        return _facts_from_probes(host)
    except Exception:  # the probes are optional; fall back to our own lookups
        return local_facts()


def _libcuda_fixes(facts: MachineFacts) -> list[Fix]:
    if not facts.libcuda_dirs:
        return [Fix("manual", "No libcuda.so.1 was found on this machine: install the NVIDIA driver (or expose it to this container).")]
    real_dir = facts.libcuda_dirs[0]
    target = os.path.join(real_dir, "libcuda.so.1")
    stub_dir = facts.dirs.stub_lib_dir
    link = os.path.join(stub_dir, "libcuda.so")
    user = Fix(
        "user",
        f"Create {link} -> {target} and point Triton and the linker at {stub_dir} (no root).",
        actions=(
            MakeDir(stub_dir),
            Symlink(link=link, target=target),
            SetEnv("TRITON_LIBCUDA_PATH", stub_dir),
            SetEnv("LIBRARY_PATH", stub_dir, prepend=True),
        ),
        commands=(
            f"mkdir -p {stub_dir}",
            f"ln -s {target} {link}",
            f"export TRITON_LIBCUDA_PATH={stub_dir}",
            f'export LIBRARY_PATH={stub_dir}${{LIBRARY_PATH:+:$LIBRARY_PATH}}',
        ),
        env={"TRITON_LIBCUDA_PATH": stub_dir},
    )
    system_link = os.path.join(real_dir, "libcuda.so")
    system = Fix(
        "system",
        f"Create the unversioned symlink next to the driver library (root): {system_link}.",
        actions=(RootCommand(("ln", "-s", "libcuda.so.1", system_link), undo_argv=("rm", system_link)),),
        commands=(f"sudo ln -s libcuda.so.1 {system_link}",),
    )
    return [user, system]


def _gcc_fixes(facts: MachineFacts, values: Mapping[str, str]) -> list[Fix]:
    limit_text = values.get("gcc_limit", "")
    if not limit_text.isdigit():
        return []
    limit = int(limit_text)
    usable = sorted((m for m in facts.gcc_by_major if m <= limit), reverse=True)
    if usable:
        gcc, gxx = facts.gcc_by_major[usable[0]]
        cxx = gxx or gcc
        env = {"NVCC_CCBIN": cxx, "CC": gcc, "CXX": cxx, "CUDAHOSTCXX": cxx}
        return [
            Fix(
                "user",
                f"Build CUDA code with gcc {usable[0]} ({gcc}), which is installed here and supported by this CUDA.",
                actions=tuple(SetEnv(k, v) for k, v in env.items()),
                commands=(" ".join(["export"] + [f"{k}={v}" for k, v in env.items()]),),
                env=env,
            )
        ]
    manager = facts.package_manager or "apt"
    packages = (f"gcc-{limit}", f"g++-{limit}") if manager == "apt" else (f"gcc{limit}", f"gcc{limit}-c++")
    return [
        Fix(
            "system",
            f"No gcc <= {limit} is installed here; install gcc {limit} and build with it.",
            actions=(InstallPackage(manager, packages),),
            commands=(f"sudo {'apt-get' if manager == 'apt' else manager} install -y {' '.join(packages)}",),
        )
    ]


def machine_fixes(rule: str, values: Mapping[str, str], facts: MachineFacts | None) -> list[Fix]:
    """Fixes naming this machine's paths, placed before the generic ones; [] without facts."""
    if facts is None:
        return []
    if rule in ("libcuda-unversioned-missing", "libcuda-not-in-linker-cache"):
        return _libcuda_fixes(facts)
    if rule == "nvcc-host-compiler-unsupported":
        return _gcc_fixes(facts, values)
    return []
