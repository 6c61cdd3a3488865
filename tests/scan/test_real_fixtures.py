"""Table-driven: every real file of fixtures/scan/real (sources in its README) scanned against
pinned package versions and a recorded machine (a snapshot of fixtures/snapshots, patched as the
rule cases of fixtures/rules patch it, each patch saying why), with the findings it must give, the
judgements it must make, and none else. A healthy file must give no finding."""

from __future__ import annotations

import copy
import os
import sys

import pytest
from packaging.version import Version

from gpudoctor.facts import Facts
from gpudoctor.host.snapshot import SnapshotHost
from gpudoctor.model import CheckStatus
from gpudoctor.scan import scan_paths
from gpudoctor.scan.changes import load_knowledge
from gpudoctor.scan.versions import Versions

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REAL = os.path.join(REPO, "fixtures", "scan", "real")
ENV = {"HF_HUB_CACHE": os.path.join(REAL, "hf-cache", "hub"), "HOME": "/nonexistent"}
sys.path.insert(0, os.path.join(REPO, "tests", "doctor"))
from rule_cases import FIXTURES, _snapshot, apply_patch  # noqa: E402

# Machines: a recorded snapshot and the patch that stands in for hardware we have no recording of
# (GPU name and compute capability are NVIDIA's published values, as in fixtures/rules).
T4 = {"nvml": {"devices": [{"index": 0, "name": "Tesla T4", "compute_capability": [7, 5], "memory_total": 16106127360}]}}
RTX3090 = {"nvml": {"devices": [{"index": 0, "name": "NVIDIA GeForce RTX 3090", "compute_capability": [8, 6],
                                 "memory_total": 25769803776}]}}
FA = lambda version: {"distributions": [{"name": "flash-attn", "version": version, "requires": []}]}  # noqa: E731
MACHINES = {
    "h200": ("snapshots/h200-baseline", {}),
    "h200+fa2.7": ("snapshots/h200-baseline", FA("2.7.4.post1")),
    "t4": ("snapshots/h200-baseline", T4),
    "t4+fa2.7": ("snapshots/h200-baseline", {**T4, **FA("2.7.4.post1")}),
    "rtx3090+fa2.3.6": ("snapshots/h200-baseline", {**RTX3090, **FA("2.3.6")}),
    "h200-no-bnb": ("snapshots/h200-baseline", {"remove_distributions": ["bitsandbytes"]}),
    # the `kernels` package (0.12.0, a real release) beside the recorded transformers: its Hub FlashAttention
    "h200+kernels": ("snapshots/h200-baseline", {"distributions": [{"name": "kernels", "version": "0.12.0", "requires": []}]}),
    "h200+bnb": ("snapshots/h200-with-bitsandbytes", {}),
    "h200+bnb-cuda125": ("snapshots/h200-with-bitsandbytes", {"env": {"BNB_CUDA_VERSION": "125"}}),
}


def _facts(machine: str) -> Facts:
    snapshot, patch = MACHINES[machine]
    directory = os.path.join(FIXTURES, snapshot)
    data = copy.deepcopy(_snapshot(directory))
    apply_patch(data, patch)
    return Facts(SnapshotHost(directory, data))


def _versions(**installed) -> Versions:
    return Versions({k: Version(v) for k, v in installed.items()}, load_knowledge().newest_known)


