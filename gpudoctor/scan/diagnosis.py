"""Static forms of two diagnosis rules (which ``gpudoctor explain`` recognises in a failed run's
log), decided from a training script before it runs:

- ``gradient-checkpointing-no-input-grads``: gradient checkpointing on a PEFT model with the
  frozen embeddings' output not requiring grad. With reentrant checkpointing (transformers'
  default before 5.0) the checkpointed blocks then record no graph and backward() fails with
  "element 0 of tensors does not require grad" (huggingface/peft#137). PEFT itself calls
  ``enable_input_require_grads`` when the model already checkpoints as it is wrapped and is not
  quantized (PeftModel.__init__, huggingface/peft#404); ``prepare_model_for_kbit_training`` does it
  too; ``use_reentrant=False`` does not need it.
- ``fp16-params-with-grad-scaler``: ``fp16=True`` with a model loaded in float16: the trainable
  weights are fp16 and GradScaler refuses them ("Attempting to unscale FP16 gradients."). From
  PEFT 0.12 LoRA adapters are cast to float32 (autocast_adapter_dtype, huggingface/peft#1706), so a
  LoRA on an fp16 model is fine there; a full fine-tune of an fp16 model never is.

What is not judged is said: a script with TRL's trainers (they prepare PEFT models themselves,
differently across releases), with Unsloth (its own checkpointing and dtype handling), or with a
quantized model (fp16: the base is frozen, prepare_model_for_kbit_training casts the rest)."""

from __future__ import annotations

from typing import Any

from ..knowledge import load_catalogue
from ..model import CheckResult, CheckStatus, Finding
from ..remedies import fixes_for
from .changes import Knowledge
from .python_file import CallSite, PythonFile, matches
from .sites import Site, python_loads, python_quantization
from .versions import INSTALLED, Versions

GC_RULE, FP16_RULE = "gradient-checkpointing-no-input-grads", "fp16-params-with-grad-scaler"
PEFT_WRAP = "peft.get_peft_model"
KBIT_PREPARE = ("peft.prepare_model_for_kbit_training", "peft.prepare_model_for_int8_training")
TRL_TRAINERS = ("trl.SFTTrainer", "trl.DPOTrainer", "trl.ORPOTrainer", "trl.KTOTrainer", "trl.CPOTrainer",
                "trl.RewardTrainer", "trl.GRPOTrainer", "trl.PPOTrainer")


def diagnosis_judgements(source: PythonFile, shown: str, knowledge: Knowledge,
                         versions: Versions) -> tuple[list[Finding], list[CheckResult]]:
    findings: list[Finding] = []
    checks: list[CheckResult] = []
    for judge in (_gradient_checkpointing, _fp16_params):
        result = judge(source, shown, knowledge, versions)
        if result is None:
            continue  # the script does not do what the rule is about: nothing to say
        found, status, reason = result
        findings.extend(found)
        checks.append(CheckResult(GC_RULE if judge is _gradient_checkpointing else FP16_RULE, status, reason, 0.0,
                                  tuple(found)))
    return findings, checks


def _calls(source: PythonFile, *patterns: str) -> list[CallSite]:
    names = {p.rsplit(".", 1)[-1] for p in patterns}  # a cheap test first: the scan's hot loop
    return [c for c in source.calls if c.qualified.rsplit(".", 1)[-1] in names
            and any(matches(c.qualified, p) for p in patterns)]


def _true(call: CallSite, name: str):
    keyword = call.keyword(name)
    return keyword if keyword is not None and keyword.literal and keyword.value is True else None


def _non_reentrant(call: CallSite) -> bool:
    kwargs = call.keyword("gradient_checkpointing_kwargs")
    return bool(kwargs is not None and kwargs.literal and isinstance(kwargs.value, dict)
                and kwargs.value.get("use_reentrant") is False)


def _not_judged(knowledge: Knowledge, versions: Versions, fact: str) -> str:
    """Why the package a version fact is about has no version to judge by ("" when it has one):
    assuming the newest release would pass a script that fails on what is really there."""
    package = knowledge.facts[fact].package
    if versions.of(package).source == INSTALLED:
        return ""
    probe_error = getattr(versions, "probe_error", "")
    if probe_error:
        return f"the package probe failed: {probe_error}"
    return f"{package} is not installed in the inspected environment"


