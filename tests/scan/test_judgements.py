"""The scan's judgements one by one: the model's config.json (local directory, hub cache), the
static diagnosis forms and each condition that makes them pass or say "not judged", axolotl's own
keys, and the edits they offer."""

from __future__ import annotations

import json
import os
import shutil

from packaging.version import Version

from gpudoctor.model import CheckStatus
from gpudoctor.scan import code_fix_plan, scan_paths
from gpudoctor.scan.changes import load_knowledge
from gpudoctor.scan.model_config import find_model_config, model_shape
from gpudoctor.scan.versions import Versions

from test_real_fixtures import ENV, REAL, _facts

PHI2_CONFIG = os.path.join(REAL, "hf-cache", "hub", "models--microsoft--phi-2", "snapshots", "fixture", "config.json")


def _versions(**installed):
    return Versions({k: Version(v) for k, v in installed.items()}, load_knowledge().newest_known)


def _scan(tmp_path, text, name="train.py", machine="h200", env=ENV, **versions):
    (tmp_path / name).write_text(text)
    facts = _facts(machine) if machine else None
    return scan_paths([str(tmp_path)], _versions(**(versions or {"transformers": "4.57.6", "peft": "0.17.0"})),
                      facts=facts, env=env, no_facts_reason="no machine in this test")


def _by_id(result):
    return {c.id: c for c in result.checks}


# -- the model's shape -------------------------------------------------------------------------


def test_seed_004_phi2_head_dim_80_on_an_rtx3090_with_flash_attn_2_3_6(tmp_path):
    result = _scan(tmp_path, "import torch\nfrom transformers import AutoModelForCausalLM\n"
                             "model = AutoModelForCausalLM.from_pretrained('microsoft/phi-2',\n"
                             "    attn_implementation='flash_attention_2')\n", machine="rtx3090+fa2.3.6")
    (finding,) = result.findings
    assert finding.id == "flash-attn-head-dim-unsupported" and finding.evidence["line"] == 4
    assert finding.evidence["head_dim"] == 80 and finding.evidence["kv_heads"] == 32
    assert "hidden_size / num_attention_heads" in finding.message and "backward for head dim > 64" in finding.message
    assert "gpudoctor.kernels.attention" in finding.fixes[0].summary  # the workaround seed 004 wrote by hand
    (edit,) = code_fix_plan(result.findings)
    assert "-    attn_implementation='flash_attention_2')\n+    attn_implementation='sdpa')\n" in edit.diff


def test_a_local_model_directory_and_a_name_bound_once(tmp_path):
    (tmp_path / "phi2").mkdir()
    shutil.copy(PHI2_CONFIG, tmp_path / "phi2" / "config.json")
    result = _scan(tmp_path, "from transformers import AutoModelForCausalLM\nPATH = './phi2'\n"
                             "m = AutoModelForCausalLM.from_pretrained(PATH, attn_implementation='flash_attention_2')\n",
                   machine="rtx3090+fa2.3.6", env={"HF_HOME": "/nonexistent"})
    (finding,) = result.findings
    assert finding.evidence["config_json"] == str(tmp_path / "phi2" / "config.json")
    assert "local directory" in finding.message


def test_a_model_named_by_a_variable_is_said_not_guessed(tmp_path):
    result = _scan(tmp_path, "import sys\nfrom transformers import AutoModelForCausalLM\n"
                             "m = AutoModelForCausalLM.from_pretrained(sys.argv[1], attn_implementation='flash_attention_2')\n",
                   machine="h200+fa2.7")
    check = _by_id(result)["flash-attn-head-dim-unsupported"]
    assert check.status is CheckStatus.SKIP and "computed at run time" in check.reason and "--require head_dim" in check.reason


def test_hub_cache_without_refs_takes_the_newest_snapshot_and_says_so(tmp_path):
    repo = tmp_path / "hub" / "models--org--m" / "snapshots"
    for rev, hidden in (("old", 1024), ("new", 2048)):
        (repo / rev).mkdir(parents=True)
        (repo / rev / "config.json").write_text(json.dumps({"num_attention_heads": 16, "hidden_size": hidden}))
    os.utime(repo / "old" / "config.json", (1, 1))
    os.utime(repo / "old", (1, 1))
    found = find_model_config("org/m", str(tmp_path), {"HF_HUB_CACHE": str(tmp_path / "hub")})
    assert found.shape.head_dim == 128 and "newest of 2 snapshots" in found.where


