"""The versions a scan judges the code against: the inspected environment's installed packages
(read from their metadata, never imported), else the newest the table knows, said so."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from packaging.version import InvalidVersion, Version

INSTALLED, NEWEST_KNOWN = "installed", "newest known (not installed)"


@dataclass(frozen=True)
class PackageVersion:
    """The version a package is judged at, and where it comes from: installed, or the newest the table knows."""

    version: Version
    source: str  # INSTALLED | NEWEST_KNOWN


@dataclass(frozen=True)
class Versions:
    """The versions a scan judges code against: those installed of the packages the table knows, the newest
    the table knows of each, and why the installed packages could not be read ("" when they were)."""

    installed: Mapping[str, Version]  # canonical name -> version
    newest_known: Mapping[str, Version]
    probe_error: str = ""  # why the installed packages could not be read ("" when they were)

    def of(self, package: str) -> PackageVersion:
        if package in self.installed:
            return PackageVersion(self.installed[package], INSTALLED)
        return PackageVersion(self.newest_known[package], NEWEST_KNOWN)


def versions_from_packages(package_facts, newest_known: Mapping[str, Version], probe_error: str = "") -> Versions:
    """From ``probes.packages.PackageFacts`` (or None, with ``probe_error``, when the package list
    could not be read)."""
    installed: dict[str, Version] = {}
    for name in newest_known:
        dist = package_facts.get(name) if package_facts is not None else None
        if dist is None:
            continue
        try:
            installed[name] = Version(dist.version)
        except InvalidVersion:
            continue
    return Versions(installed, dict(newest_known), probe_error)


def installed_versions(host=None, newest_known: Mapping[str, Version] | None = None) -> Versions:
    """The live (or snapshot) host's packages, through the same probe ``gpudoctor check`` uses."""
    from ..probes.packages import probe_packages
    from .changes import load_knowledge

    if host is None:
        from ..host import LiveHost

        host = LiveHost()
    known = newest_known if newest_known is not None else load_knowledge().newest_known
    return versions_from_packages(probe_packages(host), known)
