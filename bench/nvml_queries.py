"""How long each NVML query of host/nvml_query.py takes on this machine, and whether asking them
from several threads at once is faster (ctypes releases the GIL during each call; whether the
driver answers concurrent calls for one GPU in parallel is what this measures).

NVML's answer is on preflight()'s critical path (bench/preflight_timeline.py): after the child's
start and ``import pynvml``, the queries took ~15 ms for one H200. Per sample, in this process:
nvmlInit, then the queries one after another (each timed), then the same queries from a pool of
``--threads`` threads, in a random order of the two variants; nvmlShutdown.

Usage: python bench/nvml_queries.py [--runs 20] [--threads 4] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import threading
import time

import pynvml


def queries(handle) -> dict:
    uncorrected = pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    return {
        "name": lambda: pynvml.nvmlDeviceGetName(handle),
        "compute_capability": lambda: pynvml.nvmlDeviceGetCudaComputeCapability(handle),
        "memory_info": lambda: pynvml.nvmlDeviceGetMemoryInfo(handle),
        "uuid": lambda: pynvml.nvmlDeviceGetUUID(handle),
        "pci_info": lambda: pynvml.nvmlDeviceGetPciInfo(handle),
        "ecc_mode": lambda: pynvml.nvmlDeviceGetEccMode(handle),
        "ecc_volatile": lambda: pynvml.nvmlDeviceGetTotalEccErrors(handle, uncorrected, pynvml.NVML_VOLATILE_ECC),
        "ecc_aggregate": lambda: pynvml.nvmlDeviceGetTotalEccErrors(handle, uncorrected, pynvml.NVML_AGGREGATE_ECC),
        "retired_pages_pending": lambda: pynvml.nvmlDeviceGetRetiredPagesPendingStatus(handle),
        "remapped_rows": lambda: pynvml.nvmlDeviceGetRemappedRows(handle),
        "clocks_event_reasons": lambda: pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle),
        "pcie_gen_current": lambda: pynvml.nvmlDeviceGetCurrPcieLinkGeneration(handle),
        "pcie_gen_max": lambda: pynvml.nvmlDeviceGetMaxPcieLinkGeneration(handle),
        "pcie_gen_gpu_max": lambda: pynvml.nvmlDeviceGetGpuMaxPcieLinkGeneration(handle),
        "pcie_width_current": lambda: pynvml.nvmlDeviceGetCurrPcieLinkWidth(handle),
        "pcie_width_max": lambda: pynvml.nvmlDeviceGetMaxPcieLinkWidth(handle),
        "persistence_mode": lambda: pynvml.nvmlDeviceGetPersistenceMode(handle),
        "mig_mode": lambda: pynvml.nvmlDeviceGetMigMode(handle),
    }


def ask(call) -> None:
    try:
        call()
    except pynvml.NVMLError:
        pass


def serial(calls: dict) -> tuple[float, dict]:
    each = {}
    start = time.perf_counter()
    for name, call in calls.items():
        t = time.perf_counter()
        ask(call)
        each[name] = (time.perf_counter() - t) * 1000
    return (time.perf_counter() - start) * 1000, each


def threaded(calls: dict, threads: int) -> float:
    items = list(calls.values())
    start = time.perf_counter()
    workers = [threading.Thread(target=lambda part=items[i::threads]: [ask(c) for c in part]) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--out")
    args = parser.parse_args()
    rng = random.Random(0)
    totals: dict[str, list[float]] = {"serial": [], f"{args.threads} threads": [], "init": []}
    each: dict[str, list[float]] = {}
    for _ in range(args.runs):
        t = time.perf_counter()
        pynvml.nvmlInit()
        totals["init"].append((time.perf_counter() - t) * 1000)
        try:
            calls = {}
            for index in range(pynvml.nvmlDeviceGetCount()):
                handle = pynvml.nvmlDeviceGetHandleByIndex(index)
                calls.update({f"{index}:{k}": v for k, v in queries(handle).items()})
            for variant in rng.sample(["serial", "threaded"], 2):
                if variant == "serial":
                    total, per = serial(calls)
                    totals["serial"].append(total)
                    for name, ms in per.items():
                        each.setdefault(name, []).append(ms)
                else:
                    totals[f"{args.threads} threads"].append(threaded(calls, args.threads))
        finally:
            pynvml.nvmlShutdown()
    result = {"median_ms": {k: round(statistics.median(v), 3) for k, v in totals.items()},
              "each_median_ms": {k: round(statistics.median(v), 3) for k, v in each.items()}}
    print(json.dumps(result, indent=1))
    if args.out:
        with open(args.out, "w") as handle:
            json.dump({**result, "raw_ms": totals}, handle, indent=1)


if __name__ == "__main__":
    main()
