"""Kernel tests run on the GPU when there is one, else under Triton's interpreter.

TRITON_INTERPRET must be set before triton is imported at all (triton reads it when its own jit
helpers such as tl.interleave are defined), so torch decides and triton comes after.
"""

import os

import pytest

# On CI the README's test command installs torch and triton: a missing or broken one must fail
# the run loudly, not skip the kernel tests quietly.
if os.environ.get("CI"):
    import torch
else:
    torch = pytest.importorskip("torch", reason="kernel tests need the 'train' extra (torch)")

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

if os.environ.get("CI"):
    import triton  # noqa: F401
else:
    pytest.importorskip("triton", reason="kernel tests need the 'train' extra (triton)")

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture
def device() -> str:
    return DEVICE


# A GPU test that hangs (a kernel that never finishes, a dead driver) must not hang the suite:
# the thread method ends the process even when the main thread is blocked inside CUDA, and under
# pytest-xdist (`pytest -m gpu -n 8`) the worker is replaced and the test reported as crashed.
GPU_TEST_TIMEOUT_S = 240


def pytest_collection_modifyitems(config, items):
    here = os.path.dirname(__file__)
    for item in items:
        if item.get_closest_marker("gpu") and str(item.path).startswith(here + os.sep):
            item.add_marker(pytest.mark.timeout(GPU_TEST_TIMEOUT_S, method="thread"))


@pytest.fixture(autouse=True)
def _plans_forgotten():
    """Each test starts without remembered attention plans (attention_plan.py): a plan made by an
    earlier test would replay launches past the functions a test watches or replaces."""
    from gpudoctor.kernels import attention_plan

    attention_plan.forget()