def test_model_shape_reads_head_dim_kv_heads_and_text_config():
    assert model_shape({"num_attention_heads": 8, "hidden_size": 2048, "head_dim": 256, "num_key_value_heads": 1})[0].head_dim == 256
    shape, _ = model_shape({"text_config": {"num_attention_heads": 32, "hidden_size": 4096, "num_key_value_heads": 8}})
    assert (shape.head_dim, shape.heads, shape.kv_heads) == (128, 32, 8)
    assert model_shape({"model_type": "resnet"}) == (None, "no attention head count in the config (model_type resnet)")
    assert model_shape({"n_head": 12, "n_embd": 768})[0].head_dim == 64


def test_without_a_machine_the_gpu_judgements_are_skipped_with_the_reason(tmp_path):
    result = _scan(tmp_path, "from transformers import TrainingArguments\nTrainingArguments(output_dir='o', bf16=True)\n",
                   machine=None)
    (check,) = result.checks
    assert check.status is CheckStatus.SKIP and check.reason == "train.py:2: no machine in this test"


def test_bf16_edit_is_refused_when_fp16_is_passed_too(tmp_path):
    result = _scan(tmp_path, "from transformers import TrainingArguments\n"
                             "TrainingArguments(output_dir='o', bf16=True, fp16=False)\n", machine="t4")
    (edit,) = code_fix_plan(result.findings)
    assert edit.action is None and edit.refused[0][1] == "the call already passes `fp16`; keep one of the two by hand"


def test_4bit_without_bitsandbytes_beside_transformers_is_a_finding(tmp_path):
    result = _scan(tmp_path, "from transformers import BitsAndBytesConfig\nq = BitsAndBytesConfig(load_in_4bit=True)\n",
                   machine="h200-no-bnb")
    (finding,) = result.findings
    assert finding.id == "bitsandbytes-cuda-setup" and "not installed beside transformers" in finding.message
    # the recorded H200's interpreter (a venv with pip), not whichever pip is first on PATH
    commands = [a.command for fix in finding.fixes for a in fix.actions if hasattr(a, "command")]
    assert commands[0] == "/opt/torch/.venv/bin/python3 -m pip install -U bitsandbytes", commands


# -- gradient-checkpointing-no-input-grads -------------------------------------------------------

GC = ("from peft import LoraConfig, get_peft_model{imports}\n"
      "from transformers import AutoModelForCausalLM, Trainer, TrainingArguments\n"
      "model = AutoModelForCausalLM.from_pretrained('org/m'{load})\n"
      "{before}model = get_peft_model(model, LoraConfig())\n"
      "{after}args = TrainingArguments(output_dir='o', gradient_checkpointing=True{kwargs})\n"
      "Trainer(model=model, args=args).train()\n")


def _gc(tmp_path, imports="", load="", before="", after="", kwargs="", **versions):
    text = GC.format(imports=imports, load=load, before=before, after=after, kwargs=kwargs)
    result = _scan(tmp_path, text, **(versions or {"transformers": "4.57.6", "peft": "0.17.0"}))
    return _by_id(result).get("gradient-checkpointing-no-input-grads"), result


def test_gc_each_mitigation_passes(tmp_path):
    cases = {
        "enable_input_require_grads": dict(after="model.enable_input_require_grads()\n"),
        "prepare_model_for_kbit_training": dict(imports=", prepare_model_for_kbit_training",
                                                before="model = prepare_model_for_kbit_training(model)\n"),
        "non-reentrant": dict(kwargs=", gradient_checkpointing_kwargs={'use_reentrant': False}"),
        "before get_peft_model": dict(before="model.gradient_checkpointing_enable()\n"),
    }
    for why, parts in cases.items():
        check, result = _gc(tmp_path, **parts)
        assert check.status is CheckStatus.PASS and not result.findings, (why, check.reason)


