"""What the training code asks of the GPU, judged against this machine: the model's real head_dim
with ``attn_implementation="flash_attention_2"``, ``bf16`` on a GPU without it, and 4/8-bit
loading without a usable bitsandbytes.

The judging is not redone here: each judgement runs the static check that owns the rule
(``gpudoctor.checks``, with the same Facts ``gpudoctor check`` uses, so no torch import) on what
the code says, e.g. the flash-attn head-dim check with the head_dim read from the model's
config.json instead of ``--require head_dim=N``. The scan adds where (``file:line``), which
model, and the mechanical edit when there is one. Every judgement that cannot be made (no GPU
facts, no config.json, a model named through a variable) is a skipped check with its reason,
never a pass."""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Iterable, Mapping

from ..model import CheckResult, CheckStatus, Finding
from .model_config import ModelConfig, find_model_config
from .sites import ModelLoad, Precision, Quantization

FLASH_ATTN_RULE, BF16_RULE, BNB_RULE = "flash-attn-head-dim-unsupported", "bf16-unsupported", "bitsandbytes-cuda-setup"
# the package whose presence says the inspected environment is the one that trains with this loader
_LOADER_PACKAGE = {"transformers": "transformers", "unsloth": "unsloth", "LLaMA-Factory": "llamafactory",
                   "axolotl": "axolotl"}


class _Cannot(Exception):
    """A judgement that cannot be made here; the message is the reason."""


def judge_against_gpu(loads: Iterable[ModelLoad], precisions: Iterable[Precision], quantizations: Iterable[Quantization],
                      facts, env: Mapping[str, str], no_facts_reason: str = "") -> tuple[list[Finding], list[CheckResult]]:
    """(findings, checks). ``facts``: a ``gpudoctor.facts.Facts`` (or None, with the reason)."""
    findings: list[Finding] = []
    checks: list[CheckResult] = []

    def judge(rule: str, where: str, run: Callable[[], tuple[list[Finding], str]]) -> None:
        start = time.perf_counter()
        try:
            found, passed = run()
            status = CheckStatus.FAIL if found else CheckStatus.PASS
            reason = "; ".join(f.message for f in found) if found else f"{where}: {passed}"
        except _Cannot as why:
            found, status, reason = [], CheckStatus.SKIP, f"{where}: {why}"
        except Exception as exc:  # noqa: BLE001 - one judgement's bug must not end the scan
            found, status, reason = [], CheckStatus.ERROR, f"{where}: {type(exc).__name__}: {exc}"
        findings.extend(found)
        checks.append(CheckResult(rule, status, reason, (time.perf_counter() - start) * 1000, tuple(found)))

    for load in loads:
        if load.attn_implementation == "flash_attention_2":
            judge(FLASH_ATTN_RULE, load.attn_site.where if load.attn_site else load.site.where,
                  lambda load=load: _flash_attn(load, facts, env, no_facts_reason))
    for precision in precisions:
        if precision.mode == "bf16":
            judge(BF16_RULE, precision.site.where, lambda p=precision: _bf16(p, facts, no_facts_reason))
    for quantization in quantizations:
        judge(BNB_RULE, quantization.site.where, lambda q=quantization: _bitsandbytes(q, facts, no_facts_reason))
    return findings, checks


def _run_check(rule: str, facts, **given: Any) -> list[Finding]:
    """The rule's own static check over ``facts``, with ``given`` in place of some facts."""
    from ..checks import CHECKS_BY_ID, Skip
    from ..facts import ProbeFailure

    check = CHECKS_BY_ID[rule]
    try:
        return list(check.run(**check.arguments(facts.get, given)))
    except Skip as why:
        raise _Cannot(str(why)) from None
    except ProbeFailure as exc:
        raise _Cannot(f"the machine could not be read: {exc}") from None


def _need_facts(facts, reason: str):
    if facts is None:
        raise _Cannot(reason or "no GPU facts to judge against")


def _located(found: Finding, where: str, what: str, extra: Mapping[str, Any], edit: dict | None = None) -> Finding:
    """The check's finding, said at the place in the code that asks for it."""
    evidence = {**found.evidence, **extra}
    if edit is not None:
        evidence["edit"] = edit
    return Finding(found.id, found.severity, found.title, f"{where}: {what}: {found.message}", evidence, found.fixes)


def _flash_attn_missing(facts) -> str:
    """Why flash_attention_2 cannot load at all here ("" when flash-attn is installed or unknown).
    No rule of the catalogue is "flash-attn not installed", so this is said, not found."""
    from ..facts import ProbeFailure

    try:
        packages = facts.get("packages") if facts is not None else None
    except ProbeFailure:
        return ""  # said by the check's own skip below
    if packages is None or packages.version("flash-attn") is not None:
        return ""
    # Since huggingface/transformers#40178 (2025), transformers loads the Hub kernel
    # kernels-community/flash-attn in place of a missing flash-attn when the `kernels` package is
    # installed (downloaded at load time); without `kernels` every release raises ImportError.
    if packages.get("kernels") is not None:
        return (f"flash-attn is not installed, but kernels {packages.get('kernels').version} is: transformers releases "
                "with the Hub fallback (huggingface/transformers#40178) load kernels-community/flash-attn instead (a "
                "download when the model loads), older ones raise ImportError; not judged")
    return ("flash-attn is not installed: transformers will refuse flash_attention_2 (ImportError when the model "
            "loads; install flash-attn in the environment this code trains in, install `kernels` for recent "
            "transformers' Hub fallback (huggingface/transformers#40178), or use attn_implementation=\"sdpa\"); "
            "head_dim not judged")


