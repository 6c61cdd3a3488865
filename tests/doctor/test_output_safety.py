"""Text quoted from a log or the machine cannot drive the reader's terminal or inject HTML
(issue 14 item 15): the human reporters show control characters escaped, Markdown escapes <, >, &."""

from __future__ import annotations

import re

import pytest

from gpudoctor.cli.main import main
from gpudoctor.model import CheckResult, CheckStatus, Finding, Fix, Severity, SuggestCommand
from gpudoctor.report.base import ReportView
from gpudoctor.report.bugreport import BugReportReporter
from gpudoctor.report.markdown import MarkdownReporter
from gpudoctor.report.run import RunReporter
from gpudoctor.report.explain import ExplainReporter
from gpudoctor.report.terminal import TerminalReporter
from gpudoctor.report.text import printable

# A terminal title change, a screen clear, a full reset (ESC c: not stripped by the log cleaner),
# a C1 CSI (0x9b), a C0 control and an over-long CSI the cleaner's bounded pattern leaves alone.
HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x1bc\x9b2J\x01\x1b[" + "1" * 100 + ";1m"
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _hostile_finding() -> Finding:
    return Finding("libcuda-unversioned-missing", Severity.ERROR, "title" + HOSTILE, "message" + HOSTILE,
                   {"line": "cannot find -lcuda" + HOSTILE}, (Fix("manual", "summary" + HOSTILE),))


def test_printable_escapes_controls_and_keeps_newlines_and_tabs():
    assert printable("a\x1b[2Jb\tc\nd\x9be\x7f\u200b") == "a\\x1b[2Jb\tc\nd\\x9be\\x7f\u200b"
    assert printable("plain ✓ text") == "plain ✓ text"


@pytest.mark.parametrize("verbose", [False, True])
def test_explain_of_a_hostile_log_prints_no_control_characters(tmp_path, capsys, verbose):
    log = tmp_path / "train.log"
    log.write_bytes(("x86_64-linux-gnu/bin/ld: cannot find -lcuda" + HOSTILE + "\n"
                     "collect2: error: ld returned 1 exit status\n").encode())
    assert main(["explain", "--no-probe", *(["-v"] if verbose else []), str(log)]) == 1
    out = capsys.readouterr().out
    assert "cannot find -lcuda" in out or not verbose
    assert not CONTROL.search(out), repr(CONTROL.search(out))
    if verbose:
        assert "\\x1bc" in out and "\\x9b2J" in out  # shown, escaped: the reader sees what was there


def test_check_log_of_a_hostile_log_prints_no_control_characters(tmp_path, capsys):
    log = tmp_path / "train.log"
    log.write_bytes(("ld: cannot find -lcuda" + HOSTILE + "\n").encode())
    main(["check", "--snapshot", "fixtures/snapshots/h200-baseline", "-v", "--log", str(log)])
    out = capsys.readouterr().out
    assert "cannot find -lcuda" in out
    assert not CONTROL.search(out), repr(CONTROL.search(out))


@pytest.mark.parametrize("reporter", [ExplainReporter(["x.log"], verbose=True), TerminalReporter(verbose=True),
                                      RunReporter(1, 10)])
def test_human_reporters_escape_findings_text(reporter):
    view = ReportView((_hostile_finding(),), (CheckResult("x", CheckStatus.SKIP, "reason" + HOSTILE),),
                      summary=("summary" + HOSTILE,))
    out = reporter.render(view)
    assert "message" in out
    assert not CONTROL.search(out), repr(CONTROL.search(out))


PAYLOAD = "<img src=x onerror=alert(1)> & </details><script>x</script>"


def test_markdown_escapes_html_from_findings_and_checks():
    finding = Finding("some-rule", Severity.ERROR, "title " + PAYLOAD, "message " + PAYLOAD,
                      {}, (Fix("manual", "summary " + PAYLOAD, (SuggestCommand("echo '<b>' && true"),)),))
    view = ReportView((finding,), (CheckResult("some-rule", CheckStatus.FAIL, "reason " + PAYLOAD, findings=(finding,)),),
                      summary=("summary " + PAYLOAD,))
    out = MarkdownReporter().render(view)
    assert "<img" not in out and "<script" not in out and "</details" not in out
    assert "&lt;img src=x onerror=alert(1)&gt; &amp;" in out
    assert "`echo '<b>' && true`" in out  # a code span is literal in Markdown: kept readable
    assert "| reason &lt;img src=x onerror=alert(1)&gt; &amp; &lt;/details&gt;" in out  # still one table cell
    assert not CONTROL.search(MarkdownReporter().render(ReportView((_hostile_finding(),))))


def test_bug_report_cannot_break_out_of_its_code_block():
    """The bug report is one fenced block inside <details>: HTML inside a code block is shown
    literally (entities too, so it is not escaped there), but a value with a ``` line would close
    the fence and put the rest, </details><script> included, into the page as raw HTML."""
    breakout = "\n```\n</details>" + PAYLOAD + "\n````\n"
    finding = Finding("some-rule", Severity.ERROR, "title " + PAYLOAD + breakout, "message")
    env = {"env": {"CUDA_HOME": "/opt/x" + breakout + HOSTILE}, "cpu": {"model": "cpu" + breakout, "logical_cpus": 4}}
    out = BugReportReporter().render(ReportView((finding,), summary=("summary" + breakout,),
                                                extra={"environment": env}))
    head, body = out.split("\n\n", 1)
    assert head == "<details><summary>gpudoctor report</summary>"
    fence = body.split("text\n", 1)[0]
    assert set(fence) == {"`"} and len(fence) >= 3
    inside, after = body[len(fence) + len("text\n"):].split("\n" + fence + "\n", 1)
    assert after == "\n</details>\n"
    assert not any(line.strip().startswith(fence) for line in inside.splitlines())
    assert "</details><img src=x onerror=alert(1)>" in inside  # literal in a code block: readable
    assert "gpudoctor 0.1" in inside and "some-rule" in inside
    assert not CONTROL.search(out), repr(CONTROL.search(out))
