"""Checks of the runtime environment: Triton's cache, /dev/shm, library search paths."""

from __future__ import annotations

import posixpath

from .base import Skip, finding, fixes_for
from ..probes.runtime import MIN_CACHE_FREE

MIN_SHM = 1 << 30


def check_triton_cache_unwritable(runtime, packages, dirs):
    if packages.triton is None:
        raise Skip("Triton is not installed")
    if runtime.triton_cache_checked is None:
        raise Skip(f"could not examine {runtime.triton_cache_dir}")
    problem = None
    if not runtime.triton_cache_writable:
        problem = f"{runtime.triton_cache_checked} is not writable"
    elif runtime.triton_cache_free is not None and runtime.triton_cache_free < MIN_CACHE_FREE:
        problem = f"only {runtime.triton_cache_free // (1 << 20)} MiB free under {runtime.triton_cache_checked}"
    if problem is None:
        return []
    new = posixpath.join(dirs.cache, "triton")
    return [finding(
        "triton-cache-unwritable",
        f"Triton caches compiled kernels in {runtime.triton_cache_dir} (via {runtime.triton_cache_via}); {problem}.",
        {"cache_dir": runtime.triton_cache_dir, "via": runtime.triton_cache_via, "checked": runtime.triton_cache_checked,
         "writable": runtime.triton_cache_writable, "free_bytes": runtime.triton_cache_free},
        fixes_for("triton-cache-unwritable", {"new_cache_dir": new}),
    )]


def check_shm_too_small(system):
    if system.info is None or system.info.shm is None:
        raise Skip("/dev/shm size unknown")
    total, _free = system.info.shm
    if total >= MIN_SHM:
        return []
    return [finding(
        "shm-too-small",
        f"/dev/shm is {total // (1 << 20)} MiB: DataLoader workers and NCCL die with `Bus error`.",
        {"shm_bytes": total, "container": system.container},
        fixes_for("shm-too-small"),
    )]


def check_ld_library_path_insecure(runtime):
    findings = []
    for problem in runtime.unsafe_path_entries:
        what = {"empty": "an empty entry (the current directory)", "relative": f"a relative entry {problem.entry!r}",
                "world-writable": f"{problem.entry}, which anyone can write to",
                "shared-temp": f"{problem.entry}, a shared temporary directory (the sticky bit stops renames, "
                               "not new files: anyone can add one)",
                "foreign-owner": f"{problem.entry}, owned by another user (uid {problem.detail})",
                "unsafe-parent": f"{problem.entry}, below {problem.detail}, which another user can change",
                "creatable": f"{problem.entry}, which does not exist yet; whoever creates it in {problem.detail} "
                             "decides what is loaded"}.get(problem.problem, f"{problem.entry} ({problem.problem})")
        findings.append(finding(
            "ld-library-path-insecure",
            f"{problem.variable} contains {what}.",
            {"variable": problem.variable, "entry": problem.entry, "problem": problem.problem,
             "detail": problem.detail},
            fixes_for("ld-library-path-insecure", {"variable": problem.variable, "entry": problem.entry}),
        ))
    return findings
