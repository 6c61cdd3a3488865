"""The parent side of the NCCL measurement: run nccl_bench in a child with a timeout, keep its
JSON and what NCCL said about the transports it chose. Torch-free."""

from __future__ import annotations

import os

from .child_phase import run_phase_child
from .environment import RankEnv
from .nccl_parse import parse_nccl_info
from .nccl_topology import TOPO_TIMEOUT_S, run_topology
from .rankfacts import rank_gpu_index

_NCCL_LINES_KEPT = 400


def run_nccl_measurement(env: RankEnv, timeout_s: float) -> dict:
    # How the GPUs are connected, once per host (local rank 0), in a thread while the child
    # imports torch and sets NCCL up: run before it instead, a slow nvidia-smi (seconds without
    # persistence mode) would hold this rank back from the rendezvous the other ranks wait in.
    topology: list[dict] = []
    worker = None
    if env.local_rank == 0:
        from ..host.live import LiveHost
        from ..threads import start_daemon

        worker = start_daemon(lambda: topology.append(run_topology(LiveHost().run)), name="gpudoctor-topology")
    # INFO is what names the transports; the child is ours, so the user's level is not changed
    output = run_phase_child("gpudoctor.distributed.nccl_bench", [], env, "nccl", timeout_s, {"NCCL_DEBUG": "INFO"})
    if worker is not None:
        worker.join(TOPO_TIMEOUT_S)  # already done unless nvidia-smi outlived the measurement
    result = output.result
    # NCCL writes its debug lines to stdout (NCCL_DEBUG_FILE unset), the result is stdout's last JSON line.
    nccl_lines = [line for line in output.text.splitlines() if "NCCL INFO" in line or "NCCL WARN" in line]
    # what NCCL's own lines say, without erasing what the child measured (its version from torch)
    result.update({k: v for k, v in parse_nccl_info(output.text).items() if v or k not in result})
    result["nccl_env"] = {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}
    result["nccl_log"] = nccl_lines[:_NCCL_LINES_KEPT]
    # the NVML index nvidia-smi's matrix uses for this rank's GPU (None: UUIDs or MIG in CUDA_VISIBLE_DEVICES)
    result["gpu_index"] = rank_gpu_index(os.environ.get("CUDA_VISIBLE_DEVICES"), env.local_rank)
    if worker is not None:
        result["topology"] = topology[0] if topology else {"error": "nvidia-smi topo -m did not answer in time"}
    if output.timed_out:
        result["error"] = f"the measurement did not finish within {timeout_s:g} s (a collective hung)"
    return result