def _flash_attn(load: ModelLoad, facts, env: Mapping[str, str], no_facts_reason: str):
    missing = _flash_attn_missing(facts)
    if missing:  # before the model's shape: no head_dim matters when the package is missing
        raise _Cannot(missing)
    if not load.reference:
        raise _Cannot(f"{load.unresolved}; the model's head_dim is unknown (`gpudoctor check --require head_dim=N` "
                      "judges a head_dim you name)")
    config: ModelConfig = find_model_config(load.reference, os.path.dirname(load.site.file), env, load.cache_dir)
    if config.shape is None:
        raise _Cannot(config.why_not)
    _need_facts(facts, no_facts_reason)
    shape = config.shape
    found = _run_check(FLASH_ATTN_RULE, facts, requirements={"head_dim": [shape.head_dim]})
    model = (f"{load.reference} (head_dim {shape.head_dim} from {_derived(shape.derived)}, {shape.heads} heads, "
             f"{shape.kv_heads} KV heads; {config.where}: {config.path})")
    site = load.attn_site or load.site
    extra = {"file": site.file, "line": site.line, "shown_path": site.shown, "model": load.reference,
             "config_json": config.path, "heads": shape.heads, "kv_heads": shape.kv_heads,
             "head_dim_from": shape.derived}
    edit = ({"op": "set_kwarg", "file": site.file, "line": site.line, "old": "attn_implementation", "new": "'sdpa'"}
            if load.attn_site is not None and load.library == "transformers"
            and load.attn_keyword == "attn_implementation" else None)
    return ([_located(f, site.where, f"attn_implementation=\"flash_attention_2\" with {model}", extra, edit)
             for f in found], f"head_dim {shape.head_dim} of {load.reference} runs with the installed flash-attn on "
                              "every GPU here")


def _derived(how: str) -> str:
    return "its head_dim" if how == "head_dim" else how


def _bf16(precision: Precision, facts, no_facts_reason: str):
    _need_facts(facts, no_facts_reason)
    found = _run_check(BF16_RULE, facts)
    site = precision.site
    extra = {"file": site.file, "line": site.line, "shown_path": site.shown, "asked": precision.how}
    edit = None
    if precision.name == "bf16":  # bf16=True / bf16: true -> fp16 (the scan refuses it if fp16 is given too)
        edit = {"op": "rename_kwarg" if precision.call else "rename_key", "file": site.file, "line": site.line,
                "old": "bf16", "new": "fp16"}
    what = (f"{precision.how} on a GPU without native bf16 (transformers refuses it with \"Your setup doesn't "
            "support bf16/gpu\" when torch says so, else it runs emulated and slow)")
    return [_located(f, site.where, what, extra, edit) for f in found], "every GPU here computes natively in bf16"


def _bitsandbytes(quantization: Quantization, facts, no_facts_reason: str):
    _need_facts(facts, no_facts_reason)
    from ..facts import ProbeFailure

    try:
        packages = facts.get("packages")
    except ProbeFailure as exc:
        raise _Cannot(f"the installed packages could not be read: {exc}") from None
    site = quantization.site
    extra = {"file": site.file, "line": site.line, "shown_path": site.shown, "asked": quantization.how}
    if packages.get("bitsandbytes") is None:
        loader = _LOADER_PACKAGE.get(quantization.loader, quantization.loader)
        if packages.get(loader) is None:
            raise _Cannot(f"neither bitsandbytes nor {loader} is installed in the inspected environment: not the "
                          "environment this code trains in (`--python PATH` names that one)")
        from ..checks.base import finding, judged_python
        from ..remedies import fixes_for

        try:
            system = facts.get("system")
        except ProbeFailure:
            system = None  # the fix then says `python -m pip`
        missing = finding(BNB_RULE, f"{quantization.how} needs bitsandbytes, which is not installed beside "
                                    f"{loader} {packages.get(loader).version}: loading raises ImportError.",
                          {"bitsandbytes": None, "loader": loader}, fixes_for(BNB_RULE, judged_python(system, packages)))
        return [_located(missing, site.where, quantization.how, extra)], ""
    found = _run_check(BNB_RULE, facts)
    return ([_located(f, site.where, quantization.how, extra) for f in found],
            f"bitsandbytes {packages.get('bitsandbytes').version} ships a library for torch's CUDA")
