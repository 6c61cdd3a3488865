"""libcuda facts: where the driver library is, found exactly as Triton finds it, plus the usual
places; versioned vs unversioned names, stubs and forward-compat copies."""

from __future__ import annotations

import posixpath
from typing import NamedTuple

from .parse import ldconfig_entries, libcuda_file_version

LDCONFIG = "/sbin/ldconfig"
USUAL_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/lib/x86_64-linux-gnu",
    "/usr/lib64",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib/wsl/lib",
    "/usr/lib64-nvidia",
    "/usr/local/nvidia/lib64",
    "/usr/local/nvidia/lib",
)


class LibcudaDir(NamedTuple):
    """One directory that holds (or should hold) ``libcuda.so``, and how it was found."""

    path: str
    sources: tuple[str, ...]  # ldconfig, LD_LIBRARY_PATH, LIBRARY_PATH, TRITON_LIBCUDA_PATH, usual, compat, conda, toolkit-stubs
    has_versioned: bool  # libcuda.so.1
    has_unversioned: bool  # libcuda.so (file or working symlink)
    unversioned_target: str | None
    version: str | None  # e.g. 580.95.05, from libcuda.so.<version> or libcuda.so.1's target
    is_stub: bool
    is_compat: bool


class TritonLibcuda(NamedTuple):
    """``ldconfig -p`` and what Triton makes of it: the part of the libcuda facts the link test
    needs, probed on its own so the link test need not wait for the directory scan."""

    ldconfig_ok: bool
    ldconfig_error: str | None
    ldconfig_paths: tuple[str, ...]  # every path ldconfig -p lists for libcuda.so.1
    triton_dirs: tuple[str, ...]  # what triton's libcuda_dirs() would return
    triton_dirs_error: str | None  # the assertion triton would raise instead


class LibcudaFacts(NamedTuple):
    """Where ``libcuda.so`` is on this machine and whether Triton's way of finding it succeeds."""

    triton: TritonLibcuda  # ldconfig and Triton's view of it (also read through the properties below)
    triton_libcuda_path: str | None
    ld_library_path: tuple[str, ...]
    library_path: tuple[str, ...]
    dirs: tuple[LibcudaDir, ...]

    @property
    def ldconfig_ok(self) -> bool:
        return self.triton.ldconfig_ok

    @property
    def ldconfig_error(self) -> str | None:
        return self.triton.ldconfig_error

    @property
    def ldconfig_paths(self) -> tuple[str, ...]:
        return self.triton.ldconfig_paths

    @property
    def triton_dirs(self) -> tuple[str, ...]:
        return self.triton.triton_dirs

    @property
    def triton_dirs_error(self) -> str | None:
        return self.triton.triton_dirs_error

    def real_dirs(self) -> list[LibcudaDir]:
        """Directories holding the real driver library (not stubs, not compat)."""
        return [d for d in self.dirs if d.has_versioned and not d.is_stub and not d.is_compat]

    def dir(self, path: str) -> LibcudaDir | None:
        for entry in self.dirs:
            if entry.path == path:
                return entry
        return None


def _split_path(value: str | None) -> tuple[str, ...]:
    return tuple(value.split(":")) if value else ()


def probe_triton_libcuda(host) -> TritonLibcuda:
    env = host.env
    ldconfig = host.run((LDCONFIG, "-p"))
    ldconfig_paths: tuple[str, ...] = ()
    if ldconfig.ok:
        ldconfig_paths = tuple(p for name, _, p in ldconfig_entries(ldconfig.stdout) if name == "libcuda.so.1")
    triton_dirs, triton_error = _triton_libcuda_dirs(host, env.get("TRITON_LIBCUDA_PATH") or None, ldconfig,
                                                     ldconfig_paths, _split_path(env.get("LD_LIBRARY_PATH")))
    return TritonLibcuda(ldconfig.ok, None if ldconfig.ok else ldconfig.why_not(), ldconfig_paths,
                         triton_dirs, triton_error)


