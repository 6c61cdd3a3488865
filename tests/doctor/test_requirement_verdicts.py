"""Every --require feature is verified or fails the gate (issue 13 item 2)."""

from __future__ import annotations

import json

from gpudoctor.cli.main import main
from gpudoctor.engine import diagnose
from gpudoctor.host import SnapshotHost
from gpudoctor.requirement_verdicts import MET, NOT_MET, UNVERIFIED, verify_requirements
from gpudoctor.requirements import FEATURES, parse_requirements

H200 = "fixtures/snapshots/h200-baseline"
CPU = "fixtures/snapshots/cpu-baseline"


def _verdicts(snapshot, items, **kwargs):
    requirements = parse_requirements(items)
    report = diagnose(SnapshotHost(snapshot), requirements=requirements, **kwargs)
    return {v.feature: v for v in verify_requirements(requirements, report.checks, report.facts)}


def test_flash_attn_not_installed_is_not_met_and_fails_check(capsys):
    verdicts = _verdicts(H200, ["flash-attn", "head_dim=80"])
    assert verdicts["flash-attn"].status == NOT_MET and "not installed" in verdicts["flash-attn"].reason
    assert verdicts["head_dim=80"].status == NOT_MET
    # the issue's own example: was "No problems found", exit 0
    assert main(["check", "--snapshot", H200, "--require", "flash-attn", "--require", "head_dim=80"]) == 1
    out = capsys.readouterr().out
    assert "✗ flash-attn: NOT met" in out and "2 required feature(s) not verified" in out


def test_bf16_met_on_h200_and_unverifiable_without_a_gpu(capsys):
    assert _verdicts(H200, ["bf16"])["bf16"].status == MET
    assert main(["check", "--snapshot", H200, "--require", "bf16"]) == 0
    capsys.readouterr()
    verdict = _verdicts(CPU, ["bf16"])["bf16"]
    assert verdict.status == UNVERIFIED and "NVML" in verdict.reason
    assert main(["check", "--snapshot", CPU, "--require", "bf16", "--skip", "cuda-home-missing"]) == 1  # gate fails
    assert "? bf16: cannot verify here" in capsys.readouterr().out


def test_a_skipped_deciding_check_cannot_verify():
    verdict = _verdicts(H200, ["bf16"], skip=["bf16-unsupported"])["bf16"]
    assert verdict.status == UNVERIFIED and "--only/--skip" in verdict.reason


def test_json_carries_the_verdicts(capsys):
    assert main(["check", "--snapshot", H200, "--require", "bf16,flash-attn", "--json"]) == 1
    payload = json.loads(capsys.readouterr().out)
    assert [(r["feature"], r["status"]) for r in payload["requirements"]] == [("bf16", "met"), ("flash-attn", "NOT met")]


def test_rules_features_lists_the_vocabulary(capsys):
    assert main(["rules", "--features"]) == 0
    out = capsys.readouterr().out
    assert [line.split()[0] for line in out.splitlines()] == [form for form, _ in FEATURES.values()]
    assert main(["rules", "--features", "--json"]) == 0
    assert [f["form"] for f in json.loads(capsys.readouterr().out)] == ["bf16", "flash-attn", "head_dim=N"]


def test_markdown_shows_the_verdicts(capsys):
    assert main(["check", "--snapshot", H200, "--require", "bf16,flash-attn", "--markdown"]) == 1
    out = capsys.readouterr().out
    assert "| `bf16` | met |" in out and "| `flash-attn` | NOT met |" in out
