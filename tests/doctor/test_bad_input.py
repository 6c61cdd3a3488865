"""A broken machine is where gpudoctor is used: every odd answer ends in a result, not a crash."""

import copy
import subprocess
import time

import pytest

from gpudoctor.engine import diagnose
from gpudoctor.host import LiveHost
from gpudoctor.host.snapshot import SnapshotHost
from gpudoctor.model import CheckStatus

from rule_cases import FIXTURES, _snapshot, apply_patch

BASE = f"{FIXTURES}/snapshots/cpu-libcuda-on-ld-library-path"


def replay(patch=None, commands=None):
    data = copy.deepcopy(_snapshot(BASE))
    apply_patch(data, patch or {})
    for argv, result in (commands or {}).items():
        data["commands"] = [c for c in data["commands"] if tuple(c["argv"]) != argv]
        data["commands"].append({"argv": list(argv), **result})
    return diagnose(SnapshotHost(BASE, data))


def statuses(report):
    return {c.id: (c.status, c.reason) for c in report.checks}


def assert_no_crash(report):
    crashed = [(c.id, c.reason) for c in report.checks if c.status == CheckStatus.ERROR]
    assert crashed == []


def test_missing_ldconfig_is_reported_not_raised():
    report = replay(commands={("/sbin/ldconfig", "-p"): {"returncode": None, "stdout": "", "stderr": "", "timed_out": False, "error": "not-found"}})
    assert_no_crash(report)
    status, reason = statuses(report)["libcuda-unversioned-missing"]
    assert status == CheckStatus.SKIP and "ldconfig" in reason


def test_hung_ldconfig_is_reported_not_raised():
    report = replay(commands={("/sbin/ldconfig", "-p"): {"returncode": None, "stdout": "", "stderr": "", "timed_out": True}})
    assert_no_crash(report)
    assert "timed out" in statuses(report)["libcuda-unversioned-missing"][1]


def test_garbage_ldconfig_output():
    garbage = "\ufffd\x00 libcuda.so.1 => \n=> => =>\n" + "x" * 10000
    report = replay(commands={("/sbin/ldconfig", "-p"): {"returncode": 0, "stdout": garbage, "stderr": "", "timed_out": False}})
    assert_no_crash(report)


def test_garbage_compiler_versions():
    data = copy.deepcopy(_snapshot(BASE))
    for command in data["commands"]:
        command["stdout"] = "\ufffd\ufffd not a version"
    report = diagnose(SnapshotHost(BASE, data))
    assert_no_crash(report)


def test_unreadable_proc_driver_version():
    report = replay({"files": {"/proc/driver/nvidia/version": {"text": None, "error": "permission"}}})
    assert_no_crash(report)


@pytest.mark.parametrize("kind,error", [
    ("library-not-found", "NVML Shared Library Not Found"),
    ("driver-not-loaded", "Driver Not Loaded"),
    ("mismatch", "Driver/library version mismatch"),
    ("no-permission", "Insufficient Permissions"),
    ("timeout", "NVML did not answer within 5 s"),
])
def test_nvml_errors_become_results(kind, error):
    report = replay({"nvml": {"ok": False, "error_kind": kind, "error": error, "devices": []}})
    assert_no_crash(report)
    if kind == "mismatch":
        assert statuses(report)["driver-library-mismatch"][0] == CheckStatus.FAIL


def test_a_crashing_probe_is_reported_as_crashed_checks_while_others_go_on(monkeypatch):
    import gpudoctor.facts as facts

    def boom(host):
        raise RuntimeError("probe exploded")

    monkeypatch.setattr(facts, "probe_toolchain", boom)
    report = diagnose(SnapshotHost(BASE))
    by_id = statuses(report)
    assert by_id["c-compiler-missing"][0] == CheckStatus.ERROR and "probe exploded" in by_id["c-compiler-missing"][1]
    assert by_id["shm-too-small"][0] == CheckStatus.PASS


def test_a_crashing_check_is_reported_while_others_go_on(monkeypatch):
    import gpudoctor.checks as checks
    from gpudoctor.checks.base import Check

    def boom(**_):
        raise ZeroDivisionError("bug")

    patched = tuple(Check(c.id, c.needs, boom) if c.id == "shm-too-small" else c for c in checks.CHECKS)
    monkeypatch.setattr("gpudoctor.engine.CHECKS", patched)
    report = diagnose(SnapshotHost(BASE))
    assert statuses(report)["shm-too-small"] == (CheckStatus.ERROR, "check crashed: ZeroDivisionError: bug")
    assert statuses(report)["c-compiler-missing"][0] == CheckStatus.PASS


def test_live_check_with_a_hung_compiler_finishes_in_bounded_time(tmp_path):
    """A `gcc` that hangs forever: the toolchain probe's timeout bounds the whole check."""
    hung = tmp_path / "bin"
    hung.mkdir()
    for name in ("gcc", "nvcc"):
        tool = hung / name
        tool.write_text("#!/bin/sh\nsleep 60\n")
        tool.chmod(0o755)
    # A libcuda.so.1 Triton can locate, so the link test runs too, with the hung gcc as its cc.
    driver = tmp_path / "driver"
    driver.mkdir()
    (tmp_path / "fake.c").write_text("int cuInit(unsigned int flags) { return 0; }\n")
    subprocess.run(["/usr/bin/gcc", "-shared", "-fPIC", "-o", str(driver / "libcuda.so.1"), str(tmp_path / "fake.c")],
                   check=True, capture_output=True)
    env = {"PATH": f"{hung}:/usr/bin:/bin", "HOME": str(tmp_path), "LD_LIBRARY_PATH": str(driver)}
    start = time.monotonic()
    report = diagnose(LiveHost(env))
    assert time.monotonic() - start < 15  # the longest timeout on the way (the link test's) is 10 s
    assert_no_crash(report)
