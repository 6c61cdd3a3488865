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


# Functions the compile scripts (run by compiled_in_child) start with: a kernel's SASS, and the
# loops around its tensor-core products.
SASS_TOOLS = r"""
import os, re, subprocess, tempfile
from triton.backends.nvidia.compiler import get_ptxas


def sass_of(ptx):
    ptxas = get_ptxas(90).path
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "kernel.ptx")
        open(path, "w").write(ptx)
        subprocess.run([ptxas, "-arch=sm_90a", path, "-o", path + ".cubin"], check=True, timeout=300)
        return subprocess.run([os.path.join(os.path.dirname(ptxas), "nvdisasm"), "-c", path + ".cubin"],
                              capture_output=True, text=True, timeout=300, check=True).stdout.splitlines()


def product_loops(sass, products):
    # The loop around each tensor-core product: the smallest span from a label to a branch back
    # to it that holds the product (larger spans: the warp-specialize dispatch, and the cold
    # paths of barrier waits placed after the kernel's end that jump back into the loop).
    labels = {match.group(1): i for i, line in enumerate(sass) if (match := re.match(r"^(\.L_x_\d+):", line))}
    spans = [(labels[match.group(1)], i) for i, line in enumerate(sass)
             if (match := re.search(r"BRA `\((\.L_x_\d+)\)", line)) and labels.get(match.group(1), i) < i]
    return {min((span for span in spans if span[0] < p < span[1]), key=lambda span: span[1] - span[0])
            for p in products}
"""


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
