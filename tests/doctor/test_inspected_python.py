"""The environment under inspection is explicit (issue 13 item 1): --python PATH reads that
interpreter's packages without importing anything in it, the header and JSON name it, and an
environment without torch is never a green tick."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gpudoctor.cli.main import main
from gpudoctor.host import LiveHost
from gpudoctor.interpreter import has_torch, query_interpreter, training_interpreter


def _venv(root, torch_version: str | None = None) -> str:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = os.path.join(str(root), "bin", "python")
    if torch_version:
        site = f"lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages"
        info = root / site / f"torch-{torch_version}.dist-info"
        info.mkdir(parents=True)
        # a real wheel's METADATA header (torch 2.5.0+cu121 as pip writes it), trimmed to what is read
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {torch_version}\n\n")
    return python


@pytest.fixture(scope="module")
def envs(tmp_path_factory):
    root = tmp_path_factory.mktemp("interpreters")
    return {"bare": _venv(root / "bare"), "torch": _venv(root / "withtorch", "2.5.0+cu121")}


def test_no_torch_in_the_inspected_env_is_said_and_never_ticked(envs, capsys):
    main(["check", "--python", envs["bare"]])
    out = capsys.readouterr().out
    assert f"inspecting Python {sys.version_info[0]}.{sys.version_info[1]}" in out and envs["bare"] in out
    assert "no torch in the inspected Python environment" in out
    assert "[✓] Python packages" not in out


@pytest.mark.parametrize("uv_on_path", [True, False])
def test_fixes_name_the_inspected_interpreter(envs, capsys, monkeypatch, tmp_path, uv_on_path):
    """A bare `pip install` runs whichever pip is first on PATH; the fix names the inspected interpreter
    (this test venv has no pip, as `uv venv` makes them, so the command goes through `uv pip --python`,
    or, with no uv on PATH either, installs pip with ensurepip first)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if uv_on_path:
        (bin_dir / "uv").write_text("#!/bin/sh\n")
        (bin_dir / "uv").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))  # only this uv, or none, whatever the machine has
    main(["check", "--python", envs["torch"], "--json"])
    payload = json.loads(capsys.readouterr().out)
    (finding,) = [f for f in payload["findings"] if f["id"] == "triton-missing"]
    commands = [c for fix in finding["fixes"] for c in fix["commands"]]
    python = envs["torch"]
    expected = (f'uv pip install --python {python} "triton==3.1.0"' if uv_on_path
                else f'{python} -m ensurepip --upgrade && {python} -m pip install "triton==3.1.0"')
    assert commands == [expected], finding["fixes"]


def test_packages_are_the_named_interpreters(envs, capsys):
    main(["check", "--python", envs["torch"], "--json"])
    payload = json.loads(capsys.readouterr().out)
    env = payload["environment"]
    assert env["inspected_python"] == {"executable": envs["torch"], "version": env["inspected_python"]["version"],
                                       "chosen_because": "--python"}
    assert env["system"]["python_executable"] == envs["torch"]
    assert env["python_packages"]["packages"]["torch"] == "2.5.0+cu121"
    assert env["python_packages"]["torch_cuda_build"] == "12.1"
    main(["report", "--python", envs["torch"]])
    assert "torch: 2.5.0+cu121" in capsys.readouterr().out


def test_without_python_the_env_that_has_torch_is_chosen_and_said(envs, tmp_path):
    host = LiveHost({**os.environ, "VIRTUAL_ENV": os.path.dirname(os.path.dirname(envs["torch"]))})
    bare = query_interpreter(host, envs["bare"])
    assert not has_torch(bare.path)
    chosen = training_interpreter(host, envs["bare"], bare.path)
    assert chosen is not None and chosen.executable == envs["torch"] and "$VIRTUAL_ENV has torch" in chosen.chosen_because
    with_torch = query_interpreter(host, envs["torch"])
    assert training_interpreter(host, envs["torch"], with_torch.path) is None  # own interpreter has torch


@pytest.mark.parametrize("argv", [["check", "--python", "/nonexistent/python"], ["check", "--python", "/bin/true"],
                                  ["check", "--python", sys.executable, "--snapshot", "fixtures/snapshots/h200-baseline"]])
def test_bad_python_is_a_usage_error(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpudoctor: error: --python") and len(err.splitlines()) == 1


_TRITON_MISSING_LOG = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "logs", "triton-missing",
                                   "lavie-50.log")


def test_explain_names_the_fix_for_the_python_given(envs, capsys):
    """The log's fix installs into the interpreter the failed run used, and the report says which."""
    assert main(["explain", "--python", envs["torch"], _TRITON_MISSING_LOG]) == 1
    out = capsys.readouterr().out
    assert f"inspecting Python {sys.version_info[0]}.{sys.version_info[1]}" in out and "(--python)" in out
    assert f"--python {envs['torch']}" in out or f"{envs['torch']} -m " in out  # uv or pip form, named either way
    main(["explain", "--python", envs["torch"], "--json", _TRITON_MISSING_LOG])
    payload = json.loads(capsys.readouterr().out)
    commands = [c for f in payload["findings"] for fix in f["fixes"] for c in fix["commands"]]
    assert commands and all(envs["torch"] in c for c in commands), commands


