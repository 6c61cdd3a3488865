"""One row of the backend matrix: did this implementation import, compile, run forward and
backward, agree with the reference, and how fast. Each stage records why it stopped."""

from __future__ import annotations

import time
import traceback
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class BackendRow:
    """One backend of one capability in the backend matrix: how far it got (status, and the stage where it
    stopped, with why), its timings, and its error against the reference."""

    capability: str  # "nf4-dequant" | "attention"
    backend: str
    status: str = "untried"  # works | mismatch | fails | unavailable
    stage: str = ""  # the stage that failed: import | compile | forward | backward | agreement
    reason: str = ""
    error_type: str = ""
    first_call_ms: float | None = None  # includes JIT compile / autotune / library init
    forward_ms: float | None = None
    backward_ms: float | None = None
    errors: dict[str, float] = field(default_factory=dict)  # max error vs reference, per output
    tolerance: float | None = None
    notes: str = ""
    traceback_tail: str = ""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["errors"] = {k: float(f"{v:.3g}") for k, v in self.errors.items()}
        for key in ("first_call_ms", "forward_ms", "backward_ms"):
            if data[key] is not None:
                data[key] = round(data[key], 4)
        return data

    def fail(self, stage: str, exc: BaseException, status: str = "fails") -> "BackendRow":
        self.status, self.stage = status, stage
        self.error_type = type(exc).__name__
        self.reason = first_line(exc)
        self.traceback_tail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-4000:]
        return self


def first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    line = text.splitlines()[0]
    return line[:300]


def relative_error(out, ref) -> float:
    """max |out - ref| / max |ref|: one number per output, comparable across shapes. NaN -> inf."""
    import torch

    out, ref = out.double(), ref.double()
    diff = (out - ref).abs().max()
    if not torch.isfinite(diff):
        return float("inf")
    return float(diff / ref.abs().max().clamp_min(1e-12))


class Stopwatch:
    def __init__(self):
        self.start = time.perf_counter()

    def ms(self) -> float:
        return (time.perf_counter() - self.start) * 1000


def fastest(rows: list[BackendRow]) -> str | None:
    working = [r for r in rows if r.status == "works" and r.forward_ms is not None]
    if not working:
        return None

    def total(r):
        return r.forward_ms + (r.backward_ms or 0.0)

    return min(working, key=total).backend
