"""Kernel tests run on the GPU when there is one, else under Triton's interpreter.

TRITON_INTERPRET must be set before triton is imported at all (triton reads it when its own jit
helpers such as tl.interleave are defined), so torch decides and triton comes after.
"""

import os

import pytest

torch = pytest.importorskip("torch", reason="kernel tests need the 'train' extra (torch)")

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

pytest.importorskip("triton", reason="kernel tests need the 'train' extra (triton)")

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture
def device() -> str:
    return DEVICE
