"""The env file format and the planner, without touching a machine."""

from __future__ import annotations

import subprocess

import pytest

from gpudoctor.fix import envfile
from gpudoctor.fix.envfile import EnvEntry
from gpudoctor.fix.plan import build_plan
from gpudoctor.model import (
    CodeEdit,
    Finding,
    Fix,
    InstallPackage,
    MakeDir,
    RemoveFromPathVar,
    RootCommand,
    SetEnv,
    Severity,
    Symlink,
    WriteFile,
)

ENTRIES = [
    EnvEntry("LIBRARY_PATH", "/stub dir", "prepend"),
    EnvEntry("CC", "/usr/bin/gcc-12"),
    EnvEntry("LD_LIBRARY_PATH", "/usr/local/cuda/lib64/stubs", "remove"),
]


def test_file_round_trips():
    assert envfile.parse(envfile.render_file(ENTRIES)) == ENTRIES


def test_apply_to_matches_bash(tmp_path):
    path = tmp_path / "env.sh"
    path.write_text(envfile.render_file(ENTRIES))
    base = {"LIBRARY_PATH": "/a", "LD_LIBRARY_PATH": "/usr/local/cuda/lib64/stubs:/x:/usr/local/cuda/lib64/stubs"}
    expected = envfile.apply_to(base, ENTRIES)
    assert expected["LIBRARY_PATH"] == "/stub dir:/a" and expected["LD_LIBRARY_PATH"] == "/x"
    out = subprocess.run(["bash", "-c", 'set -u; . "$1"; . "$1"; printf "%s|%s|%s" "$LIBRARY_PATH" "$CC" "$LD_LIBRARY_PATH"',
                          "_", str(path)], env=base, capture_output=True, text=True, check=True)
    assert out.stdout == "|".join(expected[k] for k in ("LIBRARY_PATH", "CC", "LD_LIBRARY_PATH"))


def test_remove_unsets_an_emptied_variable():
    assert "LD_LIBRARY_PATH" not in envfile.apply_to({"LD_LIBRARY_PATH": "/s"}, [EnvEntry("LD_LIBRARY_PATH", "/s", "remove")])


def test_rejects_bad_names():
    with pytest.raises(ValueError):
        EnvEntry("A;rm", "x")


def _finding(fid, *fixes, severity=Severity.ERROR):
    return Finding(fid, severity, fid, "because", fixes=tuple(fixes))


def test_plan_merges_dedupes_orders_and_splits():
    a = _finding("a", Fix("user", "ua", actions=(SetEnv("X", "1"), Symlink("/d/l", "/t"), MakeDir("/d"))),
                 Fix("system", "sa", actions=(RootCommand(("ldconfig",)), WriteFile("/etc/x.conf", "y", needs_root=True))))
    b = _finding("b", Fix("user", "ub", actions=(MakeDir("/d"), MakeDir("/d/sub"), RemoveFromPathVar("P", "/s"))),
                 Fix("system", "sb", actions=(InstallPackage("apt", ("gcc-12",)),)))
    c = _finding("c", Fix("code", "edit", actions=(CodeEdit("lora_dropout=0"),)))
    user = build_plan([a, b, c, a], "user")
    assert [type(s.action).__name__ for s in user.steps] == ["MakeDir", "MakeDir", "Symlink", "SetEnv", "RemoveFromPathVar"]
    assert user.steps[0].finding_ids == ("a", "b")  # merged
    assert [f.id for f in user.without_fix] == ["c"] and user.finding_ids == ("a", "b")
    system = build_plan([a, b, c], "system")
    assert [type(s.action).__name__ for s in system.steps] == ["InstallPackage", "WriteFile", "RootCommand"]


def test_plan_reports_conflicting_values_and_root_actions_in_user_fixes():
    a = _finding("a", Fix("user", "", actions=(SetEnv("CC", "gcc-12"),)))
    b = _finding("b", Fix("user", "", actions=(SetEnv("CC", "gcc-11"), RootCommand(("true",)))))
    plan = build_plan([a, b])
    assert [s.action for s in plan.steps] == [SetEnv("CC", "gcc-12")]
    assert any("keeping the first" in n for n in plan.notes) and any("needs root" in n for n in plan.notes)


def test_an_env_file_removed_with_its_directory_while_read_has_no_entries(tmp_path, monkeypatch):
    """A concurrent `fix --undo` removes the env file and its directory between read_entries'
    open and its check of the directory (fix verifies after the state lock is released): no
    entries, not a FileNotFoundError (it ended a fix with "internal error" on CI)."""
    directory = tmp_path / "gpudoctor"
    directory.mkdir(mode=0o700)
    path = directory / "env.sh"
    envfile.write_entries(str(path), ENTRIES)
    assert envfile.read_entries(str(path)) == ENTRIES
    real_open = envfile.os.open

    def open_then_undone(name, *args, **kwargs):
        fd = real_open(name, *args, **kwargs)
        if name == str(path):  # the undo runs right after the open
            path.unlink()
            directory.rmdir()
        return fd

    monkeypatch.setattr(envfile.os, "open", open_then_undone)
    assert envfile.read_entries(str(path)) == []
