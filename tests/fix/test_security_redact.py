"""Issue 14 item 9: secrets inside kept values are redacted in snapshots."""

from __future__ import annotations

import pytest

from gpudoctor.host.redact import REDACTED, redact_env, relevant_env

GHP = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
HF = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz012345"
AKIA = "AKIA" + "IOSFODNN7EXAMPLE"


@pytest.mark.parametrize("name,value,secret", [
    ("PYTHONPATH", f"/opt/x:https://user:{GHP}@github.com/org/repo.git", GHP),
    ("HF_HOME", f"s3://{AKIA}:wJalrXUtnFEMI/K7MDENG@bucket/hf", "wJalrXUtnFEMI/K7MDENG"),
    ("CUDA_CACHE_URL", f"https://cache.example/x?token={HF}&v=1", HF),
    ("NCCL_SOCKET_OPTS", "retries=3,password=hunter2,x=1", "hunter2"),
    ("TORCH_LOG_URL", f"https://example/{HF}", HF),
    ("TRITON_DB_PASS", "hunter2", "hunter2"),
    ("GPUDOCTOR_X_PWD", "hunter2", "hunter2"),
])
def test_secrets_inside_kept_values_are_redacted(name, value, secret):
    kept = relevant_env({name: value, "PATH": "/usr/bin"})
    assert name in kept and secret not in kept[name] and REDACTED in kept[name]
    assert kept["PATH"] == "/usr/bin"


def test_plain_values_stay_as_they_are():
    env = {"PATH": "/usr/local/cuda/bin:/usr/bin", "PWD": "/home/u", "LD_LIBRARY_PATH": "/opt/lib",
           "HF_HOME": "https://huggingface.co/models", "CUDA_VISIBLE_DEVICES": "0,1", "TORCH_KEYWORDS": REDACTED}
    redacted = redact_env(env)
    assert {k: redacted[k] for k in ("PATH", "PWD", "LD_LIBRARY_PATH", "HF_HOME", "CUDA_VISIBLE_DEVICES")} == \
        {k: env[k] for k in ("PATH", "PWD", "LD_LIBRARY_PATH", "HF_HOME", "CUDA_VISIBLE_DEVICES")}
