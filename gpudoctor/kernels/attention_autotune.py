"""A small autotune at first use, for GPUs whose attention tiles were never measured here.

Why: the sm90 tiles in ``attention._ARCH_CONFIGS`` come from sweeps on an H200; the sm75, sm80
and sm86/89 entries are sized from those GPUs' shared memory and were never run on one. A guess
that spills registers can cost 2x (a 32x128 dK/dV tile on 4 warps ran hd128 at 165 TFLOP/s
against 360 for 64x128 on 8 warps on the H200). So on those GPUs the first call for a given
(GPU, head_dim bucket, dtype, causal, grouped or not) times the guessed tiles and a few
neighbours on inputs of the caller's shape (sequence capped), keeps the fastest that ran, and
caches the choice in a JSON file, so later processes pay nothing. Candidates that fail to compile
or launch (e.g. shared memory exceeded) are skipped; if none runs, the guessed tiles are used, as
they were before.

The cache file: ``$GPUDOCTOR_CACHE_DIR/attention-tiles.json`` (default
``$XDG_CACHE_HOME/gpudoctor`` or ``~/.cache/gpudoctor``). ``GPUDOCTOR_ATTENTION_AUTOTUNE=0``
turns the tuning off (the guessed tiles are used).
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import threading
import time
from pathlib import Path
from typing import Callable, Iterable

from .attention import AttentionConfig, KernelTiles

# Families whose table entries were measured on their own GPU; others are tuned at first use.
MEASURED_FAMILIES = frozenset({"sm90"})
# The sequence the candidates are timed at: long enough that the kernels, not the launches,
# dominate, short enough that tuning costs little beyond the candidates' compiles.
TUNING_SEQ_CAP = 1024
ENV_SWITCH = "GPUDOCTOR_ATTENTION_AUTOTUNE"
CACHE_FILE = "attention-tiles.json"

_LOCK = threading.Lock()
_MEMORY: dict[str, AttentionConfig] = {}


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "1").strip() not in ("0", "false", "no", "off")


def cache_path() -> Path:
    base = os.environ.get("GPUDOCTOR_CACHE_DIR")
    if not base:
        base = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
                            "gpudoctor")
    return Path(base) / CACHE_FILE


def candidates(guess: AttentionConfig) -> list[AttentionConfig]:
    """The guess first, then one pipeline stage fewer (less shared memory: the usual failure on
    smaller GPUs) and the other warp count (register pressure), for all three kernels at once."""
    def each(change: Callable[[KernelTiles], KernelTiles]) -> AttentionConfig:
        return dataclasses.replace(guess, forward=change(guess.forward), backward_dkdv=change(guess.backward_dkdv),
                                   backward_dq=change(guess.backward_dq))

    options = [guess,
               each(lambda t: dataclasses.replace(t, num_stages=max(1, t.num_stages - 1))),
               each(lambda t: dataclasses.replace(t, num_warps=8 if t.num_warps == 4 else 4))]
    unique: list[AttentionConfig] = []
    for option in options:
        if option not in unique:
            unique.append(option)
    return unique


def fastest(options: Iterable[AttentionConfig], time_ms: Callable[[AttentionConfig], float]) -> tuple[AttentionConfig | None, dict]:
    """(the fastest option that ran, {option index: milliseconds or the error}); None if none ran."""
    results: dict = {}
    best, best_ms = None, float("inf")
    for index, option in enumerate(options):
        try:
            milliseconds = time_ms(option)
        except Exception as error:  # noqa: BLE001 - a candidate that cannot run is a result
            results[index] = f"{type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''}"
            continue
        results[index] = milliseconds
        if milliseconds < best_ms:
            best, best_ms = option, milliseconds
    return best, results


def _to_json(config: AttentionConfig) -> dict:
    return dataclasses.asdict(config)


def _from_json(data: dict) -> AttentionConfig:
    return AttentionConfig(KernelTiles(**data["forward"]), KernelTiles(**data["backward_dkdv"]),
                           KernelTiles(**data["backward_dq"]), bool(data.get("split_head_dim", True)),
                           tma=int(data.get("tma", 0)), atomic_dq=bool(data.get("atomic_dq", False)),
                           delta_in_dq=bool(data.get("delta_in_dq", False)),
                           fused_backward=bool(data.get("fused_backward", False)),
                           gluon_forward=bool(data.get("gluon_forward", False)),
                           gluon_backward=bool(data.get("gluon_backward", False)),
                           gluon_atomic_dq=bool(data.get("gluon_atomic_dq", False)))


def _read_cache(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}  # absent or corrupt: tuned again, then rewritten


def _write_cache(path: Path, key: str, config: AttentionConfig, timings: dict) -> None:
    """Merge one entry and replace the file atomically (concurrent processes: last writer wins,
    and every version of the file is whole)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = _read_cache(path)
        data[key] = {"config": _to_json(config), "timings": {str(k): v for k, v in timings.items()},
                     "tuned_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        from ..paths import write_private_file

        write_private_file(str(path), json.dumps(data, indent=1, sort_keys=True).encode("utf-8"), durable=False)
    except OSError:
        pass  # an unwritable cache only means tuning again in the next process


def cache_key(device_name: str, capability, triton_version: str, bucket: int, dtype, causal: bool, grouped: bool) -> str:
    return (f"{device_name}|sm{capability[0]}{capability[1]}|triton {triton_version}|hd{bucket}|"
            f"{str(dtype).replace('torch.', '')}|{'causal' if causal else 'full'}|{'gqa' if grouped else 'mha'}")


def tuned(key: str, guess: AttentionConfig, time_ms: Callable[[AttentionConfig], float],
          path: Path | None = None) -> AttentionConfig:
    """The config for ``key``: from memory, else from the cache file, else tuned now (and cached)."""
    with _LOCK:
        if key in _MEMORY:
            return _MEMORY[key]
        path = path or cache_path()
        entry = _read_cache(path).get(key)
        config = None
        if isinstance(entry, dict):
            try:
                config = _from_json(entry["config"])
            except (KeyError, TypeError, ValueError):
                config = None
        if config is None:
            config, timings = fastest(candidates(guess), time_ms)
            if config is None:
                config = guess  # nothing ran: keep the guess (its own error surfaces at the real call)
            else:
                _write_cache(path, key, config, timings)
        _MEMORY[key] = config
        return config


def timer_for(q, k, v, causal: bool, softmax_scale: float) -> Callable[[AttentionConfig], float]:
    """Milliseconds of one forward+backward with a candidate config, on fresh inputs shaped like
    the caller's (sequence capped at TUNING_SEQ_CAP; batch 1): median of 3 after a warm-up."""
    import torch

    from .attention import flash_attention

    seq = min(q.shape[2], TUNING_SEQ_CAP)
    shape_q = (1, q.shape[1], seq, q.shape[3])
    shape_kv = (1, k.shape[1], seq if causal else min(k.shape[2], TUNING_SEQ_CAP), k.shape[3])

    def time_ms(config: AttentionConfig) -> float:
        inputs = [torch.randn(shape, device=q.device, dtype=q.dtype).requires_grad_()
                  for shape in (shape_q, shape_kv, shape_kv)]
        grad = torch.randn(shape_q, device=q.device, dtype=q.dtype)

        def once():
            out = flash_attention(*inputs, causal=causal, softmax_scale=softmax_scale, config=config)
            (out * grad).sum().backward()  # a scalar: see train/matrix_attention.py's _backward

        once()  # compiles
        if q.device.type != "cuda":
            start = time.perf_counter()
            once()
            return (time.perf_counter() - start) * 1000
        times = []
        for _ in range(3):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            once()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return statistics.median(times)

    return time_ms
