"""The import direction of docs/design.md, read from the source with ast (nothing imported):
the library never imports the CLI, logs/ never touches the machine, report/ never probes."""

import ast
import os

import pytest

import gpudoctor

PACKAGE = os.path.dirname(gpudoctor.__file__)


def _imports(path: str) -> set[str]:
    """Every gpudoctor module a file imports (absolute names), wherever in the file."""
    module = os.path.relpath(path, os.path.dirname(PACKAGE))[:-3].replace(os.sep, ".")
    package = module.rsplit(".", 1)[0] if not path.endswith("__init__.py") else module.removesuffix(".__init__")
    found = set()
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.add(name)
            found.update(f"{name}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {n for n in found if n.startswith("gpudoctor")}


def _files(*parts: str) -> list[str]:
    root = os.path.join(PACKAGE, *parts)
    if root.endswith(".py"):
        return [root]
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".py"))


LIBRARY = [f for f in _files() if f"{os.sep}cli{os.sep}" not in f and not f.endswith("__main__.py")]


@pytest.mark.parametrize("path", LIBRARY, ids=lambda p: os.path.relpath(p, PACKAGE))
def test_the_library_never_imports_the_cli(path):
    assert not [n for n in _imports(path) if n.startswith("gpudoctor.cli")]


@pytest.mark.parametrize("path", _files("logs"), ids=lambda p: os.path.relpath(p, PACKAGE))
def test_logs_never_touch_the_machine(path):
    assert not [n for n in _imports(path) if n.startswith(("gpudoctor.host", "gpudoctor.probes", "gpudoctor.facts"))]


@pytest.mark.parametrize("path", _files("remedies"), ids=lambda p: os.path.relpath(p, PACKAGE))
def test_remedies_are_built_from_values_not_probes(path):
    assert not [n for n in _imports(path) if n.startswith(("gpudoctor.host", "gpudoctor.probes"))]


def _builds_fixes(path: str) -> bool:
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "Fix" for n in ast.walk(tree))


@pytest.mark.parametrize("path", [f for f in _files() if f"{os.sep}remedies{os.sep}" not in f],
                         ids=lambda p: os.path.relpath(p, PACKAGE))
def test_only_remedies_build_fixes(path):
    """One rule, one remedy: a detector that wrote its own Fix would drift from the others."""
    assert not _builds_fixes(path)


def test_a_healthy_check_loads_no_remedy_or_fix_action():
    """preflight's first call on a healthy machine builds no fix, so it pays for none of these
    modules (measured on the H200: about 7 ms for remedies, 8.6 ms for the fix actions, 0.6 ms
    per action dataclass)."""
    import subprocess
    import sys

    code = ("import sys, gpudoctor.engine, gpudoctor.facts, gpudoctor.hook, gpudoctor.report.json, "
            "gpudoctor.requirement_verdicts, gpudoctor.host.live; "
            "print([m for m in sys.modules if m.startswith(('gpudoctor.remedies', 'gpudoctor.fix', "
            "'gpudoctor.model_actions'))])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_model_re_exports_exactly_the_action_module():
    """model's lazy re-export list (kept literal so a healthy check never imports model_actions)
    names every action class and helper of model_actions, and nothing else."""
    from gpudoctor import model, model_actions

    assert model._ACTION_NAMES == set(model_actions.ACTION_TYPES) | {"Action", "ACTION_TYPES", "action_from_json"}
    assert all(getattr(model, name) is getattr(model_actions, name) for name in model._ACTION_NAMES)


def test_the_nvml_child_script_stands_alone():
    """host/nvml_query.py also runs as ``python -I -S nvml_query.py``: as a script it cannot
    import gpudoctor, and it must stay cheap to import for preflight()."""
    assert _imports(os.path.join(PACKAGE, "host", "nvml_query.py")) == set()
