"""gpudoctor.preflight(): raises, passes, applies the env file, caches, reads pyproject."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time

import pytest
from fixhelpers import finding_record

import gpudoctor
from gpudoctor.fix import envfile
from gpudoctor.paths import GpudoctorDirs

pf = importlib.import_module("gpudoctor.hook")




def test_passes_and_prints_a_compact_summary(checks, tmp_path, capsys):
    result = gpudoctor.preflight(project_dir=str(tmp_path))
    assert result.ok and not result.cached
    assert capsys.readouterr().err.startswith("gpudoctor preflight: OK (3 checks")


def test_raises_on_errors_with_the_findings(checks, tmp_path):
    checks.findings.extend([finding_record("libcuda-unversioned-missing", "error"), finding_record("w", "warning")])
    with pytest.raises(gpudoctor.PreflightError) as info:
        gpudoctor.preflight(project_dir=str(tmp_path), quiet=True)
    assert [f.id for f in info.value.findings] == ["libcuda-unversioned-missing"]
    assert info.value.findings[0].fixes[0].kind == "user"
    assert "gpudoctor fix" in str(info.value)
    result = gpudoctor.preflight(project_dir=str(tmp_path), quiet=True, raise_on_error=False)
    assert not result.ok and len(result.findings) == 2


def test_strict_raises_on_warnings(checks, tmp_path):
    checks.findings.append(finding_record("w", "warning"))
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
    checks.findings.append(finding_record("w", "warning"))
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
    def broken(options, requirements, nvml):
        raise RuntimeError("probe exploded")

    monkeypatch.setattr(pf, "_run_checks", broken)
    result = gpudoctor.preflight(project_dir=str(tmp_path))
    # training goes on (no raise), but the result does not claim a pass it never checked
    assert not result.ok and "checks NOT run (RuntimeError: probe exploded" in capsys.readouterr().err
    assert not gpudoctor.preflight(project_dir=str(tmp_path), quiet=True).cached  # failures are not cached


def test_bad_require_is_the_callers_error(home, tmp_path):
    with pytest.raises(ValueError, match="head_dim"):
        gpudoctor.preflight(project_dir=str(tmp_path), require=["head_dim=eighty"], use_cache=False)


def test_only_rank_zero_prints_by_default(checks, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RANK", "3")
    gpudoctor.preflight(project_dir=str(tmp_path))
    assert capsys.readouterr().err == ""


def test_real_checks_leave_no_process_state_and_no_cli_import(home, tmp_path):
    """The uncached path on this machine, in a fresh interpreter: nothing from gpudoctor.cli is
    imported and the interpreter's switch interval is what the caller set."""
    code = ("import sys; sys.setswitchinterval(0.003); import gpudoctor; "
            "r = gpudoctor.preflight(quiet=True, raise_on_error=False, use_cache=False); "
            "assert r.checks > 0 and not r.not_run, r.not_run; "
            "assert sys.getswitchinterval() == 0.003, sys.getswitchinterval(); "
            "print(sorted(m for m in sys.modules if m.startswith('gpudoctor.cli')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def _second_run(code: str, cwd) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter twice, the first to fill preflight's cache: the second run."""
    subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=60, check=True)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=60)


