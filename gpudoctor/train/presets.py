"""Model shapes for the training pass. Plain data: no torch import, so the parent can list them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Preset:
    """A model shape for the training pass (see PRESETS): a real model's attention shapes with few layers and
    short sequences, and the steps, learning rate, dtype and LoRA settings it trains with."""

    name: str
    description: str
    vocab: int
    heads: int
    kv_heads: int
    head_dim: int
    layers: int
    ffn: int
    seq: int
    batch: int
    steps: int
    lr: float
    dtype: str  # "bfloat16" | "float16"
    lora_rank: int = 16
    lora_alpha: int = 32

    @property
    def dim(self) -> int:
        return self.heads * self.head_dim


# Real models' attention shapes (heads x head_dim, GQA) with few layers and short sequences, so the
# pass exercises the same kernel configurations as a real fine-tune in seconds.
PRESETS: dict[str, Preset] = {
    "phi2": Preset("phi2", "Phi-2 shapes: 32 heads x head_dim 80 (the head_dim FlashAttention's "
                   "backward refuses on Turing), bf16", vocab=1024, heads=32, kv_heads=32, head_dim=80,
                   layers=2, ffn=10240, seq=256, batch=4, steps=10, lr=3e-3, dtype="bfloat16"),
    "llama": Preset("llama", "Llama-3-8B shapes: 32 query heads, 8 KV heads (GQA), head_dim 128, bf16",
                    vocab=1024, heads=32, kv_heads=8, head_dim=128, layers=2, ffn=14336, seq=256,
                    batch=4, steps=10, lr=3e-3, dtype="bfloat16"),
    "turing": Preset("turing", "Phi-2 attention shapes in fp16 only (no bf16 before Ampere)", vocab=1024,
                     heads=32, kv_heads=32, head_dim=80, layers=2, ffn=4096, seq=256, batch=2, steps=10,
                     lr=3e-3, dtype="float16"),
    "tiny": Preset("tiny", "for the CPU (Triton interpreter): 2 heads over 1 KV head, head_dim 32, fp16 "
                   "(Triton 3.6's interpreter computes bf16 dots wrongly)",
                   vocab=64, heads=2, kv_heads=1, head_dim=32, layers=1, ffn=128, seq=32, batch=4,
                   steps=6, lr=1e-2, dtype="float16"),
}

DEFAULT_GPU_PRESET = "phi2"
CPU_PRESET = "tiny"
