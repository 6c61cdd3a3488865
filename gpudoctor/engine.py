"""Runs the checks over a host's facts: gather -> evaluate. Formatting lives in gpudoctor.report."""

from __future__ import annotations

import time
from typing import Any, Iterable, NamedTuple

from .checks import CHECKS, Skip
from .checks.base import PassedWithin
from .facts import Facts, ProbeFailure
from .model import CheckResult, CheckStatus, Finding, sort_findings


class Report(NamedTuple):
    """What one run of the checks found: the findings, each check's outcome, and the facts they
    were decided on."""

    findings: tuple[Finding, ...]
    checks: tuple[CheckResult, ...]
    facts: Any = None  # the Facts object, for reporters that show the machine summary

    def worst(self):
        return max((f.severity.rank for f in self.findings), default=-1)


def run_checks(facts: Facts, only: Iterable[str] | None = None, skip: Iterable[str] | None = None) -> list[CheckResult]:
    """Each selected check's result, in the registry's order. The checks are evaluated as their
    facts come in: the slow facts are probed in threads, and a check whose facts are all there
    runs while the others still wait on NVML, the compilers or the link test, so the checks' own
    time is not all added after the last probe (issue 12: ~19 ms of preflight's first call on the
    H200 came after the link test). When nothing is ready, the first check left waits for its
    facts."""
    only_set = set(only or ())
    skip_set = set(skip or ())
    selected = [c for c in CHECKS if not (only_set and c.id not in only_set) and c.id not in skip_set]
    workers = facts.prefetch_in_background(name for check in selected for name in check.facts)
    results: dict[int, CheckResult] = {}
    waiting = list(range(len(selected)))
    while waiting:
        ready = [i for i in waiting if not facts.pending(selected[i].facts)] or waiting[:1]
        for index in ready:
            results[index] = _run_check(selected[index], facts)
        waiting = [i for i in waiting if i not in results]
    # A check stops at its first failed fact, so a fact only such checks needed may still be
    # probed: wait for it, as the reporters (facts.gathered) and a snapshot's writer read every
    # fact after this. Done by now on every other path, so this costs nothing there.
    for worker in workers:
        worker.join()
    return [results[i] for i in range(len(selected))]


def _run_check(check, facts: Facts) -> CheckResult:
    start = time.perf_counter()
    try:
        findings = tuple(check.run(**check.arguments(facts.get)))
        status = CheckStatus.FAIL if findings else CheckStatus.PASS
        reason = "; ".join(f.title for f in findings) if findings else ""
    except Skip as why:
        findings, status, reason = (), CheckStatus.SKIP, str(why)
    except PassedWithin as how_far:
        findings, status, reason = (), CheckStatus.PASS, str(how_far)
    except ProbeFailure as exc:
        findings, status, reason = (), CheckStatus.ERROR, str(exc)
    except Exception as exc:  # noqa: BLE001 - a crashed check is reported, the others go on
        findings, status, reason = (), CheckStatus.ERROR, f"check crashed: {type(exc).__name__}: {exc}"
    return CheckResult(check.id, status, reason, (time.perf_counter() - start) * 1000, findings)


def diagnose(host, only=None, skip=None, requirements=None, extra_findings=(), facts: Facts | None = None) -> Report:
    """Probe ``host``, run the static checks, and return findings most severe first.
    ``facts`` may be passed in already probing (preflight starts the probes before it imports
    the checks); it must be for ``host`` and ``requirements``."""
    if facts is None:
        facts = Facts(host, requirements)
    results = run_checks(facts, only, skip)
    findings = [f for r in results for f in r.findings] + list(extra_findings)
    return Report(tuple(sort_findings(findings)), tuple(results), facts)
