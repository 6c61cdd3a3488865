"""Honest status (issue 13 item 3): ✓ only for checks that ran and passed, the summary counts what
could not run and why, and -v says what each passed check verified."""

from __future__ import annotations

from gpudoctor.checks import CHECKS
from gpudoctor.cli.main import main
from gpudoctor.knowledge import load_catalogue
from gpudoctor.model import CheckResult, CheckStatus
from gpudoctor.report.terminal import status_line


def test_no_gpu_sections_are_not_ticked_and_the_summary_says_why(capsys):
    assert main(["check", "--snapshot", "fixtures/snapshots/cpu-baseline", "--skip", "cuda-home-missing"]) == 0
    out = capsys.readouterr().out
    assert "[✓] Driver and libcuda" not in out and "[-] Driver and libcuda (1 of 8 checks ran; 7 could not run)" in out
    assert "[-] GPU capability (not checked: all 5 checks could not run)" in out
    assert "not run: no GPU information: NVML library-not-found (NVML Shared Library Not Found): 7 checks" in out
    assert "No problems found in the 8 checks that ran; 29 could not run (-v: why)." in out
    assert "No problems found (" not in out


def test_verbose_says_what_each_pass_verified(capsys):
    assert main(["check", "--snapshot", "fixtures/snapshots/h200-baseline", "-v"]) == 0
    out = capsys.readouterr().out
    assert "✓ bf16-unsupported: every GPU computes natively in bfloat16 (compute capability 8.0+)" in out
    assert "✓ no-nvidia-driver\n" not in out


def test_every_static_check_has_a_verified_sentence():
    catalogue = load_catalogue()
    missing = [c.id for c in CHECKS if not catalogue[c.id].verified]
    assert missing == []


def test_status_line_never_claims_what_did_not_run():
    passed = CheckResult("bf16-unsupported", CheckStatus.PASS, "", 0.0, ())
    skipped = CheckResult("no-gpu-visible", CheckStatus.SKIP, "no GPU", 0.0, ())
    assert status_line([], [passed]) == "[green]No problems found[/] (all 1 checks ran)."
    assert "No problems found" not in status_line([], [skipped])
    assert "Nothing could be checked" in status_line([], [skipped])
    assert status_line([], [passed, skipped]).endswith("1 could not run (-v: why).")
    assert status_line([], []) == "[yellow]Nothing was checked.[/]"


def test_nvcc_paths_sharing_a_compiler_name_it_once():
    """issue 13 item 5: three build paths on the same gcc list it once, not three times."""
    from rule_cases import load_cases

    from gpudoctor.engine import diagnose

    case = next(c for c in load_cases() if c.name == "gcc12-with-cuda121-limit")
    (finding,) = diagnose(case.host(), only=["nvcc-host-compiler-unsupported"]).findings
    assert "torch extensions, CMake, bare nvcc: /usr/bin/gcc 12.2.0 (gcc on PATH)" in finding.message
    assert finding.message.count("/usr/bin/gcc 12.2.0") == 1
    assert set(finding.evidence["build_paths"]) == {"torch extensions", "CMake", "bare nvcc"}
