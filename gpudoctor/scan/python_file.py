"""Read a Python file with the standard library's ``ast``: never imported, never run.

Only what the syntax says without doubt: which imported name a call goes to (``from trl import
SFTTrainer`` then ``SFTTrainer(...)``, or ``trl.SFTTrainer(...)`` after ``import trl``) and the
keyword names it passes, with their literal values where they are literals. A call through a
variable, ``**kwargs`` or a name never imported is not resolved: no guess, no finding.

Besides the resolved calls, a few facts the static forms of the diagnosis rules need: method
calls by name on any receiver (``model.gradient_checkpointing_enable()``: the receiver is a
variable, so only the method name is known), the names a file binds exactly once to a string
literal (``model_id = "microsoft/phi-2"``, so ``from_pretrained(model_id)`` names its model), and
the top-level packages it imports."""

from __future__ import annotations

import ast
import fnmatch
from dataclasses import dataclass, field

_NOT_LITERAL = object()

# Method calls recorded whatever their receiver: the diagnosis rules ask only whether the script
# makes them (and where). A fixed set keeps the walk cheap.
WATCHED_METHODS = frozenset({"gradient_checkpointing_enable", "enable_input_require_grads"})


@dataclass(frozen=True)
class KeywordSite:
    """One keyword argument of a call (or a positional one, named "0" or "1"): where it is, and its literal
    value or the dotted name or call it is written as."""

    name: str
    line: int
    column: int
    value: object = _NOT_LITERAL  # the literal value, or NOT_LITERAL
    # a dotted name (``torch.bfloat16``, ``model_id``) or the resolved callee of a call written
    # inline (``quantization_config=BitsAndBytesConfig(...)`` -> "transformers.BitsAndBytesConfig")
    expr: str = ""

    @property
    def literal(self) -> bool:
        return self.value is not _NOT_LITERAL


@dataclass(frozen=True)
class CallSite:
    """A call of an imported name (``trl.SFTTrainer``) or of a watched method (``.gradient_checkpointing_enable``):
    its line, the keywords it passes, whether it passes ``**kwargs``, and its first two positional arguments."""

    qualified: str  # "trl.SFTTrainer", "unsloth.FastLanguageModel.get_peft_model"; ".half" for a method
    line: int
    keywords: tuple[KeywordSite, ...]
    has_star_kwargs: bool  # ``**kwargs``: keywords not seen here may be passed too
    # the first positional arguments, as sites named "0", "1" (a literal value or a dotted name)
    positional: tuple[KeywordSite, ...] = ()

    def keyword(self, name: str) -> KeywordSite | None:
        return next((k for k in self.keywords if k.name == name), None)


@dataclass(frozen=True)
class PythonFile:
    """What ``read_python`` read in one Python file: its resolved calls and watched method calls in line order,
    the names bound once to a string literal, and the top-level packages it imports. A file that names none
    of transformers, trl, unsloth or peft is not parsed and has no calls."""

    path: str
    calls: tuple[CallSite, ...]
    error: str = ""  # a syntax error: the file was not read (said, not skipped silently)
    methods: tuple[CallSite, ...] = ()  # WATCHED_METHODS calls, receiver unknown
    strings: dict = field(default_factory=dict)  # name -> str literal, for names bound exactly once
    packages: frozenset = frozenset()  # top-level packages imported ("transformers", "peft")


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
        at = f" line {exc.lineno}" if getattr(exc, "lineno", None) else ""
        return PythonFile(path, (), error=f"not parsed: {exc.__class__.__name__}{at}: {getattr(exc, 'msg', exc)}")
    # one walk: imports, calls and assignments are collected together, calls resolved after (an
    # import inside main() may come after a call the walk met first)
    imports: dict[str, str] = {}
    call_nodes: list[ast.Call] = []
    bound: dict[str, int] = {}
    literal_strings: dict[str, str] = {}
    for node in ast.walk(tree):
        kind = type(node)
        if kind is ast.Call:
            call_nodes.append(node)
        elif kind is ast.Name:
            if type(node.ctx) is ast.Store:
                bound[node.id] = bound.get(node.id, 0) + 1
        elif kind is ast.Import or kind is ast.ImportFrom:
            _add_import(node, imports)
        elif kind is ast.Assign or kind is ast.AnnAssign:
            targets = node.targets if kind is ast.Assign else [node.target]
            if (len(targets) == 1 and type(targets[0]) is ast.Name and type(node.value) is ast.Constant
                    and isinstance(node.value.value, str)):
                literal_strings[targets[0].id] = node.value.value
    if not imports:
        return PythonFile(path, ())
    calls, methods = [], []
    for node in call_nodes:
        qualified = _resolve(node.func, imports)
        if qualified is not None:
            calls.append(_call_site(qualified, node, imports))
        elif type(node.func) is ast.Attribute and node.func.attr in WATCHED_METHODS:
            methods.append(_call_site("." + node.func.attr, node, imports))
    calls.sort(key=lambda c: c.line)
    methods.sort(key=lambda c: c.line)
    # a name bound twice (or also a loop variable, a parameter...) has no one value: not used
    strings = {name: value for name, value in literal_strings.items() if bound.get(name) == 1}
    packages = frozenset(target.split(".", 1)[0] for target in imports.values())
    return PythonFile(path, tuple(calls), methods=tuple(methods), strings=strings, packages=packages)


