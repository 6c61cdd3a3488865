"""Turn the child's result, or the way it died, into findings and check results. No torch here.

Mapping (rule ids from the catalogue):
  Triton compile / launcher build / load failure  -> triton-jit-failed naming the cause it found
      (from the exception, else from the compiler output on stderr via the log matcher)
  crash by signal, hang past the timeout, illegal memory access -> triton-jit-failed (every stage
      of the pass runs gpudoctor's Triton kernels), naming the stage and the signal
  out of memory                                   -> cuda-oom
  a backend disagreeing with its reference        -> kernel-numerics-mismatch (one per backend)
  loss not falling, non-finite or zero LoRA grads -> training-pass-diverged
  Unsloth would not fast-patch the --peft config  -> unsloth-layers-not-patched
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..checks.base import finding
from ..model import CheckResult, CheckStatus, Finding, Fix, Severity
from ..remedies import Machine, fixes_for
from ..remedies.training import RERUN_AFTER_FIX
from ..report.text import format_bytes
from .protocol import INSTALL_HINT



def jit_causes() -> frozenset[str]:
    """Rules that explain why Triton's JIT failed (``breaks_triton_jit`` in the catalogue); the log
    matcher reports them from the compiler's output."""
    from ..knowledge import load_catalogue

    return frozenset(rule.id for rule in load_catalogue().values() if rule.breaks_triton_jit)


@dataclass
class TrainPass:
    """What the training pass comes to: its findings, the check results of the rules it decides, and the
    ``train`` section of the JSON report."""

    findings: list[Finding] = field(default_factory=list)
    checks: list[CheckResult] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)  # the "train" key of the JSON report


def skipped_pass(reason: str, hint: str | None = None) -> TrainPass:
    checks = [CheckResult(rule, CheckStatus.SKIP, reason) for rule in
              ("triton-jit-failed", "training-pass-diverged", "kernel-numerics-mismatch")]
    return TrainPass([], checks, {"status": "skipped", "reason": reason, "hint": hint})


def _cause_fixes(cause: str, log_findings: list[Finding], compiler: str | None, machine: Machine | None) -> tuple[Fix, ...]:
    for f in log_findings:
        if f.id == cause and f.fixes:
            return f.fixes
    return fixes_for(cause, {"cc": compiler} if cause == "c-compiler-missing" else {}, machine)


def _jit_finding(stage: str, failure: dict, log_findings: list[Finding], machine: Machine | None = None) -> list[Finding]:
    cause = failure.get("cause")
    if cause is None:
        causes = jit_causes()
        cause = next((f.id for f in log_findings if f.id in causes), None)
    what = f"{failure.get('error_type', 'error')}: {failure.get('message', '')}".strip()
    if cause:
        message = f"Triton's JIT failed in the {stage} stage because of {cause} ({what})."
    else:
        message = f"Triton's JIT failed in the {stage} stage ({what}); no known cause matched its output."
    fixes = _cause_fixes(cause, log_findings, failure.get("compiler"), machine) if cause else ()
    evidence = {"stage": stage, "cause": cause, "error": what, "compiler": failure.get("compiler"),
                "traceback_tail": failure.get("traceback", "")[-1500:]}
    found = [finding("triton-jit-failed", message, evidence, fixes + (RERUN_AFTER_FIX,))]
    if cause and not any(f.id == cause for f in log_findings) and cause == "c-compiler-missing":
        found.append(finding("c-compiler-missing", f"Triton's launcher build could not start {failure.get('compiler')}.",
                             {"CC": failure.get("compiler"), "seen_by": "training pass"}, fixes))
    return found


def _stage_failure_findings(stage: dict, outcome, preset: str, machine: Machine | None) -> list[Finding]:
    failure = stage.get("failure") or {}
    kind = failure.get("kind")
    stage_id = stage["id"]
    if kind == "triton-jit":
        return _jit_finding(stage_id, failure, outcome.log_findings, machine)
    if kind == "oom":
        return [finding("cuda-oom", f"The {preset} preset ran out of GPU memory in the {stage_id} stage: "
                        f"{failure.get('message')}", {"stage": stage_id},
                        fixes_for("cuda-oom", {"from_training_pass": True}))]
    if kind in ("illegal-memory-access", "cuda-error"):
        return [finding("triton-jit-failed", f"A kernel hit a CUDA error in the {stage_id} stage: {failure.get('message')}",
                        {"stage": stage_id, "cause": kind, "traceback_tail": failure.get("traceback", "")[-1500:]},
                        fixes_for("triton-jit-failed", {"situation": "cuda-error", "preset": preset}))]
    if kind == "missing-extra":
        return []
    if stage_id == "training":
        return [finding("training-pass-diverged", f"The QLoRA step could not run: {failure.get('error_type')}: "
                        f"{failure.get('message')}", {"traceback_tail": failure.get("traceback", "")[-1500:]},
                        fixes_for("training-pass-diverged", {"situation": "error", "preset": preset}))]
    return []


