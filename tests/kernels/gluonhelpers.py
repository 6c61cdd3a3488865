"""What the Gluon kernel tests (test_attention_gluon*.py) share: compiling for sm90 in a child
process, the GPU they need, and their seeded inputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from gpudoctor.kernels import attention_gluon

# On CI (Triton with Gluon installed by the README's test command) a missing Gluon must fail the
# compile tests, not skip them.
needs_gluon = pytest.mark.skipif(not attention_gluon.available() and not os.environ.get("CI"),
                                 reason="this Triton has no Gluon (Triton >= 3.5)")

_REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def compiled_in_child(script: str, cases: list) -> dict:
    """{case: the row ``script`` printed for it}: ``script`` runs with the JSON of ``cases`` as its
    argument and prints one JSON list of rows, in their order, as its last line. In a child process
    because under TRITON_INTERPRET (the CPU test run) @gluon.jit functions become interpreted
    ones, which Gluon's compiler cannot call."""
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", script, json.dumps(cases)], capture_output=True, text=True,
                          timeout=600, env=env, cwd=_REPOSITORY)
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(zip(map(tuple, cases), json.loads(done.stdout.strip().splitlines()[-1])))


def hopper() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9


def gpu_inputs(batch, heads, kv_heads, seq_q, seq_k, head_dim, dtype, seed):
    """q (batch, heads, seq_q, head_dim), k and v (batch, kv_heads, seq_k, head_dim) on the GPU,
    drawn in that order from a generator seeded with ``seed``."""
    generator = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(batch, heads, seq_q, head_dim, device="cuda", dtype=dtype, generator=generator)
    k, v = (torch.randn(batch, kv_heads, seq_k, head_dim, device="cuda", dtype=dtype, generator=generator)
            for _ in range(2))
    return q, k, v
