"""gpudoctor.preflight(): raises, passes, applies the env file, caches, reads pyproject."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import time

import pytest

import gpudoctor
from gpudoctor.fix import envfile
from gpudoctor.paths import GpudoctorDirs

pf = importlib.import_module("gpudoctor.hook")


def _finding(fid, severity):
    return {"id": fid, "severity": severity, "title": f"{fid} title", "message": "m", "evidence": {},
            "fixes": [{"kind": "user", "summary": "s", "commands": ["gpudoctor fix"], "env": {}}]}


@pytest.fixture
def checks(home, tmp_path, monkeypatch):
    """Replace the engine run; records the options it was given."""
    calls = []
    findings = []

    def fake(options, requirements=None):
        calls.append(options)
        return {"schema": pf.CACHE_SCHEMA, "time": time.time(), "options": options, "checks": 3, "findings": list(findings)}

    monkeypatch.setattr(pf, "_run_checks", fake)
    monkeypatch.chdir(tmp_path)
    fake.calls, fake.findings = calls, findings
    return fake


def test_passes_and_prints_a_compact_summary(checks, tmp_path, capsys):
    result = gpudoctor.preflight(project_dir=str(tmp_path))
    assert result.ok and not result.cached
    assert capsys.readouterr().err.startswith("gpudoctor preflight: OK (3 checks")


def test_raises_on_errors_with_the_findings(checks, tmp_path):
    checks.findings.extend([_finding("libcuda-unversioned-missing", "error"), _finding("w", "warning")])
    with pytest.raises(gpudoctor.PreflightError) as info:
        gpudoctor.preflight(project_dir=str(tmp_path), quiet=True)
    assert [f.id for f in info.value.findings] == ["libcuda-unversioned-missing"]
    assert info.value.findings[0].fixes[0].kind == "user"
    assert "gpudoctor fix" in str(info.value)
    result = gpudoctor.preflight(project_dir=str(tmp_path), quiet=True, raise_on_error=False)
    assert not result.ok and len(result.findings) == 2


def test_strict_raises_on_warnings(checks, tmp_path):
    checks.findings.append(_finding("w", "warning"))
    assert gpudoctor.preflight(project_dir=str(tmp_path), quiet=True).ok
    with pytest.raises(gpudoctor.PreflightError):
        gpudoctor.preflight(project_dir=str(tmp_path), quiet=True, strict=True)


def test_second_call_is_a_cache_hit(checks, tmp_path):
    gpudoctor.preflight(project_dir=str(tmp_path), quiet=True)
    start = time.perf_counter()
    result = gpudoctor.preflight(project_dir=str(tmp_path), quiet=True)
    elapsed_ms = (time.perf_counter() - start) * 1000
    assert result.cached and len(checks.calls) == 1
    assert elapsed_ms < 20  # generous for CI; the benchmark measures the real number


def test_cache_is_invalidated_by_the_environment(checks, tmp_path, monkeypatch):
    gpudoctor.preflight(project_dir=str(tmp_path), quiet=True)
    monkeypatch.setenv("CUDA_HOME", "/opt/cuda-other")
    assert not gpudoctor.preflight(project_dir=str(tmp_path), quiet=True).cached
    monkeypatch.setenv("UNRELATED_VAR", "x")
    assert gpudoctor.preflight(project_dir=str(tmp_path), quiet=True).cached


def test_applies_the_env_file_to_os_environ(checks, home, tmp_path, monkeypatch):
    monkeypatch.setenv("LIBRARY_PATH", "/orig")  # restored by monkeypatch afterwards
    monkeypatch.delenv("TRITON_LIBCUDA_PATH", raising=False)
    os.makedirs(home.config)
    envfile.write_entries(home.env_file, [envfile.EnvEntry("LIBRARY_PATH", "/stub", "prepend"),
                                          envfile.EnvEntry("TRITON_LIBCUDA_PATH", "/drv")])
    result = gpudoctor.preflight(project_dir=str(tmp_path), quiet=True)
    assert os.environ["LIBRARY_PATH"] == "/stub:/orig" and os.environ["TRITON_LIBCUDA_PATH"] == "/drv"
    assert set(result.env_changed) == {"LIBRARY_PATH", "TRITON_LIBCUDA_PATH"}
    gpudoctor.preflight(project_dir=str(tmp_path), quiet=True)
    assert os.environ["LIBRARY_PATH"] == "/stub:/orig"  # not prepended twice


def test_reads_tool_gpudoctor_from_pyproject(checks, tmp_path):
    project = tmp_path / "proj"
    (project / "src").mkdir(parents=True)
    (project / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.gpudoctor]\nrequire = ["bf16", "head_dim=80"]\nskip = ["shm-too-small"]\nstrict = true\n'
    )
    checks.findings.append(_finding("w", "warning"))
    with pytest.raises(gpudoctor.PreflightError):  # strict from the file
        gpudoctor.preflight(project_dir=str(project / "src"), quiet=True)
    options = checks.calls[-1]
    assert options["require"] == ["bf16", "head_dim=80"] and options["skip"] == ["shm-too-small"]
    assert gpudoctor.preflight(project_dir=str(project / "src"), quiet=True, strict=False).ok  # explicit wins


def test_xdg_paths_mirror_gpudoctor_dirs(home, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    dirs = GpudoctorDirs.from_env()
    assert pf._env_file() == dirs.env_file and pf._cache_dir() == dirs.cache


def test_import_gpudoctor_stays_light():
    # Against what the interpreter already loaded: a site .pth may import typing itself (the
    # H200 image's numba-cuda redirector does).
    code = ("import sys; before = set(sys.modules); import gpudoctor; "
            "print([m for m in ('rich', 'gpudoctor.engine', 'dataclasses', 'typing') if m in set(sys.modules) - before])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_callbacks_import_without_frameworks_and_call_preflight(checks, tmp_path, monkeypatch):
    from gpudoctor import integrations

    seen = []
    monkeypatch.setattr(integrations, "_run_preflight", lambda options: seen.append(options) or "ok")
    hf = integrations.PreflightCallback(require=["bf16"])
    hf.on_train_begin(args=None, state=None, control="control")
    lightning = integrations.PreflightLightningCallback(skip=["x"])
    lightning.on_fit_start(trainer=None, pl_module=None)
    assert seen == [{"require": ["bf16"], "quiet": None}, {"skip": ["x"], "quiet": None}]


def test_a_crash_in_the_checks_does_not_stop_training(home, tmp_path, monkeypatch, capsys):
    def broken(options, requirements):
        raise RuntimeError("probe exploded")

    monkeypatch.setattr(pf, "_run_checks", broken)
    result = gpudoctor.preflight(project_dir=str(tmp_path))
    assert result.ok and "could not run the checks" in capsys.readouterr().err
    assert not gpudoctor.preflight(project_dir=str(tmp_path), quiet=True).cached  # failures are not cached


def test_bad_require_is_the_callers_error(home, tmp_path):
    with pytest.raises(ValueError, match="head_dim"):
        gpudoctor.preflight(project_dir=str(tmp_path), require=["head_dim=eighty"], use_cache=False)


def test_only_rank_zero_prints_by_default(checks, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RANK", "3")
    gpudoctor.preflight(project_dir=str(tmp_path))
    assert capsys.readouterr().err == ""


def test_switch_interval_is_lowered_only_while_the_checks_run(home, monkeypatch):
    seen = []
    monkeypatch.setattr(pf, "_run_checks_now", lambda options, requirements: seen.append(sys.getswitchinterval()) or {})
    before = sys.getswitchinterval()
    pf._run_checks({}, None)
    assert seen == [min(before, pf.CHECK_SWITCH_INTERVAL_S)] and sys.getswitchinterval() == before

    def broken(options, requirements):
        raise RuntimeError("a bug in a check")

    monkeypatch.setattr(pf, "_run_checks_now", broken)
    with pytest.raises(RuntimeError):
        pf._run_checks({}, None)
    assert sys.getswitchinterval() == before


def test_overlapping_checks_restore_the_callers_switch_interval(home, monkeypatch):
    import threading

    inside, release = threading.Barrier(2), threading.Event()

    def slow(options, requirements):
        inside.wait(5)
        release.wait(5)
        return {}

    monkeypatch.setattr(pf, "_run_checks_now", slow)
    before = sys.getswitchinterval()
    threads = [threading.Thread(target=pf._run_checks, args=({}, None)) for _ in range(2)]
    for thread in threads:
        thread.start()
    time.sleep(0.2)
    assert sys.getswitchinterval() == min(before, pf.CHECK_SWITCH_INTERVAL_S)
    release.set()
    for thread in threads:
        thread.join(5)
    assert sys.getswitchinterval() == before
