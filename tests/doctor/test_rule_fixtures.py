"""Table-driven: every static rule's pass and fail fixtures, replayed through its check."""

import pytest

from gpudoctor.checks import CHECKS_BY_ID
from gpudoctor.engine import run_checks
from gpudoctor.facts import Facts
from gpudoctor.model import CheckStatus

from rule_cases import load_cases

CASES = load_cases()


@pytest.mark.parametrize("case", CASES, ids=[f"{c.rule_id}/{c.expect}/{c.name}" for c in CASES])
def test_rule_fixture(case):
    facts = Facts(case.host(), case.requirements)
    (result,) = run_checks(facts, only=[case.rule_id])
    expected = CheckStatus.FAIL if case.expect == "fail" else CheckStatus.PASS
    assert result.status == expected, f"{case.path}: {result.status.value}: {result.reason}"
    for finding in result.findings:
        assert finding.id == case.rule_id
        assert finding.message and finding.fixes, "every finding says what happened and how to fix it"
    if case.expect == "fail" and "message_contains" in case.spec:
        text = " ".join(f.message for f in result.findings)
        for needle in case.spec["message_contains"]:
            assert needle in text, f"{needle!r} not in {text!r}"


WORDED = [c for c in CASES if c.expect == "fail" and CHECKS_BY_ID[c.rule_id].wording]


@pytest.mark.parametrize("case", WORDED, ids=[f"{c.rule_id}/{c.name}" for c in WORDED])
def test_a_fact_that_only_words_the_fix_cannot_fail_the_check(case, monkeypatch):
    """The system fact names the interpreter and the package manager in a fix; where its probe fails,
    the check still decides and its pip commands take the general form (`python -m pip`)."""
    facts = Facts(case.host(), case.requirements)
    for name in CHECKS_BY_ID[case.rule_id].wording:
        monkeypatch.setitem(facts._probes, name, lambda name=name: 1 / 0)
    (result,) = run_checks(facts, only=[case.rule_id])
    assert result.status == CheckStatus.FAIL, f"{case.path}: {result.status.value}: {result.reason}"
    commands = [a.command for f in result.findings for fix in f.fixes for a in fix.actions if hasattr(a, "command")]
    assert all("python -m pip " in c for c in commands if " -m pip " in c), commands
