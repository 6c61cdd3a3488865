"""On a GPU (the device machine: `pytest -m gpu tests/train`): the real presets pass end to end."""

import pytest

torch = pytest.importorskip("torch", reason="the training pass needs the 'train' extra")

from gpudoctor.train import runner  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _needs_gpu():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")


@pytest.mark.parametrize("preset", ["phi2", "llama"])
def test_preset_passes(preset):
    train = runner.run_training_pass(preset=preset, timeout_s=300)
    errors = [f"{f.id}: {f.message}" for f in train.findings if f.severity.value == "error"]
    assert train.data["status"] == "passed", errors
    assert train.data["mode"] == "gpu" and train.data["preset"] == preset
    assert train.data["training"]["loss_fell"]
    for capability in ("nf4", "attention"):
        rows = {r["backend"]: r for r in train.data["matrix"][capability]["rows"]}
        assert rows["gpudoctor-triton"]["status"] == "works", rows["gpudoctor-triton"]
    nf4_rows = {r["backend"]: r for r in train.data["matrix"]["nf4"]["rows"]}
    if nf4_rows["bitsandbytes"]["status"] != "unavailable":
        assert nf4_rows["bitsandbytes"]["status"] == "works", nf4_rows["bitsandbytes"]
    assert {c.id: c.status.value for c in train.checks}["cuda-oom"] == "pass"
    # The cold/warm compile (measured in a side process) still lands in the triton-jit detail.
    times = train.data["triton_jit"]["nf4_compile"]
    assert times["cold_ms"] > times["warm_ms"] > 0, times
    assert [r["backend"] for r in train.data["matrix"]["nf4"]["rows"]] == ["gpudoctor-triton", "bitsandbytes",
                                                                           "torch-reference"]
