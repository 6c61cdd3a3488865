"""LiveHost copes with a broken machine: hung commands, missing files, bad bytes, no permission."""

import os
import sys
import stat
import time

import pytest

from gpudoctor.host import LiveHost


def test_hung_command_is_killed_within_its_timeout():
    host = LiveHost()
    start = time.monotonic()
    result = host.run(("sh", "-c", "sleep 30"), timeout=0.3)
    assert result.timed_out and not result.ok
    assert time.monotonic() - start < 5
    assert "timed out" in result.why_not()


def test_hung_grandchild_is_killed_too():
    host = LiveHost()
    start = time.monotonic()
    result = host.run(("sh", "-c", "sleep 30 & sleep 30; wait"), timeout=0.3)
    assert result.timed_out
    assert time.monotonic() - start < 5


def test_missing_command_is_an_answer_not_an_exception():
    result = LiveHost().run(("gpudoctor-no-such-command-xyz",))
    assert result.error == "not-found" and not result.ok
    assert "not found" in result.why_not()


def test_non_utf8_output_is_decoded_with_replacement():
    result = LiveHost().run(("printf", r"ok \377\376 bytes"))
    assert result.ok and "ok" in result.stdout and "\ufffd" in result.stdout


def test_reads_missing_unreadable_and_binary_files(tmp_path):
    host = LiveHost()
    assert host.read_text(str(tmp_path / "missing")).error == "missing"
    binary = tmp_path / "binary"
    binary.write_bytes(b"NVRM \xff\xfe version")
    assert host.read_text(str(binary)).text.startswith("NVRM \ufffd")
    if os.geteuid() != 0:  # root reads everything
        secret = tmp_path / "secret"
        secret.write_text("x")
        secret.chmod(0)
        assert host.read_text(str(secret)).error == "permission"


def test_stat_reports_symlinks_and_dangling_links(tmp_path):
    host = LiveHost()
    (tmp_path / "real").write_text("x")
    (tmp_path / "link").symlink_to("real")
    (tmp_path / "dangling").symlink_to("nowhere")
    link = host.stat(str(tmp_path / "link"))
    assert link.exists and link.is_symlink and link.link_target == "real"
    dangling = host.stat(str(tmp_path / "dangling"))
    assert not dangling.exists and dangling.is_symlink


def test_world_writable_and_sticky_bits(tmp_path):
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    info = LiveHost().stat(str(open_dir))
    assert info.world_writable and not info.sticky
    open_dir.chmod(0o777 | stat.S_ISVTX)
    assert LiveHost().stat(str(open_dir)).sticky


def test_which_and_glob_use_the_hosts_path(tmp_path):
    tool = tmp_path / "bin" / "gcc-12"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    host = LiveHost({"PATH": str(tool.parent)})
    assert host.which("gcc-12") == str(tool)
    assert host.which("gcc-99") is None
    assert host.glob(str(tmp_path / "bin" / "gcc-*")) == [str(tool)]