def _version_says(knowledge: Knowledge, versions: Versions, fact: str):
    """(upstream has the behaviour in the installed version, the sentence that says which version);
    only for an installed package (``_not_judged`` first)."""
    known = knowledge.facts[fact]
    version = versions.of(known.package)
    # a pre-release of the fixed version is judged as before it: transformers#42489 reports the
    # PEFT + checkpointing failure on 5.0.0.dev0, before #43203 made 5.0.0 non-reentrant
    return version.version >= known.since, f"{known.package} {version.version} is installed", version


def _gradient_checkpointing(source: PythonFile, shown: str, knowledge: Knowledge, versions: Versions):
    wraps = _calls(source, PEFT_WRAP)
    arguments = [c for c in _calls(source, *knowledge.training_arguments) if _true(c, "gradient_checkpointing")]
    enables = [m for m in source.methods if m.qualified == ".gradient_checkpointing_enable"]
    if not wraps or not (arguments or enables):
        return None
    where = f"{shown}:{(arguments or enables)[0].line}"
    if "unsloth" in source.packages:
        return [], CheckStatus.SKIP, f"{where}: Unsloth prepares its own gradient checkpointing; not judged"
    if _calls(source, *TRL_TRAINERS):
        return [], CheckStatus.SKIP, (f"{where}: TRL's trainers prepare PEFT models for checkpointing themselves, "
                                      "differently across releases; not judged")
    if any(m.qualified == ".enable_input_require_grads" for m in source.methods):
        return [], CheckStatus.PASS, f"{where}: the script calls enable_input_require_grads()"
    prepared = [c for c in _calls(source, *KBIT_PREPARE)
                if not (c.keyword("use_gradient_checkpointing") and c.keyword("use_gradient_checkpointing").value is False)]
    if prepared:
        return [], CheckStatus.PASS, f"{where}: prepare_model_for_kbit_training (line {prepared[0].line}) makes the inputs require grad"
    if any(_non_reentrant(c) for c in arguments + enables):
        return [], CheckStatus.PASS, f"{where}: non-reentrant checkpointing (use_reentrant=False) needs no input grads"
    starred = [c for c in arguments + enables if c.has_star_kwargs]
    if starred:  # gradient_checkpointing_kwargs={"use_reentrant": False} may be in there: unseen, not judged
        return [], CheckStatus.SKIP, (f"{where}: gradient_checkpointing_kwargs may be passed in **kwargs (line "
                                      f"{starred[0].line}), which a static scan cannot read; not judged")
    quantized = bool(python_quantization(source, shown))
    first_wrap = min(w.line for w in wraps)
    if not quantized and any(e.line < first_wrap for e in enables):
        return [], CheckStatus.PASS, (f"{where}: checkpointing is on before get_peft_model (line {first_wrap}), so "
                                      "PEFT enables the input grads as it wraps the model")
    verdict, said = _by_version(knowledge, versions, "non_reentrant_checkpointing", where,
                                "whether checkpointing is reentrant (and the input grads needed) depends on the "
                                "transformers version",
                                "transformers checkpoints non-reentrantly and enables the input grads itself")
    if verdict:
        return verdict
    site_call = (arguments or enables)[0]
    found = _gc_finding(source, shown, site_call, first_wrap, quantized, said, knowledge, versions)
    return [found], CheckStatus.FAIL, found.message


def _by_version(knowledge: Knowledge, versions: Versions, fact: str, where: str, depends: str, fixed: str):
    """(verdict, said): SKIP when the package the fact depends on has no installed version (never a
    pass), PASS when the installed version has the upstream change, else (None, what it says)."""
    unknown = _not_judged(knowledge, versions, fact)
    if unknown:
        return ([], CheckStatus.SKIP, f"{where}: {unknown}; {depends}; not judged"), ""
    fixed_upstream, said, _ = _version_says(knowledge, versions, fact)
    if fixed_upstream:
        return ([], CheckStatus.PASS, f"{where}: {said}; from {knowledge.facts[fact].since} {fixed}"), said
    return None, said


