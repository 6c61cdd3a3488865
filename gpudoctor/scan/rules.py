"""Evaluate what the readers found (calls with keywords, config keys) against the version
knowledge, and turn each hit into a finding with ``file:line`` evidence and the edit that fixes
it. Fixes come from ``gpudoctor.remedies`` (the one owner), built from the scan's values."""

from __future__ import annotations

import os
from typing import Any, Iterable

from ..knowledge import load_catalogue
from ..model import Finding, Severity
from ..remedies import fixes_for
from .changes import MANUAL, MOVE_TO_CONFIG, Change, Knowledge
from .configs import ConfigFile
from .python_file import CallSite, PythonFile, matches
from .versions import INSTALLED, Versions

# Keys that only a TrainingArguments-like config has: a YAML/JSON file is judged as one only
# when it has at least one of them (a model's config.json or a CI file never is).
TRAINING_CONFIG_MARKERS = frozenset({
    "output_dir", "learning_rate", "per_device_train_batch_size", "num_train_epochs", "gradient_accumulation_steps",
    "max_steps", "warmup_steps", "lr_scheduler_type",
})
# axolotl's own names (examples/*.yml: base_model with micro_batch_size, sequence_len, datasets...)
AXOLOTL_MARKERS = frozenset({"micro_batch_size", "sequence_len", "sample_packing", "adapter", "datasets"})
# LLaMA-Factory's own names (examples/train_lora/*.yaml: stage, finetuning_type, template)
LLAMAFACTORY_MARKERS = frozenset({"stage", "finetuning_type", "template"})


def python_findings(source: PythonFile, knowledge: Knowledge, versions: Versions, root: str = "") -> list[Finding]:
    findings: list[Finding] = []
    shown = shown_path(source.path, root)
    fast = knowledge.fast_path
    for call in source.calls:
        for change in knowledge.by_callable_name.get(call.qualified.rsplit(".", 1)[-1], ()):
            if any(matches(call.qualified, pattern) for pattern in change.callables):
                findings.extend(_change_findings(call, change, knowledge, versions, source.path, shown))
        if call.qualified.endswith(".get_peft_model") and any(matches(call.qualified, p) for p in fast.callables):
            findings.extend(_fast_path_findings(call, fast, source.path, shown))
    return findings


def config_dialect(config: ConfigFile) -> str | None:
    """Which tool reads this config file: "axolotl" (its own schema), "llamafactory" or "hf" (keys
    handed to transformers' HfArgumentParser), or None: not a training config (a model's
    config.json, a CI file)."""
    top = {k.key for k in config.keys if k.depth == 0}
    if "base_model" in top and top & AXOLOTL_MARKERS:
        return "axolotl"
    if top & LLAMAFACTORY_MARKERS:
        return "llamafactory"
    return "hf" if top & TRAINING_CONFIG_MARKERS else None


def config_findings(config: ConfigFile, knowledge: Knowledge, versions: Versions, root: str = "") -> list[Finding]:
    dialect = config_dialect(config)
    if dialect is None:
        return []
    shown = shown_path(config.path, root)
    top = {k.key for k in config.keys if k.depth == 0}
    findings = []
    for key in config.keys:
        if key.depth != 0:
            continue
        for change in knowledge.changes:
            if change.config_key and change.old == key.key and dialect in change.dialects:
                state, version = _state(change, versions)
                if state is None:
                    continue
                edit = _edit(change, config.path, key.line, top, op="key")
                findings.append(_finding(change, state, version, shown, key.line, f"`{change.old}:`", edit,
                                         {"file": config.path, "line": key.line, "key": change.old,
                                          "dialect": dialect}))
    return findings


def _edit(change: Change, path: str, line: int, present: set, op: str) -> dict | None:
    """The mechanical edit for a renamed or removed keyword/key, or None: a manual change, or a
    rename onto a name the call (the file) already has, which would pass it twice."""
    if change.action == MANUAL or (change.new and change.new in present):
        return None
    verb = ("rename_" if change.new else "remove_") + ("kwarg" if op == "kwarg" else "key")
    return {"op": verb, "file": path, "line": line, "old": change.old, "new": change.new}


