"""The static halves of issue 15's rules, beyond their pass/fail fixtures (fixtures/rules/): the
parsing their probes do, the edge cases where a check must say it could not decide rather than
pass, and the version table they decide on."""

from __future__ import annotations

import sys

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from gpudoctor.checks.base import Skip
from gpudoctor.checks.compat import check_xformers_abi_mismatch
from gpudoctor.checks.libraries import check_cuda_library_shadowed
from gpudoctor.host.base import Distribution
from gpudoctor.probes.compat_data import compat_tables, wheel_library_stems
from gpudoctor.probes.cuda_libs import LdPathLibraries, LibraryCopy, library_copies
from gpudoctor.probes.dist_metadata import DistRequirements, requires_dist
from gpudoctor.probes.packages import PackageFacts
from gpudoctor.probes.python_headers import include_dir

STEMS = wheel_library_stems()


def _packages(**versions):
    return PackageFacts({name: (Distribution(name, version, "/site"),) for name, version in versions.items()}, True)


# -- probes: parsing -------------------------------------------------------------------------

def test_a_toolkit_listing_gives_each_library_its_full_version():
    names = ["libcublas.so", "libcublas.so.12", "libcublas.so.12.1.3.1", "libcublasLt.so.12", "libcublasLt.so.12.1.3.1",
             "libnvJitLink.so.12", "libnvJitLink.so.12.1.105", "libcudart.so.11.0", "libcudart.so.11.8.89", "libfoo.so.1.2"]
    copies = {(c.stem, c.soname_major): c.version for c in library_copies("/usr/local/cuda/lib64", names, STEMS, lambda p: None)}
    assert copies == {("libcublas", "12"): (12, 1, 3, 1), ("libcublasLt", "12"): (12, 1, 3, 1),
                      ("libnvJitLink", "12"): (12, 1, 105), ("libcudart", "11"): (11, 8, 89)}


def test_a_bare_soname_takes_the_version_of_the_file_its_link_names():
    targets = {"/d/libnvJitLink.so.12": "/d/libnvJitLink.so.12.4.127", "/d/libcudart.so.12": None}
    (jit, rt) = sorted(library_copies("/d", ["libnvJitLink.so.12", "libcudart.so.12"], STEMS, targets.get),
                       key=lambda c: c.stem, reverse=True)
    assert (jit.stem, jit.version) == ("libnvJitLink", (12, 4, 127))
    assert (rt.stem, rt.version) == ("libcudart", None)  # a wheel's own layout: no version in any name


def test_requires_dist_reads_the_header_block_only():
    text = ("Metadata-Version: 2.1\nName: xformers\nRequires-Dist: numpy\nRequires-Dist: torch (==1.13)\n\n"
            "Requires-Dist: not-a-header\n")
    assert requires_dist(text) == ("numpy", "torch (==1.13)")


@pytest.mark.parametrize("executable,expected", [
    ("/usr/bin/python3", "/usr/include/python3.12"),
    ("/opt/py/bin/python3.13t", "/opt/py/include/python3.13t"),
])
def test_include_dir_is_sysconfig_posix_prefix(executable, expected):
    base = "/opt/py" if "opt" in executable else "/usr"
    version = "3.13.1" if executable.endswith("t") else "3.12.3"
    assert include_dir(base, version, executable) == expected


def test_include_dir_matches_this_interpreters_sysconfig():
    import sysconfig

    if sys.abiflags not in ("", "t"):
        pytest.skip(f"abiflags {sys.abiflags!r}")
    scheme = sysconfig.get_default_scheme()
    scheme = "posix_prefix" if scheme == "posix_local" else scheme  # what Triton does
    assert include_dir(sys.base_prefix, sys.version.split()[0], sys.executable) == sysconfig.get_paths(scheme=scheme)["include"]


# -- checks: undecided is a skip, never a pass -----------------------------------------------

def test_a_shadowing_copy_of_unknown_version_is_a_skip():
    libs = LdPathLibraries("/d", (LibraryCopy("/d", "libcublas", "13", None, "libcublas.so.13"),), ())
    with pytest.raises(Skip, match="shows no version"):
        check_cuda_library_shadowed(libs, _packages(**{"nvidia-cublas": "13.1.0.3"}))


