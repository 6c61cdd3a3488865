"""CUDA libraries found on LD_LIBRARY_PATH, with the version each file name shows.

The loader searches LD_LIBRARY_PATH before a library's DT_RUNPATH, so a libcublas.so.13 or
libnvJitLink.so.12 in one of those directories is loaded instead of the copy torch's nvidia-*
wheel ships (pytorch/pytorch#131312, #134929). Only names are read: one listing per directory
and, for a bare soname link (``libnvJitLink.so.12`` without the full version beside it), the
link's target. Nothing is loaded or opened.
"""

from __future__ import annotations

import posixpath
import re
from typing import NamedTuple

# libNAME.so.MAJOR[.MINOR[.PATCH[.BUILD]]], the names toolkits and wheels give their libraries.
_LIBRARY = re.compile(r"^(lib[A-Za-z]+)\.so\.(\d{1,3}(?:\.\d{1,6}){0,3})$")
MAX_ENTRIES = 64  # LD_LIBRARY_PATH entries examined; a longer one is cut (and said so)


class LibraryCopy(NamedTuple):
    """One CUDA library (libcublas, libcudnn, ...) found in a directory of ``LD_LIBRARY_PATH``."""

    directory: str
    stem: str  # libcublas
    soname_major: str  # "13": the soname is libcublas.so.13
    version: tuple[int, ...] | None  # the full version the file names show, None when only the soname is there
    file: str  # the file that showed the version (or the soname link)


class LdPathLibraries(NamedTuple):
    """The CUDA libraries ``LD_LIBRARY_PATH`` puts in front of the ones torch's wheels bring."""

    ld_library_path: str | None
    copies: tuple[LibraryCopy, ...]
    unreadable: tuple[str, ...]  # entries that could not be listed (and why is not known: not recorded, permission)
    truncated: bool = False


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def library_copies(directory: str, names: list[str], stems: frozenset[str], link_target) -> list[LibraryCopy]:
    """The copies of ``stems`` a directory listing shows: for each (stem, soname major), the
    longest version among its file names, else the version its soname link points at."""
    best: dict[tuple[str, str], tuple[tuple[int, ...], str]] = {}
    sonames: dict[tuple[str, str], str] = {}
    for name in names:
        match = _LIBRARY.match(name)
        if match is None or match.group(1) not in stems:
            continue
        stem, version = match.group(1), _version(match.group(2))
        key = (stem, str(version[0]))
        if len(version) == 1:
            sonames[key] = name
            continue
        if key not in best or len(version) > len(best[key][0]):
            best[key] = (version, name)
    copies = []
    for key in sorted(set(best) | set(sonames)):
        stem, major = key
        if key in best:
            version, name = best[key]
        else:
            name, version = sonames[key], None
            target = link_target(posixpath.join(directory, name))
            found = _LIBRARY.match(posixpath.basename(target)) if target else None
            if found and found.group(1) == stem and len(_version(found.group(2))) > 1:
                version = _version(found.group(2))
        copies.append(LibraryCopy(directory, stem, major, version, name))
    return copies


def probe_ld_path_libraries(host, stems: frozenset[str]) -> LdPathLibraries:
    value = host.env.get("LD_LIBRARY_PATH")
    if not value:
        return LdPathLibraries(value, (), ())
    entries = [e for e in dict.fromkeys(value.split(":")) if e.startswith("/")]
    truncated = len(entries) > MAX_ENTRIES

    def link_target(path: str) -> str | None:
        info = host.stat(path)
        return info.realpath or info.link_target if info.exists else None

    copies: list[LibraryCopy] = []
    unreadable: list[str] = []
    for directory in entries[:MAX_ENTRIES]:
        names = host.listdir(directory)
        if names is None:
            info = host.stat(directory)
            if info.exists or info.error != "missing":  # unlistable, or not recorded in a snapshot: unknown
                unreadable.append(directory)
            continue  # a directory that does not exist holds nothing to load
        copies.extend(library_copies(directory, names, stems, link_target))
    return LdPathLibraries(value, tuple(copies), tuple(unreadable), truncated)
