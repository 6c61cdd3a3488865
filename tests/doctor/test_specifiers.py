"""checks/specifiers.contains decides exactly as packaging's SpecifierSet(prereleases=True) does."""

from __future__ import annotations

import itertools
import sys

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from gpudoctor.checks.specifiers import contains
from gpudoctor.probes.compat_data import compat_tables

# the ranges of the tables checks/compat.py matches (rows keyed by package name)
OWN = sorted({value for table in ("peft_transformers", "bitsandbytes_triton") for row in compat_tables()[table]
              for key, value in row.items() if isinstance(value, str) and value[:1] in "<>=!~"})
EXTRA = [">=1.2,<1.4", "==1.2", "!=1.2", ">1.2", "<=1.2", "<1.2", "<1.2rc1", ">1.2.post1", ">=1.2.dev0",
         "<1.4.dev1", ">1.2,!=1.3", "==1.2.0", ">=1.2a1,<=1.3b2",
         # forms left to SpecifierSet: they must still answer the same
         "~=1.2", "==1.*", "==1.2+local", "===1.2", ">=1!1.0"]


def _versions(spec: str) -> set[str]:
    grid = {"0.9", "1", "1.1", "1.2", "1.2.0", "1.2.1", "1.3", "1.4", "2.0", "1!0.5"}
    for bound in (part.strip().lstrip("<>=!~") for part in spec.split(",")):
        base = bound.rstrip("*").rstrip(".") or "1"
        grid |= {base, f"{base}rc1", f"{base}a1", f"{base}.dev0", f"{base}.post1", f"{base}+cu121", f"{base}.post1+local",
                 f"{base}rc1.dev2", f"{base}.1", f"{base}.0"}
    return {v for v in grid if _parses(v)}


def _parses(text: str) -> bool:
    try:
        Version(text)
    except Exception:  # noqa: BLE001
        return False
    return True


# An exclusive bound that is itself a pre-, post- or dev-release, against the releases around it.
# packaging 26 reads PEP 440's exclusions as "of the given version" (">1.2rc1" admits 1.2.post1,
# "<1.2.post1" admits 1.2rc1); packaging <= 25 compared base versions and excluded both. These
# bounds are left to SpecifierSet, so contains answers as the installed packaging does either way.
EXCLUSIVE_NON_RELEASE = [">1.2rc1", ">1.2.dev0", ">1.2a1.post1", ">1.2.post0", "<1.2.post1", "<1.2.post1.dev2"]
AROUND_1_2 = ["1.2", "1.2+local", "1.2a1", "1.2rc1+local", "1.2.dev1+local", "1.2.post1", "1.2.post1+local",
              "1.2rc1.post1", "1.2.post1.dev2", "1.2.post2+local", "1.1", "1.3"]


@pytest.mark.parametrize("spec", EXCLUSIVE_NON_RELEASE)
def test_exclusive_bounds_that_are_not_releases_answer_as_specifier_set(spec):
    reference = SpecifierSet(spec, prereleases=True)
    for text in AROUND_1_2:
        version = Version(text)
        assert contains(spec, version) == reference.contains(version, prereleases=True), (spec, text)


def test_compat_toml_has_ranges():
    assert len(OWN) >= 5, OWN


@pytest.mark.parametrize("spec", OWN + EXTRA)
def test_contains_is_specifier_sets_answer(spec):
    reference = SpecifierSet(spec, prereleases=True)
    for text in sorted(_versions(spec)):
        version = Version(text)
        assert contains(spec, version) == reference.contains(version, prereleases=True), (spec, text)


def test_compat_ranges_take_the_fast_path_without_importing_packaging_specifiers():
    import subprocess

    code = ("import sys\nfrom packaging.version import Version\nfrom gpudoctor.checks.specifiers import contains\n"
            f"for spec in {OWN!r}:\n    contains(spec, Version('1.0'))\n"
            "print('packaging.specifiers' in sys.modules, 'logging' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]
