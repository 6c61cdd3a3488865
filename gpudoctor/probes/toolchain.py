"""Toolchain facts: CUDA toolkits with their own host-compiler limits, and C/C++ compilers."""

from __future__ import annotations

import posixpath
import re
from typing import NamedTuple

from ..threads import map_in_threads
from .parse import compiler_version, cuda_header_version, cuda_version_json, host_compiler_limits, nvcc_release

COMPILER_ENV = ("CC", "CXX", "CUDAHOSTCXX", "NVCC_CCBIN")
_VERSIONED_COMPILER = re.compile(r"^(gcc|g\+\+|clang|clang\+\+)-(\d+)$")


class CudaToolkit(NamedTuple):
    """One CUDA toolkit installation and the newest host compilers its ``host_config.h`` accepts."""

    root: str
    found_via: tuple[str, ...]  # CUDA_HOME, CUDA_PATH, PATH, /usr/local/cuda, glob
    version: tuple[int, int] | None
    max_gcc: int | None  # from the toolkit's own crt/host_config.h
    max_clang: int | None
    limits_source: str | None  # path of host_config.h, or None when it could not be read


class Compiler(NamedTuple):
    """One C/C++ compiler found on this machine, and how it was found."""

    path: str
    family: str  # gcc | clang
    version: tuple[int, ...] | None
    via: str  # CC, CXX, PATH:gcc, PATH:gcc-12, ...
    cxx: str | None = None  # the matching C++ driver beside a gcc-N / clang-N (g++-N, clang++-N)
    aliases: tuple[str, ...] = ()  # other names of the same file (/usr/bin/gcc-12 for /bin/gcc)


class ToolchainFacts(NamedTuple):
    """The CUDA toolkits and compilers a build here would use: nvcc's, torch's cpp_extension's
    and Triton's launcher's."""

    toolkits: tuple[CudaToolkit, ...]
    compilers: tuple[Compiler, ...]
    compiler_env: dict[str, str]  # the compiler variables that are set (COMPILER_ENV)
    triton_cc: str | None = None  # the compiler Triton would use: $CC, else gcc, else clang
    triton_cc_exists: bool = False
    cpp_extension_toolkit: str | None = None  # root torch.utils.cpp_extension would pick
    cpp_extension_via: str | None = None
    default_gcc: str | None = None  # `gcc` on PATH: nvcc's host compiler unless -ccbin says otherwise

    def active_toolkit(self) -> CudaToolkit | None:
        """The toolkit builds would use: the one torch's cpp_extension resolves, else the first."""
        for toolkit in self.toolkits:
            if toolkit.root == self.cpp_extension_toolkit:
                return toolkit
        return None

    def compiler_at(self, path: str) -> Compiler | None:
        """The compiler at ``path``, under its own name or one of its aliases."""
        for compiler in self.compilers:
            if compiler.path == path or path in compiler.aliases:
                return compiler
        return None


def _family(path: str) -> str:
    return "clang" if "clang" in posixpath.basename(path) else "gcc"


class TritonCompiler(NamedTuple):
    """The C compiler Triton builds its launcher with: $CC, else gcc, else clang."""

    cc: str | None
    exists: bool


def probe_triton_cc(host) -> TritonCompiler:
    cc = host.env.get("CC") or host.which("gcc") or host.which("clang")
    return TritonCompiler(cc, bool(cc) and host.which(cc) is not None)


def probe_toolchain(host) -> ToolchainFacts:
    env = host.env
    # Toolkits are file reads and compilers are subprocesses: side by side, the reads happen
    # while the compilers answer.
    # An error in either is raised here, after both finished (never printed by a thread).
    (toolkits, cpp_root, cpp_via), compilers = map_in_threads(
        lambda probe: probe(host), (_probe_toolkits, _probe_compilers), max_workers=2, name="gpudoctor-toolchain")
    triton = probe_triton_cc(host)
    cc, cc_exists = triton.cc, triton.exists
    return ToolchainFacts(
        toolkits=tuple(toolkits),
        compilers=tuple(compilers),
        compiler_env={k: env[k] for k in COMPILER_ENV if env.get(k)},
        triton_cc=cc,
        triton_cc_exists=cc_exists,
        cpp_extension_toolkit=cpp_root,
        cpp_extension_via=cpp_via,
        default_gcc=host.which("gcc"),
    )


