"""Run one phase of the distributed check (the NCCL measurement, the FSDP2 pass) in a child
process with a timeout, and keep its JSON result and a bounded tail of what it printed.

Why a child: a collective that hangs (a dead peer, a broken transport) blocks its process until
NCCL's watchdog fires, which can be many minutes; killing the child's process group at our
deadline turns the hang into a finding instead. Torch-free.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass

from .environment import RankEnv

_TAIL_CHARS = 4000
_OUTPUT_BOUND = 8 << 20  # per stream; NCCL_DEBUG=INFO on many GPUs is long, a child printing more is killed


@dataclass(frozen=True)
class PhaseOutput:
    """One phase child's run: its JSON result (the parent adds host, wall_s, returncode and timed_out, and
    ``error`` and ``stderr_tail`` when the child failed), what it printed on each stream, and whether it was
    killed at the deadline. A child that could not be started has ``returncode`` None and a result of
    ``error`` alone."""

    result: dict
    stdout: str
    stderr: str
    returncode: int | None
    timed_out: bool
    wall_s: float

    @property
    def text(self) -> str:
        return self.stdout + "\n" + self.stderr


def collective_timeout(timeout_s: float) -> float:
    """A collective's own timeout inside the child: well inside the phase's, so the child can
    still report which collective hung before it is killed."""
    return max(10.0, min(120.0, timeout_s / 2))


def run_phase_child(module: str, args: list[str], env: RankEnv, phase: str, timeout_s: float,
                    extra_env: dict | None = None) -> PhaseOutput:
    child_env = {**os.environ, "GPUDOCTOR_STORE_PREFIX": f"gpudoctor/{env.run_id}/{phase}/",
                 "GPUDOCTOR_COLLECTIVE_TIMEOUT": str(collective_timeout(timeout_s)), **(extra_env or {})}
    start = time.monotonic()
    try:
        process = subprocess.Popen([sys.executable, "-m", module, *args], stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env,
                                   start_new_session=True)
    except OSError as exc:
        return PhaseOutput({"error": f"could not start the {phase} child: {exc}"}, "", "", None, False, 0.0)
    from ..host.live import read_bounded_output

    out, err, outcome = read_bounded_output(process, timeout_s, _OUTPUT_BOUND)  # kills the group past either bound
    timed_out = outcome == "timeout"
    stdout = out.decode("utf-8", "replace")
    stderr = err.decode("utf-8", "replace")
    result: dict = {"error": f"the {phase} child printed no result"}
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            try:
                result = json.loads(line)
            except ValueError:
                continue
            break
    result["host"] = env.host
    result["wall_s"] = round(time.monotonic() - start, 2)
    result["returncode"] = process.returncode
    result["timed_out"] = timed_out
    if timed_out:
        result["error"] = f"the {phase} child did not finish within {timeout_s:g} s (a collective hung)"
    elif outcome == "too-large":
        result["error"] = f"the {phase} child printed more than {_OUTPUT_BOUND >> 20} MB on one stream; killed"
    if timed_out or process.returncode != 0:
        other = [line for line in (stdout + "\n" + stderr).splitlines()
                 if "NCCL INFO" not in line and not line.startswith("{")]
        result["stderr_tail"] = "\n".join(other)[-_TAIL_CHARS:]
    return PhaseOutput(result, stdout, stderr, process.returncode, timed_out, result["wall_s"])
