"""The model a training script loads, as a shape: its ``config.json`` found without the network
(a local model directory, else the Hugging Face hub cache), and the attention shape it gives
(head_dim, heads, KV heads), which decides what FlashAttention can run.

Where the hub cache is follows huggingface_hub's documented variables
(docs/source/en/package_reference/environment_variables.md): ``HF_HUB_CACHE`` (formerly
``HUGGINGFACE_HUB_CACHE``), else ``$HF_HOME/hub``, with ``HF_HOME`` defaulting to
``$XDG_CACHE_HOME/huggingface`` or ``~/.cache/huggingface``; transformers 4.x also honoured
``TRANSFORMERS_CACHE``. A model is cached as ``models--<org>--<name>/snapshots/<commit>/`` with
``refs/main`` naming the commit ``main`` resolved to."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Mapping

MAX_CONFIG_BYTES = 1_000_000  # a config.json is a few KB; anything this large is not one
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")


@dataclass(frozen=True)
class ModelShape:
    """A model's attention shape from its config.json: head_dim, query heads and KV heads (fewer under GQA or
    MQA), its model_type, and how head_dim was found."""

    head_dim: int
    heads: int
    kv_heads: int
    model_type: str
    derived: str  # how head_dim was found: "head_dim" or "hidden_size / num_attention_heads"


@dataclass(frozen=True)
class ModelConfig:
    """What a scan learned about one model reference: the config.json it read (or why none)."""

    reference: str
    path: str = ""  # the config.json read; "" when none was found
    where: str = ""  # "local directory" | "Hugging Face cache"
    why_not: str = ""  # why no shape: not found, not readable, not an attention model
    shape: ModelShape | None = None


def hub_cache_dirs(env: Mapping[str, str], cache_dir: str = "") -> list[str]:
    """The hub cache directories to look in, the one from_pretrained would use first."""
    dirs = [cache_dir] if cache_dir else []
    hub = env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE")
    if not hub:
        home = env.get("HF_HOME") or os.path.join(
            env.get("XDG_CACHE_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".cache"),
            "huggingface")
        hub = os.path.join(os.path.expanduser(home), "hub")
    dirs.append(os.path.expanduser(hub))
    if env.get("TRANSFORMERS_CACHE"):
        dirs.append(os.path.expanduser(env["TRANSFORMERS_CACHE"]))
    return list(dict.fromkeys(dirs))


def find_model_config(reference: str, script_dir: str, env: Mapping[str, str], cache_dir: str = "") -> ModelConfig:
    """The config.json of ``reference`` (a path or a hub id as the script passes it)."""
    local = _local_dir(reference, script_dir)
    if local is not None:
        config = os.path.join(local, "config.json")
        if not os.path.isfile(config):
            return ModelConfig(reference, why_not=f"the local model directory {local} has no config.json")
        return _read(reference, config, "local directory")
    if not _HUB_ID.match(reference):
        return ModelConfig(reference, why_not=f"{reference!r} is neither an existing directory nor a hub model id")
    searched = hub_cache_dirs(env, cache_dir)
    for hub in searched:
        snapshot, note = _snapshot(os.path.join(hub, "models--" + reference.replace("/", "--")))
        if snapshot:
            return _read(reference, os.path.join(snapshot, "config.json"), "Hugging Face cache" + note)
    return ModelConfig(reference, why_not=f"{reference} is not in the local Hugging Face cache (looked in "
                                          f"{', '.join(searched)}); gpudoctor does not download it")


def _local_dir(reference: str, script_dir: str) -> str | None:
    expanded = os.path.expanduser(reference)
    # from_pretrained resolves a relative path against the working directory at run time; the
    # script's own directory and the directory gpudoctor runs in are the two likely ones
    candidates = [expanded] if os.path.isabs(expanded) else [os.path.join(script_dir, expanded), os.path.abspath(expanded)]
    return next((os.path.normpath(c) for c in candidates if os.path.isdir(c)), None)


def _snapshot(repo: str) -> tuple[str, str]:
    """(snapshot dir with a config.json, note) or ("", "")."""
    snapshots = os.path.join(repo, "snapshots")
    try:
        with open(os.path.join(repo, "refs", "main"), encoding="utf-8") as handle:
            commit = handle.read(100).strip()
        if commit and os.path.isfile(os.path.join(snapshots, commit, "config.json")):
            return os.path.join(snapshots, commit), ""
    except OSError:
        pass
    try:
        found = [os.path.join(snapshots, name) for name in os.listdir(snapshots)
                 if os.path.isfile(os.path.join(snapshots, name, "config.json"))]
    except OSError:
        return "", ""
    if not found:
        return "", ""
    newest = max(found, key=os.path.getmtime)
    note = "" if len(found) == 1 else f", newest of {len(found)} snapshots (no refs/main)"
    return newest, note


def _read(reference: str, path: str, where: str) -> ModelConfig:
    try:
        if os.path.getsize(path) > MAX_CONFIG_BYTES:
            return ModelConfig(reference, path, where, f"{path} is larger than {MAX_CONFIG_BYTES} bytes")
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as exc:
        return ModelConfig(reference, path, where, f"{path} could not be read: {exc}")
    if not isinstance(data, dict):
        return ModelConfig(reference, path, where, f"{path} is not a JSON object")
    shape, why = model_shape(data)
    return ModelConfig(reference, path, where, why, shape)


def _int(config: Mapping, *keys: str) -> int | None:
    for key in keys:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def model_shape(config: Mapping) -> tuple[ModelShape | None, str]:
    """(shape, "") or (None, why). The names are transformers' config attributes (and their
    GPT-2/Falcon-era aliases); a multimodal config keeps its language model in ``text_config``."""
    heads = _int(config, "num_attention_heads", "n_head", "num_heads")
    if heads is None and isinstance(config.get("text_config"), dict):
        return model_shape(config["text_config"])
    model_type = str(config.get("model_type") or "")
    if heads is None:
        return None, f"no attention head count in the config (model_type {model_type or 'unknown'})"
    kv_heads = _int(config, "num_key_value_heads", "num_kv_heads", "n_head_kv")
    if kv_heads is None:
        kv_heads = 1 if config.get("multi_query") is True else heads
    head_dim = _int(config, "head_dim")
    if head_dim is not None:
        return ModelShape(head_dim, heads, kv_heads, model_type, "head_dim"), ""
    hidden = _int(config, "hidden_size", "n_embd", "d_model")
    if hidden is None or hidden % heads:
        return None, f"head_dim cannot be derived (hidden size {hidden}, {heads} heads)"
    return ModelShape(hidden // heads, heads, kv_heads, model_type, "hidden_size / num_attention_heads"), ""
