"""Issue 13 item 6 (brief item a): every fix leads somewhere. For every finding produced from every
fixture -- the recorded machines (fixtures/snapshots), the rule cases (fixtures/rules) and the logs
(fixtures/logs, through `explain` on a recorded machine or with --no-probe) -- each `gpudoctor fix`
command the report suggests is run against that same machine (`gpudoctor fix --dry-run --json`,
its diagnosis replayed from the snapshot) and must plan an action for that finding: never "nothing
to fix" after being sent to fix. Other commands (a pip install, `ln -s`, an export) are shown to
be run by hand and lead somewhere by being shown."""

from __future__ import annotations

import functools
import glob
import json
import os
import re
import shlex

import pytest
from rule_cases import FIXTURES, load_cases

import gpudoctor.cli.fix as fix_cli
from gpudoctor.cli.main import main
from gpudoctor.engine import diagnose
from gpudoctor.host import SnapshotHost
from gpudoctor.report.base import ReportView
from gpudoctor.report.terminal import TerminalReporter

SNAPSHOTS = sorted(os.path.basename(p) for p in glob.glob(os.path.join(FIXTURES, "snapshots", "*"))
                   if os.path.isfile(os.path.join(p, "snapshot.json")))
CASES = [c for c in load_cases() if c.expect == "fail"]
LOGS = sorted(glob.glob(os.path.join(FIXTURES, "logs", "*", "*.log")))
# the machines a log is explained on: unknown (--no-probe), healthy, and two with static findings
LOG_MACHINES = (None, "h200-baseline", "cpu-triton35-driver-without-unversioned", "cpu-cc-missing")
FIX_COMMAND = re.compile(r"gpudoctor fix\b[^#`\n]*")


@pytest.fixture(autouse=True)
def private_home(tmp_path, monkeypatch):
    """`fix --dry-run` changes nothing, but reads gpudoctor's dirs: a HOME of the test's own."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME"):
        monkeypatch.delenv(name, raising=False)


def _replay(host_factory, requirements, monkeypatch) -> None:
    """`gpudoctor fix` on the recorded machine: its diagnosis replayed from the snapshot."""
    monkeypatch.setattr(fix_cli, "run_diagnosis",
                        lambda env, only: diagnose(host_factory(), only=only or None, requirements=requirements))


def _suggested_fix_commands(text: str) -> list[list[str]]:
    """The `gpudoctor fix ...` commands a report shows, as argv after `gpudoctor`."""
    found = []
    for command in FIX_COMMAND.findall(text):
        argv = shlex.split(command)[1:]
        if argv not in found:
            found.append(argv)
    return found


def _planned(argv: list[str], capsys) -> tuple[int, dict]:
    """Run the suggested command as a review (`--dry-run --json`): its exit code and JSON."""
    review = [a for a in argv if a not in ("--dry-run", "--json")] + ["--dry-run", "--json"]
    code = main(review)
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else {}


def _assert_leads_somewhere(argv: list[str], capsys, where: str) -> None:
    code, result = _planned(argv, capsys)
    shown = "gpudoctor " + " ".join(argv)
    assert code == 0, f"{where}: `{shown}` exited {code}"
    steps = result.get("steps") or []
    assert steps, f"{where}: `{shown}` plans nothing (findings: {[f['id'] for f in result.get('findings', [])]})"
    if "--only" in argv:
        wanted = set(argv[argv.index("--only") + 1].split(","))
        planned = {fid for step in steps for fid in step["findings"]}
        assert wanted <= planned, f"{where}: `{shown}` plans {sorted(planned)}, not {sorted(wanted - planned)}"


@functools.lru_cache(maxsize=None)
def _snapshot_host(name: str):
    return SnapshotHost(os.path.join(FIXTURES, "snapshots", name))


@pytest.mark.parametrize("snapshot", SNAPSHOTS)
def test_each_fix_that_check_suggests_plans_its_finding(snapshot, monkeypatch, capsys):
    host = lambda: SnapshotHost(os.path.join(FIXTURES, "snapshots", snapshot))  # noqa: E731
    report = diagnose(host())
    _replay(host, None, monkeypatch)
    for verbose in (False, True):
        text = TerminalReporter(verbose=verbose).render(ReportView(report.findings, report.checks))
        for argv in _suggested_fix_commands(text):
            _assert_leads_somewhere(argv, capsys, f"check --snapshot {snapshot}")


@pytest.mark.parametrize("case", CASES, ids=[f"{c.rule_id}/{c.name}" for c in CASES])
def test_each_fix_that_a_rule_case_suggests_plans_its_finding(case, monkeypatch, capsys):
    requirements = case.requirements
    report = diagnose(case.host(), requirements=requirements)
    _replay(case.host, None, monkeypatch)  # `gpudoctor fix` has no --require: it plans without them
    text = TerminalReporter().render(ReportView(report.findings, report.checks))
    for argv in _suggested_fix_commands(text):
        _assert_leads_somewhere(argv, capsys, case.path)


@pytest.mark.parametrize("log", LOGS, ids=[os.path.relpath(p, os.path.join(FIXTURES, "logs")) for p in LOGS])
def test_each_fix_that_explain_suggests_plans_its_finding_on_that_machine(log, monkeypatch, capsys):
    for machine in LOG_MACHINES:
        where = ["--no-probe"] if machine is None else ["--snapshot", os.path.join(FIXTURES, "snapshots", machine)]
        main(["explain", *where, log])
        text = capsys.readouterr().out
        commands = _suggested_fix_commands(text)
        if machine is None:
            # a log from a machine nobody has seen: `gpudoctor fix` here would plan for this one
            assert not commands, f"explain --no-probe {log} sends to {commands}"
            continue
        _replay(functools.partial(_snapshot_host, machine), None, monkeypatch)
        for argv in commands:
            _assert_leads_somewhere(argv, capsys, f"explain --snapshot {machine} {log}")


# the logs whose findings have fixes gpudoctor can apply (user or system): `gpudoctor run` shows
# them after the command fails, on this very machine
RUN_LOGS = [os.path.join(FIXTURES, "logs", name) for name in (
    "libcuda-unversioned-missing/seed-001.log", "c-compiler-missing/sageattention-7.log",
    "triton-cache-unwritable/triton-518.log", "nvcc-host-compiler-unsupported/pytorch-136556.log",
    "host-compiler-too-old/deepspeed-7143.log", "libcuda-not-in-linker-cache/dnabert2-56.log",
    "libcuda-stub-at-runtime/numba-9732.log")]


@pytest.mark.parametrize("log", RUN_LOGS, ids=[os.path.basename(p) for p in RUN_LOGS])
def test_each_fix_that_run_suggests_plans_its_finding_on_this_machine(log, capfd):
    assert main(["run", "--", "sh", "-c", f"cat {shlex.quote(log)} >&2; exit 1"]) == 1
    err = capfd.readouterr().err
    assert "diagnosing the last" in err
    for argv in _suggested_fix_commands(err.split("diagnosing the last", 1)[1]):
        _assert_leads_somewhere(argv, capfd, f"gpudoctor run (cat {log})")
