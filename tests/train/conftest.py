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
