"""A fix's pip command names the environment that was judged (remedies/installer.py): a bare
`pip install` runs whichever pip is first on PATH, often another environment's."""

from __future__ import annotations

import ast
import pathlib

import pytest

from gpudoctor.model_actions import SuggestCommand
from gpudoctor.remedies import REMEDIES, fixes_for
from gpudoctor.remedies.installer import judged_python, pip_words

_REMEDIES_DIR = pathlib.Path(__file__).resolve().parents[2] / "gpudoctor" / "remedies"


class _System:
    def __init__(self, executable):
        self.info = type("Info", (), {"python_executable": executable})()


class _Packages:
    def __init__(self, names, recorded=True):
        self.names, self.recorded = set(names), recorded

    def get(self, name):
        return object() if name in self.names else None


@pytest.mark.parametrize(("values", "expected"), [
    ({}, "python -m pip install -U bitsandbytes"),  # a log from an unknown machine
    ({"python": "/opt/env/bin/python"}, "/opt/env/bin/python -m pip install -U bitsandbytes"),
    ({"python": "/home/a b/.venv/bin/python"}, "'/home/a b/.venv/bin/python' -m pip install -U bitsandbytes"),
    ({"python": "/opt/env/bin/python", "python_has_pip": True}, "/opt/env/bin/python -m pip install -U bitsandbytes"),
    # uv's -U upgrades everything it resolves (torch too): the uv form names the package instead
    ({"python": "/opt/uv/bin/python", "python_has_pip": False},
     "uv pip install --python /opt/uv/bin/python --upgrade-package bitsandbytes bitsandbytes"),
    ({"python_has_pip": False}, "python -m pip install -U bitsandbytes"),  # no interpreter known: nothing to hand uv
    ({"python": "/opt/uv/bin/python", "python_has_pip": False, "uv_found": True},
     "uv pip install --python /opt/uv/bin/python --upgrade-package bitsandbytes bitsandbytes"),
    # no pip and no uv on PATH: pip's own bootstrap first, then pip
    ({"python": "/opt/v/bin/python", "python_has_pip": False, "uv_found": False},
     "/opt/v/bin/python -m ensurepip --upgrade && /opt/v/bin/python -m pip install -U bitsandbytes"),
])
def test_pip_words(values, expected):
    assert pip_words(values, "install -U bitsandbytes") == expected


@pytest.mark.parametrize(("values", "expected"), [
    ({"python": "/e/python"}, "CC=/usr/bin/gcc /e/python -m pip install flash-attn"),
    ({"python": "/e/python", "python_has_pip": False}, "CC=/usr/bin/gcc uv pip install --python /e/python flash-attn"),
    ({"python": "/e/python", "python_has_pip": False, "uv_found": False},
     "/e/python -m ensurepip --upgrade && CC=/usr/bin/gcc /e/python -m pip install flash-attn"),
])
def test_an_environment_prefix_applies_to_the_install_itself(values, expected):
    from gpudoctor.remedies.installer import pip

    assert pip(values, "install flash-attn", prefix="CC=/usr/bin/gcc ").command == expected


def test_judged_python_says_whether_uv_is_there_only_without_pip():
    def system(uv):
        return type("S", (), {"info": type("I", (), {"python_executable": "/e/bin/python", "uv": uv})()})()

    assert judged_python(system("/home/u/.local/bin/uv"), _Packages(["torch"]))["uv_found"] is True
    assert judged_python(system(""), _Packages(["torch"]))["uv_found"] is False
    assert "uv_found" not in judged_python(system(None), _Packages(["torch"]))  # a snapshot from before the lookup
    assert "uv_found" not in judged_python(system(""), _Packages(["pip"]))  # pip is there: uv is not needed


