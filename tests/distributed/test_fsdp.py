"""The FSDP2 QLoRA pass (issue 16 item 5): a real 2-rank run over gloo on the CPU, and the judge
on recorded results (fixtures/distributed/fsdp-*.json: a real CPU run and, where present, the
2xH200 run), each failure case changing only the fact at stake."""

from __future__ import annotations

import copy
import glob
import json
import os

import pytest

from ranks import ROOT, launch

from gpudoctor.distributed.fsdp_judge import CHECK_ID, fsdp_lines, judge_fsdp
from gpudoctor.model import CheckStatus

RECORDED = sorted(glob.glob(os.path.join(ROOT, "fixtures", "distributed", "fsdp-*.json")))


def _recorded(path: str) -> dict:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)["train"]


def _check(checks):
    (check,) = [c for c in checks if c.id == CHECK_ID]
    return check


def test_two_ranks_train_like_one_device_and_hold_half_the_weights():
    # local ranks 0 and 1: on a GPU machine NCCL refuses two ranks on one GPU
    runs = launch(2, ["--json", "--train", "--rank-timeout", "60", "--only", "no-nvidia-driver"],
                  env_of={1: {"LOCAL_RANK": "1"}}, timeout_s=240)
    assert runs[0].returncode == 0, runs[0].stderr[-2000:]
    report = runs[0].json()
    (check,) = [c for c in report["checks"] if c["id"] == CHECK_ID]
    assert check["status"] == "pass", check
    ranks = report["train"]["ranks"]
    assert sorted(ranks) == ["0", "1"]
    for rank in ranks.values():
        fsdp = rank["fsdp"]
        assert fsdp["rows_per_rank"] * 2 == rank["global_batch"]
        # every parameter is sharded over the two ranks (the NF4 bytes included)
        assert fsdp["parameter_bytes_local"] * 2 >= fsdp["parameter_bytes_full"] > fsdp["parameter_bytes_local"]
        assert fsdp["lora_without_grad"] == [] and fsdp["base_changed"] == []
    single = ranks["0"]["single_device"]["losses"]
    # the steps before the pattern is learned, where the loss is still of the first one's order
    assert ranks["0"]["fsdp"]["losses"][:2] == pytest.approx(single[:2], rel=ranks["0"]["loss_relative_tolerance"])
    assert single[-1] < single[0] * 0.95


@pytest.mark.parametrize("path", RECORDED, ids=os.path.basename)
def test_recorded_pass_is_judged_a_pass(path):
    results = _recorded(path)
    findings, checks, summary = judge_fsdp(results)
    assert findings == []
    assert _check(checks).status == CheckStatus.PASS
    assert summary["max_absolute_loss_difference"] is not None
    text = "\n".join(fsdp_lines(results, summary))
    assert "loss FSDP2" in text and "loss single GPU" in text


def test_recorded_gpu_pass_says_peak_memory_in_binary_units():
    results = _recorded(os.path.join(ROOT, "fixtures", "distributed", "fsdp-h200x2-compile.json"))
    _, checks, summary = judge_fsdp(results)
    assert "peak memory per rank 463 MiB against 568 MiB on one GPU (81%)" in _check(checks).reason
    assert "  peak memory: rank 0 460 MiB, rank 1 463 MiB; single GPU 568 MiB" in fsdp_lines(results, summary)


@pytest.mark.parametrize("path", RECORDED, ids=os.path.basename)
def test_a_rank_that_hangs_is_a_timeout_not_a_pass(path):
    results = copy.deepcopy(_recorded(path))
    results["ranks"]["1"] = {"rank": 1, "timed_out": True, "returncode": -9,
                             "error": "the train child did not finish within 300 s (a collective hung)"}
    findings, checks, _ = judge_fsdp(results)
    assert [f.id for f in findings] == ["nccl-timeout"]
    assert findings[0].evidence["ranks"] == [1]
    assert _check(checks).status == CheckStatus.FAIL


