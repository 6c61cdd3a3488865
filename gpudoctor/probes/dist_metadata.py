"""Requires-Dist and wheel tags of one installed distribution, read from its METADATA and WHEEL
files (never imported).

The package probe keeps the requirements of torch only; the few checks that need another
distribution's (xformers' wheels pin the exact torch they were built for:
``Requires-Dist: torch==2.10.0``) ask for it here. Only the header blocks are read. The WHEEL
file's ``Tag:`` lines tell a wheel from an index (manylinux_*, any) from one built on this
machine (linux_x86_64: pip built it from a source distribution or a checkout)."""

from __future__ import annotations

import posixpath
import re
from typing import NamedTuple

MAX_METADATA_BYTES = 64 * 1024  # the headers; the long description after them is never needed
_NAME_SEPARATORS = re.compile(r"[-_.]+")


class DistRequirements(NamedTuple):
    """One distribution's declared requirements and wheel tags, read from its own metadata files."""

    name: str
    version: str | None  # None: not installed
    requires: tuple[str, ...] = ()
    metadata_path: str | None = None
    unknown_reason: str | None = None  # set when the distribution is installed but its METADATA could not be read
    wheel_tags: tuple[str, ...] | None = None  # None: the WHEEL file could not be read

    @property
    def built_here(self) -> bool | None:
        """True when every platform tag is a bare linux_* one (a wheel built on this machine)."""
        if not self.wheel_tags:
            return None
        return all(tag.rsplit("-", 1)[-1].startswith("linux_") for tag in self.wheel_tags)


def header_values(text: str, header: str) -> tuple[str, ...]:
    """The values of one header in an RFC 822-style block (up to the first blank line)."""
    found = []
    for line in text.splitlines():
        if not line.strip():
            break
        name, sep, value = line.partition(":")
        if sep and name.strip().lower() == header:
            found.append(value.strip())
    return tuple(found)


def requires_dist(text: str) -> tuple[str, ...]:
    return header_values(text, "requires-dist")


def _folders(name: str, version: str) -> list[str]:
    # Installers write the name with '-' as '_' (PEP 491); older ones kept the project's spelling.
    return list(dict.fromkeys(f"{n}-{version}.dist-info" for n in (name.replace("-", "_"), name,
                                                                    _NAME_SEPARATORS.sub("_", name).lower())))


def probe_dist_requirements(host, packages, name: str) -> DistRequirements:
    dist = packages.get(name)
    if dist is None:
        return DistRequirements(name, None)
    errors = []
    for folder in _folders(dist.name, dist.version):
        path = posixpath.join(dist.location, folder, "METADATA")
        read = host.read_text(path, max_bytes=MAX_METADATA_BYTES)
        if read.text is not None:
            wheel = host.read_text(posixpath.join(dist.location, folder, "WHEEL"), max_bytes=MAX_METADATA_BYTES)
            tags = header_values(wheel.text, "tag") if wheel.text is not None else None
            return DistRequirements(dist.name, dist.version, requires_dist(read.text), path, wheel_tags=tags)
        errors.append(f"{path}: {read.error}")
    return DistRequirements(dist.name, dist.version, (), None,
                            f"{dist.name} {dist.version}'s METADATA could not be read ({errors[0]})")
