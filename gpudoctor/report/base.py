"""The one reporter interface: a reporter renders a report to text; the caller prints it.

Every output goes through one: ``check`` (terminal, JSON, Markdown), ``explain``, the training
pass's summary, ``fix --json`` and preflight's summary (``report.preflight``, which renders a
``PreflightResult`` and imports nothing, for preflight's cached path). JSON has one envelope,
``report.json.report_dict``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, TypeVar

from ..model import CheckResult, Finding

R = TypeVar("R", contravariant=True)


@dataclass(frozen=True)
class ReportView:
    """What a report shows: findings, the checks that ran, the machine summary already
    computed from gathered facts, and additive JSON sections (``train``, ``environment``...)."""

    findings: tuple[Finding, ...]
    checks: tuple[CheckResult, ...] = ()
    title: str = "gpudoctor"
    summary: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)


class Reporter(Protocol[R]):
    def render(self, report: R) -> str: ...
