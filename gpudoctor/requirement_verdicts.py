"""Is each required feature (``check --require``, ``preflight(require=...)``) verified on this
machine? One verdict per feature: met, NOT met (a finding or a missing package says why), or
cannot verify here (the check that decides it could not run). A gate passes only when every
verdict is met: a requirement nobody could check is not assumed (issue 13 item 2).

Reads the checks' results and the facts they already gathered; never probes."""

from __future__ import annotations

from typing import Any, Iterable, NamedTuple

from .model import CheckResult, CheckStatus

MET, NOT_MET, UNVERIFIED = "met", "NOT met", "cannot verify here"


class RequirementVerdict(NamedTuple):
    """Whether one feature the user required (``require=``) is met here, and the rule that
    decided it."""

    feature: str  # as the user wrote it: bf16, flash-attn, head_dim=80
    status: str  # met | NOT met | cannot verify here
    reason: str
    rule: str = ""  # the rule whose check decided it

    @property
    def ok(self) -> bool:
        return self.status == MET

    def to_json(self) -> dict:
        return {"feature": self.feature, "status": self.status, "reason": self.reason, "rule": self.rule}


def _from_check(feature: str, rule: str, checks: dict[str, CheckResult], met: str,
                relevant=lambda finding: True) -> RequirementVerdict:
    result = checks.get(rule)
    if result is None:
        return RequirementVerdict(feature, UNVERIFIED, f"the {rule} check was not run (--only/--skip)", rule)
    if result.status in (CheckStatus.SKIP, CheckStatus.ERROR):
        return RequirementVerdict(feature, UNVERIFIED, f"{rule} could not run: {result.reason}", rule)
    problems = [f for f in result.findings if relevant(f)]
    if problems:
        return RequirementVerdict(feature, NOT_MET, problems[0].message, rule)
    return RequirementVerdict(feature, MET, met, rule)


def _flash_attn_installed(packages) -> bool:
    return packages.version("flash-attn") is not None or packages.version("flash-attn-3") is not None


def verify_requirements(requirements: dict | None, checks: Iterable[CheckResult], facts: Any) -> list[RequirementVerdict]:
    """A verdict for every feature in ``requirements`` (``requirements.parse_requirements``'s form)."""
    if not requirements:
        return []
    by_id = {c.id: c for c in checks}
    packages = facts.gathered("packages") if facts is not None else None
    verdicts = []
    if requirements.get("bf16"):
        verdicts.append(_from_check("bf16", "bf16-unsupported", by_id, "every GPU computes natively in bfloat16"))
    flash_missing = None
    if requirements.get("flash-attn") or requirements.get("head_dim"):
        if packages is None:
            flash_missing = RequirementVerdict("flash-attn", UNVERIFIED, "the installed packages could not be read")
        elif not _flash_attn_installed(packages):
            flash_missing = RequirementVerdict("flash-attn", NOT_MET, "flash-attn is not installed in the inspected "
                                               "environment (pip install flash-attn --no-build-isolation)")
    if requirements.get("flash-attn"):
        if flash_missing is not None:
            verdicts.append(flash_missing)
        else:
            verdict = _from_check("flash-attn", "flash-attn-arch-unsupported", by_id,
                                  "flash-attn is installed and supports every GPU")
            abi = by_id.get("flash-attn-abi-mismatch")
            if verdict.ok and abi is not None and abi.findings:  # installed but will not import
                verdict = RequirementVerdict("flash-attn", NOT_MET, abi.findings[0].message, abi.id)
            verdicts.append(verdict)
    for head_dim in requirements.get("head_dim") or []:
        feature = f"head_dim={head_dim}"
        if flash_missing is not None:
            verdicts.append(RequirementVerdict(feature, flash_missing.status, flash_missing.reason))
            continue
        verdicts.append(_from_check(feature, "flash-attn-head-dim-unsupported", by_id,
                                    f"flash-attn supports head_dim {head_dim} on every GPU, backward included",
                                    relevant=lambda f, n=head_dim: f.evidence.get("head_dim") == n))
    return verdicts
