"""A small decoder (Llama-style) built in-process: no download, no hub, seeded weights.

token embedding -> N x [RMSNorm -> rotary attention -> RMSNorm -> SwiGLU MLP] -> RMSNorm -> head.
Every linear, the LM head included, is a frozen NF4 base (QLoRALinear); LoRA sits on the seven
projections of each block, as in a QLoRA fine-tune. Embedding and norms are frozen too.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .presets import Preset
from .qlora import QLoRALinear

ATTENTION_BACKENDS = ("triton", "sdpa", "eager")
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class RMSNorm(nn.Module):
    def __init__(self, dim: int, dtype, device):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim, dtype=dtype, device=device), requires_grad=False)

    def forward(self, x):
        # fp32 statistics, as Llama does: bf16 squares lose too much for the mean.
        variance = x.float().pow(2).mean(-1, keepdim=True)
        return (x.float() * torch.rsqrt(variance + 1e-6)).to(x.dtype) * self.weight


def rotary_tables(seq: int, head_dim: int, device, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))
    angles = torch.outer(torch.arange(seq, device=device, dtype=torch.float32), inv_freq)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rotary(x, cos, sin):
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


def eager_attention(q, k, v):
    """softmax(q k^T / sqrt(d) + causal mask) v in the input dtype: what a model without a fused
    kernel does (and the slowest, most memory-hungry backend)."""
    group = q.shape[1] // k.shape[1]
    if group > 1:
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    seq = q.shape[-2]
    mask = torch.ones(seq, seq, dtype=torch.bool, device=q.device).tril()
    scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores.float(), dim=-1).to(q.dtype) @ v


def attend(q, k, v, backend: str):
    if backend == "triton":
        from .ops import flash_attention

        return flash_attention(q, k, v, causal=True)
    if backend == "sdpa":
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=q.shape[1] != k.shape[1])
    if backend == "eager":
        return eager_attention(q, k, v)
    raise ValueError(f"unknown attention backend {backend!r} (choose from {', '.join(ATTENTION_BACKENDS)})")


class Attention(nn.Module):
    def __init__(self, preset: Preset, make_linear):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = preset.heads, preset.kv_heads, preset.head_dim
        self.q_proj = make_linear(preset.dim, preset.heads * preset.head_dim)
        self.k_proj = make_linear(preset.dim, preset.kv_heads * preset.head_dim)
        self.v_proj = make_linear(preset.dim, preset.kv_heads * preset.head_dim)
        self.o_proj = make_linear(preset.heads * preset.head_dim, preset.dim)

    def forward(self, x, cos, sin, backend: str):
        batch, seq, _ = x.shape
        q = self.q_proj(x).view(batch, seq, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(batch, seq, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(batch, seq, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        out = attend(q.contiguous(), k.contiguous(), v.contiguous(), backend)
        return self.o_proj(out.transpose(1, 2).reshape(batch, seq, self.heads * self.head_dim))


class SwiGLU(nn.Module):
    def __init__(self, preset: Preset, make_linear):
        super().__init__()
        self.gate_proj = make_linear(preset.dim, preset.ffn)
        self.up_proj = make_linear(preset.dim, preset.ffn)
        self.down_proj = make_linear(preset.ffn, preset.dim)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, preset: Preset, make_linear, dtype, device):
        super().__init__()
        self.attention_norm = RMSNorm(preset.dim, dtype, device)
        self.self_attn = Attention(preset, make_linear)
        self.mlp_norm = RMSNorm(preset.dim, dtype, device)
        self.mlp = SwiGLU(preset, make_linear)

    def forward(self, x, cos, sin, backend):
        x = x + self.self_attn(self.attention_norm(x), cos, sin, backend)
        return x + self.mlp(self.mlp_norm(x))


class QLoRADecoder(nn.Module):
    def __init__(self, preset: Preset, device, dtype: torch.dtype, attention_backend: str = "triton",
                 nf4_backend: str = "triton", lora: bool = True, seed: int = 0):
        super().__init__()
        generator = torch.Generator(device=device).manual_seed(seed)
        self.attention_backend = attention_backend

        def make_linear(fan_in, fan_out, with_lora=lora):
            return QLoRALinear(fan_in, fan_out, preset.lora_rank, preset.lora_alpha, dtype, device, generator,
                               lora=with_lora, backend=nf4_backend)

        embedding = torch.randn(preset.vocab, preset.dim, generator=generator, device=device)
        self.embed_tokens = nn.Parameter(embedding.to(dtype), requires_grad=False)
        self.layers = nn.ModuleList(Block(preset, make_linear, dtype, device) for _ in range(preset.layers))
        self.norm = RMSNorm(preset.dim, dtype, device)
        self.lm_head = make_linear(preset.dim, preset.vocab, with_lora=False)
        cos, sin = rotary_tables(preset.seq, preset.head_dim, device, dtype)
        self.register_buffer("rotary_cos", cos, persistent=False)
        self.register_buffer("rotary_sin", sin, persistent=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = F.embedding(tokens, self.embed_tokens)
        for block in self.layers:
            x = block(x, self.rotary_cos, self.rotary_sin, self.attention_backend)
        return self.lm_head(self.norm(x))


def causal_lm_loss(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy in fp32 (bf16 logits lose the small probability differences)."""
    return F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


def lora_parameters(model: nn.Module) -> dict[str, nn.Parameter]:
    return {name: p for name, p in model.named_parameters() if "lora_" in name}


def base_parameters(model: nn.Module) -> dict[str, nn.Parameter]:
    return {name: p for name, p in model.named_parameters() if "lora_" not in name}