def probe_libcuda(host, triton: TritonLibcuda | None = None) -> LibcudaFacts:
    env = host.env
    triton = triton or probe_triton_libcuda(host)
    ldconfig_paths = triton.ldconfig_paths
    ld_library_path = _split_path(env.get("LD_LIBRARY_PATH"))
    library_path = _split_path(env.get("LIBRARY_PATH"))
    triton_env = env.get("TRITON_LIBCUDA_PATH") or None

    sources: dict[str, list[str]] = {}

    def add(path: str, source: str) -> None:
        if path and path.startswith("/"):
            sources.setdefault(path.rstrip("/") or "/", []).append(source)

    for path in ldconfig_paths:
        add(posixpath.dirname(path), "ldconfig")
    if triton_env:
        add(triton_env, "TRITON_LIBCUDA_PATH")
    for path in ld_library_path:
        add(path, "LD_LIBRARY_PATH")
    for path in library_path:
        add(path, "LIBRARY_PATH")
    for path in USUAL_DIRS:
        add(path, "usual")
    # Toolkit roots as the environment names them (not from the toolchain probe, so the two run
    # side by side): their compat/ and stubs/ directories are where stray libcudas come from.
    roots = [r for r in (env.get("CUDA_HOME"), env.get("CUDA_PATH")) if r]
    for root in dict.fromkeys(("/usr/local/cuda", *roots, *host.glob("/usr/local/cuda-*"))):
        add(posixpath.join(root, "compat"), "compat")
        add(posixpath.join(root, "lib64", "stubs"), "toolkit-stubs")
        add(posixpath.join(root, "targets", "x86_64-linux", "lib", "stubs"), "toolkit-stubs")
    conda = env.get("CONDA_PREFIX")
    if conda:
        add(posixpath.join(conda, "lib"), "conda")
        add(posixpath.join(conda, "lib", "stubs"), "conda")

    dirs = []
    for path, srcs in sources.items():
        entry = _probe_dir(host, path, tuple(dict.fromkeys(srcs)))
        if entry is not None:
            dirs.append(entry)

    return LibcudaFacts(
        triton=triton,
        triton_libcuda_path=triton_env,
        ld_library_path=ld_library_path,
        library_path=library_path,
        dirs=tuple(dirs),
    )


def _probe_dir(host, path: str, sources: tuple[str, ...]) -> LibcudaDir | None:
    entries = host.listdir(path)
    if not entries:
        return None
    names = [e for e in entries if e == "libcuda.so" or e.startswith("libcuda.so.")]
    if not names:
        return None
    has_versioned = "libcuda.so.1" in names and host.stat(posixpath.join(path, "libcuda.so.1")).exists
    unversioned = host.stat(posixpath.join(path, "libcuda.so")) if "libcuda.so" in names else None
    version = next((v for v in map(libcuda_file_version, names) if v and v != "1"), None)
    if version is None and has_versioned:
        real = host.stat(posixpath.join(path, "libcuda.so.1")).realpath or ""
        version = libcuda_file_version(posixpath.basename(real))
    return LibcudaDir(
        path=path,
        sources=sources,
        has_versioned=has_versioned,
        has_unversioned=bool(unversioned and unversioned.exists),
        unversioned_target=unversioned.link_target if unversioned else None,
        version=version if version != "1" else None,
        is_stub="stubs" in path.split("/"),
        is_compat=path.rstrip("/").endswith("/compat") or "toolkit-compat" in sources,
    )


def _triton_libcuda_dirs(host, env_path, ldconfig, ldconfig_paths, ld_library_path):
    """Triton's third_party/nvidia/backend/driver.py::libcuda_dirs(), replayed on this host."""
    if env_path:
        return (env_path,), None
    if not ldconfig.ok:
        # Triton calls subprocess.check_output(["/sbin/ldconfig", "-p"]) unguarded.
        return (), f"{ldconfig.why_not()}, which Triton does not survive"
    dirs = [posixpath.dirname(p) for p in ldconfig_paths]
    if not dirs and ld_library_path:
        dirs = [d for d in ld_library_path if d and host.stat(posixpath.join(d, "libcuda.so.1")).exists]
    if not any(host.stat(posixpath.join(d, "libcuda.so.1")).exists for d in dirs):
        return tuple(dirs), "libcuda.so cannot found!"
    return tuple(dict.fromkeys(dirs)), None
