"""Whether the inspected Python has its C headers (Python.h), without running it.

Triton builds its launcher with ``-I sysconfig.get_paths()["include"]`` (triton/runtime/build.py,
Debian's posix_local scheme mapped to posix_prefix) and torch's cpp_extension does the same for
extensions. For CPython's posix_prefix scheme that directory is
``{installed_base}/include/python{X.Y}{abiflags}``, installed_base being sys.base_prefix; the
abiflags are empty for a regular 3.8+ build and ``t`` for a free-threaded one (python3.13t).
"""

from __future__ import annotations

import posixpath
from typing import NamedTuple


class PythonHeaders(NamedTuple):
    """Whether the interpreter's ``Python.h`` is installed (Triton's launcher and every C extension
    build include it)."""

    python: str | None  # the interpreter's executable
    version: str | None  # "3.12"
    include_dir: str | None
    present: bool | None  # None: unknown (unknown_reason says why)
    unknown_reason: str | None = None


def include_dir(base_prefix: str, version: str, executable: str) -> str:
    short = ".".join(version.split(".")[:2])
    free_threaded = posixpath.basename(executable).endswith(f"{short}t")
    return posixpath.join(base_prefix, "include", f"python{short}{'t' if free_threaded else ''}")


def probe_python_headers(host) -> PythonHeaders:
    info = host.system()
    if info is None or not info.base_prefix or not info.python_version:
        return PythonHeaders(None, None, None, None, "the Python's prefix and version are unknown")
    directory = include_dir(info.base_prefix, info.python_version, info.python_executable or "")
    header = host.stat(posixpath.join(directory, "Python.h"))
    short = ".".join(info.python_version.split(".")[:2])
    if header.exists:
        return PythonHeaders(info.python_executable, short, directory, True)
    if header.error == "missing":
        return PythonHeaders(info.python_executable, short, directory, False)
    why = header.error or "unknown"
    return PythonHeaders(info.python_executable, short, directory, None, f"{directory}/Python.h could not be examined ({why})")
