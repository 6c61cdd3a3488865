"""`gpudoctor env --shell bash|zsh|fish` evaluated by the real shells: the environment each one
ends up with must be what ``envfile.apply_to`` computes (which is what `gpudoctor run` and
``preflight()`` apply), also when evaluated twice and with hostile values. Shells that are not
installed are skipped; `.ci/run` installs zsh and fish where it can."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from gpudoctor.cli.main import main
from gpudoctor.fix import envfile
from gpudoctor.fix.envfile import EnvEntry

# No line break: the env file refuses one (issue 14 item 8, test_security_values.py).
NASTY = "a b'c\"d\t$(touch pwned)`touch pwned2`;touch pwned3 $HOME * ? [x] \\ / {a,b} ~"
# A path element with every character the shells treat specially (no ':', which separates).
NASTY_DIR = "/opt/odd dir/*/[ab]?/$(touch pwned4)/'q'/\"d\"/~x"
NAMES = ("LIBRARY_PATH", "CC", "LD_LIBRARY_PATH", "EMPTIED", "NEVER_SET", "NEW_PATH", "ODD_PATH")

ENTRIES = [
    EnvEntry("LIBRARY_PATH", "/stub dir", "prepend"),
    EnvEntry("CC", NASTY),
    EnvEntry("LD_LIBRARY_PATH", "/usr/local/cuda/lib64/stubs", "remove"),
    EnvEntry("EMPTIED", "/s", "remove"),
    EnvEntry("NEVER_SET", "/s", "remove"),
    EnvEntry("NEW_PATH", NASTY_DIR, "prepend"),
    EnvEntry("ODD_PATH", NASTY_DIR, "remove"),
]
BASE = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "LIBRARY_PATH": "/a",
    "LD_LIBRARY_PATH": "/usr/local/cuda/lib64/stubs:/x:/usr/local/cuda/lib64/stubs",
    "EMPTIED": "/s",
    "ODD_PATH": f"/keep:{NASTY_DIR}:/opt/odd dir/zz/ab/q:{NASTY_DIR}",
}

# Each program evaluates the exports twice, then prints the exported environment NUL-separated.
PROGRAMS = {
    "bash": ["bash", "--norc", "--noprofile", "-c", 'set -u; eval "$1"; eval "$1"; env -0', "_"],
    "zsh": ["zsh", "-f", "-c", 'setopt nounset; eval "$1"; eval "$1"; env -0', "_"],
    "fish": ["fish", "--no-config", "-c", "eval $argv[1]; eval $argv[1]; env -0"],
}


def _exported(argv: list[str], cwd) -> dict[str, str]:
    done = subprocess.run(argv, env=BASE, cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=30, check=True)
    assert done.stderr == ""
    pairs = (item.partition("=") for item in done.stdout.split("\0") if item)
    return {name: value for name, _, value in pairs if name in NAMES}


def _expected() -> dict[str, str]:
    return {k: v for k, v in envfile.apply_to(BASE, ENTRIES).items() if k in NAMES}


@pytest.mark.parametrize("shell", sorted(PROGRAMS))
def test_each_shell_ends_with_the_environment_gpudoctor_computes(shell, tmp_path):
    if not shutil.which(shell):
        pytest.skip(f"{shell} is not installed")
    exports = envfile.render_exports(ENTRIES, shell)
    got = _exported(PROGRAMS[shell] + [exports], tmp_path)
    expected = _expected()
    assert expected["ODD_PATH"] == "/keep:/opt/odd dir/zz/ab/q" and "EMPTIED" not in expected
    assert got == expected
    assert os.listdir(tmp_path) == []  # no command substitution ran


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_env_file_sources_in_bash_and_zsh(shell, tmp_path):
    if not shutil.which(shell):
        pytest.skip(f"{shell} is not installed")
    env_file = tmp_path / "env.sh"
    env_file.write_text(envfile.render_file(ENTRIES))
    source = '. "$1"; . "$1"; env -0'
    argv = {"bash": ["bash", "--norc", "--noprofile", "-c", "set -u; " + source, "_", str(env_file)],
            "zsh": ["zsh", "-f", "-c", "setopt nounset; " + source, "_", str(env_file)]}[shell]
    assert _exported(argv, tmp_path) == _expected()


@pytest.mark.parametrize("shell", sorted(PROGRAMS))
def test_cli_output_evaluates_in_that_shell(shell, home, tmp_path, capsys):
    """What a user pastes: eval "$(gpudoctor env)", or `gpudoctor env --shell fish | source`."""
    if not shutil.which(shell):
        pytest.skip(f"{shell} is not installed")
    os.makedirs(os.path.dirname(home.env_file), exist_ok=True)
    envfile.write_entries(home.env_file, ENTRIES)
    assert main(["env", "--shell", shell]) == 0
    exports = capsys.readouterr().out
    assert _exported(PROGRAMS[shell] + [exports], tmp_path) == _expected()
