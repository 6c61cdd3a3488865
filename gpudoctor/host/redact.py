"""Secrets never leave the machine: env values whose names look secret are redacted in every
snapshot and report, and so are secrets inside the other values (issue 14 item 9): credentials
in URLs (``https://user:ghp_…@host``, ``s3://AKIA…:…@``), ``?token=…`` query parameters,
``password=…`` pairs and the token formats of well-known services."""

from __future__ import annotations

import re
from typing import Mapping

REDACTED = "<redacted>"
_SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|(?:^|_)(?:PASS|PWD|PW|PAT|COOKIE|SESSION)(?:_|$)",
                          re.IGNORECASE)
_NOT_SECRET_NAMES = {"PWD", "OLDPWD"}  # the current and previous directory

# user:password@ in any URL; the user part alone is kept out too (often a token itself)
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s:]*(?::[^@\s]*)?@")
# name=value pairs in query strings, option strings and config-like values
_SECRET_PAIR = re.compile(
    r"(?P<name>[A-Za-z0-9_.-]*(?:token|secret|password|passwd|pwd|api[_-]?key|access[_-]?key|auth|signature|sig|"
    r"credential)[A-Za-z0-9_.-]*)(?P<sep>\s*[=:]\s*)(?P<value>[^\s&;,\"']+)", re.IGNORECASE)
# token formats: Hugging Face, GitHub, AWS access keys, OpenAI/Anthropic-style keys, Slack, JWTs
_TOKEN = re.compile(r"\b(?:hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|"
                    r"(?:AKIA|ASIA)[0-9A-Z]{16}|sk-[A-Za-z0-9_-]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|"
                    r"eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})")


def is_secret_name(name: str) -> bool:
    return name.upper() not in _NOT_SECRET_NAMES and bool(_SECRET_NAME.search(name))


def redact_value(value: str) -> str:
    """The value with every secret inside it replaced by ``<redacted>``."""
    value = _URL_CREDENTIALS.sub(lambda m: m.group("scheme") + REDACTED + "@", value)
    value = _SECRET_PAIR.sub(lambda m: m.group("name") + m.group("sep") + REDACTED, value)
    return _TOKEN.sub(REDACTED, value)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    return {name: (REDACTED if is_secret_name(name) else redact_value(value)) for name, value in env.items()}


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
