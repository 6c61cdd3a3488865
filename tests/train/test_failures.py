"""Every failure class the CPU can provoke, provoked for real and diagnosed."""

import argparse
import sys

import pytest

if __import__("os").environ.get("CI"):  # on CI a missing extra must fail, not skip
    import torch
else:
    torch = pytest.importorskip("torch", reason="the training pass needs the 'train' extra")
    pytest.importorskip("triton", reason="the training pass needs the 'train' extra")

from gpudoctor.train import jit, loop, matrix_nf4  # noqa: E402
from gpudoctor.train.child import _mismatches, _peft_stage  # noqa: E402
from gpudoctor.train.diagnosis import diagnose_outcome  # noqa: E402
from gpudoctor.train.presets import PRESETS  # noqa: E402
from gpudoctor.train.runner import ChildOutcome  # noqa: E402
from gpudoctor.train.stages import StageRunner  # noqa: E402

TINY = PRESETS["tiny"]


def _diagnose(stages: StageRunner, machine=None):
    result = {"schema": 1, "mode": "interpreter", "preset": "tiny", "stages": stages.stages}
    return diagnose_outcome(ChildOutcome(command=["test"], returncode=1, result=result), timeout_s=60, machine=machine)


def test_poisoned_nf4_kernel_is_a_numerics_mismatch(monkeypatch, device):
    from gpudoctor.kernels import nf4 as nf4_kernels

    real = nf4_kernels.dequantize_nf4

    def poisoned(*args, **kwargs):
        out = real(*args, **kwargs)  # the real kernel runs; one element of its result is wrong
        out.view(-1)[7] += 0.5
        return out

    monkeypatch.setattr(nf4_kernels, "dequantize_nf4", poisoned)
    stages = StageRunner()
    stages.run("nf4-backends", "NF4 dequant backends",
               lambda: {"rows": [r.to_json() for r in matrix_nf4.probe(128, 64, torch.float16, device)], "fastest": None},
               problems=_mismatches)
    assert stages.stages[0]["status"] == "fail"
    train = _diagnose(stages)
    mismatch = [f for f in train.findings if f.id == "kernel-numerics-mismatch"]
    assert len(mismatch) == 1 and mismatch[0].evidence["backend"] == "gpudoctor-triton"
    assert "torch-reference" in mismatch[0].fixes[0].summary  # names a backend that agreed
    assert {c.id: c.status.value for c in train.checks}["kernel-numerics-mismatch"] == "fail"


def test_exploding_learning_rate_is_training_pass_diverged(device):
    # AdamW refuses lr=nan outright; lr=1e4 is accepted and blows the fp16 activations up to inf.
    stages = StageRunner()
    stages.run("training", "QLoRA training",
               lambda: loop.train(loop.build_model(TINY, device), TINY, device, steps=3, lr=1e4).to_json(),
               problems=lambda d: d["problems"])
    assert stages.stages[0]["status"] == "fail"
    train = _diagnose(stages)
    diverged = [f for f in train.findings if f.id == "training-pass-diverged"]
    assert diverged and "non-finite" in diverged[0].message
    assert diverged[0].fixes


def test_cc_pointing_at_a_missing_compiler_is_named_as_the_cause(monkeypatch, device):
    monkeypatch.setenv("CC", "/nonexistent/bin/cc")
    stages = StageRunner()
    stages.run("triton-jit", "Triton JIT", lambda: jit.check(device, torch.float16, interpreted=device == "cpu"))
    assert stages.stages[0]["status"] == "error"
    assert stages.stages[0]["failure"]["cause"] == "c-compiler-missing"
    from gpudoctor.fix.actions import fix_env
    from gpudoctor.remedies import Machine

    # A machine with a working gcc: the remedy points CC at it (a user fix that leads somewhere).
    train = _diagnose(stages, machine=Machine(c_compilers=("/usr/bin/gcc",), package_manager="apt"))
    jit_failed = next(f for f in train.findings if f.id == "triton-jit-failed")
    assert "c-compiler-missing" in jit_failed.message
    assert any(fix.kind == "user" and fix_env(fix) == {"CC": "/usr/bin/gcc"} for fix in jit_failed.fixes)
    assert any(f.id == "c-compiler-missing" for f in train.findings)