def test_judged_python_says_only_what_is_known():
    assert judged_python(None) == {}
    assert judged_python(_System(None), _Packages(["pip"])) == {}
    assert judged_python(_System("/e/bin/python")) == {"python": "/e/bin/python"}
    assert judged_python(_System("/e/bin/python"), _Packages([], recorded=False)) == {"python": "/e/bin/python"}
    assert judged_python(_System("/e/bin/python"), _Packages(["pip"])) == {"python": "/e/bin/python", "python_has_pip": True}
    assert judged_python(_System("/e/bin/python"), _Packages(["torch"])) == {"python": "/e/bin/python",
                                                                             "python_has_pip": False}


@pytest.mark.parametrize("rule_id", ["torch-cpu-only", "triton-missing", "triton-version-mismatch", "flash-attn-abi-mismatch",
                                     "bitsandbytes-cuda-setup", "bitsandbytes-triton-incompatible", "xformers-abi-mismatch",
                                     "peft-transformers-incompatible", "host-compiler-too-old", "cuda-library-shadowed"])
def test_every_pip_command_names_the_judged_interpreter(rule_id):
    commands = [a.command for fix in fixes_for(rule_id, {"python": "/judged/bin/python"}) for a in fix.actions
                if isinstance(a, SuggestCommand)]
    pip_commands = [c for c in commands if " pip " in f" {c} "]
    assert pip_commands, commands
    assert all("/judged/bin/python -m pip " in c for c in pip_commands), pip_commands


@pytest.mark.parametrize(("arguments", "expected"), [
    ("install -U transformers peft", "--upgrade-package transformers --upgrade-package peft transformers peft"),
    ("install -U torch --index-url https://x/cu121", "--upgrade-package torch torch --index-url https://x/cu121"),
    ("install -U 'bitsandbytes>=0.45.1'", "--upgrade-package bitsandbytes 'bitsandbytes>=0.45.1'"),
    ('install "triton==3.1.0"', '"triton==3.1.0"'),  # no -U: left as written
])
def test_uv_upgrades_only_the_named_packages(arguments, expected):
    words = pip_words({"python": "/u/python", "python_has_pip": False}, arguments)
    assert words == f"uv pip install --python /u/python {expected}"


def _program(command: str) -> str:
    """The program a shell command line runs: after VAR=value assignments and `env [-u NAME]`."""
    words = command.split()
    while words and ("=" in words[0] and not words[0].startswith("-") or words[0] == "env"):
        words.pop(0)
        while words and words[0] == "-u":
            del words[:2]
    return words[0] if words else ""


@pytest.mark.parametrize("rule_id", sorted(REMEDIES))
def test_no_fix_names_a_bare_pip_or_python(rule_id):
    """Every remedy, over values that name the judged interpreter: no command runs `pip`, `python` or
    `python3` from PATH (the Windows-only remedy says `python`: no interpreter of this machine applies)."""
    values = {"python": "/judged/bin/python", "preset": "phi2", "situation": "crash"}
    for situation in ("crash", "timeout", "cuda-error", "error", "diverged", "compile"):
        commands = [a.command for fix in fixes_for(rule_id, {**values, "situation": situation})
                    for a in fix.actions if isinstance(a, SuggestCommand)]
        bare = [c for c in commands if _program(c) in ("pip", "pip3", "python", "python3")]
        if rule_id == "windows-dll-load-failed":
            assert bare == [c for c in commands if c.startswith("python -m pip ")]
        else:
            assert not bare, bare


def test_no_remedy_writes_a_bare_pip_or_python_command():
    """Every command string in remedies/ that starts pip or python goes through installer.py."""
    offenders = []
    for path in _REMEDIES_DIR.glob("*.py"):
        if path.name == "installer.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "SuggestCommand" and node.args:
                first = node.args[0]
                text = first.value if isinstance(first, ast.Constant) else ast.unparse(first)
                words = str(text).strip("f'\"").split()
                if any(word in ("pip", "python", "python3") for word in words):
                    offenders.append(f"{path.name}:{node.lineno}: {text}")
    offenders = [o for o in offenders if "your_script.py" not in o]
    assert not offenders, offenders
    assert REMEDIES  # the registry imported every remedy module above