@pytest.mark.parametrize("extra", [["--python", "/nonexistent/python"], ["--python", "/bin/true"]])
def test_explain_with_a_bad_python_is_a_usage_error(extra, capsys):
    assert main(["explain", *extra, _TRITON_MISSING_LOG]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpudoctor: error: --python") and len(err.splitlines()) == 1


@pytest.mark.parametrize("other", [["--no-probe"], ["--snapshot", "fixtures/snapshots/h200-baseline"]])
def test_explain_python_goes_with_neither_no_probe_nor_a_snapshot(other, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["explain", "--python", sys.executable, *other, _TRITON_MISSING_LOG])
    assert exit_.value.code == 2


def test_a_snapshot_records_the_python_given_and_replays_its_fixes(envs, tmp_path, capsys):
    directory = str(tmp_path / "snap")
    assert main(["snapshot", directory, "--python", envs["torch"]]) == 0
    assert "(--python)" in capsys.readouterr().out
    main(["check", "--snapshot", directory, "--json", "--exit-zero"])
    payload = json.loads(capsys.readouterr().out)
    assert payload["environment"]["system"]["python_executable"] == envs["torch"]
    assert payload["environment"]["python_packages"]["packages"]["torch"] == "2.5.0+cu121"
    (finding,) = [f for f in payload["findings"] if f["id"] == "triton-missing"]
    assert all(envs["torch"] in c for fix in finding["fixes"] for c in fix["commands"])


def test_a_snapshot_with_a_bad_python_is_a_usage_error_and_writes_nothing(tmp_path, capsys):
    directory = tmp_path / "snap"
    assert main(["snapshot", str(directory), "--python", "/nonexistent/python"]) == 2
    assert capsys.readouterr().err.startswith("gpudoctor: error: --python")
    assert not directory.exists()


def test_the_search_for_the_training_python_runs_beside_the_machines_probes(envs, monkeypatch):
    """`check` without --python, from an interpreter without torch: the candidates are started in a
    thread (SearchedHost) while NVML, the compilers and ldconfig are probed; only the Python facts
    wait for it, and they are the chosen interpreter's, as with the search done first."""
    from gpudoctor.interpreter import SearchedHost

    host = LiveHost({**os.environ, "VIRTUAL_ENV": os.path.dirname(os.path.dirname(envs["torch"]))})
    bare = query_interpreter(host, envs["bare"])
    started, release = __import__("threading").Event(), __import__("threading").Event()

    def slow_search():
        started.set()
        assert release.wait(30)
        return training_interpreter(host, envs["bare"], bare.path)

    searched = SearchedHost(host, slow_search)
    assert started.wait(30)
    assert searched.env is host.env and searched.which("sh")  # the machine's own facts do not wait
    release.set()
    assert searched.interpreter.executable == envs["torch"]
    assert any(d.name == "torch" and d.version == "2.5.0+cu121" for d in searched.distributions())
    assert searched.system().python_executable == envs["torch"]


def test_a_search_that_finds_nothing_leaves_the_python_facts_this_interpreters_and_a_failed_one_says_why():
    from gpudoctor.interpreter import SearchedHost

    host = LiveHost()
    nothing = SearchedHost(host, lambda: None)
    assert nothing.interpreter is None and nothing.system().python_executable == host.system().python_executable

    def broken():
        raise OSError("no candidate could be started")

    failed = SearchedHost(host, broken)
    assert failed.interpreter is None
    with pytest.raises(OSError, match="no candidate"):
        failed.distributions()


def test_check_without_python_says_the_interpreter_the_search_chose(envs, capsys, monkeypatch):
    import gpudoctor.interpreter as interpreter_module

    monkeypatch.setattr(interpreter_module, "has_torch", lambda path: any("withtorch" in p for p in path))
    monkeypatch.setenv("VIRTUAL_ENV", os.path.dirname(os.path.dirname(envs["torch"])))
    main(["check", "--json", "--exit-zero"])
    payload = json.loads(capsys.readouterr().out)
    assert payload["environment"]["inspected_python"]["executable"] == envs["torch"]
    assert "$VIRTUAL_ENV has torch" in payload["environment"]["inspected_python"]["chosen_because"]
    assert payload["environment"]["python_packages"]["packages"]["torch"] == "2.5.0+cu121"


def test_check_stops_the_nvml_child_it_started_when_nothing_collects_it(monkeypatch, capsys):
    """check starts NVML's child before the probes (as preflight does); a run that ends before
    the driver probe collects it (here a bad --require, a usage error) stops and reaps it."""
    import subprocess

    from gpudoctor.host import nvml_query

    started = []

    def fake_start():
        proc = subprocess.Popen(["sleep", "30"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        started.append(proc)
        return proc

    monkeypatch.setattr(nvml_query, "start", fake_start)
    assert main(["check", "--require", "not-a-feature"]) == 2
    assert len(started) == 1 and started[0].returncode is not None  # killed and reaped
    assert "not-a-feature" in capsys.readouterr().err
