"""On a GPU (the device machine: `pytest -m gpu tests/train`): the real presets pass end to end,
the default pass (quick matrix) and the full backend matrix."""

import pytest

torch = pytest.importorskip("torch", reason="the training pass needs the 'train' extra")

from gpudoctor.train import runner  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _needs_gpu():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")


def _passed(train, preset):
    errors = [f"{f.id}: {f.message}" for f in train.findings if f.severity.value == "error"]
    assert train.data["status"] == "passed", errors
    assert train.data["mode"] == "gpu" and train.data["preset"] == preset
    assert train.data["training"]["loss_fell"]
    for capability in ("nf4", "attention"):
        rows = {r["backend"]: r for r in train.data["matrix"][capability]["rows"]}
        assert rows["gpudoctor-triton"]["status"] == "works", rows["gpudoctor-triton"]
    checks = {c.id: c.status.value for c in train.checks}
    assert checks["cuda-oom"] == "pass"
    assert checks["kernel-numerics-mismatch"] == "pass" and checks["triton-jit-failed"] == "pass", checks


def test_default_pass_is_quick_and_names_what_it_left_out():
    train = runner.run_training_pass(preset="llama", timeout_s=300, full_matrix=False)
    _passed(train, "llama")
    for capability, left_out in (("nf4", "bitsandbytes"), ("attention", "sdpa-cudnn")):
        block = train.data["matrix"][capability]
        assert left_out in block["not_run"] and "--full-matrix" in block["not_run_reason"], block
        assert left_out not in {r["backend"] for r in block["rows"]}
    jit = train.data["triton_jit"]
    assert jit["nf4_first_launch_ms"] > 0 and "cold-cache compile" in jit["nf4_compile"], jit


def test_full_matrix():
    train = runner.run_training_pass(preset="phi2", timeout_s=300, full_matrix=True)
    _passed(train, "phi2")
    nf4_rows = {r["backend"]: r for r in train.data["matrix"]["nf4"]["rows"]}
    if nf4_rows["bitsandbytes"]["status"] != "unavailable":
        assert nf4_rows["bitsandbytes"]["status"] == "works", nf4_rows["bitsandbytes"]
    # The cold/warm compile still lands in the triton-jit detail.
    times = train.data["triton_jit"]["nf4_compile"]
    assert times["cold_ms"] > times["warm_ms"] > 0, times
    assert [r["backend"] for r in train.data["matrix"]["nf4"]["rows"]] == ["gpudoctor-triton", "bitsandbytes",
                                                                           "torch-reference"]
    assert "not_run" not in train.data["matrix"]["nf4"]
