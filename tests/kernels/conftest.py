"""Kernel tests run on the GPU when there is one, else under Triton's interpreter.

TRITON_INTERPRET must be set before any ``@triton.jit`` kernel is defined, i.e. before the
kernel modules are imported, which is why it happens here at collection time.
"""

import os

import pytest

torch = pytest.importorskip("torch", reason="kernel tests need the 'train' extra (torch)")
pytest.importorskip("triton", reason="kernel tests need the 'train' extra (triton)")

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture
def device() -> str:
    return DEVICE
