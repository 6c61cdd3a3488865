"""``--peft``: the same QLoRA model with adapters built by PEFT's LoraConfig instead of
gpudoctor's own, trained the same way, plus what Unsloth would patch for that config.

QLoRALinear is an ``nn.Linear`` whose weight holds the packed NF4 bytes (as bitsandbytes'
Linear4bit does), so PEFT's default dispatch wraps it like any linear and its adapters land on
the base's device without a dtype cast (uint8 weights are not floating point).
"""

from __future__ import annotations

from .loop import build_model, train
from .model import LORA_TARGETS
from .presets import Preset
from .unsloth_prediction import predict


def adapted_projections(model) -> list[set[str]]:
    """Per decoder layer, the projection names that carry a PEFT LoRA adapter."""
    layers: dict[int, set[str]] = {}
    for name, module in model.named_modules():
        parts = name.split(".")
        if "layers" not in parts or not hasattr(module, "lora_A") or parts[-1] not in LORA_TARGETS:
            continue
        index = int(parts[parts.index("layers") + 1])
        layers.setdefault(index, set()).add(parts[-1])
    return [layers.get(i, set()) for i in range(max(layers, default=-1) + 1)]


def run(preset: Preset, device, lora_dropout: float = 0.0, bias: str = "none", use_dora: bool = False) -> dict:
    import peft
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(r=preset.lora_rank, lora_alpha=preset.lora_alpha, lora_dropout=lora_dropout, bias=bias,
                        use_dora=use_dora, target_modules=list(LORA_TARGETS))
    model = get_peft_model(build_model(preset, device, lora=False), config)
    result = train(model, preset, device)
    adapted = adapted_projections(model)
    return {"peft_version": peft.__version__, "training": result.to_json(), "problems": result.problems(),
            "unsloth": predict(lora_dropout, bias, use_dora, adapted)}