@pytest.mark.parametrize("path", RECORDED, ids=os.path.basename)
def test_a_rank_missing_from_the_phase_is_a_timeout(path):
    results = copy.deepcopy(_recorded(path))
    del results["ranks"]["1"]
    results["missing"] = [1]
    findings, checks, _ = judge_fsdp(results)
    assert [f.id for f in findings] == ["nccl-timeout"]
    assert _check(checks).status == CheckStatus.FAIL


def test_out_of_memory_on_one_rank_is_cuda_oom():
    from gpudoctor.train.errors import classify

    results = copy.deepcopy(_recorded(RECORDED[0]))
    try:  # torch's own wording (c10/cuda/CUDACachingAllocator.cpp), raised as a plain RuntimeError here
        raise RuntimeError("CUDA out of memory. Tried to allocate 20.00 MiB (GPU 1; 79.11 GiB total capacity)")
    except RuntimeError as exc:
        failure = classify(exc)
    results["ranks"]["1"] = {"rank": 1, "failure": failure, "error": f"RuntimeError: {failure['message']}",
                             "returncode": 1, "timed_out": False}
    findings, checks, _ = judge_fsdp(results)
    assert [f.id for f in findings] == ["cuda-oom"]
    assert "Rank 1" in findings[0].message


@pytest.mark.parametrize("message, kind", [
    # torch's ProcessGroupNCCL watchdog
    ("[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1, "
     "NumelOut=1, Timeout(ms)=600000) ran for 600088 milliseconds before timing out.", "nccl-timeout"),
    # the same timeout seen by a blocking wait (TORCH_NCCL_BLOCKING_WAIT=1, WorkNCCL::checkAndThrowException):
    # the log signature knows it, the classifier's own string test did not
    ("[Rank 0] Caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=_ALLGATHER_BASE, NumelIn=4096, "
     "NumelOut=8192, Timeout(ms)=60000) ran for 60004 milliseconds before timing out.", "nccl-timeout"),
    # gloo's tcp transport (gloo/transport/tcp/unbound_buffer.cc)
    ("[../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 1800000ms for recv operation "
     "to complete", "nccl-timeout"),
    ("NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error "
     "(run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5", "nccl"),
])
def test_collective_failures_are_classified(message, kind):
    from gpudoctor.train.errors import classify

    try:
        raise RuntimeError(message)
    except RuntimeError as exc:
        assert classify(exc)["kind"] == kind


@pytest.mark.parametrize("path", RECORDED, ids=os.path.basename)
def test_a_loss_curve_off_the_single_device_one_is_diverged(path):
    results = copy.deepcopy(_recorded(path))
    for rank in results["ranks"].values():
        rank["fsdp"]["losses"] = [x * 1.10 for x in rank["fsdp"]["losses"]]  # 10% off at every step
    findings, checks, _ = judge_fsdp(results)
    assert [f.id for f in findings] == ["training-pass-diverged"]
    assert "left the single-GPU curve at step" in findings[0].message


@pytest.mark.parametrize("path", RECORDED, ids=os.path.basename)
def test_a_frozen_shard_that_changed_is_diverged(path):
    results = copy.deepcopy(_recorded(path))
    results["ranks"]["1"]["fsdp"]["base_changed"] = ["layers.0.mlp.up_proj.weight"]
    findings, _, _ = judge_fsdp(results)
    assert [f.id for f in findings] == ["training-pass-diverged"]
    assert "frozen NF4 shards that changed on rank 1" in findings[0].message


def test_memory_not_lowered_on_a_gpu_is_never_a_pass():
    gpu = [p for p in RECORDED if _recorded(p)["ranks"]["0"]["mode"] == "gpu"]
    if not gpu:
        pytest.skip("no recorded GPU run in fixtures/distributed")
    results = copy.deepcopy(_recorded(gpu[0]))
    single = results["ranks"]["0"]["single_device"]["peak_memory_bytes"]
    results["ranks"]["1"]["fsdp"]["peak_memory_bytes"] = single + 1
    findings, checks, _ = judge_fsdp(results)
    assert findings == []
    assert _check(checks).status == CheckStatus.ERROR
    assert "did not lower memory" in _check(checks).reason
