"""What Unsloth's fast patching would make of a LoRA config, without Unsloth.

Unsloth swaps in its fused LoRA kernels per decoder layer only when the adapter config has
``lora_dropout == 0`` and ``bias == "none"`` (and no DoRA magnitude vector), and only for the
projection groups that all carry adapters: QKV needs q, k and v; O needs o; MLP needs gate, up and
down. It then logs ``Unsloth <v> patched <N> layers with <Q> QKV layers, <O> O layers and <M> MLP
layers.`` (the line gpudoctor's log rule ``unsloth-layers-not-patched`` reads). Otherwise it
warns, e.g. ``Unsloth: Dropout = 0 is supported for fast patching. You are using dropout = 0.1.
Unsloth will patch all other layers, except LoRA matrices, causing a performance hit.``
No torch here.
"""

from __future__ import annotations

GROUPS = {"qkv": ("q_proj", "k_proj", "v_proj"), "o": ("o_proj",), "mlp": ("gate_proj", "up_proj", "down_proj")}


def predict(lora_dropout: float, bias: str, use_dora: bool, adapted_per_layer: list[set[str]]) -> dict:
    reasons = []
    if lora_dropout != 0:
        reasons.append(f"Unsloth: Dropout = 0 is supported for fast patching. You are using dropout = {lora_dropout}. "
                       "Unsloth will patch all other layers, except LoRA matrices, causing a performance hit.")
    if bias != "none":
        reasons.append(f"Unsloth: bias = `none` is supported for fast patching. You are using bias = {bias}. "
                       "Unsloth will patch all other layers, except LoRA matrices, causing a performance hit.")
    if use_dora:
        reasons.append("DoRA adds a magnitude vector that Unsloth's fused LoRA kernels do not compute.")
    fast = not reasons
    counts = {group: sum(1 for adapted in adapted_per_layer if fast and set(names) <= adapted)
              for group, names in GROUPS.items()}
    layers = len(adapted_per_layer)
    return {
        "fast_patching": fast and all(counts[g] == layers for g in GROUPS),
        "layers": layers,
        "qkv_layers": counts["qkv"],
        "o_layers": counts["o"],
        "mlp_layers": counts["mlp"],
        "would_log": f"Unsloth <version> patched {layers} layers with {counts['qkv']} QKV layers, "
                     f"{counts['o']} O layers and {counts['mlp']} MLP layers.",
        "warnings": reasons,
        "config": {"lora_dropout": lora_dropout, "bias": bias, "use_dora": use_dora},
    }
