"""The `train` extra brings everything the training pass imports (issue 13 item 10: after
`pip install -e '.[train]'` the pass failed with "could not import triton (No module named
'numpy')"), and the missing-extra hint names a command that installs it where the pass runs."""

from __future__ import annotations

import ast
import shlex
import sys
from pathlib import Path

from packaging.requirements import Requirement

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from gpudoctor.train.protocol import INSTALL_HINT

ROOT = Path(__file__).resolve().parents[2]
# Imported only inside a try, and reported as a skipped stage or a matrix row when absent.
OPTIONAL = {"peft", "bitsandbytes", "flash_attn"}
# Distribution name -> the module it installs, where they differ.
MODULE_OF = {"nvidia-ml-py": "pynvml"}


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _modules(requirements: list[str]) -> set[str]:
    names = {Requirement(text).name.lower() for text in requirements}
    return {MODULE_OF.get(name, name.replace("-", "_")) for name in names}


def _third_party_imports(*packages: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for package in packages:
        for path in (ROOT / "gpudoctor" / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top not in sys.stdlib_module_names and top != "gpudoctor":
                        found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def test_train_extra_lists_numpy_torch_and_triton():
    assert {"numpy", "torch", "triton"} <= _modules(_project()["optional-dependencies"]["train"])


def test_every_third_party_import_of_the_pass_is_installed_by_the_extra_or_optional():
    provided = _modules(_project()["optional-dependencies"]["train"]) | _modules(_project()["dependencies"])
    imports = _third_party_imports("train", "kernels")
    assert {"torch", "triton"} <= imports.keys()  # the scan sees the pass's imports at all
    missing = {name: sorted(paths) for name, paths in imports.items() if name not in provided | OPTIONAL}
    assert not missing, f"imported by the training pass but not in the train extra: {missing}"


def test_install_hint_installs_the_extra_into_the_interpreter_that_runs_the_pass():
    argv = shlex.split(INSTALL_HINT)
    assert argv[:4] == [sys.executable, "-m", "pip", "install"]
    assert argv[-1].endswith("[train]")
    if (ROOT / "pyproject.toml").is_file():  # this checkout: installed from it, or run from it
        assert argv[-1] == f"{ROOT}[train]" and "-e" in argv
