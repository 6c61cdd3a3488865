"""The version knowledge of ``gpudoctor scan``: which release removed or renamed which keyword,
read from ``rules/code_changes.toml`` (data, so a new upstream release is a data edit), and the
version facts the static forms of the diagnosis rules depend on."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Mapping

from packaging.version import Version

from ..knowledge import _load_toml

RENAME, MOVE_TO_CONFIG, MANUAL = "rename", "move-to-config", "manual"
# Which config files a config_key change applies to: what reads them. LLaMA-Factory and a plain
# HfArgumentParser JSON/YAML hand the keys to transformers' dataclasses; axolotl has its own schema.
HF_DIALECTS = ("hf", "llamafactory")


@dataclass(frozen=True)
class Change:
    """One keyword (or config key) a release of ``package`` deprecated or removed, from a ``[[change]]`` of
    ``rules/code_changes.toml``: the callables it applies to, what replaces it, the versions, and the rule
    its finding reports."""

    package: str
    callables: tuple[str, ...]  # "<top module>.<dotted name>"
    old: str
    new: str  # "" with action rename: the keyword is removed with no replacement
    action: str  # rename | move-to-config | manual (no mechanical edit: the note says what to do)
    deprecated_in: Version
    removed_in: Version | None  # None: still accepted with a warning in every release the table knows
    rule: str
    source: str
    config_key: bool = False
    config: str = ""  # move-to-config: the config class that now takes the keyword
    note: str = ""
    dialects: tuple[str, ...] = HF_DIALECTS  # for a config_key: the config files it applies to

    def state(self, version: Version) -> str | None:
        """'removed' (raises), 'deprecated' (warns) or None (still fine) for an installed version."""
        release = Version(version.base_version)  # 4.46.0.dev0 behaves as the 4.46 line
        if self.removed_in is not None and release >= self.removed_in:
            return "removed"
        if release >= self.deprecated_in:
            return "deprecated"
        return None


@dataclass(frozen=True)
class FastPath:
    """Keyword values a call needs for a library's fast path (Unsloth's fused LoRA kernels)."""

    callables: tuple[str, ...]
    rule: str
    source: str
    required: Mapping[str, Any]


@dataclass(frozen=True)
class VersionFact:
    """One upstream behaviour a static diagnosis depends on, from ``since`` on."""

    package: str
    since: Version
    source: str
    note: str = ""


@dataclass(frozen=True)
class Knowledge:
    """What ``rules/code_changes.toml`` says: the keyword changes, Unsloth's fast-path requirements, the
    callables that take TrainingArguments' keywords, and the version facts the static diagnoses depend on."""

    changes: tuple[Change, ...]
    fast_path: FastPath
    training_arguments: tuple[str, ...] = ()  # TrainingArguments and the TRL configs built on it
    facts: Mapping[str, VersionFact] = None  # name -> fact ([version_facts] in the TOML)

    @functools.cached_property
    def by_callable_name(self) -> dict[str, tuple[Change, ...]]:
        """The changes whose callables end in each name ("TrainingArguments", "from_pretrained"):
        a call is matched only against these (the scan's hot loop)."""
        index: dict[str, list[Change]] = {}
        for change in self.changes:
            for name in {pattern.rsplit(".", 1)[-1] for pattern in change.callables}:
                index.setdefault(name, []).append(change)
        return {name: tuple(changes) for name, changes in index.items()}

    @functools.cached_property
    def newest_known(self) -> dict[str, Version]:
        """Per package, the latest version the table speaks of: what a scan assumes for a package
        that is not installed (every change in the table applies to it)."""
        newest: dict[str, Version] = {}
        versions = [(c.package, c.removed_in or c.deprecated_in) for c in self.changes]
        versions += [(f.package, f.since) for f in (self.facts or {}).values()]
        for package, version in versions:
            newest[package] = max(newest.get(package, version), version)
        return newest


@functools.lru_cache(maxsize=1)
def load_knowledge() -> Knowledge:
    data = _load_toml("code_changes.toml")
    changes = []
    for raw in data.get("change", []):
        removed = raw.get("removed_in")
        changes.append(Change(
            package=raw["package"], callables=tuple(raw.get("callables", ())), old=raw["old"], new=raw.get("new", ""),
            action=raw.get("action", RENAME), deprecated_in=Version(raw["deprecated_in"]),
            removed_in=Version(removed) if removed else None, rule=raw["rule"], source=raw["source"],
            config_key=bool(raw.get("config_key", False)), config=raw.get("config", ""), note=raw.get("note", ""),
            dialects=tuple(raw.get("dialects", HF_DIALECTS))))
    fast = data["unsloth_fast_path"]
    facts = {name: VersionFact(raw["package"], Version(raw["since"]), raw["source"], raw.get("note", ""))
             for name, raw in data.get("version_facts", {}).items()}
    return Knowledge(tuple(changes), FastPath(tuple(fast["callables"]), fast["rule"], fast["source"],
                                              dict(fast["required"])),
                     tuple(data.get("training_arguments", {}).get("callables", ())), facts)
