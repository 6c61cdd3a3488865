"""Loads the rule fixture cases under fixtures/rules/<rule-id>/{pass,fail}/<case>/case.toml.

A case names a real snapshot under fixtures/snapshots/ and may patch it. A patch is allowed only
to stand in for hardware we do not have (a Turing GPU, a mismatched driver); each one says why
in `derived` and where its values come from.
"""

from __future__ import annotations

import copy
import functools
import os
import sys
from dataclasses import dataclass

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from gpudoctor.host.snapshot import SnapshotHost, read_snapshot_data

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "fixtures")
RULES_DIR = os.path.join(FIXTURES, "rules")


@dataclass(frozen=True)
class RuleCase:
    rule_id: str
    expect: str  # pass | fail
    name: str
    path: str
    spec: dict

    @property
    def requirements(self) -> dict:
        from gpudoctor.cli.check import parse_requirements

        return parse_requirements(self.spec.get("require", []))

    def host(self) -> SnapshotHost:
        directory = os.path.join(FIXTURES, self.spec["snapshot"])
        data = copy.deepcopy(_snapshot(directory))
        apply_patch(data, self.spec.get("patch", {}))
        return SnapshotHost(directory, data)


@functools.lru_cache(maxsize=None)
def _snapshot(directory: str) -> dict:
    return read_snapshot_data(directory)


def apply_patch(data: dict, patch: dict) -> None:
    env = data.setdefault("env", {})
    env.update(patch.get("env", {}))
    for name in patch.get("unset_env", []):
        env.pop(name, None)
    if "nvml" in patch:
        data["nvml"] = {**data.get("nvml", {}), **patch["nvml"]}
    if "kernel_log" in patch:  # the recorded kernel-log fact (host.kernel_log()), replaced whole
        data["kernel_log"] = patch["kernel_log"]
    for key in ("files", "dirs", "stats"):
        data.setdefault(key, {}).update(patch.get(key, {}))
    if "distributions" in patch:
        by_name = {d["name"].lower(): d for d in data.get("distributions") or []}
        for dist in patch["distributions"]:
            base = by_name.get(dist["name"].lower(), {"location": "/usr/lib/python3/dist-packages"})
            by_name[dist["name"].lower()] = {**base, **dist}
        data["distributions"] = list(by_name.values())
    for name in patch.get("remove_distributions", []):
        data["distributions"] = [d for d in data.get("distributions") or [] if d["name"].lower() != name.lower()]
    if "system" in patch:
        data["system"] = {**data.get("system", {}), **patch["system"]}
    if "commands" in patch:  # a command's recorded answer, replaced or added (by argv)
        by_argv = {tuple(c["argv"]): c for c in data.get("commands") or []}
        for command in patch["commands"]:
            by_argv[tuple(command["argv"])] = {"error": None, "returncode": 0, "stderr": "", "timed_out": False, **command}
        data["commands"] = list(by_argv.values())


def load_cases() -> list[RuleCase]:
    cases = []
    if not os.path.isdir(RULES_DIR):
        return cases
    for rule_id in sorted(os.listdir(RULES_DIR)):
        for expect in ("pass", "fail"):
            folder = os.path.join(RULES_DIR, rule_id, expect)
            for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
                path = os.path.join(folder, name, "case.toml")
                with open(path, "rb") as handle:
                    cases.append(RuleCase(rule_id, expect, name, path, tomllib.load(handle)))
    return cases