def _probe_compilers(host) -> list[Compiler]:
    candidates: list[tuple[str, str]] = []  # (name or path, via)
    for name in COMPILER_ENV:
        if host.env.get(name):
            candidates.append((host.env[name], name))
    for name in ("gcc", "cc", "clang"):
        candidates.append((name, f"PATH:{name}"))
    # Versioned gccs (gcc-12, ...) are the replacements offered when nvcc refuses the default
    # compiler. Versioned clangs are not asked: no check uses them, and `clang-N --version`
    # loads all of LLVM (17 ms on the H200, the longest command of preflight's first call).
    for directory in _unique_dirs(host):
        for entry in host.listdir(directory) or []:
            match = _VERSIONED_COMPILER.match(entry)
            if match and match.group(1) == "gcc":
                candidates.append((posixpath.join(directory, entry), f"PATH:{entry}"))
    found = _one_name_per_file(host, candidates)
    # Each compiler answers in a few ms, but a machine has many (gcc, cc, g++, gcc-12, gcc-13,
    # ...); asking them side by side keeps the toolchain probe off the critical path.
    probed = map_in_threads(lambda item: _probe_compiler(host, item[0], item[1]), found, max_workers=8,
                            name="gpudoctor-cc")
    return [_with_aliases(host, compiler, aliases) for compiler, (_, _, aliases) in zip(probed, found)]


def _one_name_per_file(host, candidates) -> list[tuple[str, str, list[str]]]:
    """(path, via, aliases) once per compiler file, under the first name it was found by. With a
    merged /usr, /bin/gcc and /usr/bin/gcc are one file, `gcc` links to `gcc-12` and `cc` to
    `gcc`: the same compiler listed (and asked) under each name was judged as several."""
    found: list[tuple[str, str, list[str]]] = []
    by_file: dict[str, int] = {}
    for name, via in candidates:
        path = host.which(name)
        if path is None:
            continue
        real = host.stat(path).realpath or path
        index = by_file.get(real)
        if index is None:
            by_file[real] = len(found)
            found.append((path, via, []))
        elif path != found[index][0] and path not in found[index][2]:
            found[index][2].append(path)
    return found


def _with_aliases(host, compiler: Compiler, aliases: list[str]) -> Compiler:
    """The aliases recorded, and the C++ partner of a versioned alias (g++-12 beside gcc-12) when
    the first name has none: the fix that points CC/CXX at an older gcc needs both."""
    if not aliases:
        return compiler
    cxx = compiler.cxx or next((p for p in map(lambda a: _cxx_partner(host, a), aliases) if p), None)
    return compiler._replace(aliases=tuple(aliases), cxx=cxx)


def _unique_dirs(host) -> list[str]:
    """PATH's absolute directories, once each: with a merged /usr, /bin and /usr/bin are the
    same directory and would list every compiler twice."""
    unique, seen = [], set()
    for directory in dict.fromkeys(host.env.get("PATH", "").split(":")):
        if not directory or not directory.startswith("/"):
            continue
        real = host.stat(directory).realpath or directory
        if real not in seen:
            seen.add(real)
            unique.append(directory)
    return unique


def _probe_compiler(host, path: str, via: str) -> Compiler:
    family = _family(path)
    if posixpath.basename(path) == "cc" or via in COMPILER_ENV:
        # `cc` and $CC may be either family: ask it.
        probe = host.run((path, "--version"))
        family = "clang" if "clang" in probe.stdout.lower() else "gcc"
    if family == "clang":
        result = host.run((path, "--version"))
    else:
        result = host.run((path, "-dumpfullversion", "-dumpversion"))
    version = compiler_version(family, result.stdout) if result.ok else None
    return Compiler(path, family, version, via, _cxx_partner(host, path))


def _cxx_partner(host, path: str) -> str | None:
    directory, name = posixpath.split(path)
    match = _VERSIONED_COMPILER.match(name)
    if not match or match.group(1) not in ("gcc", "clang"):
        return None
    partner = f"{'g++' if match.group(1) == 'gcc' else 'clang++'}-{match.group(2)}"
    return posixpath.join(directory, partner) if partner in (host.listdir(directory) or []) else None


