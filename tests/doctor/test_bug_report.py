"""`gpudoctor report` and check --json's environment object (issue 13 item 9)."""

from __future__ import annotations

import json
import sys

from gpudoctor.cli.main import main
from gpudoctor.engine import diagnose
from gpudoctor.environment import environment
from gpudoctor.host import SnapshotHost

H200 = "fixtures/snapshots/h200-baseline"


def test_report_block_has_the_versions_a_bug_report_needs(capsys):
    assert main(["report", "--snapshot", H200]) == 0
    out = capsys.readouterr().out
    assert out.startswith("<details><summary>gpudoctor report</summary>") and "```text" in out
    for line in ("GPU 0: NVIDIA H200 (compute 9.0", "NVIDIA driver: 580.159.04, CUDA (driver): 13.0",
                 "torch CUDA build: 13.0", "cuDNN (wheel): 9.19.0.56", "NCCL (wheel): 2.28.9", "torch: 2.11.0",
                 "flash-attn: not found", "unsloth: not found", "trl: not found", "accelerate: 1.15.0",
                 "deepspeed: not found", "xformers: not found", "RAM: 125.9 GiB", "CPU: "):
        assert line in out, line
    assert "NVIDIA_REQUIRE_CUDA" not in out


def test_report_redacts_secrets(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_TOKEN", "hf_" + "a" * 30)
    monkeypatch.setenv("HF_HOME", "https://user:hunter2secret@example.com/cache")
    monkeypatch.setenv("CUDA_HOME", "/usr/local/cuda?token=abcdef123456")
    assert main(["report"]) == 0
    out = capsys.readouterr().out
    assert "hunter2secret" not in out and "abcdef123456" not in out and "a" * 30 not in out
    assert "HF_HOME=https://<redacted>@example.com/cache" in out


def test_check_json_gains_an_environment_object(capsys):
    assert main(["check", "--json", "--snapshot", H200]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["schema"] == 1
    env = payload["environment"]
    assert env["nvidia"]["gpus"][0]["name"] == "NVIDIA H200"
    assert env["python_packages"]["torch_cuda_build"] == "13.0" and env["python_packages"]["nccl"] == "2.28.9"
    assert env["system"]["python_executable"] == "/opt/torch/.venv/bin/python3"


def test_environment_reads_only_gathered_facts():
    """--only bf16-unsupported gathers the driver alone: no packages or toolchain section is invented."""
    report = diagnose(SnapshotHost(H200), only=["bf16-unsupported"])
    env = environment(report.facts)
    assert env["nvidia"] is not None and env["python_packages"] is None and env["toolchain"] is None


def test_report_never_imports_torch():
    import subprocess

    code = ("import sys, io, contextlib; from gpudoctor.cli.main import main\n"
            "with contextlib.redirect_stdout(io.StringIO()): main(['report'])\n"
            "assert 'torch' not in sys.modules and 'triton' not in sys.modules, 'imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
