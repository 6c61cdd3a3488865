"""One rank's part of `gpudoctor check --distributed`: probe, publish, and on rank 0 collect,
compare and report. Phases (each through the rendezvous store, each with a deadline):

1. ``static``: every rank's static report and comparable facts; rank 0 waits for them all (at
   most ``--rank-timeout``), then announces the ``plan``: who answered, and whether the
   measurements run (only when every rank answered: a collective over a missing rank hangs).
2. ``nccl`` (``--nccl`` or ``--train``): each rank runs the NCCL measurement in a child process
   with its own timeout, so a hung collective is killed, not waited on.
3. ``train`` (``--train``): the FSDP2 QLoRA pass (train/fsdp.py), each rank in a child process
   with the phase's timeout; rank 0 judges it against the single-GPU curve (fsdp_judge.py).
4. ``bye``: rank 0 waits briefly for the others to have read everything before it exits (outside
   torchrun it hosts the store).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..model import CheckResult, CheckStatus, Finding
from .compare import Comparison, Member, Missing, compare, unreachable_finding
from .environment import RankEnv
from .rankfacts import comparable_facts, from_json, rank_gpu, to_json

SLACK_S = 30.0  # beyond a phase's own timeout: process start, imports, the store's round trips


@dataclass(frozen=True)
class Options:
    """What ``gpudoctor check --distributed`` was asked for: how long rank 0 waits for every rank's static
    report, which phases run (``--nccl``, ``--train``) with their timeout, preset and ``--compile``, and the
    static checks' ``--only``, ``--skip`` and ``--require``."""

    rank_timeout_s: float = 120.0
    nccl: bool = False
    train: bool = False
    phase_timeout_s: float = 300.0  # each child phase (NCCL measurement, FSDP2 pass)
    compile: bool = False
    preset: str | None = None
    only: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    requirements: Any = None


@dataclass(frozen=True)
class DistributedReport:
    """What rank 0 renders: the comparison plus the phases' results."""

    env: RankEnv
    comparison: Comparison
    nccl: dict | None = None  # rank -> the measurement; or {"skipped": why}
    train: dict | None = None
    extra_findings: tuple[Finding, ...] = ()
    extra_checks: tuple[CheckResult, ...] = ()

    @property
    def findings(self) -> tuple[Finding, ...]:
        from ..model import sort_findings

        return tuple(sort_findings(list(self.comparison.findings) + list(self.extra_findings)))

    @property
    def checks(self) -> tuple[CheckResult, ...]:
        return tuple(self.comparison.checks) + tuple(self.extra_checks)


def member_payload(env: RankEnv, report) -> dict:
    from ..report.json import report_dict

    return {"rank": env.rank, "local_rank": env.local_rank, "host": env.host,
            "gpu": rank_gpu(report.facts, env.local_rank),
            "facts": to_json(comparable_facts(report.facts, env.local_rank)),
            "report": report_dict(report.findings, report.checks)}


def member_from_payload(payload: dict) -> Member:
    report = payload.get("report") or {}
    findings = tuple(Finding.from_json(f) for f in report.get("findings", ()))
    checks = tuple(CheckResult(c["id"], CheckStatus(c["status"]), c.get("reason", ""), float(c.get("duration_ms", 0)),
                               tuple(f for f in findings if f.id == c["id"])) for c in report.get("checks", ()))
    return Member(f"rank {payload['rank']}", payload.get("host", "?"), from_json(payload.get("facts") or {}),
                  findings, checks, rank=int(payload["rank"]), local_rank=payload.get("local_rank"),
                  gpu=payload.get("gpu"))


def _local_only(env: RankEnv, report, why: str, timeout_s: float) -> DistributedReport:
    """This rank could not reach rank 0: its own report, and rank 0 as the unreachable one."""
    member = member_from_payload(member_payload(env, report))
    comparison = compare([member], [], timeout_s)
    lost = unreachable_finding([Missing(0, why)], env.world_size, timeout_s)
    checks = [c for c in comparison.checks if c.id != "rank-unreachable"]
    checks.append(CheckResult("rank-unreachable", CheckStatus.FAIL, lost.message, findings=(lost,)))
    comparison = Comparison(comparison.members, (Missing(0, why),), comparison.identical, comparison.differences,
                            tuple(list(comparison.findings) + [lost]), tuple(checks), timeout_s)
    return DistributedReport(env, comparison)


