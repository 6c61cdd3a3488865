"""`gpudoctor fix` end to end in a temporary HOME, with the real link test before and after."""

from __future__ import annotations

import os
import shutil
import subprocess

from fixhelpers import LIBCUDA_ID, link_ok, tree

from gpudoctor.cli.main import main
from gpudoctor.fix import envfile
from gpudoctor.fix.verify import fixed_environment


def test_link_fails_before_fix_passes_after_and_undo_restores_the_tree(machine, home, driver_dir, tmp_path, capsys):
    before = tree(tmp_path)
    assert not link_ok(os.environ, driver_dir), "the fake driver dir must reproduce `cannot find -lcuda`"

    assert main(["fix"]) == 0
    out = capsys.readouterr().out
    assert f"{LIBCUDA_ID}: fixed" in out
    assert link_ok(fixed_environment(os.environ, home), driver_dir)
    stub = os.path.join(home.stub_lib_dir, "libcuda.so")
    assert os.readlink(stub) == os.path.join(driver_dir, "libcuda.so.1")
    for directory in (home.stub_lib_dir, home.cache, home.config, home.state):
        assert os.stat(directory).st_mode & 0o777 == 0o700
    # verification ran under the env file, not the caller's environment
    verify_env, only = machine.calls[-1]
    assert only == [LIBCUDA_ID] and verify_env["LIBRARY_PATH"].split(":")[0] == home.stub_lib_dir

    assert main(["fix", "--undo"]) == 0
    assert tree(tmp_path) == before
    assert not link_ok(os.environ, driver_dir)


def test_apply_is_idempotent(machine, home, tmp_path, capsys):
    assert main(["fix"]) == 0
    first = tree(tmp_path)
    assert main(["fix"]) == 0  # the (unsourced) shell still fails the link; apply finds all done
    assert "already done" in capsys.readouterr().out
    assert tree(tmp_path) == first  # manifest and env file byte-identical too


def test_dry_run_changes_nothing_and_script_is_valid_bash(machine, home, tmp_path, capsys):
    before = tree(tmp_path)
    assert main(["fix", "--dry-run"]) == 0
    script = capsys.readouterr().out
    assert tree(tmp_path) == before
    assert script.startswith("#!/usr/bin/env bash\n") and "set -euo pipefail" in script
    assert f"# [error] {LIBCUDA_ID}:" in script
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)
    if shutil.which("shellcheck"):
        subprocess.run(["shellcheck", "-s", "bash", "-"], input=script, text=True, check=True)


def test_dry_run_script_does_the_same_as_fix(machine, home, driver_dir, tmp_path):
    script_file = tmp_path / "plan.sh"
    assert main(["fix", "--script", str(script_file)]) == 0
    subprocess.run(["bash", str(script_file)], check=True, capture_output=True)
    subprocess.run(["bash", str(script_file)], check=True, capture_output=True)  # guarded: re-runnable
    entries = envfile.read_entries(home.env_file)
    assert [e.name for e in entries] == ["LIBRARY_PATH", "TRITON_LIBCUDA_PATH"]
    assert link_ok(envfile.apply_to(os.environ, entries), driver_dir)


def test_symlink_over_a_real_file_is_refused(machine, home, capsys):
    os.makedirs(home.stub_lib_dir)
    real_file = os.path.join(home.stub_lib_dir, "libcuda.so")
    with open(real_file, "w") as handle:
        handle.write("mine")
    assert main(["fix"]) == 1
    out = capsys.readouterr().out
    assert "refused" in out and "not a symlink; refusing to replace it" in out
    assert f"{LIBCUDA_ID}: NOT fixed" in out
    assert open(real_file).read() == "mine" and not os.path.islink(real_file)


def test_undo_leaves_a_symlink_the_user_repointed(machine, home, tmp_path, capsys):
    assert main(["fix"]) == 0
    stub = os.path.join(home.stub_lib_dir, "libcuda.so")
    os.unlink(stub)
    os.symlink("/somewhere/else", stub)
    assert main(["fix", "--undo"]) == 1
    assert "not where gpudoctor pointed it" in capsys.readouterr().out
    assert os.readlink(stub) == "/somewhere/else"


def test_env_prints_exports_for_each_shell(machine, home, capsys):
    assert main(["fix"]) == 0
    capsys.readouterr()
    assert main(["env", "--shell", "bash"]) == 0
    bash = capsys.readouterr().out
    assert "export TRITON_LIBCUDA_PATH=" in bash and "LIBRARY_PATH" in bash
    result = subprocess.run(["bash", "-c", f'set -u; eval "$1"; eval "$1"; printf %s "$LIBRARY_PATH"', "_", bash],
                            capture_output=True, text=True, check=True)
    assert result.stdout == home.stub_lib_dir  # eval twice: prepended once
    assert main(["env", "--shell", "fish"]) == 0
    assert "set -gx TRITON_LIBCUDA_PATH" in capsys.readouterr().out


