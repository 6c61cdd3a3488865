"""Paths with spaces, quotes, newlines and command substitutions stay data, never code."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from fixhelpers import libcuda_finding

from gpudoctor.fix import envfile
from gpudoctor.fix.apply import apply_plan
from gpudoctor.fix.plan import build_plan
from gpudoctor.fix.script import render_script
from gpudoctor.fix.shellquote import comment, sh
from gpudoctor.model import Finding, Fix, SetEnv, Severity
from gpudoctor.paths import GpudoctorDirs

NASTY = "a b'c\"d\n$(touch pwned)`touch pwned2`;touch pwned3 $HOME *"
# Paths that go into the env file: everything nasty but a line break, which the line-based env
# file refuses (issue 14 item 8; tests/fix/test_security_values.py covers the refusal).
NASTY_PATH = NASTY.replace("\n", "\t")
NASTY_LINE = NASTY.replace("\n", " ")


def _no_pwned(root) -> None:
    for _, _, files in os.walk(root):
        assert not [f for f in files if f.startswith("pwned")]


@pytest.fixture
def nasty_home(tmp_path, monkeypatch) -> GpudoctorDirs:
    home = tmp_path / NASTY_PATH
    home.mkdir()
    env = {"HOME": str(home)}
    monkeypatch.setenv("HOME", str(home))
    for name in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "LIBRARY_PATH", "TRITON_LIBCUDA_PATH"):
        monkeypatch.delenv(name, raising=False)  # the scripts run below inherit the environment
    return GpudoctorDirs.from_env(env)


@pytest.mark.parametrize("text", [NASTY, "", "plain", "-rf", "tab\there", "\x01ctl", "é ü"])
def test_sh_round_trips_through_bash(text):
    out = subprocess.run(["bash", "-c", f"printf %s {sh(text)}"], capture_output=True, text=True, check=True)
    assert out.stdout == text


def test_rendered_script_with_nasty_paths_runs_safely(nasty_home, tmp_path):
    driver = tmp_path / ("driver " + NASTY_PATH)
    driver.mkdir()
    (driver / "libcuda.so.1").write_text("not really a library")
    finding = libcuda_finding(nasty_home, str(driver))
    script = render_script(build_plan([finding]), nasty_home)
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)
    if shutil.which("shellcheck"):
        subprocess.run(["shellcheck", "-s", "bash", "-"], input=script, text=True, check=True)

    subprocess.run(["bash", "-c", script], cwd=tmp_path, check=True, capture_output=True)
    _no_pwned(tmp_path)
    stub = os.path.join(nasty_home.stub_lib_dir, "libcuda.so")
    assert os.readlink(stub) == str(driver / "libcuda.so.1")
    entries = envfile.read_entries(nasty_home.env_file)
    assert entries[0] == envfile.EnvEntry("LIBRARY_PATH", nasty_home.stub_lib_dir, "prepend")

    # sourcing the env file gives the exact value, and runs nothing
    out = subprocess.run(["bash", "-c", 'set -u; . "$1"; printf %s "$LIBRARY_PATH"', "_", nasty_home.env_file],
                         cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout == nasty_home.stub_lib_dir
    _no_pwned(tmp_path)


def test_apply_with_nasty_paths_matches_the_script(nasty_home, tmp_path):
    driver = tmp_path / "drv"
    driver.mkdir()
    result = apply_plan(build_plan([libcuda_finding(nasty_home, str(driver))]), nasty_home)
    assert all(o.ok for o in result.outcomes)
    out = subprocess.run(["bash", "-c", '. "$1"; printf %s "$TRITON_LIBCUDA_PATH|$LIBRARY_PATH"', "_", nasty_home.env_file],
                         cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout == f"{driver}|{nasty_home.stub_lib_dir}"
    _no_pwned(tmp_path)


def test_finding_text_cannot_inject_commands(tmp_path):
    dirs = GpudoctorDirs.from_env({"HOME": str(tmp_path)})
    evil = Finding("x-evil", Severity.ERROR, "title\ntouch pwned", "msg\r\ntouch pwned2",
                   fixes=(Fix("user", "summary\ntouch pwned3", actions=(SetEnv("X", "1"),)),))
    script = render_script(build_plan([evil]), dirs)
    subprocess.run(["bash", "-c", script], cwd=tmp_path, check=True, capture_output=True)
    _no_pwned(tmp_path)
    assert all(line.startswith("#") for line in comment("a\nb\rc").splitlines())


def test_system_script_is_valid_and_refuses_to_run_unprivileged(tmp_path):
    from gpudoctor.model import InstallPackage, RootCommand, WriteFile

    dirs = GpudoctorDirs.from_env({"HOME": str(tmp_path)})
    finding = Finding("libcuda-not-in-linker-cache", Severity.ERROR, "t", "m", fixes=(
        # the nastiest one-line content ld.so.conf.d accepts (a line break is refused now, issue 14 item 8)
        Fix("system", "register", actions=(WriteFile(f"/etc/ld.so.conf.d/{NASTY_LINE}.conf", "/" + NASTY_LINE + "\n",
                                                     needs_root=True),
                                           RootCommand(("ldconfig",)), InstallPackage("apt", ("gcc-12", "g++-12")))),))
    script = render_script(build_plan([finding], "system"), dirs)
    assert 'if [ "$(id -u)" -ne 0 ]' in script
    assert script.index("apt-get install") < script.index("printf '%s'") < script.index("\nldconfig")
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)
    if shutil.which("shellcheck"):
        subprocess.run(["shellcheck", "-s", "bash", "-"], input=script, text=True, check=True)
