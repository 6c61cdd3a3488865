"""The cross-rank comparison: what is the same everywhere (said once), what differs (with the
ranks and hosts on each side), and the findings that follow. Pure: it works on what the ranks
sent (or on two recorded snapshots, for `gpudoctor diff`), never on a machine."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from ..checks.base import finding
from ..model import CheckResult, CheckStatus, Finding, Severity, sort_findings
from ..remedies import fixes_for
from .rankfacts import Compared

ABSENT = "absent"


@dataclass(frozen=True)
class Member:
    """One rank's report (or one snapshot's, labelled by name)."""

    label: str  # "rank 3" or the snapshot's name
    host: str
    facts: Mapping[str, Compared]
    findings: tuple[Finding, ...] = ()
    checks: tuple[CheckResult, ...] = ()
    rank: int | None = None
    local_rank: int | None = None
    gpu: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)  # nccl / train results a rank sent


@dataclass(frozen=True)
class Missing:
    """A rank whose report never arrived, and why ("no report arrived" on rank 0; on a rank that lost
    rank 0, why rank 0 could not be reached)."""

    rank: int
    why: str


@dataclass(frozen=True)
class Difference:
    """One fact that is not the same on every member: its key, its kind (one of rankfacts.KINDS, which
    decides how it is judged) and each value with the members that have it, the commonest first."""

    key: str
    kind: str
    groups: tuple[tuple[str, tuple[Member, ...]], ...]  # value -> the members that have it, most first


@dataclass(frozen=True)
class Comparison:
    """What the comparison found: the facts identical on every member (key -> the one value), those that
    differ, the ranks that never reported, and the findings and check results that follow. ``timeout_s``
    is how long rank 0 waited for the reports (None for snapshots)."""

    members: tuple[Member, ...]
    missing: tuple[Missing, ...]
    identical: Mapping[str, str]
    differences: tuple[Difference, ...]
    findings: tuple[Finding, ...]
    checks: tuple[CheckResult, ...]
    timeout_s: float | None = None

    @property
    def hosts(self) -> list[str]:
        return sorted({m.host for m in self.members})


def _ranges(numbers: Iterable[int]) -> str:
    ordered = sorted(set(numbers))
    parts: list[str] = []
    start = prev = None
    for n in ordered + [None]:
        if start is None:
            start = prev = n
        elif n is not None and n == prev + 1:
            prev = n
        else:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = prev = n
    return ",".join(parts)


def describe(members: Sequence[Member]) -> str:
    """'ranks 0-3 on node-a, rank 5 on node-b' (or 'A' / 'A, B' for snapshots)."""
    if any(m.rank is None for m in members):
        return ", ".join(m.label for m in members)
    by_host: dict[str, list[int]] = {}
    for m in members:
        by_host.setdefault(m.host, []).append(m.rank)  # type: ignore[arg-type]
    parts = []
    for host, ranks in by_host.items():
        word = "rank" if len(ranks) == 1 else "ranks"
        parts.append(f"{word} {_ranges(ranks)} on {host}")
    return ", ".join(parts)


def _differences(members: Sequence[Member]) -> tuple[dict[str, str], list[Difference]]:
    keys: list[str] = []
    for m in members:
        keys.extend(k for k in m.facts if k not in keys)
    identical: dict[str, str] = {}
    differences: list[Difference] = []
    for key in keys:
        kind = next(m.facts[key].kind for m in members if key in m.facts)
        by_value: dict[str, list[Member]] = {}
        for m in members:
            by_value.setdefault(m.facts[key].value if key in m.facts else ABSENT, []).append(m)
        if len(by_value) == 1:
            identical[key] = next(iter(by_value))
        else:
            groups = sorted(by_value.items(), key=lambda item: -len(item[1]))
            differences.append(Difference(key, kind, tuple((v, tuple(ms)) for v, ms in groups)))
    return identical, differences


def _difference_finding(diff: Difference, total: int) -> Finding:
    (common, common_members), *others = diff.groups
    sides = "; ".join(f"{value} on {describe(ms)}" for value, ms in diff.groups)
    odd = [m for _, ms in others for m in ms]
    subject = diff.key.lstrip("$")
    if diff.key.startswith("$"):
        how = (f"unset {subject} on {describe(odd)}" if common == ABSENT
               else f"export {subject}={common} for every rank (in the launcher's environment, not one node's profile)")
    else:
        how = f"install {subject} {common} on {describe(odd)}" if common != ABSENT else f"remove {subject} from {describe(odd)}"
    severity = None if diff.kind == "version" else Severity.WARNING
    return finding(
        "ranks-differ",
        f"{subject} differs across ranks: {sides}.",
        {"fact": diff.key, "kind": diff.kind,
         "values": {value: [m.rank if m.rank is not None else m.label for m in ms] for value, ms in diff.groups},
         "hosts": {value: sorted({m.host for m in ms}) for value, ms in diff.groups}},
        fixes_for("ranks-differ", {"subject": subject, "agreeing": f"{len(common_members)} of {total} have {common}",
                                   "how": how}),
        severity=severity,
    )


def _merge_findings(members: Sequence[Member]) -> list[Finding]:
    """Each distinct finding once; one that only some ranks got says which."""
    groups: dict[tuple[str, str], list[tuple[Member, Finding]]] = {}
    for m in members:
        for f in m.findings:
            groups.setdefault((f.id, f.message), []).append((m, f))
    merged = []
    for (_id, _message), pairs in groups.items():
        who = [m for m, _ in pairs]
        first = pairs[0][1]
        if len({m.label for m in who}) == len(members):
            merged.append(first)
            continue
        evidence = {**first.evidence, "ranks": [m.rank if m.rank is not None else m.label for m in who],
                    "hosts": sorted({m.host for m in who})}
        merged.append(dataclasses.replace(first, message=f"{first.message} (only on {describe(who)})", evidence=evidence))
    return merged


_STATUS_ORDER = (CheckStatus.FAIL, CheckStatus.ERROR, CheckStatus.SKIP, CheckStatus.PASS)


def _merge_checks(members: Sequence[Member], findings: Sequence[Finding]) -> list[CheckResult]:
    order: list[str] = []
    by_id: dict[str, list[tuple[Member, CheckResult]]] = {}
    for m in members:
        for c in m.checks:
            if c.id not in by_id:
                order.append(c.id)
            by_id.setdefault(c.id, []).append((m, c))
    merged = []
    for check_id in order:
        pairs = by_id[check_id]
        statuses = {c.status for _, c in pairs}
        own = tuple(f for f in findings if f.id == check_id)
        duration = max(c.duration_ms for _, c in pairs)
        if len(statuses) == 1 and len(pairs) == len(members):
            status = pairs[0][1].status
            reasons = {c.reason for _, c in pairs}
            reason = pairs[0][1].reason if len(reasons) == 1 else "; ".join(
                f"{describe([m for m, c in pairs if c.reason == r])}: {r}" for r in sorted(reasons))
        else:
            # Mixed: the worst status leads, and every rank's outcome is said (a check that passed
            # on some ranks and was skipped on others is not shown as passed).
            status = next(s for s in _STATUS_ORDER if s in statuses)
            parts = []
            for s in _STATUS_ORDER:
                who = [m for m, c in pairs if c.status == s]
                if who:
                    why = next((c.reason for m, c in pairs if c.status == s and c.reason), "")
                    parts.append(f"{s.value} on {describe(who)}" + (f" ({why})" if why else ""))
            absent = [m for m in members if m.label not in {p[0].label for p in pairs}]
            if absent:
                parts.append(f"not run on {describe(absent)}")
            reason = "; ".join(parts)
        merged.append(CheckResult(check_id, status, reason, duration, own))
    return merged


def compare(members: Sequence[Member], missing: Sequence[Missing] = (), timeout_s: float | None = None,
            subject: str = "ranks") -> Comparison:
    """Compare what the members sent; ``missing`` are the ranks that never did."""
    members = tuple(members)
    identical, differences = _differences(members)
    diff_findings = [_difference_finding(d, len(members)) for d in differences if d.kind not in ("placement",)]
    findings = _merge_findings(members) + diff_findings
    checks = _merge_checks(members, findings)
    if len(members) >= 2:
        status = CheckStatus.FAIL if diff_findings else CheckStatus.PASS
        checks.append(CheckResult("ranks-differ", status, "; ".join(f.message for f in diff_findings),
                                  findings=tuple(diff_findings)))
    else:
        checks.append(CheckResult("ranks-differ", CheckStatus.SKIP, f"only {len(members)} of the {subject} reported"))
    unreachable = []
    if missing:
        unreachable.append(unreachable_finding(missing, len(members) + len(missing), timeout_s))
    if subject == "ranks":
        checks.append(CheckResult("rank-unreachable", CheckStatus.FAIL if missing else CheckStatus.PASS,
                                  unreachable[0].message if unreachable else "", findings=tuple(unreachable)))
    findings += unreachable
    return Comparison(members, tuple(missing), identical, tuple(differences), tuple(sort_findings(findings)),
                      tuple(checks), timeout_s)


def unreachable_finding(missing: Sequence[Missing], world_size: int, timeout_s: float | None) -> Finding:
    ranks = [m.rank for m in missing]
    word = "rank" if len(ranks) == 1 else "ranks"
    within = f" within {timeout_s:g} s" if timeout_s is not None else ""
    whys = sorted({m.why for m in missing})
    return finding(
        "rank-unreachable",
        f"{word} {_ranges(ranks)} of {world_size} did not report{within}: {'; '.join(whys)}.",
        {"ranks": ranks, "world_size": world_size, "timeout_s": timeout_s, "why": whys},
        fixes_for("rank-unreachable", {"which": f"{word} {_ranges(ranks)}"}),
    )
