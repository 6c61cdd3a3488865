"""Keys of the config files fine-tuning tools read (LLaMA-Factory and axolotl YAML, the JSON that
HfArgumentParser.parse_json_file reads, TOML), each with its line.

YAML: PyYAML is not a dependency, so this reads the block-mapping subset such configs use
(``key: value`` lines, nesting by indentation, comments, ``- item`` lists skipped); flow mappings,
anchors and multi-document files are read as far as their ``key:`` lines go. A key's value is kept
only when it is a plain scalar on the key's own line (``bf16: true``, ``model_name_or_path: org/name``),
the few values the model-shape and precision judgements read; anything else is None, never guessed."""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CONFIG_SUFFIXES = (".yaml", ".yml", ".json", ".toml")
_YAML_KEY = re.compile(r"^(?P<indent>[ ]*)(?P<key>[A-Za-z_][A-Za-z0-9_.\-]*)[ \t]*:(?:[ \t]+(?P<value>.*)|$)")


@dataclass(frozen=True)
class ConfigKey:
    """One key of a config file: its line (0 when a TOML key's line was not found), its nesting depth, and
    its value when that is a scalar."""

    key: str
    line: int
    depth: int  # 0: top level
    value: object = None  # a scalar value (str, bool, int, float) when the key has one on its line


def key_values(config: "ConfigFile") -> dict:
    """Top-level key -> (value, line), for the keys that have a scalar value."""
    return {k.key: (k.value, k.line) for k in config.keys if k.depth == 0 and k.value is not None}


@dataclass(frozen=True)
class ConfigFile:
    """A config file's keys, at every nesting level; ``error`` says why the file was not parsed (then it has
    no keys)."""

    path: str
    keys: tuple[ConfigKey, ...]
    error: str = ""


def read_config(path: str, text: str | None = None) -> ConfigFile:
    if text is None:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    lower = path.lower()
    try:
        if lower.endswith((".yaml", ".yml")):
            return ConfigFile(path, tuple(yaml_keys(text)))
        if lower.endswith(".json"):
            return ConfigFile(path, tuple(json_keys(text)))
        if lower.endswith(".toml"):
            return ConfigFile(path, tuple(toml_keys(text)))
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        return ConfigFile(path, (), error=f"not parsed: {exc}")
    return ConfigFile(path, ())


def yaml_keys(text: str):
    indents: list[int] = []  # the indentation of each open mapping level
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith(("---", "...")):
            indents = []
            continue
        match = _YAML_KEY.match(line)
        if not match:
            continue
        indent = len(match.group("indent"))
        while indents and indents[-1] >= indent:
            indents.pop()
        yield ConfigKey(match.group("key"), number, len(indents), _yaml_scalar(match.group("value") or ""))
        indents.append(indent)


def _yaml_scalar(text: str):
    """The plain scalars training configs use (true/false, numbers, strings, quoted or not);
    None for no value, a block (| >), a flow collection or an anchor/alias."""
    if text[:1] in ("'", '"'):
        quote = text[0]
        end = text.find(quote, 1)
        return text[1:end] if end > 0 else None
    text = re.split(r"\s#", text, maxsplit=1)[0].strip()
    if not text or text[0] in "|>[{&*!":
        return None
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("null", "~"):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def json_keys(text: str):
    """Keys of a JSON object with their lines: the decoder gives no positions, so each key is
    found in the text in document order after the previous one."""
    data = json.loads(text)
    position = 0
    for key, depth, value in _walk(data, 0):
        found = text.find(json.dumps(key), position)
        if found < 0:
            continue
        position = found + 1
        yield ConfigKey(key, text.count("\n", 0, found) + 1, depth, value)


def _walk(value, depth):
    if isinstance(value, dict):
        for key, item in value.items():
            yield str(key), depth, item if isinstance(item, (str, bool, int, float)) else None
            yield from _walk(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item, depth + 1)


def toml_keys(text: str):
    data = tomllib.loads(text)
    lines = text.splitlines()
    for key, depth, value in _walk(data, 0):
        pattern = re.compile(rf"^\s*\"?{re.escape(key)}\"?\s*=")
        line = next((n for n, l in enumerate(lines, 1) if pattern.match(l)), 0)
        yield ConfigKey(key, line, depth, value)
