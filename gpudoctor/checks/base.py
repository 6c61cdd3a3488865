"""What a check is, and helpers to build findings from the catalogue."""

from __future__ import annotations

from typing import Any, Callable, Mapping, NamedTuple

from ..knowledge import catalogue_rule
from ..model import Finding, Fix, Severity


class Skip(Exception):
    """Raised by a check that cannot decide; the message is the reason shown to the user."""


class PassedWithin(Exception):
    """Raised by a check that found nothing but could look only part of the way (a kernel log
    that no longer reaches back far enough): a pass whose message says how far it looked, shown
    instead of the rule's unqualified ``verified`` sentence."""


class Check(NamedTuple):
    """One static check: the rule it decides, the facts it needs (names in ``facts.Facts``), and the
    function that turns those facts into findings (raising ``Skip`` when it cannot decide)."""

    id: str  # the rule id it decides
    needs: tuple[str, ...]  # names of facts (see gpudoctor.facts.Facts)
    run: Callable[..., list[Finding]]
    # facts used only to word the fix (which interpreter, which package manager): a failed probe
    # passes None and the fix takes its general form (``python -m pip``), it does not fail the check
    wording: tuple[str, ...] = ()

    @property
    def facts(self) -> tuple[str, ...]:
        """Every fact the check reads: its needs, then its wording facts."""
        return self.needs + self.wording

    def arguments(self, get: Callable[[str], Any], given: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The keyword arguments of ``run``: each needed fact from ``get`` (a failed probe raises),
        each wording fact or None where its probe failed; ``given`` overrides both."""
        from ..facts import ProbeFailure

        given = given or {}

        def fact(name: str) -> Any:
            return given[name] if name in given else get(name)

        kwargs = {name: fact(name) for name in self.needs}
        for name in self.wording:
            try:
                kwargs[name] = fact(name)
            except ProbeFailure:
                kwargs[name] = None
        return kwargs


def fixes_for(rule_id: str, values: Mapping[str, Any] | None = None, machine: Any = None) -> tuple[Fix, ...]:
    """``remedies.fixes_for``, imported when a check first finds something: on a healthy machine
    no remedy module is loaded (about 7 ms of preflight's first call on the H200)."""
    from ..remedies import fixes_for as remedies_fixes_for

    return remedies_fixes_for(rule_id, values, machine)


def judged_python(system: Any, packages: Any = None) -> dict[str, Any]:
    """The interpreter whose packages were judged (the system fact's, the inspected one under
    ``--python``) and whether it has pip, for the pip command a remedy names
    (remedies/installer.py); {} where unknown."""
    from ..remedies.installer import judged_python as values  # only where a fix is built, like fixes_for

    return values(system, packages)


def remedy_machine():
    """``remedies.machine`` (the machine values a fix names), imported only where a fix is built."""
    from ..remedies import machine

    return machine


def finding(rule_id: str, message: str, evidence: Mapping[str, Any] | None = None,
            fixes: tuple[Fix, ...] | list[Fix] = (), severity: Severity | None = None) -> Finding:
    rule = catalogue_rule(rule_id)
    return Finding(
        id=rule_id,
        severity=severity or rule.severity,
        title=rule.title,
        message=message,
        evidence=dict(evidence or {}),
        fixes=tuple(fixes),
    )


def cc_str(cc: tuple[int, int]) -> str:
    return f"{cc[0]}.{cc[1]}"


def parse_cc(text: str) -> tuple[int, int]:
    major, minor = text.split(".")[:2]
    return (int(major), int(minor))


def gpus_or_skip(driver) -> list:
    if not driver.nvml.ok:
        raise Skip(f"no GPU information: NVML {driver.nvml.error_kind} ({driver.nvml.error})")
    if not driver.nvml.devices:
        raise Skip("no GPU visible")
    return list(driver.nvml.devices)