def test_gc_enabled_before_wrapping_a_quantized_model_still_fails(tmp_path):
    check, _ = _gc(tmp_path, load=", load_in_4bit=True", before="model.gradient_checkpointing_enable()\n")
    assert check.status is CheckStatus.FAIL and "quantized" in check.reason


def test_gc_trl_and_unsloth_are_not_judged(tmp_path):
    check, _ = _gc(tmp_path, imports="\nfrom trl import SFTTrainer", after="SFTTrainer(model=model)\n")
    assert check.status is CheckStatus.SKIP and "TRL" in check.reason
    check, _ = _gc(tmp_path, imports="\nimport unsloth")
    assert check.status is CheckStatus.SKIP and "Unsloth" in check.reason


def test_gc_edit_adds_non_reentrant_kwargs(tmp_path):
    _, result = _gc(tmp_path)
    (edit,) = code_fix_plan(result.findings)
    assert ("args = TrainingArguments(output_dir='o', gradient_checkpointing=True, "
            "gradient_checkpointing_kwargs={\"use_reentrant\": False})") in edit.action.new_text
    _, old = _gc(tmp_path, transformers="4.34.1", peft="0.6.0")  # no gradient_checkpointing_kwargs before 4.35
    assert "edit" not in old.findings[0].evidence


# -- fp16-params-with-grad-scaler ----------------------------------------------------------------

FP16 = ("import torch\nfrom transformers import AutoModelForCausalLM, TrainingArguments\n{imports}"
        "model = AutoModelForCausalLM.from_pretrained('org/m', torch_dtype=torch.float16{load})\n{wrap}"
        "TrainingArguments(output_dir='o', fp16=True)\n")


def _fp16(tmp_path, imports="", load="", wrap="", **versions):
    result = _scan(tmp_path, FP16.format(imports=imports, load=load, wrap=wrap),
                   **(versions or {"transformers": "4.57.6", "peft": "0.17.0"}))
    return _by_id(result)["fp16-params-with-grad-scaler"]


def test_fp16_lora_depends_on_the_peft_version(tmp_path):
    lora = dict(imports="from peft import get_peft_model, LoraConfig\n", wrap="model = get_peft_model(model, LoraConfig())\n")
    assert _fp16(tmp_path, **lora).status is CheckStatus.PASS
    assert _fp16(tmp_path, **lora, transformers="4.40.2", peft="0.11.1").status is CheckStatus.FAIL
    no_cast = dict(lora, wrap="model = get_peft_model(model, LoraConfig(), autocast_adapter_dtype=False)\n")
    assert _fp16(tmp_path, **no_cast).status is CheckStatus.FAIL


def test_fp16_quantized_is_not_judged(tmp_path):
    check = _fp16(tmp_path, load=", load_in_8bit=True")
    assert check.status is CheckStatus.SKIP and "quantized" in check.reason


# -- axolotl's own keys --------------------------------------------------------------------------


def test_axolotl_yaml_is_judged_by_axolotl_not_by_transformers(tmp_path):
    (tmp_path / "cfg.yml").write_text("base_model: org/m\nmicro_batch_size: 2\nevaluation_strategy: steps\n"
                                      "output_dir: ./out\nnoisy_embedding_alpha: 5\n")
    result = scan_paths([str(tmp_path)], _versions(transformers="4.57.6", axolotl="0.8.0"), env=ENV)
    found = {(f.id, f.evidence["key"], f.severity.value) for f in result.findings}
    assert found == {("training-config-key-changed", "evaluation_strategy", "warning"),
                     ("training-config-key-changed", "noisy_embedding_alpha", "warning")}
    assert all("still accepted, with a warning" in f.message and f.fixes for f in result.findings)
    (edit,) = code_fix_plan(result.findings)
    assert "+eval_strategy: steps\n" in edit.diff and "+neftune_noise_alpha: 5\n" in edit.diff