def _call_site(qualified: str, node: ast.Call, imports: dict[str, str]) -> CallSite:
    return CallSite(qualified, node.lineno, tuple(_keywords(node, imports)), any(k.arg is None for k in node.keywords),
                    tuple(_positional(node.args)))


def _add_import(node, names: dict[str, str]) -> None:
    """local name -> what it was imported as ("trl.SFTTrainer", "trl"), for every import in the
    file (functions included: a script's imports inside main() count the same)."""
    if type(node) is ast.Import:
        for alias in node.names:
            if alias.asname:
                names[alias.asname] = alias.name
            else:  # ``import transformers.trainer`` binds ``transformers``
                top = alias.name.split(".")[0]
                names[top] = top
    elif node.module and node.level == 0:
        for alias in node.names:
            if alias.name != "*":
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"


def _resolve(func: ast.expr, imports: dict[str, str]) -> str | None:
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name) or func.id not in imports:
        return None
    return ".".join([imports[func.id], *reversed(parts)])


def _dotted(node: ast.expr) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    return ".".join([node.id, *reversed(parts)])


def _literal(node: ast.expr):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _NOT_LITERAL


def _keywords(call: ast.Call, imports: dict[str, str]):
    for keyword in call.keywords:
        if keyword.arg is None:
            continue
        value = _literal(keyword.value)
        expr = ""
        if value is _NOT_LITERAL:
            if isinstance(keyword.value, ast.Call):
                expr = _resolve(keyword.value.func, imports) or ""
            else:
                expr = _dotted(keyword.value)
        yield KeywordSite(keyword.arg, keyword.lineno, keyword.col_offset, value, expr)


def _positional(args: list[ast.expr]):
    for index, arg in enumerate(args[:2]):  # the model name or path is the first; nothing needs more
        value = _literal(arg)
        yield KeywordSite(str(index), arg.lineno, arg.col_offset, value, _dotted(arg) if value is _NOT_LITERAL else "")


def matches(qualified: str, pattern: str) -> bool:
    """``pattern`` "trl.SFTTrainer" matches "trl.SFTTrainer" and "trl.trainer.sft_trainer.SFTTrainer":
    the same top-level package, the same name at the end. A ``*`` in the tail globs within one
    name: "transformers.AutoModel*.from_pretrained" matches AutoModelForCausalLM.from_pretrained."""
    top, _, tail = pattern.partition(".")
    if qualified.split(".", 1)[0] != top:
        return False
    if "*" in tail:
        names = tail.split(".")
        return len(qualified.split(".")) > len(names) and fnmatch.fnmatchcase(
            ".".join(qualified.split(".")[-len(names):]), tail)
    return qualified == pattern or qualified.endswith("." + tail)
