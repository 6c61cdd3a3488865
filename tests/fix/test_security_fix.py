"""Issue 14: the fixers on a shared machine and against a tampered manifest. Each test is an
attack from the issue's review; each failed on the code before the fix."""

from __future__ import annotations

import json
import os
import stat

import pytest
from fixhelpers import LIBCUDA_ID, libcuda_finding, tree

from gpudoctor.cli.main import main
from gpudoctor.engine import Report
from gpudoctor.fix import envfile
from gpudoctor.fix.undo import REFUSED, undo
from gpudoctor.paths import GpudoctorDirs

OTHER_UID = 65534  # nobody


@pytest.fixture
def static_machine(home, tmp_path, monkeypatch):
    """The libcuda finding, always (no compiler needed): the driver dir is a plain file."""
    driver = tmp_path / "driver"
    driver.mkdir()
    (driver / "libcuda.so.1").write_bytes(b"\x7fELF not really")

    def diagnose(env, only):
        dirs = GpudoctorDirs.from_env(env)
        finding = libcuda_finding(dirs, str(driver))
        return Report((finding,), ())

    monkeypatch.setattr("gpudoctor.cli.fix.run_diagnosis", diagnose)
    return str(driver)


def _as_other_user(path) -> None:
    try:
        os.chown(path, OTHER_UID, OTHER_UID)
    except PermissionError:
        pytest.skip("needs root to make a file another user's")


# -- item 1: someone else's directory never becomes yours ------------------------------------


def test_foreign_stub_dir_in_a_shared_cache_is_refused_and_never_reaches_env_file(
        home, static_machine, tmp_path, monkeypatch, capsys):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared))
    planted = shared / "gpudoctor" / "lib"
    planted.mkdir(parents=True)
    for directory in (shared / "gpudoctor", planted):
        directory.chmod(0o755)
        _as_other_user(directory)
    dirs = GpudoctorDirs.from_env()

    code = main(["fix"])
    out = capsys.readouterr().out
    assert code != 0
    assert "refus" in out and "uid 65534" in out
    entries = envfile.read_entries(dirs.env_file)
    assert not any(e.name == "LIBRARY_PATH" for e in entries), entries
    assert not any(str(planted) in e.value for e in entries)
    assert os.listdir(planted) == []


def test_group_writable_stub_dir_is_refused(home, static_machine, capsys):
    os.makedirs(home.stub_lib_dir)
    os.chmod(home.stub_lib_dir, 0o777)
    assert main(["fix"]) != 0
    assert "writable by others" in capsys.readouterr().out
    assert not any(e.name == "LIBRARY_PATH" for e in envfile.read_entries(home.env_file))


def test_foreign_config_dir_is_refused(home, static_machine, tmp_path, monkeypatch, capsys):
    shared = tmp_path / "sharedconf"
    (shared / "gpudoctor").mkdir(parents=True)
    _as_other_user(shared / "gpudoctor")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(shared))
    assert main(["fix"]) != 0
    assert not os.path.exists(shared / "gpudoctor" / "env.sh")


def test_symlinked_state_dir_is_refused(home, static_machine, tmp_path, monkeypatch, capsys):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.makedirs(os.path.dirname(home.state))
    os.symlink(elsewhere, home.state)
    assert main(["fix"]) == 1
    assert "refusing to keep gpudoctor's state" in capsys.readouterr().out
    assert os.listdir(elsewhere) == [] and not os.path.exists(home.env_file)


def test_prepend_of_a_directory_others_can_write_is_refused(home, tmp_path):
    from gpudoctor.fix.apply import apply_plan
    from gpudoctor.fix.plan import build_plan
    from gpudoctor.model import Finding, Fix, SetEnv, Severity

    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    missing = tmp_path / "not-yet"
    findings = [Finding(f"r{i}", Severity.ERROR, "t", "m",
                        fixes=(Fix("user", "s", (SetEnv(var, str(d), prepend=True),)),))
                for i, (var, d) in enumerate([("LD_LIBRARY_PATH", open_dir), ("PATH", missing), ("PYTHONPATH", "/tmp")])]
    result = apply_plan(build_plan(findings, "user"), home)
    assert [o.status for o in result.outcomes] == ["refused"] * 3
    assert envfile.read_entries(home.env_file) == []


