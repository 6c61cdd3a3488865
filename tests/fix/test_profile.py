"""`gpudoctor fix --profile`: one line in the user's shell profile loads the env file, so new
shells get the fixes too (a CUDA stubs dir stays out of LD_LIBRARY_PATH). The line is appended
once, the user's own lines are never touched, and --undo gives back the file byte for byte."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from gpudoctor.cli.main import main
from gpudoctor.engine import Report
from gpudoctor.fix.apply import ALREADY, DONE, apply_plan
from gpudoctor.fix.plan import build_plan, with_profile_line
from gpudoctor.fix.undo import UNDONE, undo
from gpudoctor.model import CheckResult, CheckStatus, Finding, Fix, RemoveFromPathVar, Severity

STUBS = "/usr/local/cuda/lib64/stubs"
RULE = "libcuda-stub-at-runtime"
USER_BASHRC = b"# the user's own file\nexport LD_LIBRARY_PATH=/usr/local/cuda/lib64/stubs:/opt/x\nalias ll='ls -l'"  # no final newline


def _finding() -> Finding:
    return Finding(RULE, Severity.ERROR, "the CUDA stub libcuda is on LD_LIBRARY_PATH", "stubs first",
                   fixes=(Fix("user", f"Remove {STUBS} from LD_LIBRARY_PATH.",
                              actions=(RemoveFromPathVar("LD_LIBRARY_PATH", STUBS),)),))


def _diagnose(env, only):
    """Stands in for the engine: the finding is there while the stubs dir is on LD_LIBRARY_PATH."""
    present = STUBS in env.get("LD_LIBRARY_PATH", "").split(":")
    findings = (_finding(),) if present else ()
    return Report(findings, (CheckResult(RULE, CheckStatus.FAIL if present else CheckStatus.PASS, findings=findings),))


def _plan(home, profile):
    return with_profile_line(build_plan([_finding()], "user"), str(profile), home.env_file)


def _snapshot(path):
    st = os.stat(path)
    return path.read_bytes(), st.st_ino, st.st_mode


def test_appends_once_and_undo_gives_the_file_back_byte_for_byte(home, tmp_path):
    bashrc = tmp_path / "home" / ".bashrc"
    bashrc.write_bytes(USER_BASHRC)
    os.chmod(bashrc, 0o640)
    before = _snapshot(bashrc)

    result = apply_plan(_plan(home, bashrc), home)
    assert [o.status for o in result.outcomes] == [DONE, DONE]
    lines = bashrc.read_text().splitlines()
    assert lines[:3] == USER_BASHRC.decode().splitlines() and lines[3].startswith("[ -f ")
    assert [o.status for o in apply_plan(_plan(home, bashrc), home).outcomes] == [ALREADY, ALREADY]

    outcomes = undo(home)
    assert all(o.status == UNDONE for o in outcomes)
    assert _snapshot(bashrc) == before  # same bytes, same inode, same mode


def test_new_shells_load_the_env_file(home, tmp_path):
    bashrc = tmp_path / "home" / ".bashrc"
    bashrc.write_bytes(USER_BASHRC)
    apply_plan(_plan(home, bashrc), home)
    out = subprocess.run(["bash", "--norc", "--noprofile", "-c", '. "$HOME/.bashrc"; printf %s "$LD_LIBRARY_PATH"'],
                         env={"HOME": str(tmp_path / "home"), "PATH": os.environ["PATH"]},
                         capture_output=True, text=True, check=True)
    assert out.stdout == "/opt/x"


def test_zsh_profile_loads_it_too(home, tmp_path):
    if not shutil.which("zsh"):
        pytest.skip("zsh is not installed")
    zshrc = tmp_path / "home" / ".zshrc"
    zshrc.write_text(f"export LD_LIBRARY_PATH={STUBS}\n")
    apply_plan(_plan(home, zshrc), home)
    out = subprocess.run(["zsh", "-f", "-c", 'source "$HOME/.zshrc"; print -rn -- "${LD_LIBRARY_PATH-unset}"'],
                         env={"HOME": str(tmp_path / "home"), "PATH": os.environ["PATH"]},
                         capture_output=True, text=True, check=True)
    assert out.stdout == "unset"  # the only entry was the stubs dir: the variable is gone


def test_undo_keeps_what_the_user_added_after_our_line(home, tmp_path):
    bashrc = tmp_path / "home" / ".bashrc"
    bashrc.write_text("export A=1\n")
    apply_plan(_plan(home, bashrc), home)
    with open(bashrc, "a") as handle:
        handle.write("export B=2\n")
    undo(home)
    assert bashrc.read_text() == "export A=1\nexport B=2\n"


def test_a_profile_that_did_not_exist_is_created_and_removed_again(home, tmp_path):
    zshrc = tmp_path / "home" / "zdot" / ".zshrc"
    apply_plan(_plan(home, zshrc), home)
    assert zshrc.read_text().count("\n") == 1
    undo(home)
    assert not zshrc.exists() and not zshrc.parent.exists()


def test_cli_appends_to_the_shells_profile_verifies_and_undoes(home, tmp_path, monkeypatch, capsys):
    bashrc = tmp_path / "home" / ".bashrc"
    bashrc.write_bytes(USER_BASHRC)
    monkeypatch.setattr("gpudoctor.cli.fix.run_diagnosis", _diagnose)
    monkeypatch.setenv("SHELL", "/bin/bash")
    monkeypatch.setenv("LD_LIBRARY_PATH", f"{STUBS}:/opt/x")
    assert main(["fix", "--profile"]) == 0
    out = capsys.readouterr().out
    assert f"add to {bashrc}" in out and f"{RULE}: fixed" in out
    assert main(["fix", "--undo"]) == 0
    assert bashrc.read_bytes() == USER_BASHRC


def test_dry_run_script_does_the_same_and_is_idempotent(home, tmp_path, monkeypatch, capsys):
    bashrc = tmp_path / "home" / ".bashrc"
    bashrc.write_bytes(USER_BASHRC)
    monkeypatch.setattr("gpudoctor.cli.fix.run_diagnosis", _diagnose)
    monkeypatch.setenv("LD_LIBRARY_PATH", f"{STUBS}:/opt/x")
    assert main(["fix", "--dry-run", "--profile", str(bashrc)]) == 0
    script = capsys.readouterr().out
    assert bashrc.read_bytes() == USER_BASHRC  # a dry run changes nothing
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)
    if shutil.which("shellcheck"):
        subprocess.run(["shellcheck", "-s", "bash", "-"], input=script, text=True, check=True)
    for _ in range(2):
        subprocess.run(["bash", "-c", script], capture_output=True, check=True)
    apply_plan(_plan(home, tmp_path / "applied"), home)  # what `gpudoctor fix` appends, for comparison
    appended = bashrc.read_text()[len(USER_BASHRC):]
    assert appended == "\n" + (tmp_path / "applied").read_text()


@pytest.mark.parametrize("shell, argv", [("/usr/bin/fish", ["fix", "--profile"]), ("/bin/tcsh", ["fix", "--profile"]),
                                         ("/bin/bash", ["fix", "--profile", "--system"])])
def test_profile_usage_errors_are_one_line_and_exit_2(home, monkeypatch, capsys, shell, argv):
    monkeypatch.setenv("SHELL", shell)
    monkeypatch.setattr("gpudoctor.cli.fix.run_diagnosis", _diagnose)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_undo_leaves_our_line_alone_once_the_user_edited_it(home, tmp_path):
    """Commented out or wrapped by the user, the line is theirs now: undo must not cut it."""
    bashrc = tmp_path / "home" / ".bashrc"
    bashrc.write_text("export A=1\n")
    apply_plan(_plan(home, bashrc), home)
    ours = bashrc.read_text().splitlines()[-1]
    bashrc.write_text(f"export A=1\n# {ours}\n")
    undo(home)
    assert bashrc.read_text() == f"export A=1\n# {ours}\n"
