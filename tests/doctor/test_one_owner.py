"""One owner: for every rule that more than one detector can report, the same facts give the
same fixes from each detector (the static check, `explain` of a real log replayed against the
same recorded machine, and the training pass's classifier), because all of them call the rule's
remedy in gpudoctor/remedies and none builds a fix of its own."""

import glob
import json
import os

import pytest

from gpudoctor.engine import diagnose
from gpudoctor.facts import Facts
from gpudoctor.knowledge import load_catalogue
from gpudoctor.logs import diagnose_paths
from gpudoctor.remedies import REMEDIES, machine_from_facts

from rule_cases import FIXTURES, load_cases

CATALOGUE = load_catalogue()
MULTI = sorted(r for r, rule in CATALOGUE.items() if len({"static", "log", "train"} & set(rule.detected_by)) > 1)


def _static_and_log_pairs():
    for rule_id in MULTI:
        if not {"static", "log"} <= set(CATALOGUE[rule_id].detected_by):
            continue
        logs = sorted(glob.glob(os.path.join(FIXTURES, "logs", rule_id, "*.log")))
        for case in (c for c in load_cases() if c.rule_id == rule_id and c.expect == "fail"):
            for log in logs:
                yield pytest.param(case, log, id=f"{rule_id}:{case.name}:{os.path.basename(log)}")


def test_every_rule_reported_by_several_detectors_has_a_remedy():
    fixable = [r for r in MULTI if CATALOGUE[r].area not in ()]
    assert [r for r in fixable if r not in REMEDIES] == []


@pytest.mark.parametrize("case,log", list(_static_and_log_pairs()))
def test_static_check_and_log_diagnosis_give_the_same_fixes(case, log):
    host = case.host()
    facts = Facts(host, case.requirements)
    static = [f for f in diagnose(host, only=[case.rule_id], requirements=case.requirements, facts=facts).findings
              if f.id == case.rule_id]
    assert static, f"{case.path}: the fail fixture no longer fails"
    from_log = [f for f in diagnose_paths([log], machine=lambda: machine_from_facts(facts)) if f.id == case.rule_id]
    if not from_log:
        pytest.skip(f"{os.path.basename(log)} shows {case.rule_id} only as a consequence of another rule")
    assert from_log[0].fixes == static[0].fixes


def test_training_pass_and_static_check_give_the_same_compiler_fix():
    from gpudoctor.train.diagnosis import diagnose_outcome
    from gpudoctor.train.runner import ChildOutcome

    case = next(c for c in load_cases() if c.rule_id == "c-compiler-missing" and c.expect == "fail")
    host = case.host()
    facts = Facts(host)
    static = next(f for f in diagnose(host, only=["c-compiler-missing"], facts=facts).findings)
    compiler = facts.get("toolchain").triton_cc
    stage = {"id": "triton-jit", "status": "error",
             "failure": {"kind": "triton-jit", "cause": "c-compiler-missing", "compiler": compiler,
                         "error_type": "FileNotFoundError", "message": f"No such file or directory: '{compiler}'"}}
    result = {"schema": 1, "mode": "interpreter", "preset": "tiny", "stages": [stage]}
    train = diagnose_outcome(ChildOutcome(command=["test"], returncode=1, result=result), timeout_s=60,
                             machine=machine_from_facts(facts))
    from_pass = next(f for f in train.findings if f.id == "c-compiler-missing")
    assert from_pass.fixes == static.fixes


def test_explain_with_a_snapshot_names_the_recorded_machines_fix(capsys):
    """`gpudoctor explain --snapshot DIR LOG`: a log and the machine it came from, recorded."""
    from gpudoctor.cli.main import main
    from gpudoctor.fix.actions import fix_commands

    snapshot = os.path.join(FIXTURES, "snapshots", "cpu-triton35-driver-without-unversioned")
    log = os.path.join(FIXTURES, "logs", "libcuda-unversioned-missing", "seed-001.log")
    code = main(["explain", "--json", "--snapshot", snapshot, log])
    data = json.loads(capsys.readouterr().out)
    assert code == 1
    finding = next(f for f in data["findings"] if f["id"] == "libcuda-unversioned-missing")
    from gpudoctor.host import SnapshotHost

    host = SnapshotHost(snapshot)
    static = next(f for f in diagnose(host, only=["libcuda-unversioned-missing"], facts=Facts(host)).findings)
    assert [fix["commands"] for fix in finding["fixes"]] == [fix_commands(fix) for fix in static.fixes]
    assert any(c.startswith("ln -s ") for fix in finding["fixes"] for c in fix["commands"])
