"""Installed distributions read straight from the ``*.dist-info`` folders on ``sys.path``.

``importlib.metadata`` gives the same answers but costs 12-18 ms to import (it pulls in email,
csv and zipfile) and parses each METADATA with the email package; on the H200 image, with about
200 distributions, listing them took 117 ms inside ``preflight()``'s first call, whose whole
budget is 100 ms. Here name and version come from the folder name
(``name-version.dist-info``, the form PEP 491/PEP 376 installers write), and the METADATA
headers, RECORD and direct_url.json are read only for the few distributions whose details a
check needs. A ``.egg-info`` (setuptools' older layout, common in conda and distribution Pythons:
a folder holding PKG-INFO, or the PKG-INFO file itself) gives its name and version from the
PKG-INFO headers. Anything unusual (a zip or egg on ``sys.path``, a folder name that does not
parse, an egg-info without both headers or of a package whose files a check reads) is handed to
``importlib.metadata`` so its answer stays the reference.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Iterable

from .base import Distribution

# Native libraries whose presence inside a distribution we report (bitsandbytes' CUDA builds,
# flash-attn's extension); listing every file of every distribution would be slow.
INTERESTING_FILE_PREFIXES = ("bitsandbytes/libbitsandbytes", "flash_attn_2_cuda", "flash_attn_3")
DETAILED = ("torch", "bitsandbytes", "flash-attn", "flash-attn-3")
_DIST_INFO = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._]*?)-(\d[^-]*)\.dist-info$")
MAX_HEADER_BYTES = 1 << 20  # METADATA headers; the long description after them is never read


_NAME_SEPARATORS = re.compile(r"[-_.]+")


def canonicalize_name(name: str) -> str:
    """PEP 503 name normalization (what packaging.utils.canonicalize_name does). Spelled out
    because importing packaging.utils also imports packaging.tags (~8 ms), paid by every
    preflight() first call."""
    return _NAME_SEPARATORS.sub("-", name).lower()


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", errors="replace")
    except OSError:
        return None


def metadata_headers(path: str) -> dict[str, list[str]]:
    """The RFC 822 header block of a METADATA file (up to the first blank line), as
    {header name lowercased: [values]}; continuation lines are joined like email does."""
    headers: dict[str, list[str]] = {}
    data = b""
    try:
        with open(path, "rb") as handle:
            # to the blank line that ends the headers, not the long description after it
            while len(data) < MAX_HEADER_BYTES:
                chunk = handle.read(8192)
                data += chunk
                if not chunk or b"\n\n" in data or b"\n\r\n" in data:
                    break
    except OSError:
        return headers
    block = data[:MAX_HEADER_BYTES].decode("utf-8", errors="replace")
    last: str | None = None
    for line in block.splitlines():
        if not line.strip():
            break
        if line[0] in " \t" and last is not None:
            headers[last][-1] += " " + line.strip()
            continue
        name, sep, value = line.partition(":")
        if not sep:
            continue
        last = name.strip().lower()
        headers.setdefault(last, []).append(value.strip())
    return headers


def record_files(text: str, prefixes: Iterable[str]) -> tuple[str, ...]:
    """Paths listed in a RECORD (``path,hash,size`` per line, CSV) that start with a prefix."""
    prefixes = tuple(prefixes)
    found = []
    for line in text.splitlines():
        if line.startswith('"'):  # a quoted path (it holds a comma or a quote): real CSV
            import csv

            path = next(csv.reader([line]), [""])[0]
        else:
            path = line.rsplit(",", 2)[0]
        if path.startswith(prefixes):
            found.append(path)
    return tuple(found)


def _location(entry: str) -> str:
    """What importlib.metadata's ``locate_file("")`` gives: the entry as a pathlib path prints it
    (no trailing or doubled slashes, no '.' parts; '..' is kept)."""
    parts = [p for p in entry.split("/") if p not in ("", ".")]
    return "/" + "/".join(parts)


def _from_dist_info(entry: str, location: str, folder: str, name: str, version: str) -> Distribution:
    key = canonicalize_name(name)
    if key not in DETAILED:
        return Distribution(name=name, version=version, location=location)
    path = os.path.join(entry, folder)
    headers = metadata_headers(os.path.join(path, "METADATA"))
    record = _read(os.path.join(path, "RECORD")) if key != "torch" else None  # torch's RECORD is huge
    return Distribution(
        name=(headers.get("name") or [name])[0],
        version=version,
        location=location,
        requires=tuple(headers.get("requires-dist", ())) if key == "torch" else (),
        files=record_files(record, INTERESTING_FILE_PREFIXES) if record else (),
        direct_url=_read(os.path.join(path, "direct_url.json")),
    )


def _from_egg_info(entry: str, location: str, folder: str) -> Distribution | None:
    """Name and version from an egg-info's PKG-INFO headers; None to leave it to importlib.metadata
    (headers missing, or a DETAILED package: its files and requirements live in other egg files)."""
    path = os.path.join(entry, folder)
    headers = metadata_headers(os.path.join(path, "PKG-INFO") if os.path.isdir(path) else path)
    name, version = (headers.get("name") or [""])[0], (headers.get("version") or [""])[0]
    if not name or not version or canonicalize_name(name) in DETAILED:
        return None
    return Distribution(name=name, version=version, location=location)


def _via_importlib(dist) -> Distribution | None:
    """One distribution as importlib.metadata sees it (the rare layouts)."""
    name, version = dist.metadata["Name"], dist.version
    if not name:
        return None
    key = canonicalize_name(name)
    detailed = key in DETAILED
    return Distribution(
        name=name,
        version=version or "",
        location=str(dist.locate_file("")),
        requires=tuple(dist.requires or ()) if key == "torch" else (),
        files=tuple(str(f) for f in (dist.files or ()) if str(f).startswith(INTERESTING_FILE_PREFIXES))
        if detailed and key != "torch" else (),
        direct_url=dist.read_text("direct_url.json") if detailed else None,
    )


def installed_distributions(path: list[str] | None = None) -> list[Distribution]:
    """Every distribution on ``path`` (default ``sys.path``), in importlib.metadata's order:
    sys.path entries in turn, each entry's metadata folders in directory order. The current
    directory (``''`` on sys.path, e.g. a checkout's own .egg-info) is skipped: it is an
    artifact of where gpudoctor runs, not an installed copy."""
    cwd = os.path.realpath(os.getcwd())
    found: list[Distribution] = []
    for entry in sys.path if path is None else path:
        if not entry or not entry.startswith("/"):
            continue
        try:
            if os.path.realpath(entry) == cwd:
                continue
            if entry.endswith(".egg"):  # an unzipped egg (`setup.py install` builds): EGG-INFO inside
                if os.path.isdir(entry):
                    found.extend(_importlib_entry(entry))
                    continue
            names = os.listdir(entry)
        except NotADirectoryError:
            found.extend(_importlib_entry(entry))  # a zip or an egg file on sys.path
            continue
        except OSError:
            continue
        location = _location(entry)
        rare = False
        read_eggs: set[str] = set()
        for folder in names:
            lower = folder.lower()
            if lower.endswith(".dist-info"):
                match = _DIST_INFO.match(folder)
                if match is None:
                    rare = True
                    continue
                try:
                    found.append(_from_dist_info(entry, location, folder, match.group(1), match.group(2)))
                except Exception:  # noqa: BLE001 - one broken dist-info must not hide the others
                    continue
            elif lower.endswith(".egg-info"):
                egg = _from_egg_info(entry, location, folder)
                if egg is None:
                    rare = True
                else:
                    found.append(egg)
                    read_eggs.add(folder)
        if rare:
            found.extend(_importlib_entry(entry, rare_only=True, already_read=read_eggs))
    return found


def _importlib_entry(entry: str, rare_only: bool = False, already_read: set[str] = frozenset()) -> list[Distribution]:
    from importlib import metadata

    found = []
    for dist in metadata.distributions(path=[entry]):
        try:
            folder = os.path.basename(str(getattr(dist, "_path", "")))
            if rare_only and (_DIST_INFO.match(folder) or folder in already_read):
                continue  # already read from its folder name or its PKG-INFO
            item = _via_importlib(dist)
        except Exception:  # noqa: BLE001
            continue
        if item is not None:
            found.append(item)
    return found