def _probe_toolkits(host) -> tuple[list[CudaToolkit], str | None]:
    found: dict[str, list[str]] = {}

    def add(root: str | None, via: str) -> None:
        if not root:
            return
        root = root.rstrip("/") or "/"
        # A toolkit has nvcc and its headers; a bin/nvcc wrapper script alone is not one.
        if host.stat(posixpath.join(root, "bin", "nvcc")).exists and host.stat(posixpath.join(root, "include", "cuda_runtime.h")).exists:
            found.setdefault(root, []).append(via)

    for name in ("CUDA_HOME", "CUDA_PATH"):
        add(host.env.get(name), name)
    nvcc = host.which("nvcc")
    nvcc_root = None
    if nvcc:
        info = host.stat(nvcc)
        real = info.realpath or nvcc
        nvcc_root = posixpath.dirname(posixpath.dirname(real))
        # A wrapper script on PATH (exec /usr/local/cuda-X/bin/nvcc) has no toolkit beside it.
        add(nvcc_root, "PATH")
    add("/usr/local/cuda", "/usr/local/cuda")
    for root in host.glob("/usr/local/cuda-*") + host.glob("/opt/cuda*"):
        add(root, "glob")

    # torch.utils.cpp_extension._find_cuda_home: CUDA_HOME or CUDA_PATH, else nvcc on PATH,
    # else /usr/local/cuda if it exists.
    cpp_root = host.env.get("CUDA_HOME") or host.env.get("CUDA_PATH")
    cpp_via = "CUDA_HOME" if host.env.get("CUDA_HOME") else "CUDA_PATH"
    if not cpp_root:
        if nvcc:
            # cpp_extension takes dirname(dirname(which nvcc)) without resolving links.
            cpp_root, cpp_via = posixpath.dirname(posixpath.dirname(nvcc)), f"nvcc on PATH ({nvcc})"
        elif host.stat("/usr/local/cuda").exists:
            cpp_root, cpp_via = "/usr/local/cuda", "/usr/local/cuda"
    if cpp_root:
        cpp_root = cpp_root.rstrip("/") or "/"

    toolkits = []
    real_seen: dict[str, int] = {}
    for root, via in found.items():
        real = host.stat(root).realpath or root
        if real in real_seen:  # /usr/local/cuda -> /usr/local/cuda-13.0: one toolkit, two names
            index = real_seen[real]
            toolkits[index] = _merge_via(toolkits[index], via, root)
            if root == cpp_root:
                cpp_root = toolkits[index].root
            continue
        real_seen[real] = len(toolkits)
        toolkits.append(_probe_toolkit(host, root, tuple(via)))
    return toolkits, cpp_root, cpp_via


def _merge_via(toolkit: CudaToolkit, via: list[str], root: str) -> CudaToolkit:
    return toolkit._replace(found_via=toolkit.found_via + tuple(via))


CUDA_H_HEAD_BYTES = 256 * 1024


def _probe_toolkit(host, root: str, via: tuple[str, ...]) -> CudaToolkit:
    version = None
    version_json = host.read_text(posixpath.join(root, "version.json"))
    if version_json.text:
        version = cuda_version_json(version_json.text)
    if version is None:
        # include/cuda.h says `#define CUDA_VERSION 13000`: a file read instead of running nvcc.
        # The define sits about 14 KB into the 1.1 MB header (CUDA 12.x/13.0): read the head only,
        # decoding the whole file cost ~5 ms of preflight's first call.
        cuda_h = host.read_text(posixpath.join(root, "include", "cuda.h"), max_bytes=CUDA_H_HEAD_BYTES)
        version = cuda_header_version(cuda_h.text) if cuda_h.text else None
    if version is None:
        result = host.run((posixpath.join(root, "bin", "nvcc"), "--version"), timeout=10.0)
        if result.ok:
            version = nvcc_release(result.stdout)
    limits, source = {}, None
    for candidate in ("include/crt/host_config.h", "targets/x86_64-linux/include/crt/host_config.h",
                      "targets/sbsa-linux/include/crt/host_config.h"):
        path = posixpath.join(root, candidate)
        text = host.read_text(path).text
        if text:
            limits, source = host_compiler_limits(text), path
            break
    return CudaToolkit(root, via, version, limits.get("gcc"), limits.get("clang"), source)