def _change_findings(call: CallSite, change: Change, knowledge: Knowledge, versions: Versions, path: str, shown: str):
    for keyword in call.keywords:
        if keyword.name != change.old:
            continue
        state, version = _state(change, versions)
        if state is None:
            continue
        name = call.qualified.rsplit(".", 1)[-1] if not call.qualified.endswith(".from_pretrained") else \
            ".".join(call.qualified.rsplit(".", 2)[-2:])
        if change.action == MOVE_TO_CONFIG:
            target = _renamed_in(knowledge, versions, change.config, change.new)
            edit = {"op": "move_to_config", "file": path, "line": keyword.line, "old": change.old, "new": target,
                    "config": change.config}
        else:
            edit = _edit(change, path, keyword.line, {k.name for k in call.keywords}, op="kwarg")
        yield _finding(change, state, version, shown, keyword.line, f"`{name}({change.old}=…)`", edit,
                       {"file": path, "line": keyword.line, "call": call.qualified, "kwarg": change.old})


def _renamed_in(knowledge: Knowledge, versions: Versions, config: str, name: str) -> str:
    """The keyword's name in ``config`` for these versions (SFTConfig's max_seq_length became
    max_length): a moved argument lands under the name the installed config accepts."""
    for change in knowledge.changes:
        if change.old == name and any(p.endswith("." + config) for p in change.callables):
            state, _ = _state(change, versions)
            if state is not None:
                return change.new
    return name


def _state(change: Change, versions: Versions):
    version = versions.of(change.package)
    return change.state(version.version), version


def _finding(change: Change, state: str, version, shown: str, line: int, what: str, edit: dict | None,
             evidence: dict) -> Finding:
    rule = load_catalogue()[change.rule]
    where = f"{shown}:{line}"
    against = (f"Installed: {change.package} {version.version}." if version.source == INSTALLED else
               f"{change.package} is not installed here: judged against {version.version}, the newest release "
               "gpudoctor's table knows.")
    if change.action == MOVE_TO_CONFIG:
        todo = f"it belongs in {change.config}(...) now (as `{edit['new']}`)"
    elif change.new:
        todo = f"use `{change.new}`"
        if edit is None and change.action != MANUAL:
            todo += f" (not renamed automatically: `{change.new}` is passed here already; remove one of the two)"
    else:
        todo = "remove it"
    if state == "removed":
        verb = f"removed in {change.package} {change.removed_in}"
    else:
        verb = f"deprecated since {change.package} {change.deprecated_in}" + (
            f", removed in {change.removed_in}" if change.removed_in else " (still accepted, with a warning)")
    message = f"{where}: {what} is {verb}; {todo}. {against}"
    if change.note:
        message += f" Note: {change.note}."
    severity = rule.severity if state == "removed" else Severity.WARNING
    values: dict[str, Any] = {
        **evidence, "shown_path": shown, "replacement": edit["new"] if edit else change.new,
        "package": change.package, "action": change.action, "version": str(version.version),
        "version_source": version.source,
        "state": state, "deprecated_in": str(change.deprecated_in),
        "removed_in": str(change.removed_in) if change.removed_in else None, "source": change.source,
    }
    if edit is not None:
        values["edit"] = edit
    if change.action == MOVE_TO_CONFIG:
        values["config"] = change.config
    if change.note:
        values["note"] = change.note
    return Finding(change.rule, severity, rule.title, message, values, _fixes(change.rule, values))


def _fixes(rule: str, values: dict) -> tuple:
    return fixes_for(rule, values)


def _fast_path_findings(call: CallSite, fast, path: str, shown: str) -> Iterable[Finding]:
    rule = load_catalogue()[fast.rule]
    for keyword in call.keywords:
        if keyword.name not in fast.required or not keyword.literal:
            continue  # a variable: its value is not known without running the code
        wanted = fast.required[keyword.name]
        if keyword.value == wanted:
            continue
        values = {
            "file": path, "line": keyword.line, "shown_path": shown, "call": call.qualified, "kwarg": keyword.name,
            "value": keyword.value, "required": wanted, "source": fast.source,
            "edit": {"op": "set_kwarg", "file": path, "line": keyword.line, "old": keyword.name, "new": repr(wanted)},
        }
        if keyword.name == "lora_dropout":
            values["dropout"] = keyword.value
        if keyword.name == "bias":
            values["bias"] = keyword.value
        message = (f"{shown}:{keyword.line}: `get_peft_model({keyword.name}={keyword.value!r})`: Unsloth patches its fast "
                   f"LoRA kernels only with {keyword.name}={wanted!r}; with this value it will log \"patched … 0 QKV "
                   f"layers, 0 O layers and 0 MLP layers\" and train on the slow path (about 2x slower, more memory).")
        yield Finding(fast.rule, rule.severity, rule.title, message, values, fixes_for(fast.rule, values))


def shown_path(path: str, root: str) -> str:
    if root:
        relative = os.path.relpath(path, root)
        if not relative.startswith(".."):
            return relative
    return path