def _gc_finding(source: PythonFile, shown: str, call: CallSite, wrap_line: int, quantized: bool, said: str,
                knowledge: Knowledge, versions: Versions) -> Finding:
    rule = load_catalogue()[GC_RULE]
    site = Site(source.path, shown, call.line)
    how = ("TrainingArguments(gradient_checkpointing=True)" if not call.qualified.startswith(".")
           else "model.gradient_checkpointing_enable()")
    why_peft = ("the model is quantized, so PEFT does not enable them" if quantized
                else "checkpointing is switched on after get_peft_model, so PEFT did not enable them")
    message = (f"{site.where}: {how} with the PEFT model of get_peft_model (line {wrap_line}) and no "
               f"enable_input_require_grads(): the frozen embeddings' output does not require grad ({why_peft}); "
               f"reentrant checkpointing, transformers' default before 5.0 ({said}), then records no graph and "
               "backward() fails with `element 0 of tensors does not require grad and does not have a grad_fn`.")
    values: dict[str, Any] = {"file": source.path, "line": call.line, "shown_path": shown, "peft_wrap_line": wrap_line,
                              "quantized": quantized, "source": knowledge.facts["non_reentrant_checkpointing"].source}
    kwargs_ok, _, _ = _version_says(knowledge, versions, "checkpointing_kwargs")
    if kwargs_ok and call.keyword("gradient_checkpointing_kwargs") is None:
        # transformers >= 4.35 takes gradient_checkpointing_kwargs (huggingface/transformers#27020)
        values["edit"] = {"op": "add_kwarg", "file": source.path, "line": call.line,
                          "old": "gradient_checkpointing_kwargs", "new": '{"use_reentrant": False}',
                          "callee": call.qualified.rsplit(".", 1)[-1]}
    return Finding(GC_RULE, rule.severity, rule.title, message, values, fixes_for(GC_RULE, values))


def _fp16_params(source: PythonFile, shown: str, knowledge: Knowledge, versions: Versions):
    amp = [c for c in _calls(source, *knowledge.training_arguments) if _true(c, "fp16")]
    loads = [l for l in python_loads(source, shown) if l.library == "transformers" and l.dtype == "float16"]
    if not amp or not loads:
        return None
    where = f"{shown}:{loads[0].dtype_site.line if loads[0].dtype_site else loads[0].site.line}"
    if "unsloth" in source.packages:
        return [], CheckStatus.SKIP, f"{where}: Unsloth casts the trainable weights itself; not judged"
    if python_quantization(source, shown):
        return [], CheckStatus.SKIP, (f"{where}: the model is quantized: its base weights are frozen and the trainable "
                                      "ones' dtype depends on prepare_model_for_kbit_training; not judged")
    wraps = _calls(source, PEFT_WRAP)
    peft_via_trainer = [c for c in _calls(source, *TRL_TRAINERS) if c.keyword("peft_config") is not None]
    no_autocast = [w for w in wraps if w.keyword("autocast_adapter_dtype") is not None
                   and w.keyword("autocast_adapter_dtype").value is False]
    load = loads[0]
    dtype_line = load.dtype_site.line if load.dtype_site else load.site.line
    if (wraps or peft_via_trainer) and not no_autocast:
        verdict, said = _by_version(knowledge, versions, "fp32_adapters", where,
                                    "whether the LoRA adapters are float32 on an fp16 model depends on the PEFT version",
                                    "PEFT keeps the LoRA weights in float32 on an fp16 model")
        if verdict:
            return verdict
        trained = f"the trainable weights, the LoRA adapters PEFT adds ({said}; float32 adapters only from PEFT 0.12),"
    elif no_autocast:
        trained = (f"the trainable weights, LoRA adapters kept in the model's dtype by "
                   f"get_peft_model(autocast_adapter_dtype=False) (line {no_autocast[0].line}),")
    else:
        trained = "the trainable weights, every weight of the model (no PEFT adapter: a full fine-tune),"
    rule = load_catalogue()[FP16_RULE]
    message = (f"{shown}:{dtype_line}: the model is loaded in float16 and trained with fp16=True (line {amp[0].line}): "
               f"{trained} are float16, and GradScaler raises `ValueError: Attempting to unscale FP16 gradients.` at "
               "the first optimizer step.")
    values = {"file": source.path, "line": dtype_line, "shown_path": shown, "fp16_line": amp[0].line,
              "model": load.reference, "source": knowledge.facts["fp32_adapters"].source}
    found = Finding(FP16_RULE, rule.severity, rule.title, message, values, fixes_for(FP16_RULE, values))
    return [found], CheckStatus.FAIL, message
