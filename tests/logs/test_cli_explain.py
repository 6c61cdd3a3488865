"""`gpudoctor explain`: exit 1 when a known failure is recognised, 0 when none, 2 with a one-line
error for unreadable input (never a traceback)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

from gpudoctor.cli.main import main

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
FAILING = str(FIXTURES / "libcuda-unversioned-missing" / "seed-000-unsloth.log")
HEALTHY = str(FIXTURES / "healthy" / "nccl-1412-init.log")


def test_recognised_failure_exits_1(capsys):
    assert main(["explain", "--no-probe", FAILING]) == 1
    out = capsys.readouterr().out
    assert "libcuda-unversioned-missing" in out and "unsloth-layers-not-patched" in out


def test_healthy_log_exits_0(capsys):
    assert main(["explain", "--no-probe", HEALTHY]) == 0
    assert "No known cause recognised" in capsys.readouterr().out


def test_unreadable_input_exits_2_with_one_line(capsys, tmp_path):
    assert main(["explain", str(tmp_path / "nope.log")]) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and "nope.log" in captured.err and "Traceback" not in captured.err
    assert main(["explain", str(tmp_path)]) == 2


def test_json_output_follows_the_schema(capsys):
    assert main(["explain", "--no-probe", "--json", FAILING]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == 1 and data["tool"]["name"] == "gpudoctor"
    assert data["findings"][0]["id"] == "libcuda-unversioned-missing"
    assert data["checks"] == []


def test_json_for_a_healthy_log(capsys):
    assert main(["explain", "--json", HEALTHY]) == 0
    assert json.loads(capsys.readouterr().out)["findings"] == []


def test_stdin(monkeypatch, capsys):
    text = (FIXTURES / "driver-too-old" / "fooocus-1313.log").read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text)))
    assert main(["explain", "--no-probe", "--json", "-"]) == 1
    assert json.loads(capsys.readouterr().out)["findings"][0]["id"] == "driver-too-old"


def test_live_probes_do_not_break_explain(capsys):
    # Without --no-probe the fixes are enriched from this machine; whatever it has, it works.
    assert main(["explain", FAILING]) == 1


def test_unknown_failure_says_so_and_shows_the_last_exception(capsys, tmp_path):
    log = tmp_path / "u.log"
    log.write_text('Traceback (most recent call last):\n  File "/w/train.py", line 42, in step\n    x = y[3]\n'
                   "IndexError: list index out of range\n")
    assert main(["explain", str(log)]) == 0
    out = capsys.readouterr().out
    assert "No known cause recognised" in out and "IndexError: list index out of range" in out
    assert "/w/train.py:42" in out and "gpudoctor report" in out
