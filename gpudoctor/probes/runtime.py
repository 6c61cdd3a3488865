"""Runtime facts: Triton's cache directory, /dev/shm, and unsafe search path entries.

Search paths (issue 14 item 10): LD_LIBRARY_PATH, LIBRARY_PATH, PATH, PYTHONPATH and LD_PRELOAD.
An entry is unsafe when someone other than the user (or root) can put a file there: empty or
relative (the current directory), writable by others (a sticky /tmp or /dev/shm too: the
sticky bit stops renames, not new files), owned by another user, below a parent another user
controls, or not existing yet where others can create it."""

from __future__ import annotations

import posixpath
from typing import NamedTuple

MIN_CACHE_FREE = 1 << 30  # 1 GiB: a few hundred compiled kernels plus headroom


class PathEntryProblem(NamedTuple):
    """One unsafe or useless entry of a search-path variable (PATH, LD_LIBRARY_PATH, ...)."""

    variable: str
    entry: str
    problem: str  # empty | relative | world-writable | shared-temp | foreign-owner | unsafe-parent | creatable
    detail: str = ""  # the path that makes it unsafe (an ancestor, the nearest existing parent)


class RuntimeFacts(NamedTuple):
    """Where Triton would write its cache and whether it can, and the unsafe search-path entries."""

    triton_cache_dir: str
    triton_cache_via: str
    triton_cache_exists: bool
    triton_cache_checked: str | None  # the nearest existing directory we tested
    triton_cache_writable: bool | None
    triton_cache_free: int | None
    unsafe_path_entries: tuple[PathEntryProblem, ...]


def triton_cache_dir(env) -> tuple[str, str]:
    """Triton's knobs: TRITON_CACHE_DIR, else $TRITON_HOME/.triton/cache, else ~/.triton/cache."""
    if env.get("TRITON_CACHE_DIR"):
        return env["TRITON_CACHE_DIR"], "TRITON_CACHE_DIR"
    if env.get("TRITON_HOME"):
        return posixpath.join(env["TRITON_HOME"], ".triton", "cache"), "TRITON_HOME"
    return posixpath.join(env.get("HOME", "/root"), ".triton", "cache"), "HOME"


def probe_runtime(host) -> RuntimeFacts:
    cache, via = triton_cache_dir(host.env)
    info = host.stat(cache)
    checked = cache if info.exists else None
    probe_dir = cache
    while checked is None and probe_dir not in ("/", ""):
        probe_dir = posixpath.dirname(probe_dir)
        if host.stat(probe_dir).exists:
            checked = probe_dir
    writable = host.writable(checked) if checked else None
    free = host.disk_free(checked) if checked else None

    problems: list[PathEntryProblem] = []
    euid = _euid(host)
    for variable in SEARCH_PATH_VARIABLES:
        value = host.env.get(variable)
        if value is None:
            continue
        entries = value.replace(" ", ":").split(":") if variable == "LD_PRELOAD" else value.split(":")
        for entry in entries:
            if variable == "LD_PRELOAD" and ("/" not in entry):
                continue  # empty or a bare name: the loader looks it up in its own trusted dirs
            problem = _entry_problem(host, entry, euid)
            if problem is not None:
                problems.append(PathEntryProblem(variable, entry, *problem))
    return RuntimeFacts(cache, via, info.exists, checked, writable, free, tuple(problems))


SEARCH_PATH_VARIABLES = ("LD_LIBRARY_PATH", "LIBRARY_PATH", "PATH", "PYTHONPATH", "LD_PRELOAD")


def _euid(host) -> int | None:
    try:
        return host.system().euid
    except Exception:  # noqa: BLE001 - a host without system facts: owners are not judged
        return None


def _entry_problem(host, entry: str, euid: int | None) -> tuple[str, str] | None:
    if entry == "":
        return "empty", ""
    if not entry.startswith("/"):
        return "relative", ""
    st = host.stat(entry)
    if not st.exists:
        parent = posixpath.dirname(entry.rstrip("/")) or "/"
        while parent != "/" and not host.stat(parent).exists:
            parent = posixpath.dirname(parent)
        pst = host.stat(parent)
        if pst.exists and (pst.mode & 0o022 or (euid is not None and pst.uid not in (0, euid))):
            return "creatable", parent
        return None  # only you or root could create it
    if st.mode & 0o022:
        return ("world-writable" if not st.sticky else "shared-temp"), ""
    if euid is not None and st.uid not in (0, euid):
        return "foreign-owner", str(st.uid)
    parent = posixpath.dirname((st.realpath or entry).rstrip("/"))
    while parent:
        pst = host.stat(parent)
        if pst.exists and ((pst.mode & 0o022 and not pst.sticky) or (euid is not None and pst.uid not in (0, euid))):
            return "unsafe-parent", parent
        if parent == "/":
            break
        parent = posixpath.dirname(parent)
    return None
