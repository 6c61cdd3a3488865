"""Issue 14 item g: `fix --system` killed while the package manager runs. The install is recorded
in the manifest BEFORE the package manager starts (state "in progress", with the package database
as it was), so `--undo` afterwards can see it: it removes the requested packages the install did
get in, and names exactly what it cannot know (packages that appeared since, which the install may
have pulled in or someone else may have installed).

No real package manager runs: a fake one (a shell script over a text file of package names, in
the one-name-per-line form rpm prints) installs, and one removes."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from gpudoctor.fix import packages, system
from gpudoctor.fix.manifest import Manifest, normalized_change
from gpudoctor.fix.plan import build_plan
from gpudoctor.fix.script import render_script
from gpudoctor.fix.undo import GONE, KEPT, MANUAL, UNDONE, WOULD, undo, undo_plan
from gpudoctor.model import Finding, Fix, InstallPackage, Severity

MANAGER = "dnf"  # its database lists one name per line
BEFORE = ("bash", "glibc", "coreutils")
REQUESTED = ("gcc-toolset-12-gcc", "gcc-toolset-12-gcc-c++")
DEPENDENCY = "gcc-toolset-12-runtime"

INSTALLER = """#!/bin/sh
# a package manager that pulls in a dependency first, then the requested packages, then hangs
# (until killed) or finishes, as told by $FAKE_PM_MODE
db="$FAKE_PM_DB"
echo {dep} >> "$db"
[ "$FAKE_PM_MODE" = hang-after-dependency ] && {{ touch "$db.reached"; exec sleep 60; }}
for name in "$@"; do case "$name" in -*) ;; *) echo "$name" >> "$db" ;; esac; done
[ "$FAKE_PM_MODE" = hang-after-all ] && {{ touch "$db.reached"; exec sleep 60; }}
exit 0
""".format(dep=DEPENDENCY)

REMOVER = """#!/bin/sh
db="$FAKE_PM_DB"
for name in "$@"; do case "$name" in -*) ;; *) grep -vxF "$name" "$db" > "$db.tmp"; mv "$db.tmp" "$db" ;; esac; done
"""


@pytest.fixture
def fake_pm(tmp_path, monkeypatch):
    db = tmp_path / "installed.txt"
    db.write_text("".join(f"{name}\n" for name in BEFORE))
    tools = {}
    for name, body in (("fake-install", INSTALLER), ("fake-remove", REMOVER)):
        path = tmp_path / name
        path.write_text(body)
        path.chmod(0o755)
        tools[name] = str(path)
    monkeypatch.setitem(packages.INSTALL_COMMANDS, MANAGER, (tools["fake-install"], "-y"))
    monkeypatch.setitem(packages.REMOVE_COMMANDS, MANAGER, (tools["fake-remove"],))
    monkeypatch.setitem(packages._LIST_COMMANDS, MANAGER, ("cat", str(db)))
    monkeypatch.setattr(system, "is_root", lambda: True)  # the script runs as this user: no sudo, no root
    monkeypatch.setenv("FAKE_PM_DB", str(db))
    return db


def _installed(db) -> set[str]:
    return set(db.read_text().split())


def _plan():
    finding = Finding("nvcc-host-compiler-unsupported", Severity.ERROR, "gcc too new", "test",
                      fixes=(Fix("system", "install gcc 12", (InstallPackage(MANAGER, REQUESTED),)),))
    return build_plan([finding], "system")


def _fix_system_killed_at(home, fake_pm, mode: str) -> None:
    """`fix --system` (session.fix_system, as the CLI calls it after confirmation) in a forked
    process group, SIGKILLed with its package manager once the manager reached ``mode``'s point."""
    from gpudoctor.fix.session import fix_system

    plan = _plan()
    script = render_script(plan, home)
    os.environ["FAKE_PM_MODE"] = mode
    try:
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                os.setpgid(0, 0)
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 1)
                os.dup2(devnull, 2)
                fix_system(plan, home, script, False, dict(os.environ), lambda env, only: None)
                code = 0
            finally:
                os._exit(code)
        reached = str(fake_pm) + ".reached"
        deadline = time.monotonic() + 30
        while not os.path.exists(reached) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert os.path.exists(reached), "the fake package manager never ran"
        os.killpg(pid, signal.SIGKILL)  # gpudoctor and the install it runs
        os.waitpid(pid, 0)
    finally:
        del os.environ["FAKE_PM_MODE"]


