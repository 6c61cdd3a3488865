"""The process group a phase child (the NCCL measurement, the FSDP2 pass) joins: the launch's
rendezvous store under the phase's own prefix (child_phase.py sets GPUDOCTOR_STORE_PREFIX and the
collective timeout), NCCL for GPU tensors and gloo for CPU ones on a GPU host, gloo alone without a
GPU. Imports torch: only the children load it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Any


@dataclass(frozen=True)
class PhaseGroup:
    """The process group a phase child joined (``join_phase_group``): its rank, world size and local rank,
    the device its tensors go on (cuda:LOCAL_RANK, or the CPU without a GPU) and the collectives' timeout."""

    rank: int
    world_size: int
    local_rank: int
    device: Any  # torch.device
    on_gpu: bool
    timeout_s: float


def join_phase_group(before_kernels=None) -> PhaseGroup:
    """Join the group; ``before_kernels()`` runs without a GPU before anything defines a Triton
    kernel (the FSDP2 pass sets TRITON_INTERPRET there)."""
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    timeout_s = float(os.environ.get("GPUDOCTOR_COLLECTIVE_TIMEOUT", "120"))
    timeout = timedelta(seconds=timeout_s)
    base = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), None, False, timeout)
    store = dist.PrefixStore(os.environ["GPUDOCTOR_STORE_PREFIX"], base)
    on_gpu = torch.cuda.is_available()
    if on_gpu:
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        dist.init_process_group("cpu:gloo,cuda:nccl", store=store, rank=rank, world_size=world, timeout=timeout,
                                device_id=device)
    else:
        if before_kernels is not None:
            before_kernels()
        device = torch.device("cpu")
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=timeout)
    return PhaseGroup(rank, world, local_rank, device, on_gpu, timeout_s)
