"""Every dataclass and NamedTuple record says what it is. Besides documentation, this is start-up time: a dataclass
without a docstring gets one built from ``inspect.signature`` when the class is created, paid at
import by preflight()'s first call for the classes on its path (docs/benchmarks.md)."""

import ast
import os

import gpudoctor

PACKAGE = os.path.dirname(gpudoctor.__file__)


def _dataclasses_without_docstring() -> list[str]:
    missing = []
    for directory, _, files in os.walk(PACKAGE):
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(directory, name)
            with open(path, encoding="utf-8") as handle:
                tree = ast.parse(handle.read())
            for node in ast.walk(tree):
                if (isinstance(node, ast.ClassDef) and ast.get_docstring(node) is None
                        and (any("dataclass" in ast.unparse(d) for d in node.decorator_list)
                             or any(ast.unparse(b) == "NamedTuple" for b in node.bases))):
                    missing.append(f"{os.path.relpath(path, PACKAGE)}:{node.lineno} {node.name}")
    return missing


def test_every_dataclass_has_a_docstring():
    assert _dataclasses_without_docstring() == []
