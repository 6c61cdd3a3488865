"""The test suite never changes the host's package database unless asked (issue 13 item 12): a
test module that runs a package manager must be gated on GPUDOCTOR_TEST_SYSTEM_PACKAGES (see
tests/fix/test_package_undo.py). A static scan: every call that runs a process is read, and one
whose command starts with a package manager needs the gate in its module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
GATE = "GPUDOCTOR_TEST_SYSTEM_PACKAGES"
# Tools that change the package database. dpkg-deb (builds a .deb) and dpkg-query (reads) do not.
MANAGERS = {"apt", "apt-get", "aptitude", "dpkg", "rpm", "dnf", "yum", "zypper", "pacman", "snap", "conda",
            "mamba", "micromamba", "brew"}
RUNNERS = {"run", "call", "check_call", "check_output", "Popen", "system", "popen", "execvp", "execv",
           "spawnvp", "create_subprocess_exec", "create_subprocess_shell"}


def _command_word(node: ast.expr) -> str | None:
    """The program a call's first argument names: ["dpkg", ...], ("rpm", ...) or "apt-get install"."""
    if isinstance(node, (ast.List, ast.Tuple)) and node.elts:
        node = node.elts[0]
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.split():
        return Path(node.value.split()[0]).name
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        words = str(node.values[0].value).split()
        return Path(words[0]).name if words else None
    return None


def package_manager_calls(source: str) -> list[tuple[int, str]]:
    calls = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and node.args):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
        word = _command_word(node.args[0])
        if name in RUNNERS and word in MANAGERS:
            calls.append((node.lineno, word))
    return calls


def ungated(source: str) -> list[tuple[int, str]]:
    return [] if GATE in source else package_manager_calls(source)


def test_no_test_module_runs_a_package_manager_without_the_opt_in_gate():
    offenders = {str(path.relative_to(TESTS)): calls for path in sorted(TESTS.rglob("*.py"))
                 if (calls := ungated(path.read_text(encoding="utf-8")))}
    assert not offenders, f"these run a package manager without checking {GATE}: {offenders}"


def test_the_package_undo_tests_are_seen_and_gated():
    source = (TESTS / "fix" / "test_package_undo.py").read_text(encoding="utf-8")
    assert {word for _, word in package_manager_calls(source)} == {"dpkg"}  # the scan sees them
    assert GATE in source


@pytest.mark.parametrize("source", [
    'import subprocess\nsubprocess.run(["apt-get", "install", "-y", "gcc"])\n',
    'import subprocess\nsubprocess.check_call(("/usr/bin/dpkg", "--purge", "x"))\n',
    'import os\nos.system("pacman -S --noconfirm gcc")\n',
    'import subprocess\nsubprocess.run(f"dnf install -y {name}", shell=True)\n',
])
def test_the_scan_flags_an_ungated_install(source):
    assert ungated(source)
    assert not ungated(f'import os\nassert os.environ.get("{GATE}") == "1"\n' + source)


@pytest.mark.parametrize("source", [
    'script = render()\nassert "apt-get install -y gcc" in script\n',  # a string checked, not run
    'import subprocess\nsubprocess.run(["dpkg-query", "--show"])\n',  # reads only
    'import subprocess\nsubprocess.run(["dpkg-deb", "--build", "d", "x.deb"])\n',  # builds a file
])
def test_the_scan_leaves_reads_and_strings_alone(source):
    assert not ungated(source)
