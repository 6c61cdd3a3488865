"""Runtime facts: Triton's cache directory, /dev/shm, and unsafe library search path entries."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

MIN_CACHE_FREE = 1 << 30  # 1 GiB: a few hundred compiled kernels plus headroom


@dataclass(frozen=True)
class PathEntryProblem:
    variable: str
    entry: str
    problem: str  # empty | relative | world-writable


@dataclass(frozen=True)
class RuntimeFacts:
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
    for variable in ("LD_LIBRARY_PATH", "LIBRARY_PATH"):
        value = host.env.get(variable)
        if value is None:
            continue
        for entry in value.split(":"):
            if entry == "":
                problems.append(PathEntryProblem(variable, entry, "empty"))
            elif not entry.startswith("/"):
                problems.append(PathEntryProblem(variable, entry, "relative"))
            else:
                st = host.stat(entry)
                if st.exists and st.is_dir and st.world_writable and not st.sticky:
                    problems.append(PathEntryProblem(variable, entry, "world-writable"))
    return RuntimeFacts(cache, via, info.exists, checked, writable, free, tuple(problems))
