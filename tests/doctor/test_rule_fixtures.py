"""Table-driven: every static rule's pass and fail fixtures, replayed through its check."""

import pytest

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
