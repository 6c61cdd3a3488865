"""Every real log in fixtures/logs/<rule-id>/ is diagnosed as <rule-id> first; healthy ones
produce nothing. The folder name is the expected answer, so adding a fixture adds a test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpudoctor.logs import diagnose_paths
from gpudoctor.logs.signatures import load_signatures

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
LOGS = sorted(FIXTURES.glob("*/*.log"))


def test_fixture_tree_is_not_empty():
    assert len(LOGS) >= 50
    assert len(list((FIXTURES / "healthy").glob("*.log"))) >= 5


@pytest.mark.parametrize("log", LOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_first_finding_is_the_folder_rule(log: Path):
    findings = diagnose_paths([str(log)])
    if log.parent.name == "healthy":
        assert findings == [], [f.id for f in findings]
    else:
        assert findings, "nothing recognised"
        assert findings[0].id == log.parent.name, [f.id for f in findings]


@pytest.mark.parametrize("log", LOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_fixture_names_its_source(log: Path):
    source = log.with_suffix(".source")
    assert source.exists(), f"{source.name} missing: where did this log come from?"
    text = source.read_text().strip()
    assert text.startswith(("https://github.com/", "shared/seeds/")), text


def test_every_signature_rule_has_two_failing_fixtures():
    rules = {s.rule for s in load_signatures()}
    for rule in sorted(rules):
        count = len(list((FIXTURES / rule).glob("*.log")))
        assert count >= 2, f"{rule}: {count} fixture(s)"


def test_values_from_the_log_reach_the_message():
    by_name = {
        "nvcc-host-compiler-unsupported/pytorch-136556.log": "gcc up to 12",
        "driver-too-old/fooocus-1313.log": "CUDA up to 11.4 (found version 11040)",
        "torch-arch-unsupported/wyoming-xtts-1.log": "sm_120; it supports sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90",
        "transformers-removed-kwarg/chinese-error-corrector-31.log": "renamed to eval_strategy",
        "trl-sfttrainer-api-change/unsloth-10785.log": "SFTConfig(max_length=...)",
        "cuda-oom/pytorch-16417.log": "allocating 22.00 MiB (GPU 0: 23.65 GiB in total, 11.06 MiB free)",
        "nccl-failure/transformer-distributed-1.log": "unhandled system error, ncclSystemError) in NCCL 2.18.6",
        "unsloth-layers-not-patched/seed-000-count.log": "only 0 QKV, 0 O and 0 MLP layers",
        "unsloth-layers-not-patched/seed-000.log": "lora_dropout = 0.1",
        "flash-attn-head-dim-unsupported/llaga-16.log": "head dimension > 64",
        "cuda-version-mismatch/xinference-1286.log": "libcudart.so.12 (CUDA 12 runtime)",
        "flash-attn-abi-mismatch/fa-1832.log": "_ZN3c105ErrorC2ENS_14SourceLocation",
        # held-out real logs (2026-11-23)
        "nccl-failure/diffusion-pipe-ui-10.log": "(unhandled cuda error, ncclUnhandledCudaError); the CUDA call inside NCCL failed (999 'unknown error')",
        "nccl-failure/nccl-1410.log": "in NCCL 2.20.5; the CUDA call inside NCCL failed (1 'invalid argument')",
        "flash-attn-head-dim-unsupported/fa-1290.log": "head sizes 64, 128, and 256",
        "flash-attn-head-dim-unsupported/fa-1645.log": "(Composable Kernel) supports head dimensions up to 256",
        "python-headers-missing/triton-windows-96.log": "found no pyconfig.h",
        "transformers-removed-kwarg/trl-6168.log": "Trainer does not accept `tokenizer`",
        "cuda-home-missing/chattts-595.log": "flash_attn's build found no nvcc",
        "nvcc-host-compiler-unsupported/tf-faster-rcnn-352.log": "gcc up to 6",
        "bf16-unsupported/openbuddy-45.log": "compute capability >= 8.0",
        "xformers-abi-mismatch/shivamshrirao-diffusers-161.log": "needs _ZNK3c104impl13OperatorEntry20reportSignatureErrorENS0_12CppSignatureE",
    }
    for name, expected in by_name.items():
        finding = diagnose_paths([str(FIXTURES / name)])[0]
        assert expected in finding.message, (name, finding.message)


def test_evidence_points_at_the_first_matching_line():
    log = FIXTURES / "libcuda-unversioned-missing" / "pytorch-103417.log"
    finding = diagnose_paths([str(log)])[0]
    assert finding.evidence["line_number"] == 6
    assert finding.evidence["line"].startswith("/usr/bin/ld: cannot find -lcuda")
    assert finding.evidence["log"] == str(log)


def test_several_files_rank_across_all_of_them():
    logs = [FIXTURES / "libcuda-unversioned-missing" / "seg-zero-63.log", FIXTURES / "healthy" / "nccl-1412-init.log"]
    ids = [f.id for f in diagnose_paths([str(p) for p in logs])]
    assert ids == ["libcuda-unversioned-missing", "triton-jit-failed"]