# (case, versions, machine, findings: {(rule, line)}, judgements made: {(rule, status)})
V4 = dict(transformers="4.57.6", trl="0.12.0", peft="0.17.0", axolotl="0.8.0")
CASES = [
    ("llamafactory-otfq", V4, "h200+bnb", set(),
     {("bf16-unsupported", "pass"), ("bitsandbytes-cuda-setup", "pass")}),
    ("llamafactory-otfq", {**V4, "transformers": "5.0.0"}, "t4", {("transformers-removed-kwarg", 35), ("bf16-unsupported", 36)},
     {("bf16-unsupported", "fail"), ("bitsandbytes-cuda-setup", "pass"), ("transformers-removed-kwarg", "fail")}),
    ("llamafactory-otfq", {**V4, "transformers": "5.15.0"}, "h200+bnb-cuda125",
     {("transformers-removed-kwarg", 35), ("bitsandbytes-cuda-setup", 3)},
     {("bf16-unsupported", "pass"), ("bitsandbytes-cuda-setup", "fail"), ("transformers-removed-kwarg", "fail")}),
    ("axolotl-openllama-qlora", V4, "t4", {("training-config-key-changed", 17), ("bf16-unsupported", 39)},
     {("training-config-key-changed", "fail"), ("bf16-unsupported", "fail"), ("bitsandbytes-cuda-setup", "pass")}),
    ("axolotl-openllama-qlora", {**V4, "axolotl": "0.7.0"}, "h200", set(),
     {("bf16-unsupported", "pass"), ("bitsandbytes-cuda-setup", "pass")}),
    ("willmiller-fp16", V4, "h200", {("transformers-removed-kwarg", 22), ("fp16-params-with-grad-scaler", 11)},
     {("transformers-removed-kwarg", "fail"), ("fp16-params-with-grad-scaler", "fail")}),
    ("willmiller-fp16", {**V4, "transformers": "5.15.0"}, "h200",
     {("transformers-removed-kwarg", 22), ("transformers-removed-kwarg", 24), ("fp16-params-with-grad-scaler", 11)},
     {("transformers-removed-kwarg", "fail"), ("fp16-params-with-grad-scaler", "fail")}),
    ("willmiller-fp16", {**V4, "transformers": "4.40.2"}, "h200", {("fp16-params-with-grad-scaler", 11)},
     {("fp16-params-with-grad-scaler", "fail")}),
    ("regrant-bf16", V4, "t4", {("transformers-removed-kwarg", 22), ("bf16-unsupported", 11)},
     {("transformers-removed-kwarg", "fail"), ("bf16-unsupported", "fail")}),
    ("regrant-bf16", V4, "h200", {("transformers-removed-kwarg", 22)},
     {("transformers-removed-kwarg", "fail"), ("bf16-unsupported", "pass")}),
    ("coral-lora", V4, "h200", {("transformers-removed-kwarg", 48)}, {("transformers-removed-kwarg", "fail")}),
    ("dreamvla-gpt2-fa2", V4, "t4+fa2.7", {("flash-attn-head-dim-unsupported", 5)},
     {("flash-attn-head-dim-unsupported", "fail")}),
    ("dreamvla-gpt2-fa2", V4, "rtx3090+fa2.3.6", set(), {("flash-attn-head-dim-unsupported", "pass")}),
    ("dreamvla-gpt2-fa2", V4, "h200+fa2.7", set(), {("flash-attn-head-dim-unsupported", "pass")}),
    ("dreamvla-gpt2-fa2", V4, "h200", set(), {("flash-attn-head-dim-unsupported", "skip")}),  # flash-attn absent
    ("trl-sft-healthy", V4, "t4+fa2.7", set(), set()),
    ("trl-sft-healthy", {"transformers": "5.15.0", "trl": "0.20.0"}, "h200", set(), set()),
    ("transformers-42489", V4, "h200", {("gradient-checkpointing-no-input-grads", 12)},
     {("gradient-checkpointing-no-input-grads", "fail")}),
    ("transformers-42489", {**V4, "transformers": "5.0.0.dev0"}, "h200", {("gradient-checkpointing-no-input-grads", 12)},
     {("gradient-checkpointing-no-input-grads", "fail")}),
    ("transformers-42489", {**V4, "transformers": "5.0.0"}, "h200", set(),
     {("gradient-checkpointing-no-input-grads", "pass")}),
]


@pytest.mark.parametrize("case,versions,machine,findings,judged", CASES,
                         ids=[f"{c[0]}@{c[1].get('transformers')}-{c[2]}" for c in CASES])
def test_real_file(case, versions, machine, findings, judged):
    result = scan_paths([os.path.join(REAL, case)], _versions(**versions), facts=_facts(machine), env=ENV)
    assert {(f.id, f.evidence["line"]) for f in result.findings} == findings, [f.message for f in result.findings]
    assert {(c.id, c.status.value) for c in result.checks} == judged, [c.reason for c in result.checks]
    assert not result.not_read
    for finding in result.findings:
        assert finding.message.startswith(os.path.basename(finding.evidence["file"]) + ":"), finding.message
        assert finding.fixes, f"{finding.id} has no fix"


def test_every_real_file_is_a_case_and_named_in_the_readme():
    readme = open(os.path.join(REAL, "README.md")).read()
    used = {c[0] for c in CASES}
    cases = {d for d in os.listdir(REAL) if os.path.isdir(os.path.join(REAL, d)) and d != "hf-cache"}
    assert cases == used
    assert all(f"`{case}`" in readme for case in cases)


def test_model_shape_comes_from_the_cached_config_json():
    result = scan_paths([os.path.join(REAL, "dreamvla-gpt2-fa2")], _versions(**V4), facts=_facts("t4+fa2.7"), env=ENV)
    (finding,) = result.findings
    assert finding.evidence["head_dim"] == 64 and finding.evidence["heads"] == 12
    assert finding.evidence["config_json"].endswith("models--gpt2/snapshots/fixture/config.json")
    assert "flash-attn 2 does not run on this GPU at all" in finding.message
    assert finding.evidence["edit"] == {"op": "set_kwarg", "file": finding.evidence["file"], "line": 5,
                                        "old": "attn_implementation", "new": "'sdpa'"}


def test_without_the_config_json_the_head_dim_is_not_judged_and_says_where_it_looked():
    result = scan_paths([os.path.join(REAL, "dreamvla-gpt2-fa2")], _versions(**V4), facts=_facts("t4+fa2.7"),
                        env={"HF_HOME": "/nonexistent/hf"})
    (check,) = result.checks
    assert result.findings == () and check.status is CheckStatus.SKIP
    assert "gpt2 is not in the local Hugging Face cache" in check.reason and "/nonexistent/hf/hub" in check.reason


def test_without_gpu_facts_nothing_is_passed():
    result = scan_paths([os.path.join(REAL, "llamafactory-otfq")], _versions(**V4), facts=None, env=ENV,
                        no_facts_reason="no machine given")
    assert {c.status for c in result.checks} == {CheckStatus.SKIP}
    assert all("no machine given" in c.reason for c in result.checks)
