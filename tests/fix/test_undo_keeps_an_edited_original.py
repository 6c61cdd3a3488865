"""`fix --undo` on a code edit the user changed since: the file is left alone AND the record with
its original text stays in the manifest, so a later --undo (once the file is back to gpudoctor's
version) still restores it byte for byte (found in review: the record used to be dropped)."""

import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEED = os.path.join(ROOT, "fixtures", "scan", "unsloth_seed")


def _cli(args, cwd, home):
    env = {**os.environ, "HOME": str(home), "XDG_STATE_HOME": str(home / "state"),
           "XDG_CONFIG_HOME": str(home / "config"), "XDG_CACHE_HOME": str(home / "cache")}
    return subprocess.run([sys.executable, "-m", "gpudoctor", *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120)


def _edited_seed(tmp_path):
    """(project, home, script, original bytes, bytes after gpudoctor's edit)."""
    project = tmp_path / "project"
    shutil.copytree(SEED, project, ignore=shutil.ignore_patterns("SOURCE.md"))
    home = tmp_path / "home"
    home.mkdir()
    script = project / "train.py"
    original = script.read_bytes()
    assert "done  edit" in _cli(["fix", "--code", "--yes"], project, home).stdout
    return project, home, script, original, script.read_bytes()


def test_an_original_is_never_lost_to_an_undo_that_left_the_file(tmp_path):
    project, home, script, original, edited = _edited_seed(tmp_path)
    script.write_bytes(edited + b"# the user's own line\n")

    first = _cli(["fix", "--undo"], project, home)
    assert f"{script} was changed since gpudoctor edited it" in first.stdout
    assert "stays recorded" in first.stdout
    assert script.read_bytes() == edited + b"# the user's own line\n"  # the user's change is theirs

    script.write_bytes(edited)  # the user takes their line out again
    second = _cli(["fix", "--undo"], project, home)
    assert "restored " + str(script) in second.stdout, second.stdout + second.stderr
    assert script.read_bytes() == original


def test_a_file_missing_at_undo_time_keeps_its_original_too(tmp_path):
    """A checkout or a stash can take the file away for a while: its record stays (found in review)."""
    project, home, script, original, edited = _edited_seed(tmp_path)
    script.unlink()
    gone = _cli(["fix", "--undo"], project, home)
    assert "does not exist now" in gone.stdout and "stays recorded" in gone.stdout
    script.write_bytes(edited)  # back from the stash
    back = _cli(["fix", "--undo"], project, home)
    assert "restored " + str(script) in back.stdout, back.stdout + back.stderr
    assert script.read_bytes() == original