def test_only_the_first_copy_of_a_soname_on_ld_library_path_counts():
    newer = LibraryCopy("/new", "libcublas", "13", (13, 1, 0, 3), "libcublas.so.13.1.0.3")
    older = LibraryCopy("/old", "libcublas", "13", (13, 0, 0, 19), "libcublas.so.13.0.0.19")
    packages = _packages(**{"nvidia-cublas": "13.1.0.3"})
    assert check_cuda_library_shadowed(LdPathLibraries("/new:/old", (newer, older), ()), packages) == []
    (finding,) = check_cuda_library_shadowed(LdPathLibraries("/old:/new", (older, newer), ()), packages)
    assert finding.evidence["directories"] == ["/old"]


def test_an_older_patch_release_of_the_same_minor_is_not_a_shadow():
    # symbol versions are per major.minor (__nvJitLinkComplete_12_4): 12.4.99 serves a 12.4.127 wheel
    copy = LibraryCopy("/d", "libnvJitLink", "12", (12, 4, 99), "libnvJitLink.so.12.4.99")
    assert check_cuda_library_shadowed(LdPathLibraries("/d", (copy,), ()),
                                       _packages(**{"nvidia-nvjitlink-cu12": "12.4.127"})) == []


def test_an_unlistable_ld_library_path_entry_is_a_skip():
    with pytest.raises(Skip, match="could not be listed"):
        check_cuda_library_shadowed(LdPathLibraries("/x", (), ("/x",)), _packages(**{"nvidia-cublas": "13.1.0.3"}))


def test_xformers_built_from_source_is_a_skip():
    # setup.py's `torch>=2.4` says nothing about the torch the build compiled against
    source_build = DistRequirements("xformers", "0.0.29", ("torch>=2.4", "numpy"), "/m", None, ("cp311-cp311-linux_x86_64",))
    with pytest.raises(Skip, match="built on this machine"):
        check_xformers_abi_mismatch(_packages(torch="2.5.1", xformers="0.0.29"), source_build)
    index_wheel = DistRequirements("xformers", "0.0.35", ("torch>=2.10",), "/m", None, ("py39-none-manylinux_2_28_x86_64",))
    assert check_xformers_abi_mismatch(_packages(torch="2.11.0", xformers="0.0.35"), index_wheel) == []
    assert check_xformers_abi_mismatch(_packages(torch="2.9.0", xformers="0.0.35"), index_wheel)[0].id == "xformers-abi-mismatch"
    no_torch = DistRequirements("xformers", "0.0.29", ("numpy",), "/m")
    with pytest.raises(Skip, match="names no torch version"):
        check_xformers_abi_mismatch(_packages(torch="2.5.1", xformers="0.0.29"), no_torch)


def test_xformers_pin_ignores_torchs_local_label():
    pinned = DistRequirements("xformers", "0.0.28.post3", ("numpy", "torch==2.5.1"), "/m")
    assert check_xformers_abi_mismatch(_packages(torch="2.5.1+cu124", xformers="0.0.28.post3"), pinned) == []
    (finding,) = check_xformers_abi_mismatch(_packages(torch="2.6.0+cu124", xformers="0.0.28.post3"), pinned)
    assert "torch 2.5.1" in finding.message


def test_unreadable_xformers_metadata_is_a_skip():
    with pytest.raises(Skip, match="METADATA could not be read"):
        check_xformers_abi_mismatch(_packages(torch="2.5.1", xformers="0.0.28"),
                                    DistRequirements("xformers", "0.0.28", (), None, "xformers 0.0.28's METADATA could not be read (x)"))


# -- the table -------------------------------------------------------------------------------

def test_every_compat_row_parses_and_cites_its_source():
    tables = compat_tables()
    for table, versions in (("peft_transformers", ("peft", "transformers")),
                            ("bitsandbytes_triton", ("bitsandbytes", "triton"))):
        for row in tables[table]:
            for name in versions:
                SpecifierSet(row[name])
            assert row["source"] and row["references"], row
            assert all(ref.startswith("https://") for ref in row["references"])
    firsts = [Version(row["torch_from"]) for row in tables["torch_min_compiler"]]
    assert firsts == sorted(firsts, reverse=True) and firsts[-1] == Version("0"), "newest first, down to every release"
    for row in tables["torch_min_compiler"]:
        assert row["source"] and all(ref.startswith("https://") for ref in row["references"]), row


def test_every_wheel_library_names_wheels_and_nothing_else():
    for stem, wheels in compat_tables()["wheel_libraries"].items():
        assert stem.startswith("lib") and wheels and all(w.startswith("nvidia-") for w in wheels)
