"""Whether a version is in a version range, as ``packaging.specifiers.SpecifierSet(spec,
prereleases=True).contains(version)`` decides it, for the plain comparison ranges of
``rules/compat.toml`` (``>=0.16.0,<0.18.0``, ``==0.18.0``, ``<4.52.1``).

Why not SpecifierSet itself: importing packaging.specifiers imports packaging.utils, which
imports packaging.tags and with it logging and sysconfig, 17-25 ms on the 2-core box (~5 ms of
it logging's, bench/preflight_timeline.py on the H200), paid by preflight()'s first call on every
machine that has peft and transformers, or bitsandbytes and Triton. Only the clauses whose rules
are spelled out below take this path (PEP 440's ordered comparisons, including the exclusions of
the exclusive ones against a bound that is a plain release, and ``==``/``!=`` without wildcards,
each against a version without a local label); anything else (``~=``, ``==1.*``, ``===``, a local
label, ``<``/``>`` a pre-, post- or dev-release) goes to SpecifierSet, so a
range this module does not know is never decided by a guess. tests/doctor/test_specifiers.py
holds the two equal over every compat.toml range and a grid of pre-, post-, dev- and local
versions.
"""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

_CLAUSE = re.compile(r"^\s*(==|!=|<=|>=|<|>)\s*(\d+(?:\.\d+)*(?:(?:a|b|rc)\d+)?(?:\.post\d+)?(?:\.dev\d+)?)\s*$")


def contains(spec: str, version: Version) -> bool:
    """``SpecifierSet(spec, prereleases=True).contains(version)``."""
    clauses = [_CLAUSE.match(clause) for clause in spec.split(",")]
    if not all(clauses):
        from packaging.specifiers import SpecifierSet

        return SpecifierSet(spec, prereleases=True).contains(version)
    try:
        bounds = [(match.group(1), Version(match.group(2))) for match in clauses]
    except InvalidVersion:
        bounds = None
    # An exclusive bound that is itself a pre-, post- or dev-release (">1.2rc1", "<1.2.post1"):
    # packaging 26 excludes only the pre-/post-releases of that very version (">1.2rc1" admits
    # 1.2.post1), packaging <= 25 those of its base version (and pyproject allows both), so
    # the installed packaging decides it rather than one reading spelled out here.
    if bounds is None or any(operator in ("<", ">") and (bound.is_prerelease or bound.is_postrelease)
                             for operator, bound in bounds):
        from packaging.specifiers import SpecifierSet

        return SpecifierSet(spec, prereleases=True).contains(version)
    return all(_holds(operator, version, bound) for operator, bound in bounds)


def _holds(operator: str, version: Version, bound: Version) -> bool:
    public = Version(version.public)  # a bound without a local label ignores the version's (PEP 440)
    if operator == "==":
        return public == bound
    if operator == "!=":
        return public != bound
    if operator == "<=":
        return public <= bound
    if operator == ">=":
        return public >= bound
    if operator == "<":
        # <V excludes V's pre-releases unless V is one itself
        return version < bound and not (not bound.is_prerelease and version.is_prerelease
                                        and Version(version.base_version) == Version(bound.base_version))
    # >V excludes V's post-releases unless V is one itself, and V with a local label
    return version > bound and not (
        (not bound.is_postrelease and version.is_postrelease or version.local is not None)
        and Version(version.base_version) == Version(bound.base_version))
