"""Remedies for what the GPU itself cannot do."""

from __future__ import annotations

from typing import Any, Mapping

from ..model import CodeEdit, Fix
from .installer import python

GPUDOCTOR_ATTENTION = "gpudoctor.kernels.attention.flash_attention"


def torch_arch_unsupported(v: Mapping[str, Any]) -> list[Fix]:
    return [Fix("manual", "Install a torch build whose CUDA version has kernels for this GPU (cu128 or newer for "
                          "Blackwell sm_120; cu126 or older for Pascal/Volta); compare torch.cuda.get_arch_list() "
                          "with the GPU's compute capability.",
                (python(v, "-c 'import torch; print(torch.cuda.get_arch_list(), "
                           "torch.cuda.get_device_capability())'"),))]


def bf16_unsupported(v: Mapping[str, Any]) -> list[Fix]:
    return [Fix("code", "Use fp16 mixed precision on this GPU (fp16=True, torch_dtype=torch.float16).",
                (CodeEdit("train in fp16 instead of bf16", "bf16=True", "fp16=True"),))]


def flash_attn_arch_unsupported(v: Mapping[str, Any]) -> list[Fix]:
    return [Fix("code", f"Use attn_implementation=\"sdpa\", or gpudoctor's Triton FlashAttention kernel ({GPUDOCTOR_ATTENTION}).",
                (CodeEdit("use SDPA attention", 'attn_implementation="flash_attention_2"', 'attn_implementation="sdpa"'),))]


def flash_attn_head_dim_unsupported(v: Mapping[str, Any]) -> list[Fix]:
    return [Fix("code", f"Use attn_implementation=\"sdpa\", or gpudoctor's Triton FlashAttention ({GPUDOCTOR_ATTENTION}: "
                        "head_dim 32..256, multiples of 8).",
                (CodeEdit("use SDPA attention", 'attn_implementation="flash_attention_2"', 'attn_implementation="sdpa"'),))]


def triton_arch_unsupported(v: Mapping[str, Any]) -> list[Fix]:
    return [Fix("manual", "Upgrade torch together with its pinned Triton, or run without Triton kernels on this GPU "
                          "(no torch.compile, or backend=\"aot_eager\"; no Unsloth).")]
