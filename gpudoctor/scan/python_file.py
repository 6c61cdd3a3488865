"""Read a Python file with the standard library's ``ast``: never imported, never run.

Only what the syntax says without doubt: which imported name a call goes to (``from trl import
SFTTrainer`` then ``SFTTrainer(...)``, or ``trl.SFTTrainer(...)`` after ``import trl``) and the
keyword names it passes, with their literal values where they are literals. A call through a
variable, ``**kwargs`` or a name never imported is not resolved: no guess, no finding."""

from __future__ import annotations

import ast
from dataclasses import dataclass

_NOT_LITERAL = object()


@dataclass(frozen=True)
class KeywordSite:
    name: str
    line: int
    column: int
    value: object = _NOT_LITERAL  # the literal value, or NOT_LITERAL

    @property
    def literal(self) -> bool:
        return self.value is not _NOT_LITERAL


@dataclass(frozen=True)
class CallSite:
    qualified: str  # "trl.SFTTrainer", "unsloth.FastLanguageModel.get_peft_model"
    line: int
    keywords: tuple[KeywordSite, ...]
    has_star_kwargs: bool  # ``**kwargs``: keywords not seen here may be passed too


@dataclass(frozen=True)
class PythonFile:
    path: str
    calls: tuple[CallSite, ...]
    error: str = ""  # a syntax error: the file was not read (said, not skipped silently)


def read_python(path: str, source: bytes | None = None) -> PythonFile:
    if source is None:
        with open(path, "rb") as handle:
            source = handle.read()
    # Cheap pre-filter: a file that never names a watched package has no call to resolve.
    if not any(word in source for word in (b"transformers", b"trl", b"unsloth", b"peft")):
        return PythonFile(path, ())
    try:
        tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError) as exc:
        return PythonFile(path, (), error=f"not parsed: {exc.__class__.__name__}: {getattr(exc, 'msg', exc)}")
    imports = _imports(tree)
    if not imports:
        return PythonFile(path, ())
    calls = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            qualified = _resolve(node.func, imports)
            if qualified is not None:
                calls.append(CallSite(qualified, node.lineno, tuple(_keywords(node)),
                                      any(k.arg is None for k in node.keywords)))
    calls.sort(key=lambda c: c.line)
    return PythonFile(path, tuple(calls))


def _imports(tree: ast.AST) -> dict[str, str]:
    """local name -> what it was imported as ("trl.SFTTrainer", "trl"), for every import in the
    file (functions included: a script's imports inside main() count the same)."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:  # ``import transformers.trainer`` binds ``transformers``
                    top = alias.name.split(".")[0]
                    names[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                if alias.name != "*":
                    names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def _resolve(func: ast.expr, imports: dict[str, str]) -> str | None:
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name) or func.id not in imports:
        return None
    return ".".join([imports[func.id], *reversed(parts)])


def _keywords(call: ast.Call):
    for keyword in call.keywords:
        if keyword.arg is None:
            continue
        try:
            value = ast.literal_eval(keyword.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            value = _NOT_LITERAL
        yield KeywordSite(keyword.arg, keyword.lineno, keyword.col_offset, value)


def matches(qualified: str, pattern: str) -> bool:
    """``pattern`` "trl.SFTTrainer" matches "trl.SFTTrainer" and "trl.trainer.sft_trainer.SFTTrainer":
    the same top-level package, the same name at the end."""
    top, _, tail = pattern.partition(".")
    return qualified.split(".", 1)[0] == top and (qualified == pattern or qualified.endswith("." + tail))