def _root(argv) -> int:
    return subprocess.call(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_the_install_is_recorded_before_the_package_manager_runs(home, fake_pm):
    _fix_system_killed_at(home, fake_pm, "hang-after-all")
    (record,) = [c for c in Manifest.load(home.manifest_file).changes if c["op"] == "packages"]
    assert record["state"] == "in progress" and record["manager"] == MANAGER
    assert record["requested"] == list(REQUESTED) and record["before"] == sorted(BEFORE)
    assert normalized_change(record, home)[0] is not None  # a record undo accepts
    (plan,) = [o for o in undo_plan(home) if o.change["op"] == "packages"]
    assert plan.status == WOULD and "interrupted" in plan.message


def test_undo_after_a_kill_removes_what_was_requested_and_names_what_it_cannot_know(home, fake_pm):
    _fix_system_killed_at(home, fake_pm, "hang-after-all")
    assert _installed(fake_pm) == {*BEFORE, *REQUESTED, DEPENDENCY}

    (outcome,) = [o for o in undo(home, _root) if o.change["op"] == "packages"]

    assert _installed(fake_pm) == {*BEFORE, DEPENDENCY}  # the requested ones removed, nothing that was there
    assert outcome.status == KEPT  # not everything is known: said, and --undo exits 1
    assert " ".join(sorted(REQUESTED)) in outcome.message
    assert DEPENDENCY in outcome.message and "cannot tell" in outcome.message
    assert not os.path.exists(home.manifest_file)


def test_killed_before_the_requested_packages_got_in(home, fake_pm):
    _fix_system_killed_at(home, fake_pm, "hang-after-dependency")
    (outcome,) = [o for o in undo(home, _root) if o.change["op"] == "packages"]
    assert _installed(fake_pm) == {*BEFORE, DEPENDENCY}
    assert outcome.status == KEPT and DEPENDENCY in outcome.message and "none of" in outcome.message


def test_killed_before_anything_was_installed_undo_has_nothing_to_remove(home, fake_pm, monkeypatch):
    # the kill lands after the record and before the script: the manifest says "in progress"
    monkeypatch.setattr(system, "run_system_script", lambda script, use_sudo: os.kill(os.getpid(), signal.SIGKILL))
    pid = os.fork()
    if pid == 0:
        try:
            from gpudoctor.fix.session import fix_system

            plan = _plan()
            fix_system(plan, home, render_script(plan, home), False, dict(os.environ), lambda env, only: None)
        finally:
            os._exit(70)
    os.waitpid(pid, 0)
    (record,) = [c for c in Manifest.load(home.manifest_file).changes if c["op"] == "packages"]
    assert record["state"] == "in progress"
    (outcome,) = [o for o in undo(home, _root) if o.change["op"] == "packages"]
    assert outcome.status == GONE and _installed(fake_pm) == set(BEFORE)


def test_undo_without_root_keeps_the_interrupted_record_for_later(home, fake_pm):
    _fix_system_killed_at(home, fake_pm, "hang-after-all")
    (outcome,) = [o for o in undo(home, None) if o.change["op"] == "packages"]
    assert outcome.status == MANUAL
    (outcome,) = [o for o in undo(home, _root) if o.change["op"] == "packages"]
    assert outcome.status == KEPT and _installed(fake_pm) == {*BEFORE, DEPENDENCY}


def test_a_finished_install_replaces_its_in_progress_record(home, fake_pm):
    from gpudoctor.fix.session import fix_system

    os.environ["FAKE_PM_MODE"] = "finish"
    try:
        plan = _plan()
        result = fix_system(plan, home, render_script(plan, home), False, dict(os.environ),
                            lambda env, only: type("R", (), {"findings": (), "checks": ()})())
    finally:
        del os.environ["FAKE_PM_MODE"]
    assert result.exit_code == 0 and result.recorded == 1
    (record,) = [c for c in Manifest.load(home.manifest_file).changes if c["op"] == "packages"]
    assert "state" not in record and "before" not in record
    assert record["added"] == sorted([*REQUESTED, DEPENDENCY])
    (outcome,) = [o for o in undo(home, _root) if o.change["op"] == "packages"]
    assert outcome.status == UNDONE and _installed(fake_pm) == set(BEFORE)


@pytest.mark.parametrize("bad", [
    {"before": "bash"},  # not a list
    {"before": ["bash", "-rf /"]},  # not a package name
    {"requested": []},
    {"requested": ["gcc; rm -rf ~"]},
])
def test_a_hostile_in_progress_record_is_refused(home, bad):
    record = {"op": "packages", "state": "in progress", "manager": MANAGER, "argv": ["x"],
              "requested": list(REQUESTED), "before": list(BEFORE), **bad}
    change, why = normalized_change(record, home)
    assert change is None and why

