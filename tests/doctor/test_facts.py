"""Facts probed from other facts, and the engine evaluating checks as their facts come in."""

from __future__ import annotations

import os
import threading

from rule_cases import FIXTURES

from gpudoctor import engine
from gpudoctor.checks.base import Check
from gpudoctor.facts import PROBED_FROM, Facts
from gpudoctor.host.snapshot import SnapshotHost
from gpudoctor.model import CheckStatus

H200 = os.path.join(FIXTURES, "snapshots", "h200-baseline")


def test_probed_from_is_what_each_probe_asks_for():
    facts = Facts(SnapshotHost(H200))
    asked: dict[str, set[str]] = {}
    probing: list[str] = []
    get = facts.get

    def spy(name):
        if probing:
            asked.setdefault(probing[-1], set()).add(name)
        probing.append(name)
        try:
            return get(name)
        finally:
            probing.pop()

    facts.get = spy
    for name in facts.names:
        facts._cache.clear()
        asked.clear()
        try:
            spy(name)
        except Exception:  # noqa: BLE001 - a probe failing on this snapshot still asked what it asked
            pass
        assert asked.get(name, set()) == set(PROBED_FROM.get(name, ())), name


def _slow_kernel_log(facts: Facts, released: threading.Event) -> None:
    probe = facts._probes["kernel_log"]

    def slow():
        assert released.wait(10), "never released"
        return probe()

    facts._probes["kernel_log"] = slow


def test_a_check_whose_facts_are_in_runs_before_one_still_waiting(monkeypatch):
    facts = Facts(SnapshotHost(H200))
    released = threading.Event()
    _slow_kernel_log(facts, released)
    order = []

    def needs_the_slow_fact(kernel_log):
        order.append("slow")
        return []

    def needs_a_quick_fact(env):
        order.append("quick")
        released.set()  # only now may the slow probe answer: the quick check must not wait for it
        return []

    monkeypatch.setattr(engine, "CHECKS", (Check("first-in-the-registry", ("kernel_log",), needs_the_slow_fact),
                                           Check("second-in-the-registry", ("env",), needs_a_quick_fact)))
    results = engine.run_checks(facts)
    assert order == ["quick", "slow"]
    assert [r.id for r in results] == ["first-in-the-registry", "second-in-the-registry"]  # the registry's order
    assert all(r.status is CheckStatus.PASS for r in results)


def test_a_fact_probed_from_a_slow_one_is_pending_while_that_one_is():
    facts = Facts(SnapshotHost(H200))
    released = threading.Event()
    probe = facts._probes["driver"]
    facts._probes["driver"] = lambda: released.wait(10) and probe()
    facts.prefetch_in_background(["driver"])
    assert facts.pending(["health"]) and facts.pending(["driver"]) and not facts.pending(["env"])
    released.set()
    facts.get("health")
    assert not facts.pending(["health", "driver"])


def test_every_fact_the_checks_started_is_in_when_run_checks_returns(monkeypatch):
    # A check stops at its first failed fact (arguments() raises), so a slow fact that only such
    # checks need was still being probed when run_checks returned: the header and the JSON's
    # environment (facts.gathered) then left out a GPU that prefetch()'s join used to show.
    facts = Facts(SnapshotHost(H200))
    probe = facts._probes["driver"]

    def slow_driver():
        threading.Event().wait(0.3)
        return probe()

    def broken_packages():
        raise OSError("no site-packages to read")

    facts._probes["driver"] = slow_driver
    facts._probes["packages"] = broken_packages
    monkeypatch.setattr(engine, "CHECKS", (Check("needs-packages-then-the-driver", ("packages", "driver"),
                                                 lambda packages, driver: []),))
    [result] = engine.run_checks(facts)
    assert result.status is CheckStatus.ERROR and "no site-packages" in result.reason
    assert facts.gathered("driver") is not None and not facts.pending(["driver"])
