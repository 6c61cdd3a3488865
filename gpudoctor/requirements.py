"""What the training needs (``check --require``, ``preflight(require=...)``): the feature
vocabulary and its parsing. Library code: a bad item raises ``RequirementError`` and the caller
decides how to say so (the CLI exits 2, preflight raises ValueError in the caller's script).

Imports only the standard library's builtins: preflight parses requirements on every uncached
call before the checks are imported.
"""

from __future__ import annotations

# feature -> (the form it is written in, what it asks for). One vocabulary for check, preflight
# and `gpudoctor rules --features`.
FEATURES = {
    "bf16": ("bf16", "the GPU computes in bfloat16 (compute capability 8.0 or newer)"),
    "flash-attn": ("flash-attn", "flash-attn is installed and supports this GPU"),
    "head_dim": ("head_dim=N", "flash-attn supports attention head dimension N on this GPU, backward included"),
}


class RequirementError(ValueError):
    """A requirement item that is not in the vocabulary or not well formed."""


def feature_forms() -> list[str]:
    return [form for form, _ in FEATURES.values()]


def _unknown(name: str) -> RequirementError:
    return RequirementError(f"unknown required feature {name!r}; valid: {', '.join(feature_forms())}")


def parse_requirements(items) -> dict:
    """``['head_dim=80', 'bf16,flash-attn']`` -> ``{'head_dim': [80], 'bf16': True, 'flash-attn': True}``.
    Items may be comma-separated; ``head-dim`` and ``flash_attn`` spellings are accepted."""
    requirements: dict = {}
    for item in items:
        if not isinstance(item, str):
            raise RequirementError(f"a required feature is a string, got {item!r}")
        for part in item.split(","):
            part = part.strip()
            if not part:
                continue
            name, has_value, value = part.partition("=")
            name = name.strip()
            if has_value:
                key = name.replace("-", "_")
                if key != "head_dim":
                    raise _unknown(part)
                try:
                    head_dim = int(value)
                except ValueError:
                    raise RequirementError(f"head_dim must be an integer, got {value.strip()!r}") from None
                if head_dim <= 0:
                    raise RequirementError(f"head_dim must be positive, got {head_dim}")
                requirements.setdefault("head_dim", []).append(head_dim)
                continue
            if name.replace("-", "_") == "head_dim":
                raise RequirementError("head_dim needs a value: head_dim=N")
            key = name.replace("_", "-")
            if key not in FEATURES:
                raise _unknown(name)
            requirements[key] = True
    return requirements
