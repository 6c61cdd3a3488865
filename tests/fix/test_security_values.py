"""Issue 14 items 6, 7, 8, 11: the env file keeps the user's lines, `gpudoctor env` prints POSIX
sh unless fish is asked for, every value is checked for the format it goes into, and every
finding of a rule is fixed."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from gpudoctor.cli.main import main
from gpudoctor.fix import envfile
from gpudoctor.fix.apply import apply_plan
from gpudoctor.fix.envfile import EnvEntry
from gpudoctor.fix.plan import build_plan
from gpudoctor.fix.script import render_script
from gpudoctor.fix.undo import undo
from gpudoctor.model import Finding, Fix, RemoveFromPathVar, SetEnv, Severity, WriteFile

HOSTILE = "x'; touch P; #"


def _finding(rule: str, *actions, message: str = "m") -> Finding:
    return Finding(rule, Severity.ERROR, "t", message, fixes=(Fix("user", "s", tuple(actions)),))


# -- item 6: the user's own lines in env.sh ------------------------------------------------------


def test_users_own_lines_survive_fix_and_undo(home):
    apply_plan(build_plan([_finding("a", SetEnv("GD_A", "1"))]), home)
    with open(home.env_file, "a") as handle:
        handle.write("export MY_OWN=kept  # mine\n")
    apply_plan(build_plan([_finding("b", SetEnv("GD_B", "2"))]), home)
    text = open(home.env_file).read()
    assert "export MY_OWN=kept  # mine\n" in text and "GD_B" in text
    undo(home)
    assert os.path.exists(home.env_file)  # not deleted: it has the user's line
    assert envfile.read_entries(home.env_file) == []
    assert "export MY_OWN=kept  # mine\n" in open(home.env_file).read()


# -- item 7: `gpudoctor env` is POSIX sh unless --shell fish -------------------------------------


def _env_output(monkeypatch, capsys, *argv) -> str:
    monkeypatch.setenv("SHELL", "/usr/bin/fish")  # the user's login shell must not matter
    assert main(["env", *argv]) == 0
    return capsys.readouterr().out


def test_env_defaults_to_posix_sh_even_for_a_fish_user(home, monkeypatch, capsys, tmp_path):
    apply_plan(build_plan([_finding("a", SetEnv("GD_HOSTILE", HOSTILE))]), home)
    exports = _env_output(monkeypatch, capsys)
    assert "set -gx" not in exports
    for shell in ("bash", "dash", "sh"):
        if not shutil.which(shell):
            continue
        done = subprocess.run([shell, "-c", 'eval "$1"; printf %s "$GD_HOSTILE"', "_", exports], cwd=tmp_path,
                              capture_output=True, text=True, check=True)
        assert done.stdout == HOSTILE and not (tmp_path / "P").exists()
    assert "set -gx" in _env_output(monkeypatch, capsys, "--shell", "fish")


@pytest.mark.skipif(not shutil.which("dash"), reason="dash is not installed")
def test_posix_lines_run_in_dash(tmp_path):
    entries = [EnvEntry("LD_LIBRARY_PATH", "/s t/ub", "remove"), EnvEntry("LIBRARY_PATH", "/new dir", "prepend")]
    exports = envfile.render_exports(entries)
    env = {"PATH": os.environ["PATH"], "LD_LIBRARY_PATH": "/s t/ub:/keep:/s t/ub", "LIBRARY_PATH": ""}
    done = subprocess.run(["dash", "-c", 'eval "$1"; eval "$1"; printf "%s|%s" "$LD_LIBRARY_PATH" "$LIBRARY_PATH"', "_",
                           exports], env=env, capture_output=True, text=True, check=True)
    assert done.stdout == "/keep|/new dir"


@pytest.mark.skipif(not shutil.which("fish"), reason="fish is not installed")
def test_fish_prepend_to_a_set_but_empty_variable_makes_no_empty_entry():
    exports = envfile.render_exports([EnvEntry("LD_LIBRARY_PATH", "/dir", "prepend")], "fish")
    env = {"PATH": os.environ["PATH"], "LD_LIBRARY_PATH": ""}
    done = subprocess.run(["fish", "--no-config", "-c", "eval $argv[1]; eval $argv[1]; env", exports], env=env,
                          capture_output=True, text=True, check=True, stdin=subprocess.DEVNULL)
    assert "LD_LIBRARY_PATH=/dir\n" in done.stdout  # not "/dir:" (an empty entry is the current dir)


# -- item 8: values checked for the format they go into ------------------------------------------


@pytest.mark.parametrize("value", ["/x\n/tmp/evil", "a\rb", "nul\0"])
def test_env_values_with_line_breaks_are_refused(home, value):
    with pytest.raises(ValueError):
        EnvEntry("X", value)
    result = apply_plan(build_plan([_finding("a", SetEnv("X", value))]), home)
    assert [o.status for o in result.outcomes] == ["refused"]
    assert not os.path.exists(home.env_file)


def test_ldconf_line_with_a_newline_is_refused_in_the_root_script(home):
    evil = WriteFile("/etc/ld.so.conf.d/gpudoctor-libcuda.conf", "/x\n/tmp/evil/lib\n", needs_root=True)
    finding = Finding("r", Severity.ERROR, "t", "m", fixes=(Fix("system", "s", (evil,)),))
    script = render_script(build_plan([finding], "system"), home)
    assert "\n/tmp/evil/lib" not in script.replace("\\n", "")  # never a line of its own
    assert "refusing to write" in script
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)


def test_path_list_entries_cannot_hold_a_separator():
    with pytest.raises(ValueError):
        EnvEntry("LD_LIBRARY_PATH", "/a:/tmp/evil", "remove")


# -- item 11: every finding of a rule --------------------------------------------------------------


def test_two_findings_of_one_rule_are_both_fixed(home, monkeypatch):
    stubs = ["/usr/local/cuda/lib64/stubs", "/opt/cuda/lib64/stubs"]
    findings = [_finding("ld-library-path-stubs", RemoveFromPathVar("LD_LIBRARY_PATH", s), message=s) for s in stubs]
    plan = build_plan(findings)
    assert len(plan.steps) == 2 and plan.finding_ids == ("ld-library-path-stubs",)
    apply_plan(plan, home)
    after = envfile.apply_to({"LD_LIBRARY_PATH": ":".join(stubs + ["/keep"])}, envfile.read_entries(home.env_file))
    assert after["LD_LIBRARY_PATH"] == "/keep"
