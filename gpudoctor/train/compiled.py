"""``--compile``: the QLoRA step under torch.compile, and its graph breaks.

How the step reaches zero graph breaks: gpudoctor's Triton kernels enter the model only as
``torch.library`` custom ops with fake implementations (see ops.py), so Dynamo records each as one
graph node instead of tracing into the Python launchers (NF4State unwrapping, lru_cache'd tables,
grid maths and raw kernel launches are what break graphs in a naive QLoRA step). The NF4 linear
is a ``torch.autograd.Function`` around that op, which Dynamo traces whole; the LoRA path is plain
tensor maths. No ``.item()``, no data-dependent Python branches in forward.
"""

from __future__ import annotations

import time

import torch

from .model import causal_lm_loss


def explain(model, tokens) -> dict:
    import torch._dynamo as dynamo

    dynamo.reset()

    def step(batch):
        return causal_lm_loss(model(batch), batch)

    start = time.perf_counter()
    explanation = dynamo.explain(step)(tokens)
    reasons = []
    for record in explanation.break_reasons:
        where = ""
        if getattr(record, "user_stack", None):
            frame = record.user_stack[-1]
            where = f" at {frame.filename.rsplit('/', 1)[-1]}:{frame.lineno}"
        reasons.append(f"{record.reason}{where}")
    return {"graphs": explanation.graph_count, "graph_breaks": explanation.graph_break_count,
            "break_reasons": reasons[:20], "ops": explanation.op_count,
            "explain_ms": round((time.perf_counter() - start) * 1000, 1)}


def compiled_step(model, backend: str):
    """The loss function compiled; the caller runs ``loss.backward()`` (AOTAutograd compiles it)."""
    import torch._dynamo as dynamo

    dynamo.reset()

    def step(batch):
        return causal_lm_loss(model(batch), batch)

    return torch.compile(step, backend=backend, fullgraph=True)