def test_removed_key_without_replacement_is_deleted_from_a_yaml(tmp_path):
    (tmp_path / "args.yaml").write_text("output_dir: o\nlearning_rate: 1.0e-4\nlogging_dir: ./logs\nbf16: true\n")
    result = scan_paths([str(tmp_path)], _versions(transformers="5.15.0"), env=ENV)
    (edit,) = code_fix_plan(result.findings)
    assert edit.action.new_text == "output_dir: o\nlearning_rate: 1.0e-4\nbf16: true\n"


# -- a package not installed (or not probed) is not judged at the newest version -----------------------


def test_diagnosis_is_not_judged_when_the_package_is_not_installed(tmp_path):
    lora = dict(imports="from peft import get_peft_model, LoraConfig\n", wrap="model = get_peft_model(model, LoraConfig())\n")
    check = _fp16(tmp_path, **lora, transformers="4.57.6")  # no peft installed
    assert check.status is CheckStatus.SKIP and "peft is not installed in the inspected environment" in check.reason
    check, result = _gc(tmp_path, peft="0.17.0")  # no transformers installed
    assert check.status is CheckStatus.SKIP and not result.findings
    assert "transformers is not installed in the inspected environment" in check.reason


def test_diagnosis_is_not_judged_when_the_package_probe_failed(tmp_path):
    from gpudoctor.facts import ProbeFailure
    from gpudoctor.scan import _versions_from

    class NoPackages:
        def get(self, name):
            raise ProbeFailure(name, OSError("metadata unreadable"))

    versions = _versions_from(NoPackages(), load_knowledge())
    (tmp_path / "train.py").write_text(FP16.format(imports="from peft import get_peft_model, LoraConfig\n", load="",
                                                   wrap="model = get_peft_model(model, LoraConfig())\n"))
    result = scan_paths([str(tmp_path)], versions, facts=None, env=ENV, no_facts_reason="no machine")
    check = _by_id(result)["fp16-params-with-grad-scaler"]
    assert check.status is CheckStatus.SKIP and "the package probe failed: " in check.reason
    assert "metadata unreadable" in check.reason


def test_gc_with_star_kwargs_is_not_judged_and_not_edited(tmp_path):
    check, result = _gc(tmp_path, before="extra = {'gradient_checkpointing_kwargs': {'use_reentrant': False}}\n",
                        kwargs=", **extra")
    assert check.status is CheckStatus.SKIP and "may be passed in **" in check.reason
    assert not result.findings and not code_fix_plan(result.findings)
    check, result = _gc(tmp_path, after="model.gradient_checkpointing_enable(**kw)\n")
    assert check.status is CheckStatus.SKIP and not result.findings


def test_flash_attention_2_without_flash_attn_says_transformers_will_refuse_it(tmp_path):
    # no rule of the catalogue is "flash-attn not installed": not judged, but said first, whatever
    # the model (its head_dim does not matter when the package is missing)
    for model in ("'microsoft/phi-2'", "sys.argv[1]"):
        result = _scan(tmp_path, "import sys\nfrom transformers import AutoModelForCausalLM\n"
                                 f"m = AutoModelForCausalLM.from_pretrained({model}, attn_implementation='flash_attention_2')\n")
        check = _by_id(result)["flash-attn-head-dim-unsupported"]
        assert check.status is CheckStatus.SKIP and not result.findings
        assert "flash-attn is not installed: transformers will refuse flash_attention_2" in check.reason, check.reason
        assert "install `kernels`" in check.reason


def test_flash_attention_2_without_flash_attn_but_with_kernels_is_not_called_a_failure(tmp_path):
    # huggingface/transformers#40178: with `kernels` installed, transformers loads the Hub FlashAttention instead
    result = _scan(tmp_path, "from transformers import AutoModelForCausalLM\n"
                             "m = AutoModelForCausalLM.from_pretrained('microsoft/phi-2', attn_implementation='flash_attention_2')\n",
                   machine="h200+kernels")
    check = _by_id(result)["flash-attn-head-dim-unsupported"]
    assert check.status is CheckStatus.SKIP and not result.findings
    assert "but kernels 0.12.0 is" in check.reason and "will refuse" not in check.reason, check.reason
