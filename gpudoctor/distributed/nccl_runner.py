"""The parent side of the NCCL measurement: run nccl_bench in a child with a timeout, keep its
JSON and what NCCL said about the transports it chose. Torch-free."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from .environment import RankEnv
from .nccl_parse import parse_nccl_info

_NCCL_LINES_KEPT = 400
_TAIL_CHARS = 4000


def run_nccl_measurement(env: RankEnv, timeout_s: float) -> dict:
    child_env = {**os.environ, "GPUDOCTOR_STORE_PREFIX": f"gpudoctor/{env.run_id}/nccl/",
                 "GPUDOCTOR_COLLECTIVE_TIMEOUT": str(max(10.0, min(120.0, timeout_s / 2))),
                 # INFO is what names the transports; the child is ours, so the user's level is not changed
                 "NCCL_DEBUG": "INFO"}
    command = [sys.executable, "-m", "gpudoctor.distributed.nccl_bench"]
    start = time.monotonic()
    try:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   env=child_env, start_new_session=True)
    except OSError as exc:
        return {"error": f"could not start the measurement: {exc}"}
    timed_out = False
    try:
        out, err = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = process.communicate()
    # NCCL writes its debug lines to stdout (NCCL_DEBUG_FILE unset), the result is stdout's last JSON line.
    stdout = out.decode("utf-8", "replace")
    text = stdout + "\n" + err.decode("utf-8", "replace")
    result: dict = {"error": "the measurement printed no result"}
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            try:
                result = json.loads(line)
            except ValueError:
                continue
            break
    nccl_lines = [line for line in text.splitlines() if "NCCL INFO" in line or "NCCL WARN" in line]
    # what NCCL's own lines say, without erasing what the child measured (its version from torch)
    result.update({k: v for k, v in parse_nccl_info(text).items() if v or k not in result})
    result["nccl_env"] = {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}
    result["host"] = env.host
    result["wall_s"] = round(time.monotonic() - start, 2)
    result["returncode"] = process.returncode
    result["timed_out"] = timed_out
    result["nccl_log"] = nccl_lines[:_NCCL_LINES_KEPT]
    if timed_out or process.returncode != 0:
        other = [line for line in text.splitlines() if "NCCL INFO" not in line and not line.startswith("{")]
        result["stderr_tail"] = "\n".join(other)[-_TAIL_CHARS:]
    if timed_out:
        result.setdefault("error", f"the measurement did not finish within {timeout_s:g} s (a collective hung)")
    return result