def run_rank(env: RankEnv, options: Options, host=None) -> tuple[DistributedReport | None, bool]:
    """This rank's whole part. Returns (the report to print, whether it is this rank's to print):
    rank 0 always prints; another rank prints only when it lost rank 0 (nobody else would)."""
    from ..engine import diagnose
    from ..host import LiveHost
    from .exchange import Rendezvous, StoreUnreachable

    host = host or LiveHost()
    try:
        rendezvous = Rendezvous(env, options.rank_timeout_s)
    except StoreUnreachable as exc:
        report = diagnose(host, only=options.only, skip=options.skip, requirements=options.requirements)
        return _local_only(env, report, str(exc), options.rank_timeout_s), True
    report = diagnose(host, only=options.only, skip=options.skip, requirements=options.requirements)
    rendezvous.publish("static", member_payload(env, report))

    if env.is_leader:
        payloads, missing = rendezvous.collect("static", list(range(env.world_size)), options.rank_timeout_s)
        answered = sorted(payloads)
        measure = not missing and env.world_size >= 1
        plan = {"answered": answered, "nccl": (options.nccl or options.train) and measure,
                "train": options.train and measure}
        rendezvous.announce("plan", plan)
    else:
        plan = rendezvous.wait_for("plan", options.rank_timeout_s * 2 + SLACK_S)
        if plan is None:
            why = "rank 0 announced no plan in time (it died, or its probes hung)"
            return _local_only(env, report, why, options.rank_timeout_s), True
        payloads, missing = {}, []

    results: dict[str, Any] = {}
    for phase, wanted in (("nccl", plan["nccl"]), ("train", plan["train"])):
        if not wanted:
            continue
        own = _run_phase(phase, env, options)
        rendezvous.publish(phase, own)
        if env.is_leader:
            got, lost = rendezvous.collect(phase, plan["answered"], options.phase_timeout_s + SLACK_S)
            results[phase] = {"ranks": got, "missing": lost}

    rendezvous.publish("bye", {})
    if not env.is_leader:
        return None, False
    rendezvous.collect("bye", plan["answered"], 10.0)
    members = [member_from_payload(payloads[r]) for r in sorted(payloads)]
    comparison = compare(members, [Missing(r, "no report arrived") for r in missing], options.rank_timeout_s)
    extra_findings, extra_checks = _phase_findings(results, plan, options, missing)
    return DistributedReport(env, comparison, results.get("nccl"), results.get("train"),
                             tuple(extra_findings), tuple(extra_checks)), True


def _run_phase(phase: str, env: RankEnv, options: Options) -> dict:
    if phase == "train":
        from .child_phase import run_phase_child

        args = (["--preset", options.preset] if options.preset else []) + (["--compile"] if options.compile else [])
        return run_phase_child("gpudoctor.train.fsdp", args, env, "train", options.phase_timeout_s).result
    from .nccl_runner import run_nccl_measurement

    return run_nccl_measurement(env, options.phase_timeout_s)


def _phase_findings(results: dict, plan: dict, options: Options, missing: list[int]):
    findings: list[Finding] = []
    checks: list[CheckResult] = []
    if options.nccl or options.train:
        if "nccl" in results:
            from .nccl_judge import judge_nccl

            found, checked = judge_nccl(results["nccl"])
            findings.extend(found)
            checks.extend(checked)
        else:
            why = f"not run: ranks {missing} did not report" if missing else "not run"
            checks.append(CheckResult("nccl-bandwidth-low", CheckStatus.SKIP, why))
    if options.train:
        from .fsdp_judge import CHECK_ID, judge_fsdp

        if "train" in results:
            found, checked, summary = judge_fsdp({**results["train"], "timeout_s": options.phase_timeout_s})
            results["train"]["summary"] = summary
            findings.extend(found)
            checks.extend(checked)
        else:
            why = f"not run: ranks {missing} did not report" if missing else "not run"
            checks.append(CheckResult(CHECK_ID, CheckStatus.SKIP, why))
    return findings, checks

