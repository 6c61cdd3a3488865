"""Timers that are honest on both devices: CUDA events on the GPU (device work is asynchronous),
the host clock on the CPU."""

from __future__ import annotations

import statistics
import time
from typing import Callable

import torch


def synchronize(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def time_once_ms(fn: Callable[[], object], device) -> float:
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return (time.perf_counter() - start) * 1000


def median_ms(fn: Callable[[], object], device, repeats: int = 5) -> float:
    """Median of ``repeats`` timed calls after one warm-up call (compile and caches stay out).
    On the CPU (Triton's interpreter) two repeats: the numbers only show the path ran."""
    fn()
    if torch.device(device).type != "cuda":
        repeats = min(repeats, 2)
    if torch.device(device).type == "cuda":
        times = []
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return statistics.median(times)
    return statistics.median(time_once_ms(fn, device) for _ in range(repeats))