def _crash_findings(outcome, preset: str, timeout_s: float) -> list[Finding]:
    running = outcome.running_stage() or {"id": "start-up", "title": "starting the child"}
    evidence = {"stage": running["id"], "returncode": outcome.returncode, "signal": outcome.signal_name,
                "stderr_tail": outcome.stderr_tail[-1500:], "command": " ".join(outcome.command)}
    if outcome.timed_out:
        message = (f"The training pass hung: still in stage '{running.get('title', running['id'])}' after "
                   f"{timeout_s:.0f} s, so it was killed. A kernel that never finishes, or a compile stuck on a "
                   "lock in the Triton cache.")
        fixes = fixes_for("triton-jit-failed", {"situation": "timeout", "preset": preset,
                                                "longer_timeout": int(timeout_s * 3)})
        evidence["timeout_s"] = timeout_s
        return [finding("triton-jit-failed", message, evidence, fixes)]
    signal_name = outcome.signal_name
    if signal_name:
        message = (f"The training pass died with {signal_name} in stage '{running.get('title', running['id'])}': "
                   "a native crash (a kernel, the driver or an extension), not a Python error.")
    else:
        message = (f"The training pass exited with code {outcome.returncode} without a result, in stage "
                   f"'{running.get('title', running['id'])}'.")
    return [finding("triton-jit-failed", message, evidence, fixes_for("triton-jit-failed", {"situation": "crash", "preset": preset}))]


def _backend_findings(stage: dict, log_matcher) -> list[Finding]:
    found = []
    rows = (stage.get("detail") or {}).get("rows", [])
    working = [r["backend"] for r in rows if r["status"] == "works"]
    for row in rows:
        if row["status"] == "mismatch":
            found.append(finding("kernel-numerics-mismatch",
                                 f"{row['capability']} backend {row['backend']} disagrees with the reference: {row['reason']}.",
                                 {"capability": row["capability"], "backend": row["backend"], "errors": row["errors"],
                                  "tolerance": row["tolerance"], "shape": row["notes"]},
                                 fixes_for("kernel-numerics-mismatch", {"working": tuple(working)})))
        elif row["status"] == "fails" and row["backend"] == "gpudoctor-triton":
            found += _jit_finding(f"{row['capability']} backend matrix ({row['stage']})",
                                  {"error_type": row["error_type"], "message": row["reason"],
                                   "traceback": row.get("traceback_tail", "")}, [])
        elif row["status"] == "fails" and row.get("traceback_tail"):
            # A third-party backend failing: the log signatures know several (flash-attn's head_dim
            # and arch limits, its ABI errors); report those, the rest stays a matrix entry.
            for f in log_matcher(row["traceback_tail"].splitlines()):
                if f.id.startswith("flash-attn") or f.id.startswith("bitsandbytes"):
                    found.append(f)
    return found


