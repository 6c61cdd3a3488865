"""Remedies for training code and config, and for what the training pass found."""

from __future__ import annotations

import shlex
import sys
from typing import Any, Mapping

from ..model import Fix, SuggestCommand
from .code import applies_with_fix_code, code_edit
from .installer import pip

RERUN_PASS = SuggestCommand("gpudoctor check --train")
# The training pass runs in gpudoctor's own interpreter (train/runner.py), which has gpudoctor; a
# bare `python` on PATH may not (gpudoctor installed with pipx).
_PASS_PYTHON = shlex.quote(sys.executable or "python3")
RERUN_AFTER_FIX = Fix("manual", "After the fix, rerun the training pass.", (RERUN_PASS,))


def unsloth_layers_not_patched(v: Mapping[str, Any]) -> list[Fix]:
    """From a log (``dropout``/``bias`` when it said) or a scan (``kwarg``, ``value``, ``required``,
    ``file``/``line`` and the ``edit``)."""
    kwarg = v.get("kwarg", "lora_dropout")
    value = v.get("value", v.get("dropout", "…")) if kwarg == "lora_dropout" else v.get("value", v.get("bias", "…"))
    required = v.get("required", 0 if kwarg == "lora_dropout" else "none")
    return [Fix("code", "Set lora_dropout=0 and bias=\"none\" (and no DoRA) in get_peft_model / LoraConfig so Unsloth "
                        "patches every layer with its fast path." + applies_with_fix_code(v),
                (code_edit(v, "Unsloth's fast path", f"{kwarg}={value!r}" if "value" in v else f"{kwarg}={value}",
                           f"{kwarg}={required!r}"),))]


def transformers_removed_kwarg(v: Mapping[str, Any]) -> list[Fix]:
    """From a log (``kwarg`` and ``replacement`` as the signature's sentence) or a scan (``kwarg``,
    ``replacement`` as the new name, "" when the keyword is gone, ``action`` "manual" when the
    change is no rename, the versions and the ``edit``)."""
    kwarg, replacement = v.get("kwarg") or v.get("key"), v.get("replacement")
    if not kwarg:
        return [Fix("code", "Update the arguments that this transformers version removed (see its release notes).")]
    if not v.get("package"):  # from a log: the replacement is a sentence, the version unknown
        return [Fix("code", f"Change `{kwarg}`: {replacement or 'see the release notes of the installed version'}.")]
    when = (f"removed in {v['package']} {v['removed_in']}" if v.get("state") == "removed"
            else f"deprecated since {v['package']} {v.get('deprecated_in')}")
    if not replacement:
        summary, description = f"Remove `{kwarg}` ({when}).", f"remove {kwarg}"
    elif v.get("action") == "manual":
        summary = f"Replace `{kwarg}` with `{replacement}` ({when}); not a mechanical rename."
        description = f"replace {kwarg}"
    else:
        summary, description = f"Rename `{kwarg}` to `{replacement}` ({when}).", f"rename {kwarg}"
    if v.get("note"):
        summary += f" {v['note'][:1].upper()}{v['note'][1:]}."
    return [Fix("code", summary + applies_with_fix_code(v), (code_edit(v, description, kwarg, str(replacement or "")),))]


def trl_sfttrainer_api_change(v: Mapping[str, Any]) -> list[Fix]:
    """From a log (``replacement`` as a sentence, when known) or a scan (``kwarg``, ``replacement``
    as the new name, ``config`` when the argument moved into SFTConfig, the ``edit``)."""
    kwarg = v.get("kwarg") or v.get("key")
    if kwarg and v.get("edit"):
        if v.get("config"):
            summary = f"Move `{kwarg}` from the SFTTrainer call into {v['config']}(...) as `{v.get('replacement')}`."
            edit = code_edit(v, f"move {kwarg} into {v['config']}", f"SFTTrainer(..., {kwarg}=…)",
                             f"{v['config']}(..., {v.get('replacement')}=…)")
        else:
            summary = f"Rename `{kwarg}` to `{v.get('replacement')}`."
            edit = code_edit(v, f"rename {kwarg}", kwarg, str(v.get("replacement")))
        return [Fix("code", summary + applies_with_fix_code(v), (edit,))]
    if kwarg and not v.get("replacement"):
        # A log's name that no table knows: say only what the log shows (held-out round 2).
        if v.get("trl_config_from_training_args"):
            return [Fix("code", f"`{kwarg}` is a field your own TrainingArguments class adds, which SFTTrainer passed "
                                "on to SFTConfig: pass an SFTConfig (or a subclass of SFTConfig that adds your fields) "
                                "as args=, or keep that field out of the arguments object.")]
        return [Fix("manual", f"Look `{kwarg}` up in the SFTConfig/SFTTrainer documentation of the installed TRL "
                              "version: upgrade TRL if the argument is newer than it, use the new name if it was "
                              "renamed, or drop it if TRL does not take it.", (pip(v, "show trl"),))]
    replacement = v.get("replacement") or ("move dataset and formatting options into SFTConfig; tokenizer= "
                                           "becomes processing_class=")
    return [Fix("code", f"Update the SFTTrainer call for this TRL version: {replacement}.")]


def triton_jit_failed(v: Mapping[str, Any]) -> list[Fix]:
    """``situation`` (from the training pass): timeout | crash | cuda-error | compile (default)."""
    preset = v.get("preset", "phi2")
    isolate = Fix("manual", "Rerun the pass alone to watch it fail, and skip the backend matrix to isolate the "
                            "training step.", (SuggestCommand(f"{_PASS_PYTHON} -m gpudoctor.train --preset {preset} --skip-backends"),))
    situation = v.get("situation", "compile")
    if situation == "timeout":
        return [isolate, Fix("manual", "If the machine is only slow (a cold cache compiles every kernel), allow more time.",
                             (SuggestCommand(f"gpudoctor check --train --train-timeout {v.get('longer_timeout', 600)}"),))]
    if situation == "crash":
        return [isolate]
    if situation == "cuda-error":
        return [Fix("manual", "Find the kernel: rerun the pass with synchronous launches.",
                    (SuggestCommand(f"CUDA_LAUNCH_BLOCKING=1 {_PASS_PYTHON} -m gpudoctor.train --preset {preset}"),))]
    return [Fix("manual", "Run `gpudoctor check` to find why the compiler failed (missing libcuda.so, no C compiler, "
                          "unwritable cache), then rerun the training pass.", (SuggestCommand("gpudoctor check"), RERUN_PASS))]


def kernel_numerics_mismatch(v: Mapping[str, Any]) -> list[Fix]:
    working = v.get("working") or ()
    use = f"Use a backend that agreed: {', '.join(working)}." if working else "No backend agreed here."
    return [Fix("manual", use + " Report the mismatch upstream with `gpudoctor check --train --json`.")]


def training_pass_diverged(v: Mapping[str, Any]) -> list[Fix]:
    """``situation``: diverged (the loss or gradients went wrong) | error (the step raised)."""
    preset = v.get("preset", "phi2")
    if v.get("situation") == "diverged":
        return [Fix("manual", "Isolate the kernel: rerun the pass and compare the backend matrix; a backend that "
                              "disagrees there is the usual cause.", (SuggestCommand(f"gpudoctor check --train --preset {preset} -v"),))]
    return [Fix("manual", "Rerun the training pass alone to see the whole traceback.",
                (SuggestCommand(f"{_PASS_PYTHON} -m gpudoctor.train --preset {preset}"),))]