def test_json_output_is_one_object(machine, home, capsys):
    import json

    assert main(["fix", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["schema"] == 1 and payload["verification"] == [{"id": LIBCUDA_ID, "status": "fixed", "detail": ""}]
    # the one envelope (report_dict), the fix's keys added: the findings the plan was built from come along
    assert payload["tool"]["name"] == "gpudoctor" and "checks" in payload
    assert [f["id"] for f in payload["findings"]] == [LIBCUDA_ID]
    assert payload["findings"][0]["fixes"][0]["actions"]


def test_fix_session_is_library_code(machine, home, driver_dir):
    """apply -> verify -> record lives in gpudoctor.fix.session (issue 12 item 5): the library
    fixes and verifies without the command line, and cli/fix.py calls neither step itself."""
    import inspect

    import gpudoctor.cli.fix as cli_fix
    from gpudoctor.fix.plan import build_plan
    from gpudoctor.fix.session import fix_user

    plan = build_plan(machine(dict(os.environ), None).findings, "user")
    result = fix_user(plan, home, os.environ, machine)
    assert result.ok and [v.status for v in result.verification] == ["fixed"]
    assert result.applied.changed and os.path.exists(home.manifest_file)
    assert link_ok(fixed_environment(os.environ, home), driver_dir)
    source = inspect.getsource(cli_fix)
    assert "apply_plan(" not in source and "verify(" not in source and "record_system_" not in source


def test_system_needs_root_or_sudo_and_never_escalates_by_itself(machine, monkeypatch, capsys):
    monkeypatch.setattr("gpudoctor.fix.system.is_root", lambda: False)
    called = []
    monkeypatch.setattr("gpudoctor.fix.system.subprocess.call", lambda *a, **k: called.append(a) or 0)
    assert main(["fix", "--system", "--yes"]) == 1
    captured = capsys.readouterr()
    assert "ln -s libcuda.so.1" in captured.out and "--sudo" in captured.err
    assert called == []


def test_system_fix_asks_first_without_yes(machine, monkeypatch, capsys):
    monkeypatch.setattr("gpudoctor.fix.system.is_root", lambda: True)
    called = []
    monkeypatch.setattr("gpudoctor.fix.system.subprocess.call", lambda *a, **k: called.append(a) or 0)
    monkeypatch.setattr("sys.stdin", open(os.devnull))  # not a terminal: cannot ask, so no
    assert main(["fix", "--system"]) == 1
    assert "pass --yes" in capsys.readouterr().err and called == []


def test_system_fix_runs_records_and_undoes(machine, home, driver_dir, monkeypatch, capsys):
    monkeypatch.setattr("gpudoctor.fix.system.is_root", lambda: True)  # the script itself runs unprivileged here
    assert main(["fix", "--system", "--yes"]) == 0
    assert os.readlink(os.path.join(driver_dir, "libcuda.so")) == "libcuda.so.1"
    assert f"{LIBCUDA_ID}: fixed" in capsys.readouterr().out
    assert main(["fix", "--undo"]) == 0
    assert not os.path.lexists(os.path.join(driver_dir, "libcuda.so"))
    assert not os.path.exists(home.manifest_file)


def test_check_after_fix_says_load_the_env_file_not_fix_again(machine, home, driver_dir):
    """issue 13 item 4: a finding the env file fixes, in a shell that has not loaded it, points at
    `eval "$(gpudoctor env)"` / `gpudoctor run --`, not at another `gpudoctor fix`."""
    from gpudoctor.fix.pending import fixed_but_not_loaded
    from gpudoctor.report.base import ReportView
    from gpudoctor.report.terminal import TerminalReporter

    assert fixed_but_not_loaded([LIBCUDA_ID], os.environ, home, machine) == []  # no env file yet
    assert main(["fix"]) == 0
    assert fixed_but_not_loaded([LIBCUDA_ID], os.environ, home, machine) == [LIBCUDA_ID]
    loaded = fixed_environment(os.environ, home)
    assert fixed_but_not_loaded([LIBCUDA_ID], loaded, home, machine) == []  # loaded: nothing pending

    report = machine(dict(os.environ), None)
    pending = {"ids": [LIBCUDA_ID], "env_file": home.env_file, "load": 'eval "$(gpudoctor env)"',
               "run": "gpudoctor run -- CMD ..."}
    text = TerminalReporter().render(ReportView(report.findings, report.checks, extra={"fixed_not_loaded": pending}))
    assert f'fixed in {home.env_file}, but not loaded in this shell: eval "$(gpudoctor env)"' in text
    assert "gpudoctor run -- CMD" in text and f"gpudoctor fix --only {LIBCUDA_ID}" not in text
