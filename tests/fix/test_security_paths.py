"""Issue 14 item 10: unsafe search path entries are flagged, on every variable that loads code."""

from __future__ import annotations

import os

import pytest

from gpudoctor.checks.runtime import check_ld_library_path_insecure
from gpudoctor.host.live import LiveHost
from gpudoctor.probes.runtime import probe_runtime


def _problems(env) -> dict[tuple[str, str], str]:
    facts = probe_runtime(LiveHost(env))
    return {(p.variable, p.entry): p.problem for p in facts.unsafe_path_entries}


def test_shared_temp_missing_foreign_and_open_parents_are_flagged(tmp_path):
    own = tmp_path / "own"
    own.mkdir(mode=0o700)
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    below_open = open_dir / "lib"
    below_open.mkdir()
    below_open.chmod(0o755)
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    try:
        os.chown(foreign, 65534, 65534)
    except PermissionError:
        pytest.skip("needs root to make a directory another user's")
    preload = own / "libx.so"
    preload.write_bytes(b"")
    env = {
        "HOME": str(tmp_path),
        "LD_LIBRARY_PATH": f"{own}:/tmp:{below_open}",
        "LIBRARY_PATH": f"{open_dir}/not-yet",
        "PATH": f"/usr/bin:{foreign}",
        "PYTHONPATH": "/dev/shm",
        "LD_PRELOAD": f"{open_dir}/evil.so libc.so.6 {preload}",
    }
    assert _problems(env) == {
        ("LD_LIBRARY_PATH", "/tmp"): "shared-temp",
        ("LD_LIBRARY_PATH", str(below_open)): "unsafe-parent",
        ("LIBRARY_PATH", f"{open_dir}/not-yet"): "creatable",
        ("PATH", str(foreign)): "foreign-owner",
        ("PYTHONPATH", "/dev/shm"): "shared-temp",
        ("LD_PRELOAD", f"{open_dir}/evil.so"): "creatable",
    }


def test_each_problem_is_a_finding_with_a_fix_and_says_why(tmp_path):
    env = {"HOME": str(tmp_path), "LD_LIBRARY_PATH": "/tmp:/dev/shm", "PATH": "/usr/bin"}
    findings = check_ld_library_path_insecure(probe_runtime(LiveHost(env)))
    assert [f.id for f in findings] == ["ld-library-path-insecure"] * 2
    assert all("sticky bit stops renames" in f.message and f.fixes for f in findings)


def test_own_and_root_directories_are_fine(tmp_path):
    own = tmp_path / "mine"
    own.mkdir(mode=0o700)
    env = {"HOME": str(tmp_path), "LD_LIBRARY_PATH": f"{own}:/usr/lib", "PATH": f"/usr/bin:/bin:{tmp_path}/later",
           "PYTHONPATH": str(own)}
    assert _problems(env) == {}
