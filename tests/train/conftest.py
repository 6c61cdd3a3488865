"""Training-pass tests: the GPU when there is one, else Triton's interpreter (tiny preset).

TRITON_INTERPRET must be set before gpudoctor.kernels defines its @triton.jit kernels, so it is
set here at collection time, as tests/kernels/conftest.py does. Tests that only exercise the
parent side (runner, diagnosis) need neither torch nor triton and live in test_parent_side.py.
"""

import os

import pytest

try:
    import torch

    HAVE_TORCH = True
except ImportError:  # the parent-side tests still run
    HAVE_TORCH = False

if HAVE_TORCH and not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

DEVICE = "cuda" if HAVE_TORCH and torch.cuda.is_available() else "cpu"


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
