"""Fill message and fix templates with the values a signature captured.

Templates use ``str.format`` fields (``{gcc_limit}``); a value that no line captured renders
as ``?`` rather than raising, because a log may show only part of a multi-line message.
Derived values (``derive = { name = "function:capture" }``) are computed by the small, named
functions below so the TOML stays data.
"""

from __future__ import annotations

import string
from typing import Callable, Mapping


class _Values(dict):
    def __missing__(self, key: str) -> str:
        return "?"


_FORMATTER = string.Formatter()


def fill(template: str, values: Mapping[str, str]) -> str:
    try:
        return _FORMATTER.vformat(template, (), _Values(values))
    except (ValueError, IndexError, AttributeError):  # a malformed template must not crash explain
        return template


def _cuda_version(values: Mapping[str, str], arg: str) -> str:
    # CUDA encodes versions as 1000 * major + 10 * minor: 11040 is 11.4.
    raw = values.get(arg, "")
    if not raw.isdigit():
        return "?"
    number = int(raw)
    return f"{number // 1000}.{(number % 1000) // 10}"


def _suffix_nvml(values: Mapping[str, str], arg: str) -> str:
    return f" (the libraries on disk are {values[arg]})" if values.get(arg) else ""


def _prefix_comma(values: Mapping[str, str], arg: str) -> str:
    return f", {values[arg]}" if values.get(arg) else ""


def _suffix_nccl(values: Mapping[str, str], arg: str) -> str:
    return f" in NCCL {values[arg]}" if values.get(arg) else ""


def _nccl_cuda_failure(values: Mapping[str, str], arg: str) -> str:
    # NCCL's last error "Cuda failure 999 'unknown error'" (the number only for driver API calls)
    if not values.get(arg):
        return ""
    code = values.get("cuda_error")
    return f"; the CUDA call inside NCCL failed ({code + ' ' if code else ''}'{values[arg]}')"


def _prefix_supports(values: Mapping[str, str], arg: str) -> str:
    return f"; it supports {values[arg].strip()}" if values.get(arg) else ""


def _default_training_args(values: Mapping[str, str], arg: str) -> str:
    return values.get(arg) or "TrainingArguments"


def _oom_detail(values: Mapping[str, str], arg: str) -> str:
    if not values.get(arg):
        return ""
    gpu = values.get("gpu_index", "?")
    free = values.get("free")
    return f" (GPU {gpu}: {values[arg]} in total" + (f", {free} free)" if free else ")")


def _stalled_rank(values: Mapping[str, str], arg: str) -> str:
    # Ranks that report different SeqNums are not in the same collective: the lowest one is the
    # rank that fell behind (or the first to wait on a peer that never arrived).
    low, high, rank = values.get(f"{arg}_min"), values.get(f"{arg}_max"), values.get(f"rank_at_{arg}_min")
    if not (low and high and rank) or low == high:
        return ""
    return (f" Rank {rank} reports the lowest SeqNum ({low}; others reached {high}): if these lines are from the same"
            f" process group, it fell behind, so read its log first.")


def _in_parens(values: Mapping[str, str], arg: str) -> str:
    # an optional value that older releases do not print (NCCL < 2.10 names no peer)
    return f" ({values[arg]})" if values.get(arg) else ""


def _xformers_build_vs_torch(values: Mapping[str, str], arg: str) -> str:
    # xFormers prints its build's torch next to the installed one whenever its extension fails to
    # load (xformers/_cpp_lib.py: any OSError from torch.ops.load_library), not only when they differ.
    built, torch = values.get(arg) or "?", values.get("torch_version") or "?"
    if torch.endswith("+cpu"):
        return f"it was built for PyTorch {built} with CUDA, and the installed torch ({torch}) is a CPU-only build"
    if torch == built:
        return (f"it was built for the installed PyTorch ({torch}), so the versions are not the cause: the library "
                "failed to load for another reason (a torch without CUDA, as on macOS; missing CUDA libraries; "
                "another Python)")
    return f"built for PyTorch {built}, running PyTorch {torch}"


def _trl_kwarg_advice(values: Mapping[str, str], arg: str) -> str:
    # Only a name in the signature's lookup is known to have moved or been renamed; any other is
    # said as what the log shows (held-out round 2: trl#3564, Chinese-Mixtral-8x7B#31).
    if values.get(arg):
        return values[arg]
    if values.get("trl_config_from_training_args"):
        return ("SFTTrainer rebuilt the TrainingArguments it was given as an SFTConfig with every field "
                "(SFTConfig(**args_as_dict)), and SFTConfig has every standard TrainingArguments field, so this "
                "one is a field your own TrainingArguments class adds")
    return ("it may have been renamed or removed, be newer than this TRL release, or not be a TRL argument; "
            "the SFTConfig documentation of the installed TRL version lists what it takes")


def _head_dims(values: Mapping[str, str], arg: str) -> str:
    # flash-attn 1.0-2.3 name a limit ("head dim > 64"); 2.4-2.5 name the cases ("head dim 256 with dropout, ...")
    if values.get(arg):
        return f"> {values[arg]}"
    return values.get("head_dim_case") or "?"


DERIVERS: dict[str, Callable[[Mapping[str, str], str], str]] = {
    "head_dims": _head_dims,
    "stalled_rank": _stalled_rank,
    "cuda_version": _cuda_version,
    "suffix_nvml": _suffix_nvml,
    "prefix_comma": _prefix_comma,
    "suffix_nccl": _suffix_nccl,
    "nccl_cuda_failure": _nccl_cuda_failure,
    "prefix_supports": _prefix_supports,
    "default_training_args": _default_training_args,
    "oom_detail": _oom_detail,
    "in_parens": _in_parens,
    "xformers_build_vs_torch": _xformers_build_vs_torch,
    "trl_kwarg_advice": _trl_kwarg_advice,
}


def derive(values: dict[str, str], specs: Mapping[str, str]) -> None:
    """Add derived values in place; ``specs`` maps name -> "function:capture"."""
    for name, spec in specs.items():
        function, _, arg = spec.partition(":")
        values[name] = DERIVERS[function](values, arg)
