"""Remedies for the runtime environment: caches, shared memory, search paths, memory, NCCL."""

from __future__ import annotations

import posixpath
from typing import Any, Mapping

from ..model import Fix, MakeDir, RemoveFromPathVar, SetEnv, SuggestCommand
from .driver import CHECK_ON_THE_MACHINE


def triton_cache_unwritable(v: Mapping[str, Any]) -> list[Fix]:
    new = v.get("new_cache_dir")
    if not new:
        gd = v.get("dirs")
        if gd is None:
            return [CHECK_ON_THE_MACHINE]
        new = posixpath.join(gd.cache, "triton")
    return [Fix("user", f"Move Triton's cache to {new}.", (MakeDir(new), SetEnv("TRITON_CACHE_DIR", new)))]


def shm_too_small(v: Mapping[str, Any]) -> list[Fix]:
    return [Fix("manual", "Give the container more shared memory (docker run --shm-size=16g or --ipc=host), or use "
                          "num_workers=0; for NCCL, NCCL_SHM_DISABLE=1.", (SuggestCommand("df -h /dev/shm"),))]


def ld_library_path_insecure(v: Mapping[str, Any]) -> list[Fix]:
    variable, entry = v.get("variable"), v.get("entry")
    if not variable or entry is None:
        return [CHECK_ON_THE_MACHINE]
    return [Fix("user", f"Remove it from {variable}.", (RemoveFromPathVar(variable, entry),))]


def cuda_oom(v: Mapping[str, Any]) -> list[Fix]:
    return [Fix("manual", "Reduce per-step memory: a smaller per_device_train_batch_size (raise "
                          "gradient_accumulation_steps), gradient checkpointing, a shorter max sequence length, or "
                          "4-bit loading; free the GPU if other processes hold memory (nvidia-smi); "
                          "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True helps against fragmentation.",
                (SuggestCommand("nvidia-smi"),) + ((SuggestCommand("gpudoctor check --train --preset tiny"),)
                                                   if v.get("from_training_pass") else ()))]


def nccl_failure(v: Mapping[str, Any]) -> list[Fix]:
    return [Fix("manual", "Find the rank that failed first (its log has the real error) and rerun with NCCL_DEBUG=INFO "
                          "to see the transport; for socket errors set NCCL_SOCKET_IFNAME, for P2P hangs try "
                          "NCCL_P2P_DISABLE=1.", (SuggestCommand("NCCL_DEBUG=INFO <your launch command>"),))]
