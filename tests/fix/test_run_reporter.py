"""``gpudoctor run``'s output about the command goes through ``report.run.RunReporter`` (issue 13
item c): the diagnosis of a failure and the warnings of a success; ``cli/run.py`` only gathers the
findings and selects the reporter."""

from __future__ import annotations

import ast
import inspect

from gpudoctor.model import Finding, Fix, SetEnv, Severity, SuggestCommand
from gpudoctor.report.base import ReportView
from gpudoctor.report.run import RunReporter

WARNING = Finding("unsloth-layers-not-patched", Severity.WARNING, "Unsloth patched 0 layers",
                  "Unsloth patched 0 QKV layers\x1b]0;pwned\x07: lora_dropout > 0",
                  fixes=(Fix("code", "Set lora_dropout=0", (SuggestCommand("edit your LoraConfig"),)),))
ERROR = Finding("libcuda-unversioned-missing", Severity.ERROR, "no libcuda.so", "cannot find -lcuda",
                fixes=(Fix("user", "stub dir", (SetEnv("LIBRARY_PATH", "/x", prepend=True),)),))


def test_a_success_with_warnings_is_reported_as_a_success():
    text = RunReporter(0, 12).render(ReportView((WARNING,), title="gpudoctor run"))
    assert "the command succeeded, but its output showed 1 warning(s):" in text
    assert "[warning] unsloth-layers-not-patched: Unsloth patched 0 layers" in text
    assert "fix (code): Set lora_dropout=0" in text and "$ edit your LoraConfig" in text
    assert "\x1b" not in text and "\\x1b" in text  # the child's escape sequences are shown, not sent
    assert "exited" not in text and "diagnosing" not in text


def test_a_clean_success_renders_nothing():
    assert RunReporter(0, 5).render(ReportView((), title="gpudoctor run")) == ""


def test_a_failure_is_still_diagnosed_by_the_same_reporter():
    text = RunReporter(1, 7).render(ReportView((ERROR,), title="gpudoctor run"))
    assert "the command exited 1; diagnosing the last 7 lines of its output" in text
    assert "[error] libcuda-unversioned-missing" in text and "gpudoctor fix --only libcuda-unversioned-missing" in text


def test_a_scan_that_failed_is_said_by_the_reporter():
    view = ReportView((), title="gpudoctor run", extra={"scan_error": "RuntimeError: boom"})
    assert "could not scan the output for warnings (RuntimeError: boom)" in RunReporter(0, 0).render(view)
    assert "could not diagnose the output (RuntimeError: boom)" in RunReporter(3, 0).render(view)


def test_the_cli_formats_nothing_itself():
    """cli/run.py selects the reporter: it neither builds fix lines nor escapes finding text."""
    import gpudoctor.cli.run as cli_run

    tree = ast.parse(inspect.getsource(cli_run))
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    names |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert not names & {"fix_lines", "printable"}, names & {"fix_lines", "printable"}


def test_a_finding_this_machine_does_not_show_gets_its_steps_not_a_fix_that_finds_nothing():
    """`gpudoctor fix` plans from this machine's static checks: a finding they do not find here
    (fixable_here without its id) shows the steps by hand, and no `gpudoctor fix` line at all."""
    elsewhere = RunReporter(1, 3).render(ReportView((ERROR,), extra={"fixable_here": []}))
    assert "gpudoctor fix" not in elsewhere
    assert "$ case " in elsewhere and "LIBRARY_PATH" in elsewhere and "run these where it failed" in elsewhere
    here = RunReporter(1, 3).render(ReportView((ERROR,), extra={"fixable_here": [ERROR.id]}))
    assert f"$ gpudoctor fix --only {ERROR.id}" in here and "gpudoctor fix --dry-run" in here
