"""The version knowledge of ``gpudoctor scan``: which release removed or renamed which keyword,
read from ``rules/code_changes.toml`` (data, so a new upstream release is a data edit)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Mapping

from packaging.version import Version

from ..knowledge import _load_toml

RENAME, MOVE_TO_CONFIG = "rename", "move-to-config"


@dataclass(frozen=True)
class Change:
    package: str
    callables: tuple[str, ...]  # "<top module>.<dotted name>"
    old: str
    new: str
    action: str
    deprecated_in: Version
    removed_in: Version
    rule: str
    source: str
    config_key: bool = False
    config: str = ""  # move-to-config: the config class that now takes the keyword
    note: str = ""

    def state(self, version: Version) -> str | None:
        """'removed' (raises), 'deprecated' (warns) or None (still fine) for an installed version."""
        release = Version(version.base_version)  # 4.46.0.dev0 behaves as the 4.46 line
        if release >= self.removed_in:
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
class Knowledge:
    changes: tuple[Change, ...]
    fast_path: FastPath

    @functools.cached_property
    def newest_known(self) -> dict[str, Version]:
        """Per package, the latest version the table speaks of: what a scan assumes for a package
        that is not installed (every change in the table applies to it)."""
        newest: dict[str, Version] = {}
        for change in self.changes:
            newest[change.package] = max(newest.get(change.package, change.removed_in), change.removed_in)
        return newest


@functools.lru_cache(maxsize=1)
def load_knowledge() -> Knowledge:
    data = _load_toml("code_changes.toml")
    changes = []
    for raw in data.get("change", []):
        changes.append(Change(
            package=raw["package"], callables=tuple(raw["callables"]), old=raw["old"], new=raw.get("new", ""),
            action=raw.get("action", RENAME), deprecated_in=Version(raw["deprecated_in"]),
            removed_in=Version(raw["removed_in"]), rule=raw["rule"], source=raw["source"],
            config_key=bool(raw.get("config_key", False)), config=raw.get("config", ""), note=raw.get("note", "")))
    fast = data["unsloth_fast_path"]
    return Knowledge(tuple(changes), FastPath(tuple(fast["callables"]), fast["rule"], fast["source"],
                                              dict(fast["required"])))
