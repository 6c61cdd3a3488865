"""One compiler, one entry (issue 13): with a merged /usr, /bin/gcc and /usr/bin/gcc are the same
file, and `gcc` is a link to `gcc-12`; the toolchain probe listed each name as its own compiler.
Built here as a tmp dir of symlinks, probed by the live host."""

from __future__ import annotations

import os

import pytest

from gpudoctor.host import LiveHost
from gpudoctor.probes.toolchain import probe_toolchain

FAKE_GCC = """#!/bin/sh
case "$1" in
  -dumpfullversion) echo 12.2.0 ;;
  --version) echo "gcc (Debian 12.2.0-14) 12.2.0" ;;
esac
"""


@pytest.fixture
def usrmerge(tmp_path):
    """tmp/usr/bin: x86_64-linux-gnu-gcc-12 (the file), gcc-12 -> it, gcc -> gcc-12, cc -> gcc,
    g++-12 (the partner); tmp/bin -> usr/bin (usrmerge)."""
    usr_bin = tmp_path / "usr" / "bin"
    usr_bin.mkdir(parents=True)
    for name in ("x86_64-linux-gnu-gcc-12", "x86_64-linux-gnu-g++-12"):
        (usr_bin / name).write_text(FAKE_GCC)
        (usr_bin / name).chmod(0o755)
    os.symlink("x86_64-linux-gnu-gcc-12", usr_bin / "gcc-12")
    os.symlink("x86_64-linux-gnu-g++-12", usr_bin / "g++-12")
    os.symlink("gcc-12", usr_bin / "gcc")
    os.symlink("gcc", usr_bin / "cc")
    os.symlink("usr/bin", tmp_path / "bin")
    return tmp_path


def _real(path) -> str:
    return os.path.realpath(path)


def test_each_compiler_is_listed_once_under_its_first_name(usrmerge):
    usr_bin, bin_ = str(usrmerge / "usr" / "bin"), str(usrmerge / "bin")
    host = LiveHost({"PATH": f"{usr_bin}:{bin_}", "CC": f"{bin_}/gcc"})
    toolchain = probe_toolchain(host)
    reals = [_real(c.path) for c in toolchain.compilers]
    assert len(reals) == len(set(reals)), toolchain.compilers
    (compiler,) = toolchain.compilers
    # the first name it was found by ($CC, as given), the others remembered as aliases
    assert (compiler.path, compiler.via, compiler.version) == (f"{bin_}/gcc", "CC", (12, 2, 0))
    assert f"{usr_bin}/gcc" in compiler.aliases and f"{usr_bin}/gcc-12" in compiler.aliases
    # the partner g++-12 of the versioned name is kept although gcc-12 was merged away
    assert compiler.cxx == f"{usr_bin}/g++-12"


def test_lookups_by_any_name_find_the_one_entry(usrmerge):
    usr_bin, bin_ = str(usrmerge / "usr" / "bin"), str(usrmerge / "bin")
    toolchain = probe_toolchain(LiveHost({"PATH": f"{bin_}:{usr_bin}"}))
    assert toolchain.default_gcc == f"{bin_}/gcc"
    (compiler,) = toolchain.compilers
    assert compiler.via == "PATH:gcc" and compiler.path == f"{bin_}/gcc"
    for name in (f"{bin_}/gcc", f"{bin_}/gcc-12", f"{bin_}/cc"):  # /usr/bin is the same dir: listed once
        assert toolchain.compiler_at(name) is compiler


def test_distinct_compilers_stay_distinct(usrmerge, tmp_path_factory):
    other = tmp_path_factory.mktemp("opt") / "gcc"
    other.write_text(FAKE_GCC.replace("12.2.0", "13.3.0"))
    other.chmod(0o755)
    usr_bin = str(usrmerge / "usr" / "bin")
    toolchain = probe_toolchain(LiveHost({"PATH": usr_bin, "CC": str(other)}))
    assert [(c.via, c.version[0]) for c in toolchain.compilers] == [("CC", 13), ("PATH:gcc", 12)]


def test_a_build_path_named_by_an_alias_is_still_judged(usrmerge):
    """CXX and CUDAHOSTCXX naming one g++ by two paths: the second variable's compiler is the
    first's entry (an alias), and the CMake build path still gets judged with it."""
    from gpudoctor.checks.toolchain import build_paths

    usr_bin, bin_ = str(usrmerge / "usr" / "bin"), str(usrmerge / "bin")
    env = {"PATH": usr_bin, "CXX": f"{usr_bin}/g++-12", "CUDAHOSTCXX": f"{bin_}/g++-12"}
    toolchain = probe_toolchain(LiveHost(env))
    paths = {path: (compiler, via) for path, compiler, via in build_paths(toolchain)}
    compiler, via = paths["CMake"]
    assert via == "$CUDAHOSTCXX" and compiler is not None and compiler.path == f"{usr_bin}/g++-12"