def _checks(stages: dict, result: dict, findings: list[Finding]) -> list[CheckResult]:
    def status_for(rule: str, stage_ids: tuple[str, ...]) -> tuple[CheckStatus, float, tuple[Finding, ...]]:
        mine = tuple(f for f in findings if f.id == rule)
        present = [stages[s] for s in stage_ids if s in stages]
        duration = sum(s.get("duration_ms", 0.0) for s in present)
        if mine:
            return CheckStatus.FAIL, duration, mine
        if not present or any(s["status"] in ("skip", "error") for s in present):
            return CheckStatus.SKIP, duration, ()  # it could not decide; the error has its own finding
        return CheckStatus.PASS, duration, ()

    def undecided(stage_ids: tuple[str, ...]) -> str:
        for sid in stage_ids:
            stage = stages.get(sid)
            if stage is None:
                return f"stage {sid} did not run"
            if stage["status"] in ("skip", "error"):
                failure = stage.get("failure") or {}
                return stage.get("reason") or f"stage {sid} failed: {failure.get('error_type')}: {failure.get('message')}"
        return ""

    checks = []
    jit = stages.get("triton-jit", {}).get("detail") or {}
    compile_times = jit.get("nf4_compile")
    launcher = (jit.get("launcher") or {}).get("launcher_build_ms")
    reason = f"launcher built in {launcher} ms" if launcher is not None else ""
    if isinstance(compile_times, dict):
        reason += f"; NF4 kernel first launch cold {compile_times['cold_ms']} ms, warm {compile_times['warm_ms']} ms"
    elif compile_times:
        reason += f"; {compile_times}"
    status, duration, mine = status_for("triton-jit-failed", ("triton-jit",))
    if status == CheckStatus.SKIP:
        reason = undecided(("triton-jit",))
    elif status == CheckStatus.FAIL:
        reason = "; ".join(f.message for f in mine)
    checks.append(CheckResult("triton-jit-failed", status, reason, duration, mine))

    training = stages.get("training", {}).get("detail") or {}
    status, duration, mine = status_for("training-pass-diverged", ("training",))
    if status == CheckStatus.PASS:
        losses = training.get("losses", [])
        reason = (f"loss {losses[0]} -> {losses[-1]} in {len(losses)} steps; all {training.get('lora_tensors')} LoRA "
                  f"tensors got non-zero gradients; {training.get('base_tensors')} base tensors frozen")
    elif status == CheckStatus.SKIP:
        reason = undecided(("training",))
    else:
        reason = "; ".join(f.message for f in mine)
    checks.append(CheckResult("training-pass-diverged", status, reason, duration, mine))

    status, duration, mine = status_for("kernel-numerics-mismatch", ("nf4-backends", "attention-backends"))
    agreeing = [f"{sid.split('-')[0]}: fastest {stages[sid]['detail'].get('fastest')}"
                for sid in ("nf4-backends", "attention-backends") if stages.get(sid, {}).get("detail")]
    reason = {CheckStatus.PASS: "; ".join(agreeing), CheckStatus.FAIL: "; ".join(f.message for f in mine)}.get(
        status) or undecided(("nf4-backends", "attention-backends"))
    checks.append(CheckResult("kernel-numerics-mismatch", status, reason, duration, mine))

    if result.get("mode") == "gpu":
        mine = tuple(f for f in findings if f.id == "cuda-oom")
        peak = result.get("peak_memory_bytes")
        total = (result.get("device") or {}).get("memory_bytes")
        checks.append(CheckResult("cuda-oom", CheckStatus.FAIL if mine else CheckStatus.PASS,
                                  f"peak GPU memory {format_bytes(peak, 'n/a')} of {format_bytes(total, 'n/a')}",
                                  0.0, mine))
    for stage_id, rule in (("compile", "train-torch-compile"), ("peft", "unsloth-layers-not-patched")):
        if stage_id not in stages:
            continue
        stage = stages[stage_id]
        mine = tuple(f for f in findings if f.id == rule)
        problems = stage.get("problems") or []
        status = {"pass": CheckStatus.PASS, "fail": CheckStatus.FAIL, "skip": CheckStatus.SKIP}.get(stage["status"], CheckStatus.ERROR)
        if mine:
            status = CheckStatus.FAIL
        reason = "; ".join(problems) or _stage_reason(stage)
        checks.append(CheckResult(rule, status, reason, stage.get("duration_ms", 0.0), mine))
    return checks


def _stage_reason(stage: dict) -> str:
    detail = stage.get("detail") or {}
    if stage["id"] == "compile" and detail:
        return f"{detail.get('graph_breaks')} graph breaks in {detail.get('graphs')} graph(s), backend {detail.get('backend')}"
    if stage["id"] == "peft" and detail:
        return detail.get("skipped") or detail.get("unsloth", {}).get("would_log", "")
    failure = stage.get("failure") or {}
    return f"{failure.get('error_type', '')}: {failure.get('message', '')}" if failure else ""


def _peft_findings(stage: dict) -> list[Finding]:
    unsloth = (stage.get("detail") or {}).get("unsloth")
    if not unsloth or unsloth["fast_patching"]:
        return []
    config = unsloth["config"]
    return [finding("unsloth-layers-not-patched",
                    f"With this LoRA config Unsloth would log: {unsloth['would_log']} " + " ".join(unsloth["warnings"]),
                    {"config": config, "would_log": unsloth["would_log"]},
                    fixes_for("unsloth-layers-not-patched", {"dropout": config.get("lora_dropout", "…")}),
                    severity=Severity.WARNING)]


