"""Fixtures for the fixer tests: a temporary HOME, a fake driver dir, a fake machine."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import time

import pytest
from fixhelpers import FakeMachine

from gpudoctor.paths import GpudoctorDirs


@pytest.fixture
def home(tmp_path, monkeypatch) -> GpudoctorDirs:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "LIBRARY_PATH", "TRITON_LIBCUDA_PATH"):
        monkeypatch.delenv(name, raising=False)
    return GpudoctorDirs.from_env()


@pytest.fixture
def driver_dir(tmp_path) -> str:
    """A directory holding only libcuda.so.1 (a real shared object), like most driver installs."""
    if not shutil.which("gcc"):
        pytest.skip("gcc is needed to build the fake libcuda.so.1")
    directory = tmp_path / "driver lib"  # a space, on purpose
    directory.mkdir()
    src = tmp_path / "fake.c"
    src.write_text("int cuInit(unsigned int flags) { return 0; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(directory / "libcuda.so.1"), str(src)],
                   check=True, capture_output=True)
    from gpudoctor.probes.linktest import link_test

    env = {k: v for k, v in os.environ.items() if k != "LIBRARY_PATH"}
    if link_test("gcc", [], "-lcuda", env).ok:
        # e.g. the H200 device image, which ships /lib/libcuda.so: -lcuda always links there
        pytest.skip("this machine's linker finds a libcuda.so in its default directories, so a driver dir "
                    "with only libcuda.so.1 cannot reproduce `cannot find -lcuda`")
    return str(directory)


@pytest.fixture
def machine(home, driver_dir, monkeypatch) -> FakeMachine:
    fake = FakeMachine(home, driver_dir)
    monkeypatch.setattr("gpudoctor.cli.fix.run_diagnosis", fake)
    return fake


@pytest.fixture
def checks(home, tmp_path, monkeypatch):
    """preflight's engine run replaced by one that reports ``checks.findings`` (records in the
    JSON form preflight caches); ``checks.calls`` holds the options of each call."""
    hook = importlib.import_module("gpudoctor.hook")
    calls, findings = [], []

    def fake(options, requirements=None, nvml=None):
        calls.append(options)
        ranks = {"info": 0, "warning": 1, "error": 2}  # the test's own table of the fake findings
        blocking = {mode: [i for i, f in enumerate(findings) if ranks[f["severity"]] >= threshold]
                    for mode, threshold in (("default", 2), ("strict", 1))}
        return {"schema": hook.CACHE_SCHEMA, "time": time.time(), "options": options, "checks": 3,
                "findings": list(findings), "blocking": blocking}

    monkeypatch.setattr(hook, "_run_checks", fake)
    monkeypatch.chdir(tmp_path)
    fake.calls, fake.findings = calls, findings
    return fake
