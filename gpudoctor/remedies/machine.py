"""The machine a fix is for: the plain values remedies name in their fixes (the directory that
holds the real libcuda.so.1, the compilers installed, the package manager, gpudoctor's own
directories) and, for every rule the static checks found on it, the fixes they gave. Both come
from the same Facts every detector uses, so a log diagnosis, a static check and the training
pass give identical fixes for identical facts: where a static check sees the problem on this
machine, its remedy already had every value, and the other detectors take that fix."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from ..paths import GpudoctorDirs
from .installer import judged_python


@dataclass(frozen=True)
class Machine:
    """What a remedy may know about the machine to build a concrete fix: where the real libcuda is,
    which compilers and package manager exist, and the fixes the static checks already built."""

    libcuda_dirs: tuple[str, ...] = ()  # directories holding the driver's real libcuda.so.1, best first
    gcc_by_major: Mapping[int, tuple[str, str | None]] = field(default_factory=dict)  # major -> (gcc, g++)
    c_compilers: tuple[str, ...] = ()  # working C compilers found (gcc, clang), PATH order
    package_manager: str | None = None  # apt | dnf | yum | zypper | pacman
    # the judged interpreter as remedies/installer.judged_python gives it (python, python_has_pip,
    # uv_found; a key absent where not known), for the `<python> -m pip` a fix names
    interpreter: Mapping[str, Any] = field(default_factory=dict)
    dirs: GpudoctorDirs | None = None
    static_fixes: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)  # rule id -> fixes, from the checks

    def for_interpreter(self, executable: str) -> "Machine":
        """This machine as a process running ``executable`` sees it: the same paths and compilers, but
        pip commands for that interpreter, and without the static fixes (made for the inspected
        interpreter's packages) when it is another one."""
        if executable == self.interpreter.get("python"):
            return self
        return replace(self, interpreter={"python": executable}, static_fixes={})

    def values(self) -> dict[str, Any]:
        return {"libcuda_dirs": self.libcuda_dirs, "gcc_by_major": self.gcc_by_major,
                "c_compilers": self.c_compilers, "package_manager": self.package_manager, "dirs": self.dirs,
                **self.interpreter}


def distro_manager(system: Any) -> str | None:
    info = getattr(system, "info", None)
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


def _fact(facts: Any, name: str) -> Any:
    try:
        value = facts.get(name)
    except Exception:  # noqa: BLE001 - a fact we cannot learn leaves that part of the fix generic
        return None
    return None if isinstance(value, BaseException) else value  # a ProbeFailure: unknown


def libcuda_dirs(libcuda: Any) -> tuple[str, ...]:
    return tuple(d.path for d in libcuda.real_dirs()) if libcuda is not None else ()


def gcc_by_major(toolchain: Any) -> dict[int, tuple[str, str | None]]:
    """Each installed gcc major, first found on PATH first, with its g++ partner."""
    gccs: dict[int, tuple[str, str | None]] = {}
    for compiler in getattr(toolchain, "compilers", ()) or ():
        if compiler.family == "gcc" and compiler.version is not None:
            gccs.setdefault(compiler.version[0], (compiler.path, compiler.cxx))
    return gccs


def c_compilers(toolchain: Any) -> tuple[str, ...]:
    """C compilers that answered with a version (so they run), in probe order."""
    found: list[str] = []
    for compiler in getattr(toolchain, "compilers", ()) or ():
        if compiler.version is not None and compiler.family in ("gcc", "clang") and compiler.path not in found:
            found.append(compiler.path)
    return tuple(found)


def _static_fixes(facts: Any, findings: Any) -> dict[str, tuple[Any, ...]]:
    if findings is None:
        from ..engine import run_checks  # here, not at import: the checks import the remedies

        findings = [f for result in run_checks(facts) for f in result.findings]
    fixes: dict[str, tuple[Any, ...]] = {}
    for finding in findings:
        merged = fixes.get(finding.id, ())
        fixes[finding.id] = merged + tuple(fix for fix in finding.fixes if fix not in merged)
    return fixes


def machine_from_facts(facts: Any, findings: Any = None) -> Machine:
    """``facts``: a ``gpudoctor.facts.Facts`` (each fact probed once, shared with the checks).
    ``findings``: the static findings already computed over those facts (else the checks run)."""
    toolchain = _fact(facts, "toolchain")
    system = _fact(facts, "system")
    return Machine(
        libcuda_dirs=libcuda_dirs(_fact(facts, "libcuda")),
        gcc_by_major=gcc_by_major(toolchain),
        c_compilers=c_compilers(toolchain),
        package_manager=distro_manager(system),
        interpreter=judged_python(system, _fact(facts, "packages")),  # the values the static checks pass
        dirs=_fact(facts, "dirs"),
        static_fixes=_static_fixes(facts, findings),
    )
