"""Issue 13 item b: `gpudoctor fix --python PATH` plans (and verifies) the fixes for the named
interpreter's environment, not gpudoctor's own, as `check --python` inspects it: a second venv,
built here, whose packages differ from gpudoctor's."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import gpudoctor.fix.verify as verify
from gpudoctor.cli.main import main


def _venv(root, torch_version: str | None = None) -> str:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    if torch_version:
        site = root / f"lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages"
        info = site / f"torch-{torch_version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {torch_version}\n\n")
    return os.path.join(str(root), "bin", "python")


@pytest.fixture(scope="module")
def torch_venv(tmp_path_factory):
    """torch 2.5.0+cu121 and no triton: `triton-missing` there, never in gpudoctor's own venv."""
    return _venv(tmp_path_factory.mktemp("interp") / "withtorch", "2.5.0+cu121")


def _dry_run_json(capsys, *argv):
    assert main(["fix", "--dry-run", "--json", *argv]) == 0
    captured = capsys.readouterr()
    return json.loads(captured.out), captured.err


def test_the_plan_comes_from_the_named_interpreters_packages(home, torch_venv, capsys):
    own, _ = _dry_run_json(capsys)
    assert "triton-missing" not in {f["id"] for f in own["findings"]}  # gpudoctor's venv has triton
    named, err = _dry_run_json(capsys, "--python", torch_venv)
    assert "triton-missing" in {f["id"] for f in named["findings"]}
    assert named["inspected_python"]["executable"] == torch_venv
    assert f"inspecting Python {sys.version_info[0]}.{sys.version_info[1]}" in err and torch_venv in err


def test_apply_and_verification_use_the_named_interpreter(home, torch_venv, capsys, monkeypatch):
    seen = []
    real = verify.live_diagnose

    def spy(env, only, requirements=None, interpreter=None):
        seen.append(interpreter.executable if interpreter else None)
        return real(env, only, requirements, interpreter=interpreter)

    monkeypatch.setattr(verify, "live_diagnose", spy)
    monkeypatch.setenv("CC", "/nonexistent/gcc")  # c-compiler-missing: a user fix (CC -> the working gcc)
    code = main(["fix", "--python", torch_venv, "--only", "c-compiler-missing"])
    out = capsys.readouterr().out
    assert len(seen) >= 2 and set(seen) == {torch_venv}  # the diagnosis and the re-run after the fix
    assert "c-compiler-missing: fixed" in out and code == 0


@pytest.mark.parametrize("argv, message", [
    (["fix", "--python", "/nonexistent/python"], "--python /nonexistent/python: no such interpreter"),
    (["fix", "--undo", "--python", sys.executable], "--python"),
])
def test_bad_or_misplaced_python_is_a_usage_error(home, argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpudoctor: error: ") and message in err and len(err.splitlines()) == 1