def diagnose_outcome(outcome, timeout_s: float, machine: Machine | None = None) -> TrainPass:
    from ..logs import diagnose_lines

    result = outcome.result or {}
    preset = result.get("preset") or "phi2"
    stage_list = result.get("stages") or _stages_from_events(outcome.events)
    stages = {s["id"]: s for s in stage_list}
    findings: list[Finding] = []

    import_stage = stages.get("import", {})
    if (import_stage.get("failure") or {}).get("kind") == "missing-extra":
        failure = import_stage["failure"]
        return skipped_pass(f"the child could not import {failure.get('cause')} ({failure.get('message')}): {INSTALL_HINT}",
                            hint=INSTALL_HINT)

    for stage in stage_list:
        if stage.get("status") == "error":
            findings += _stage_failure_findings(stage, outcome, preset, machine)
        if stage["id"] == "training" and stage.get("status") == "fail":
            detail = stage.get("detail") or {}
            findings.append(finding("training-pass-diverged", "; ".join(stage.get("problems", [])) + ".",
                                    {"losses": detail.get("losses"), "zero_lora_grads": detail.get("zero_lora_grads"),
                                     "nonfinite_grads": detail.get("nonfinite_grads")},
                                    fixes_for("training-pass-diverged", {"situation": "diverged", "preset": preset})))
        if stage["id"].endswith("-backends"):
            findings += _backend_findings(stage, lambda lines, **kw: diagnose_lines(lines, machine=machine, **kw))
        if stage["id"] == "peft":
            findings += _peft_findings(stage)
    if outcome.result is None:
        findings += _crash_findings(outcome, preset, timeout_s)
    findings = _merge_repeats(findings)

    # Causes the log matcher read in the child's output (compiler errors, OOM, driver trouble),
    # minus its own generic "Triton failed" consequence, which the findings above replace.
    known = {(f.id, f.message) for f in findings}
    for f in outcome.log_findings:
        if f.id != "triton-jit-failed" and (f.id, f.message) not in known and not any(x.id == f.id for x in findings):
            findings.append(f)

    data = {k: v for k, v in result.items() if k != "stages"}
    data["stages"] = [{k: v for k, v in s.items() if k != "detail"} for s in stage_list]
    details = {s["id"]: s.get("detail") for s in stage_list if s.get("detail") is not None}
    data["matrix"] = {cap: details[sid] for cap, sid in (("nf4", "nf4-backends"), ("attention", "attention-backends"))
                      if sid in details}
    for key in ("triton-jit", "training", "compile", "peft"):
        if key in details:
            data[key.replace("-", "_")] = details[key]
    data["child"] = {"returncode": outcome.returncode, "signal": outcome.signal_name, "timed_out": outcome.timed_out,
                     "wall_s": round(outcome.wall_s, 3), "command": outcome.command}
    data["status"] = "failed" if findings and any(f.severity == Severity.ERROR for f in findings) else "passed"
    return TrainPass(findings, _checks(stages, result, findings), data)


def _merge_repeats(findings: list[Finding]) -> list[Finding]:
    """One broken JIT fails every later stage the same way: keep the first finding of each rule
    and list where else it showed up (kernel mismatches stay one per backend)."""
    import dataclasses

    kept: dict[str, int] = {}
    merged: list[Finding] = []
    for f in findings:
        if f.id == "kernel-numerics-mismatch" or f.id not in kept:
            kept.setdefault(f.id, len(merged))
            merged.append(f)
            continue
        first = merged[kept[f.id]]
        also = list(first.evidence.get("also_in_stages", []))
        stage = f.evidence.get("stage")
        if stage and stage != first.evidence.get("stage") and stage not in also:
            also.append(stage)
        merged[kept[f.id]] = dataclasses.replace(first, evidence={**first.evidence, "also_in_stages": also})
    return merged


def _stages_from_events(events: list[dict]) -> list[dict]:
    """The stages that finished before the child died, from its progress events."""
    return [{k: v for k, v in e.items() if k not in ("event", "summary")}
            for e in events if e.get("event") == "stage-end"]
