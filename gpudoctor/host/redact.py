"""Secrets never leave the machine: env values whose names look secret are redacted in every
snapshot and report."""

from __future__ import annotations

import re
from typing import Mapping

REDACTED = "<redacted>"
_SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    return {name: (REDACTED if is_secret_name(name) else value) for name, value in env.items()}


# Snapshots keep only the variables probes read (and redact secrets among them), so a recording
# carries no unrelated personal settings.
_RELEVANT_NAMES = {
    "PATH", "HOME", "USER", "SHELL", "LD_LIBRARY_PATH", "LIBRARY_PATH", "LD_PRELOAD", "CC", "CXX",
    "CUDAHOSTCXX", "NVCC_CCBIN", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "VIRTUAL_ENV",
    "KUBERNETES_SERVICE_HOST", "BNB_CUDA_VERSION", "HF_HOME", "PYTHONPATH",
}
_RELEVANT_PREFIXES = ("CUDA_", "TRITON_", "NVIDIA_", "NCCL_", "PYTORCH_", "TORCH_", "XDG_", "COLAB_", "GPUDOCTOR_")


def relevant_env(env: Mapping[str, str]) -> dict[str, str]:
    kept = {k: v for k, v in env.items() if k in _RELEVANT_NAMES or k.startswith(_RELEVANT_PREFIXES)}
    return redact_env(kept)