def test_out_of_memory_maps_to_cuda_oom():
    # No GPU to exhaust here: the real exception class, raised and classified as the child does.
    def allocate():
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")

    stages = StageRunner()
    stages.run("training", "QLoRA training", allocate)
    train = _diagnose(stages)
    assert [f.id for f in train.findings] == ["cuda-oom"]


def test_peak_gpu_memory_is_said_in_binary_units():
    result = {"schema": 1, "mode": "gpu", "preset": "phi2", "stages": [], "peak_memory_bytes": 3 << 29,
              "device": {"memory_bytes": 80 << 30}}
    train = diagnose_outcome(ChildOutcome(command=["test"], returncode=0, result=result), timeout_s=60)
    (oom,) = [c for c in train.checks if c.id == "cuda-oom"]
    assert oom.reason == "peak GPU memory 1.5 GiB of 80 GiB"


def test_unsloth_would_not_patch_a_config_with_dropout():
    args = argparse.Namespace(lora_dropout=0.1, lora_bias="none")
    stages = StageRunner()
    stages.run("peft", "PEFT", lambda: _peft_stage(args, TINY, "cpu"), problems=lambda d: d.get("problems", []))
    detail = stages.stages[0]["detail"]
    assert detail["unsloth"]["qkv_layers"] == 0 and "dropout = 0.1" in detail["unsloth"]["warnings"][0]
    train = _diagnose(stages)
    assert any(f.id == "unsloth-layers-not-patched" for f in train.findings)
    good = _peft_stage(argparse.Namespace(lora_dropout=0.0, lora_bias="none"), TINY, "cpu")
    assert good["unsloth"]["fast_patching"] and good["unsloth"]["qkv_layers"] == TINY.layers


def test_compiled_step_has_no_graph_breaks(device):
    from gpudoctor.train import compiled
    from gpudoctor.train.data import cycle_batches

    model = loop.build_model(TINY, device)
    tokens = cycle_batches(TINY.vocab, TINY.batch, TINY.seq, 1, device)[0]
    explained = compiled.explain(model, tokens)
    assert explained["graph_breaks"] == 0, explained["break_reasons"]
    assert explained["graphs"] == 1


def test_a_backend_failure_read_by_the_log_matcher_names_the_given_machines_interpreter():
    """The log signatures the pass runs over a backend's traceback get the Machine too (review of
    ce529ab: they said `python -m pip` while the same rule's remedy named the interpreter)."""
    import glob

    from gpudoctor.remedies import Machine, fixes_for
    from gpudoctor.train.diagnosis import diagnose_outcome
    from gpudoctor.train.runner import ChildOutcome

    log = open(sorted(glob.glob("fixtures/logs/flash-attn-abi-mismatch/*.log"))[0], encoding="utf-8").read()
    row = {"capability": "attention", "backend": "flash-attn", "status": "fails", "stage": "attention-backends",
           "reason": "ImportError", "traceback_tail": log[-3000:]}
    result = {"schema": 1, "mode": "gpu", "preset": "tiny",
              "stages": [{"id": "attention-backends", "status": "pass", "detail": {"rows": [row]}}]}
    machine = Machine(interpreter={"python": "/judged/bin/python", "python_has_pip": True})
    found = diagnose_outcome(ChildOutcome(command=["t"], returncode=0, result=result), timeout_s=60, machine=machine)
    (finding,) = [f for f in found.findings if f.id == "flash-attn-abi-mismatch"]
    assert finding.fixes == fixes_for("flash-attn-abi-mismatch", {}, machine)
    assert "/judged/bin/python -m pip install" in finding.fixes[0].actions[0].command


def test_the_pass_names_its_own_interpreter_not_the_inspected_one():
    from gpudoctor.remedies import Machine

    inspected = Machine(interpreter={"python": "/other/env/bin/python", "python_has_pip": False}, static_fixes={"x": ()})
    ours = inspected.for_interpreter(sys.executable)
    assert (dict(ours.interpreter), dict(ours.static_fixes)) == ({"python": sys.executable}, {})
    assert inspected.for_interpreter("/other/env/bin/python") is inspected
