"""The parent side of the NCCL measurement: run nccl_bench in a child with a timeout, keep its
JSON and what NCCL said about the transports it chose. Torch-free."""

from __future__ import annotations

import os

from .child_phase import run_phase_child
from .environment import RankEnv
from .nccl_parse import parse_nccl_info

_NCCL_LINES_KEPT = 400


def run_nccl_measurement(env: RankEnv, timeout_s: float) -> dict:
    # INFO is what names the transports; the child is ours, so the user's level is not changed
    output = run_phase_child("gpudoctor.distributed.nccl_bench", [], env, "nccl", timeout_s, {"NCCL_DEBUG": "INFO"})
    result = output.result
    # NCCL writes its debug lines to stdout (NCCL_DEBUG_FILE unset), the result is stdout's last JSON line.
    nccl_lines = [line for line in output.text.splitlines() if "NCCL INFO" in line or "NCCL WARN" in line]
    # what NCCL's own lines say, without erasing what the child measured (its version from torch)
    result.update({k: v for k, v in parse_nccl_info(output.text).items() if v or k not in result})
    result["nccl_env"] = {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}
    result["nccl_log"] = nccl_lines[:_NCCL_LINES_KEPT]
    if output.timed_out:
        result["error"] = f"the measurement did not finish within {timeout_s:g} s (a collective hung)"
    return result