# -- item 12: output files --------------------------------------------------------------------


def test_script_output_replaces_a_planted_symlink_instead_of_following_it(home, static_machine, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    link = tmp_path / "plan.sh"
    os.symlink(victim, link)
    assert main(["fix", "--script", str(link)]) == 0
    assert victim.read_text() == "precious\n"
    assert not os.path.islink(link) and stat.S_IMODE(os.stat(link).st_mode) == 0o700


def test_script_output_does_not_keep_a_foreign_owner_or_mode(home, static_machine, tmp_path):
    target = tmp_path / "plan.sh"
    target.write_text("echo planted\n")
    target.chmod(0o666)
    _as_other_user(target)
    assert main(["fix", "--system", "--script", str(target)]) == 0
    st = os.stat(target)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (os.geteuid(), 0o700)
    assert "planted" not in target.read_text()


# -- item 13: the manifest is not trusted -------------------------------------------------------


def _manifest(dirs, changes) -> None:
    os.makedirs(dirs.state, mode=0o700, exist_ok=True)
    with open(dirs.manifest_file, "w") as handle:
        json.dump({"schema": 1, "changes": changes}, handle)


def test_hostile_root_undo_argv_is_never_run(home, tmp_path):
    pwned = tmp_path / "pwned"
    ran = []
    _manifest(home, [{"op": "root_command", "argv": ["true"], "undo_argv": ["touch", str(pwned)]},
                     {"op": "root_command", "argv": ["ln", "-s", "x", "/etc/passwd"], "undo_argv": ["rm", "/etc/passwd"]},
                     {"op": "packages", "manager": "apt", "argv": [], "added": ["--purge", "x;rm -rf /"]}])
    outcomes = undo(home, root=lambda argv: ran.append(argv) or 0)
    assert ran == [] and not pwned.exists()
    assert [o.status for o in outcomes] == [REFUSED] * 3
    assert all("manifest entry" in o.message for o in outcomes)


def test_hostile_entries_do_not_delete_or_edit_files_gpudoctor_never_made(home, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("mine\n")
    victim_dir = tmp_path / "emptydir"
    victim_dir.mkdir()
    user_link = tmp_path / "mylink"
    os.symlink("/usr", user_link)
    bashrc = tmp_path / "home" / ".bashrc"
    bashrc.write_text("alias ll='ls -l'\n")
    before = tree(tmp_path)
    _manifest(home, [
        {"op": "write_file", "path": str(victim), "content": "mine\n"},
        {"op": "mkdir", "path": str(victim_dir), "purpose": "fix"},
        {"op": "symlink", "link": str(user_link), "target": "/usr"},
        {"op": "append_line", "path": str(bashrc), "line": "alias ll='ls -l'", "added": "alias ll='ls -l'\n",
         "created": False},
        {"op": "env_file", "path": str(victim)},
        {"op": "mkdir", "path": str(victim_dir), "purpose": "manifest"},
        "not even a dict",
    ])
    outcomes = undo(home)
    assert [o.status for o in outcomes] == [REFUSED] * 7
    after = [e for e in tree(tmp_path) if not e[0].startswith("home/")]
    assert after == [e for e in before if not e[0].startswith("home/")]
    assert bashrc.read_text() == "alias ll='ls -l'\n"


def test_one_bad_entry_does_not_block_the_rest_and_is_dropped(home, static_machine, tmp_path, capsys):
    before = tree(tmp_path)
    assert main(["fix"]) in (0, 1)
    with open(home.manifest_file) as handle:
        data = json.load(handle)
    data["changes"].insert(1, {"op": "root_command", "argv": ["x"], "undo_argv": ["sh", "-c", "touch /tmp/pwned-gd"]})
    with open(home.manifest_file, "w") as handle:
        json.dump(data, handle)
    assert main(["fix", "--undo"]) == 1  # says so
    assert "manifest entry 2 refused" in capsys.readouterr().out
    assert tree(tmp_path) == before  # everything else undone, state dir gone
    assert main(["fix", "--undo"]) == 0


def test_corrupt_manifest_is_named_and_not_overwritten(home, static_machine, capsys):
    os.makedirs(home.state, mode=0o700)
    with open(home.manifest_file, "w") as handle:
        handle.write('{"schema": 1, "changes": [ trunc')
    assert main(["fix"]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    assert open(home.manifest_file).read() == '{"schema": 1, "changes": [ trunc'
    assert not os.path.exists(home.env_file)
    assert main(["fix", "--undo"]) == 2


def test_older_root_records_get_a_derived_checked_undo(home, tmp_path):
    driver = tmp_path / "drv"
    driver.mkdir()
    link = driver / "libcuda.so"
    os.symlink("libcuda.so.1", link)
    ran = []
    _manifest(home, [{"op": "root_command", "argv": ["ln", "-s", "libcuda.so.1", str(link)], "undo_argv": ["rm", str(link)]}])
    outcomes = undo(home, root=lambda argv: ran.append(argv) or 0)
    assert ran == [("rm", "--", str(link))] and outcomes[0].status == "undone"
    # re-pointed by someone since: not gpudoctor's any more, left alone
    os.unlink(link)  # what the (fake) root rm would have done
    os.symlink("elsewhere", link)
    _manifest(home, [{"op": "root_symlink", "link": str(link), "target": "libcuda.so.1"}])
    ran.clear()
    assert undo(home, root=lambda argv: ran.append(argv) or 0)[0].status == "left in place" and ran == []


# -- item 14: --undo --dry-run and --undo --script only print the plan ---------------------------


def test_undo_dry_run_and_script_change_nothing(home, static_machine, tmp_path, capsys):
    assert main(["fix"]) in (0, 1)
    after_fix = tree(tmp_path / "home")
    assert main(["fix", "--undo", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would undo" in out and "remove symlink" in out
    assert tree(tmp_path / "home") == after_fix
    script = tmp_path / "undo.sh"
    assert main(["fix", "--undo", "--script", str(script)]) == 0
    assert tree(tmp_path / "home") == after_fix
    assert "would undo" in script.read_text()


def test_snapshot_refuses_planted_symlinks(tmp_path, capsys):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    out = tmp_path / "snap"
    out.mkdir(mode=0o700)
    os.symlink(victim, out / "snapshot.json")
    assert main(["snapshot", str(out)]) == 2
    link_dir = tmp_path / "linkdir"
    os.symlink(tmp_path / "elsewhere", link_dir)
    assert main(["snapshot", str(link_dir)]) == 2
    assert victim.read_text() == "precious\n" and "refusing" in capsys.readouterr().err


def test_a_long_manifest_is_undone_in_linear_time(home):
    """Issue 14 item 15: a 2.6 MB manifest took 36 s (quadratic); 13000 env records here."""
    import time

    entries = [envfile.EnvEntry(f"GD_V{i}", "/some/value/" + "x" * 100) for i in range(13000)]
    os.makedirs(home.config, mode=0o700)
    envfile.write_entries(home.env_file, entries)
    _manifest(home, [{"op": "env_file", "path": home.env_file}]
              + [{"op": "env", "entry": e.to_json(), "replaced": None} for e in entries])
    assert os.path.getsize(home.manifest_file) > 2_000_000
    started = time.monotonic()
    outcomes = undo(home)
    assert time.monotonic() - started < 10
    assert {o.status for o in outcomes} == {"undone"} and not os.path.exists(home.env_file)