def test_cached_path_imports_neither_the_model_nor_dataclasses(home, tmp_path):
    code = ("import sys, gpudoctor; gpudoctor.preflight(quiet=True, raise_on_error=False); "
            "print(sorted(m for m in ('gpudoctor.model', 'gpudoctor.paths', 'dataclasses', 'rich', 'gpudoctor.cli.check') "
            "if m in sys.modules))")
    out = _second_run(code, tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_cached_path_imports_only_what_it_names(home, tmp_path):
    """Against what the interpreter loaded before (a site .pth may import re or json itself):
    the cached call adds gpudoctor's hook and xdg, _blake2 and the C JSON scanner, nothing else
    (json.decoder and json.encoder import re: ~8 ms of a bare venv's start-up)."""
    code = ("import sys; before = set(sys.modules); import gpudoctor; "
            "r = gpudoctor.preflight(quiet=True, raise_on_error=False); "
            "print(r.cached, sorted(set(sys.modules) - before))")
    out = _second_run(code, tmp_path)
    assert out.returncode == 0, out.stderr
    cached, added = out.stdout.split(" ", 1)
    assert cached == "True"
    assert set(eval(added)) <= {"gpudoctor", "gpudoctor.hook", "gpudoctor.xdg", "_blake2", "_json", "__future__"}


@pytest.mark.parametrize("text", [
    '{"schema": 4, "time": 1732370000.5, "options": {"require": ["bf16"], "skip": null, "strict": false}}',
    r'{"findings": [{"id": "cuda-oom", "message": "caf\u00e9 \u2713 \"quoted\"\n", "evidence": {"n": -1e-3}}]}',
    '[NaN, Infinity, -Infinity, 1e400, 12345678901234567890]', '"text"', '  {"a": [] }\n',
])
def test_the_cached_paths_json_reader_reads_what_json_reads(text):
    import json
    import math

    ours, theirs = pf._read_cache_json(text), json.loads(text)
    assert json.dumps(ours) == json.dumps(theirs) or all(math.isnan(a) for a in (ours[0], theirs[0]))


@pytest.mark.parametrize("text", ["", "{", '{"a": 1} trailing', "{'a': 1}", '{"a": 01}', "[1,]"])
def test_the_cached_paths_json_reader_refuses_what_json_refuses(text):
    with pytest.raises(ValueError):
        pf._read_cache_json(text)


def test_checks_that_could_not_run_are_not_ok(checks, tmp_path, monkeypatch, capsys):
    def broken(options, requirements=None, nvml=None):
        raise RuntimeError("a bug in a check")

    monkeypatch.setattr(pf, "_run_checks", broken)
    result = gpudoctor.preflight(project_dir=str(tmp_path))
    assert not result.ok and "RuntimeError" in result.not_run
    assert "checks NOT run" in capsys.readouterr().err


def test_unknown_features_and_rule_ids_are_the_callers_error(checks, tmp_path):
    with pytest.raises(ValueError, match="unknown required feature 'fp8'; valid: bf16, flash-attn, head_dim=N"):
        gpudoctor.preflight(project_dir=str(tmp_path), require=["fp8"])
    with pytest.raises(ValueError, match="unknown rule id.*bogus.*valid: no-nvidia-driver"):
        gpudoctor.preflight(project_dir=str(tmp_path), skip=["bogus"])
    assert checks.calls == []


@pytest.mark.parametrize("body, message", [
    ("require = 5", "require in .* must be a string or a list of strings"),
    ("skip = 5", "skip in .* must be a string or a list of strings"),
    ('require = ["fp8"]', "unknown required feature 'fp8'"),
    ('strict = "true"', "strict = 'true' in .* must be true or false"),
    ('strict = "false"', "strict = 'false' in .* must be true or false"),
])
def test_a_bad_pyproject_never_passes_the_gate_nor_crashes(checks, tmp_path, body, message, capsys):
    (tmp_path / "pyproject.toml").write_text(f"[tool.gpudoctor]\n{body}\n")
    with pytest.raises(gpudoctor.PreflightError, match=message):
        gpudoctor.preflight(project_dir=str(tmp_path))
    result = gpudoctor.preflight(project_dir=str(tmp_path), raise_on_error=False)
    assert not result.ok and checks.calls == []
    assert "checks NOT run" in capsys.readouterr().err


def test_non_boolean_options_and_a_non_table_tool_are_ignored_with_a_note(checks, tmp_path, capsys):
    """Ignoring raise_on_error or quiet leaves the gate raising and speaking (strict is refused:
    ignoring it would loosen the gate)."""
    checks.findings.append(finding_record("w", "warning"))
    (tmp_path / "pyproject.toml").write_text('[tool.gpudoctor]\nquiet = "yes"\n')
    assert gpudoctor.preflight(project_dir=str(tmp_path)).ok
    assert "ignoring quiet = 'yes'" in capsys.readouterr().err
    (tmp_path / "pyproject.toml").write_text("tool = 1\n")
    assert gpudoctor.preflight(project_dir=str(tmp_path)).ok


@pytest.mark.parametrize("kind", ["directory", "not-utf8", "unreadable"])
def test_a_broken_env_file_never_crashes_the_script(checks, home, tmp_path, kind, capsys):
    env_file = GpudoctorDirs.from_env().env_file
    os.makedirs(os.path.dirname(env_file), exist_ok=True)
    if kind == "directory":
        os.makedirs(env_file)
    else:
        with open(env_file, "wb") as handle:
            handle.write(b"export A=\xff\xfe\n" if kind == "not-utf8" else b"export A=1\n")
        if kind == "unreadable":
            if os.geteuid() == 0:
                pytest.skip("root reads every file")
            os.chmod(env_file, 0)
    result = gpudoctor.preflight(project_dir=str(tmp_path), raise_on_error=False)
    assert result.env_changed == {}
    assert "could not apply" in capsys.readouterr().err


@pytest.mark.parametrize("damage", ["garbage", "future", "wrong-types", "bad-index"])
def test_a_damaged_cache_entry_is_a_miss(checks, tmp_path, damage):
    gpudoctor.preflight(project_dir=str(tmp_path), quiet=True)
    directory = os.path.join(pf._cache_dir(), "preflight")
    (name,) = os.listdir(directory)
    path = os.path.join(directory, name)
    with open(path) as handle:
        entry = json.load(handle)
    if damage == "future":
        entry["time"] = time.time() + 365 * 24 * 3600
    elif damage == "wrong-types":
        entry["findings"] = "x"
    elif damage == "bad-index":
        entry["blocking"]["default"] = [7]
    with open(path, "w") as handle:
        handle.write("{not json" if damage == "garbage" else json.dumps(entry))
    result = gpudoctor.preflight(project_dir=str(tmp_path), quiet=True)
    assert not result.cached and len(checks.calls) == 2


def test_required_features_are_verified_or_fail_the_gate(home, tmp_path, monkeypatch):
    """issue 13: preflight(require=[...]) never passes a feature it could not verify. The test
    venv has no flash-attn, so head_dim=80 is NOT met on any machine; bf16 is met only with a GPU."""
    monkeypatch.chdir(tmp_path)
    result = gpudoctor.preflight(require=["bf16", "head_dim=80"], raise_on_error=False, quiet=True)
    verdicts = {r["feature"]: r["status"] for r in result.unmet_requirements}
    assert verdicts["head_dim=80"] == "NOT met" and not result.ok
    assert verdicts.get("bf16", "met") in ("met", "cannot verify here", "NOT met")
    with pytest.raises(gpudoctor.PreflightError, match="head_dim=80"):
        gpudoctor.preflight(require=["head_dim=80"], quiet=True)


def test_a_cached_verdict_says_how_old_it_is(checks, tmp_path, capsys):
    """A cached OK is the machine as it was when checked (GPU health can change within the
    cache's day): the summary says when, not just "cached"."""
    gpudoctor.preflight(project_dir=str(tmp_path))
    capsys.readouterr()
    result = gpudoctor.preflight(project_dir=str(tmp_path))
    assert result.cached and isinstance(result.checked_at, float)
    err = capsys.readouterr().err
    assert err.startswith("gpudoctor preflight: OK (3 checks, cached from ") and " s ago, " in err


@pytest.fixture
def nvml_children(monkeypatch):
    """The NVML children preflight starts (host/nvml_query.py), as on a machine with a core free
    for one: this one has 2 CPUs, where nvml_query.start() would keep the query in a thread."""
    from gpudoctor.host import nvml_query

    started: list[subprocess.Popen] = []
    real_spawn = nvml_query.spawn
    monkeypatch.setattr(nvml_query, "usable_cpus", lambda: 64)
    monkeypatch.setattr(nvml_query, "spawn", lambda: started.append(real_spawn()) or started[-1])
    return started


def _left_behind(started: list[subprocess.Popen]) -> list[int]:
    """The children that still run or were never reaped (a zombie is a child of this process)."""
    import psutil

    ours = {child.pid for child in psutil.Process().children()}
    return [proc.pid for proc in started if proc.returncode is None or proc.pid in ours]


def test_the_nvml_child_starts_before_the_config_is_read_and_is_reaped(checks, tmp_path, monkeypatch, nvml_children):
    (tmp_path / "pyproject.toml").write_text('[tool.gpudoctor]\nrequire = ["bf16"]\n')
    order = []
    read_config = pf._read_config
    monkeypatch.setattr(pf, "_read_config", lambda *args: order.append(len(nvml_children)) or read_config(*args))
    gpudoctor.preflight(project_dir=str(tmp_path), quiet=True, raise_on_error=False)
    assert order == [1]  # the child was started when the config was read
    assert len(checks.calls) == 1 and not _left_behind(nvml_children)  # a check that never asked NVML: stopped


@pytest.mark.parametrize("bad", [{"require": ["not-a-feature"]}, {"skip": ["not-a-rule"]}])
def test_a_bad_argument_leaves_no_nvml_child(home, tmp_path, nvml_children, bad):
    with pytest.raises(ValueError, match="not-a-"):
        gpudoctor.preflight(project_dir=str(tmp_path), use_cache=False, **bad)
    assert len(nvml_children) == 1 and not _left_behind(nvml_children)


def test_a_config_error_leaves_no_nvml_child(checks, tmp_path, nvml_children):
    (tmp_path / "pyproject.toml").write_text('[tool.gpudoctor]\nstrict = "true"\n')
    with pytest.raises(gpudoctor.PreflightError, match="must be true or false"):
        gpudoctor.preflight(project_dir=str(tmp_path), quiet=True)
    assert checks.calls == [] and len(nvml_children) == 1 and not _left_behind(nvml_children)


def test_an_interrupt_while_reading_the_config_leaves_no_nvml_child(checks, tmp_path, monkeypatch, nvml_children):
    def interrupted(*args):
        raise KeyboardInterrupt

    (tmp_path / "pyproject.toml").write_text("[tool.gpudoctor]\n")
    monkeypatch.setattr(pf, "_read_config", interrupted)
    with pytest.raises(KeyboardInterrupt):
        gpudoctor.preflight(project_dir=str(tmp_path), quiet=True)
    assert len(nvml_children) == 1 and not _left_behind(nvml_children)


def test_checks_that_crash_leave_no_nvml_child(home, tmp_path, monkeypatch, nvml_children):
    def broken(options, requirements, nvml):
        raise RuntimeError("a bug before the host took the child")

    monkeypatch.setattr(pf, "_run_checks", broken)
    result = gpudoctor.preflight(project_dir=str(tmp_path), quiet=True, raise_on_error=False, use_cache=False)
    assert "a bug before the host took the child" in result.not_run
    assert len(nvml_children) == 1 and not _left_behind(nvml_children)


def test_the_real_checks_with_skip_leave_no_nvml_child(home, tmp_path, nvml_children):
    result = gpudoctor.preflight(project_dir=str(tmp_path), skip=["no-gpu-visible"], quiet=True,
                                 raise_on_error=False, use_cache=False)
    assert result.checks > 0 and not result.not_run, result.not_run
    assert len(nvml_children) == 1 and not _left_behind(nvml_children)