@pytest.mark.skipif(not __import__("shutil").which("gcc"), reason="needs gcc")
def test_link_test_fails_without_unversioned_libcuda_and_passes_with_it(tmp_path):
    """The real link test with Triton's -lcuda flag, against a stand-in libcuda.so.1 built here."""
    import subprocess

    driver = tmp_path / "driver"
    driver.mkdir()
    src = tmp_path / "libcuda.c"
    src.write_text("int cuInit(unsigned int f) { return (int)f; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(driver / "libcuda.so.1"), str(src)], check=True)
    host = LiveHost({"PATH": os.environ["PATH"]})
    if host.link_test("gcc", (), "-lcuda", "").ok:
        pytest.skip("this machine's linker finds a libcuda.so in its default directories (the H200 image has "
                    "/lib/libcuda.so), so `cannot find -lcuda` cannot be reproduced here")
    before = host.link_test("gcc", (str(driver),), "-lcuda", "")
    assert not before.ok and before.error is None
    assert "cannot find -lcuda" in before.output
    assert host.link_test("gcc", (str(driver),), "-l:libcuda.so.1", "").ok
    stub = tmp_path / "stub"
    stub.mkdir()
    (stub / "libcuda.so").symlink_to(driver / "libcuda.so.1")
    assert host.link_test("gcc", (str(driver),), "-lcuda", str(stub)).ok


def test_nvml_without_a_driver_is_an_answer():
    info = LiveHost().nvml()
    if not info.ok:
        assert info.error_kind in ("library-not-found", "driver-not-loaded", "mismatch", "no-permission", "timeout", "other")


def test_os_release_read_by_the_standard_library_matches_distro():
    """The fast path (platform.freedesktop_os_release) must report what distro does."""
    from gpudoctor.host import live

    fast = live._os_release()
    if fast is None:
        pytest.skip("this machine's os-release has no ID or VERSION_ID; distro answers alone")
    assert fast == live._distro_release()


@pytest.mark.parametrize("os_release", [
    'PRETTY_NAME="Debian GNU/Linux trixie/sid"\nNAME="Debian GNU/Linux"\nID=debian\n',  # no VERSION_ID
    'VERSION_ID="7"\nPRETTY_NAME="Seven"\n',  # no ID: platform says "linux"
    'ID=acme\nVERSION_ID="7"\n',  # no PRETTY_NAME: platform says "Linux", distro builds one
])
def test_os_release_without_id_or_version_leaves_it_to_distro(os_release, tmp_path, monkeypatch):
    """The real platform.freedesktop_os_release() reading these files, defaults and all."""
    from gpudoctor.host import live

    path = tmp_path / "os-release"
    path.write_text(os_release)
    monkeypatch.setattr(live.platform, "_os_release_candidates", (str(path),), raising=False)
    monkeypatch.setattr(live.platform, "_os_release_cache", None, raising=False)
    if live.platform.freedesktop_os_release().get("VERSION_ID") is None and "VERSION_ID" in os_release:
        pytest.skip("this Python's platform module does not read os-release from _os_release_candidates")
    assert live._os_release() is None


def test_missing_os_release_leaves_it_to_distro(monkeypatch):
    from gpudoctor.host import live

    def missing():
        raise OSError("no os-release file")

    monkeypatch.setattr(live.platform, "freedesktop_os_release", missing)
    assert live._os_release() is None
    assert LiveHost().system().distro_id == live._distro_release()[0]


def test_a_failing_toolkit_scan_fails_the_probe_once_without_a_thread_traceback(monkeypatch, capfd):
    from gpudoctor.probes import toolchain

    calls = []

    def broken(host):
        calls.append(host)
        raise RuntimeError("toolkit scan broke")

    monkeypatch.setattr(toolchain, "_probe_toolkits", broken)
    with pytest.raises(RuntimeError, match="toolkit scan broke"):
        toolchain.probe_toolchain(LiveHost())
    assert len(calls) == 1 and "Exception in thread" not in capfd.readouterr().err


def test_a_probe_calling_sys_exit_is_a_probe_failure_not_the_end(monkeypatch):
    from gpudoctor.facts import Facts, ProbeFailure

    facts = Facts(LiveHost())
    calls = []
    monkeypatch.setitem(facts._probes, "system", lambda: calls.append(1) or sys.exit(3))
    for _ in range(2):
        with pytest.raises(ProbeFailure, match="SystemExit"):
            facts.get("system")
    assert calls == [1]


def test_prefetching_twice_starts_one_thread_per_fact():
    from gpudoctor.facts import Facts

    facts = Facts(LiveHost())
    first = facts.prefetch_in_background(["system", "packages", "env"])
    second = facts.prefetch_in_background(["packages", "system"])
    assert {t.name for t in first} == {"gpudoctor-probe-system", "gpudoctor-probe-packages"}  # env is quick
    assert not ({t for t in second} - set(first))
    for worker in first:
        worker.join()
