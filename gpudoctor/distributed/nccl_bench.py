"""The NCCL measurement, run by each rank in a child process (`python -m gpudoctor.distributed.nccl_bench`)
so that a hung collective is killed by the parent's timeout instead of hanging the doctor.

All-reduce and all-gather over message sizes, timed with CUDA events after warm-up, the slowest
rank's time taken (what a job waits for), bus bandwidth as nccl-tests computes it
(doc/PERFORMANCE.md: all-reduce busbw = S/t x 2(n-1)/n, all-gather busbw = S/t x (n-1)/n with
S the gathered size). Also P2P access between the GPUs this process sees and the NVLink/PCIe
figures of its own GPU from NVML. Without a GPU the same runs over gloo on the CPU (small sizes):
the plumbing is tested that way, and the figures are labelled as gloo's.

Prints one JSON line on stdout; NCCL's own INFO lines go to stderr for the parent to read.
"""

from __future__ import annotations

import json
import os
import sys
import time

GPU_SIZES = (1 << 20, 8 << 20, 64 << 20, 256 << 20, 1 << 30)  # 1 MB .. 1 GB, as the issue asks
CPU_SIZES = (1 << 20, 8 << 20)


def _iterations(size: int) -> tuple[int, int]:
    """(warm-up, timed): fewer at the large sizes, where one call is already milliseconds."""
    return (2, 5) if size >= 256 << 20 else (5, 20)


def _nvml_links(index: int) -> dict:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001
        return {"error": f"NVML: {exc}"}
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        active, version = 0, None
        for link in range(getattr(pynvml, "NVML_NVLINK_MAX_LINKS", 18)):
            try:
                if pynvml.nvmlDeviceGetNvLinkState(handle, link) == pynvml.NVML_FEATURE_ENABLED:
                    active += 1
                    version = version or pynvml.nvmlDeviceGetNvLinkVersion(handle, link)
            except pynvml.NVMLError:
                continue
        out = {"nvlink_active": active, "nvlink_version": version}
        for key, call in (("pcie_gen_max", pynvml.nvmlDeviceGetMaxPcieLinkGeneration),
                          ("pcie_width_max", pynvml.nvmlDeviceGetMaxPcieLinkWidth),
                          ("pcie_gen_current", pynvml.nvmlDeviceGetCurrPcieLinkGeneration),
                          ("pcie_width_current", pynvml.nvmlDeviceGetCurrPcieLinkWidth)):
            try:
                out[key] = int(call(handle))
            except pynvml.NVMLError as exc:
                out[key] = None
                out.setdefault("unknown", {})[key] = str(exc)
        return out
    finally:
        pynvml.nvmlShutdown()


def _nvml_index(local_rank: int) -> int:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        entries = [e.strip() for e in visible.split(",")]
        if local_rank < len(entries) and entries[local_rank].isdigit():
            return int(entries[local_rank])
    return local_rank


def measure() -> dict:
    import torch
    import torch.distributed as dist

    from .phase_group import join_phase_group

    group = join_phase_group()
    rank, world, local_rank, device = group.rank, group.world_size, group.local_rank, group.device
    result: dict = {"rank": rank, "world_size": world, "torch": torch.__version__}
    if group.on_gpu:
        result.update(backend="nccl", device=torch.cuda.get_device_name(device),
                      nccl_version=".".join(map(str, torch.cuda.nccl.version())))
        count = torch.cuda.device_count()
        result["p2p"] = {f"{i},{j}": bool(torch.cuda.can_device_access_peer(i, j))
                         for i in range(count) for j in range(count) if i != j}
        result["links"] = _nvml_links(_nvml_index(local_rank))
        sizes = GPU_SIZES
    else:
        result.update(backend="gloo", device="cpu")
        sizes = CPU_SIZES
    result["all_reduce"] = [_time_op("all_reduce", size, world, device) for size in sizes]
    result["all_gather"] = [_time_op("all_gather", size, world, device) for size in sizes]
    dist.barrier()
    dist.destroy_process_group()
    return result


def _time_op(op: str, size: int, world: int, device) -> dict:
    import torch
    import torch.distributed as dist

    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    elements = size // torch.tensor([], dtype=dtype).element_size()
    if op == "all_reduce":
        tensor = torch.ones(elements, dtype=dtype, device=device)
        run = lambda: dist.all_reduce(tensor)  # noqa: E731
        total = size
    else:
        # all-gather of S bytes in all: each rank contributes S/n (nccl-tests' convention)
        part = max(1, elements // world)
        tensor = torch.ones(part, dtype=dtype, device=device)
        out = torch.empty(part * world, dtype=dtype, device=device)
        run = lambda: dist.all_gather_into_tensor(out, tensor)  # noqa: E731
        total = part * world * tensor.element_size()
    warm, timed = _iterations(size)
    for _ in range(warm):
        run()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(timed):
            run()
        end.record()
        end.synchronize()
        seconds = start.elapsed_time(end) / 1000 / timed
    else:
        begin = time.perf_counter()
        for _ in range(timed):
            run()
        seconds = (time.perf_counter() - begin) / timed
    # The slowest rank's time is the collective's (nccl-tests reports the same).
    slowest = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)  # a CPU tensor: over gloo
    seconds = float(slowest.item())
    algbw = total / seconds / 1e9
    factor = 2 * (world - 1) / world if op == "all_reduce" else (world - 1) / world
    return {"bytes": total, "time_us": round(seconds * 1e6, 2), "algbw_gbs": round(algbw, 2),
            "busbw_gbs": round(algbw * factor, 2), "iterations": timed}


def main() -> int:
    try:
        result = measure()
    except Exception as exc:  # noqa: BLE001 - the parent turns it into a finding
        print(json.dumps({"error": f"{type(exc).__name__}: {str(exc)[:2000]}"}))
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip NCCL's and CUDA's teardown: the result is out
