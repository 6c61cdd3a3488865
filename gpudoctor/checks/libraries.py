"""A CUDA library on LD_LIBRARY_PATH older than the one torch's nvidia-* wheel ships (issue 15).

The loader takes the first file with the soname it looks for, and LD_LIBRARY_PATH comes before
the wheel's own directory (DT_RUNPATH). A copy of the same soname that is older by a minor
release lacks the versioned symbols the wheel's other libraries were linked against:
`libcusparse.so.12: undefined symbol: __nvJitLinkComplete_12_4, version libnvJitLink.so.12`
(pytorch/pytorch#131312). Another soname major (libcudart.so.11 beside a CUDA 12 wheel) is a
different library, never loaded in its place, so it is not reported."""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

from ..probes.compat_data import compat_tables
from .base import Skip, finding, fixes_for


def _wheel_versions(packages) -> dict[tuple[str, int], tuple[str, Version]]:
    """(library stem, soname major) -> (wheel name, version) for the installed nvidia-* wheels."""
    found: dict[tuple[str, int], tuple[str, Version]] = {}
    for stem, names in compat_tables()["wheel_libraries"].items():
        for name in names:
            dist = packages.get(name)
            if dist is None:
                continue
            try:
                version = Version(dist.version)
            except InvalidVersion:
                continue
            found.setdefault((stem, version.release[0]), (dist.name, version))
    return found


def check_cuda_library_shadowed(ld_path_libraries, packages):
    wheels = _wheel_versions(packages)
    if not wheels:
        raise Skip("no nvidia-* CUDA library wheels are installed, so none can be shadowed")
    if not ld_path_libraries.ld_library_path:
        return []
    shadows, unknown, seen = [], [], set()
    for copy in ld_path_libraries.copies:  # LD_LIBRARY_PATH order: the first copy of a soname is the one loaded
        key = (copy.stem, int(copy.soname_major))
        if key in seen or key not in wheels:
            continue
        seen.add(key)
        wheel, wheel_version = wheels[key]
        if copy.version is None:
            unknown.append(f"{copy.directory}/{copy.file}")
        elif copy.version[:2] < wheel_version.release[:2]:
            shadows.append((copy, wheel, wheel_version))
    if not shadows:
        if unknown:
            raise Skip(f"{', '.join(unknown)} shadow{'s' if len(unknown) == 1 else ''} a wheel's library but "
                       "shows no version in its name; whether it is older is unknown")
        if ld_path_libraries.unreadable:
            raise Skip(f"LD_LIBRARY_PATH entries could not be listed: {', '.join(ld_path_libraries.unreadable)}")
        if ld_path_libraries.truncated:
            raise Skip("LD_LIBRARY_PATH has more entries than gpudoctor examines")
        return []
    directories = list(dict.fromkeys(copy.directory for copy, _, _ in shadows))
    described = "; ".join(f"{copy.directory}/{copy.file} ({'.'.join(map(str, copy.version))}) before "
                          f"{wheel} {version}'s {copy.stem}.so.{copy.soname_major}" for copy, wheel, version in shadows)
    first, wheel, version = shadows[0]
    return [finding(
        "cuda-library-shadowed",
        f"LD_LIBRARY_PATH puts older CUDA libraries ahead of the ones torch's wheels ship: {described}. The older copy is "
        f"loaded, and libraries built against {first.stem} {version.release[0]}.{version.release[1]} fail with "
        "`undefined symbol: …, version " + f"{first.stem}.so.{first.soname_major}`.",
        {"shadows": [{"file": f"{c.directory}/{c.file}", "version": ".".join(map(str, c.version)), "wheel": w,
                      "wheel_version": str(v)} for c, w, v in shadows],
         "directories": directories, "ld_library_path": ld_path_libraries.ld_library_path},
        fixes_for("cuda-library-shadowed", {"shadow_dirs": tuple(directories), "wheel": wheel}),
    )]
