"""Judging the FSDP2 QLoRA pass every rank ran (train/fsdp.py): did every rank finish, did the
sharded model learn like the single-GPU one on the same data, and did sharding lower each rank's
peak memory. Torch-free: rank 0's parent judges what the children printed.

Mapping (rule ids from the catalogue, as the single-GPU pass maps them, train/diagnosis.py):
  a rank that never finished (killed at the phase's deadline)  -> nccl-timeout (a collective hung)
  out of memory on a rank                                      -> cuda-oom
  Triton compile / launch failure on a rank                    -> triton-jit-failed
  an NCCL / process-group error                                -> nccl-failure
  any other exception in the pass                              -> what the log diagnosis finds in the
                                                                  rank's output, else training-pass-diverged
  loss not falling, FSDP2 loss off the single-GPU curve, LoRA shards without gradients, a frozen
  NF4 shard changed, graph breaks under --compile                -> training-pass-diverged
Per-rank peak memory not below the single-GPU figure is not an environment problem but a pass
that did not prove what it claims: the check becomes an error (never a pass), with the figures.
"""

from __future__ import annotations

from ..checks.base import finding
from ..model import CheckResult, CheckStatus, Finding
from ..remedies import fixes_for
from ..report.text import format_bytes
from ..train.signals import MIN_LOSS_DROP, loss_fell

# The check carries the training pass's rule id, as the single-GPU pass's checks do (grouped with
# it in the report); its findings name the cause (nccl-timeout, cuda-oom, ...).
CHECK_ID = "training-pass-diverged"


def _failure_findings(rank: int, result: dict) -> list[Finding]:
    failure = result.get("failure") or {}
    kind = failure.get("kind")
    what = result.get("error") or f"{failure.get('error_type', 'error')}: {failure.get('message', '')}"
    evidence = {"rank": rank, "host": result.get("host"), "error": what,
                "traceback_tail": (failure.get("traceback") or result.get("stderr_tail") or "")[-1500:]}
    if kind == "oom":
        return [finding("cuda-oom", f"Rank {rank} ran out of GPU memory in the FSDP2 pass: {what}", evidence,
                        fixes_for("cuda-oom", {"from_training_pass": True}))]
    if kind in ("triton-jit", "illegal-memory-access", "cuda-error"):
        return [finding("triton-jit-failed", f"Rank {rank}: a Triton kernel failed in the FSDP2 pass ({what}).", evidence,
                        fixes_for("triton-jit-failed", {"situation": "crash", "preset": result.get("preset")}))]
    if kind in ("nccl", "nccl-timeout"):
        rule = "nccl-timeout" if kind == "nccl-timeout" else "nccl-failure"
        return [finding(rule, f"Rank {rank}: a collective of the FSDP2 pass failed ({what}).", evidence, fixes_for(rule))]
    from ..logs import diagnose_lines

    text = "\n".join(x for x in (failure.get("traceback"), result.get("stderr_tail")) if x)
    diagnosed = [f for f in diagnose_lines(text.splitlines()) if f.id != "unknown"] if text else []
    if diagnosed:
        return diagnosed[:3]
    return [finding("training-pass-diverged", f"Rank {rank}: the FSDP2 QLoRA pass could not run: {what}", evidence,
                    fixes_for("training-pass-diverged", {"situation": "error", "preset": result.get("preset")}))]


def _max_relative_difference(a: list[float], b: list[float]) -> float:
    return max((abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b)), default=float("inf"))


def _steps_off_curve(a: list[float], b: list[float], rtol: float, atol: float) -> list[int]:
    """Steps where |a - b| > rtol * |b| + atol * |b[0]| (see train/fsdp.py for why both parts)."""
    floor = atol * abs(b[0]) if b else 0.0
    return [i for i, (x, y) in enumerate(zip(a, b)) if abs(x - y) > rtol * abs(y) + floor]


def _curve_problems(label: str, losses: list[float], single: list[float], rtol: float, atol: float) -> list[str]:
    problems = []
    finite = all(isinstance(x, (int, float)) and x == x and abs(x) != float("inf") for x in losses)
    if not finite:
        return [f"the {label} loss became non-finite: {losses}"]
    if len(losses) >= 2 and not loss_fell(losses):
        problems.append(f"the {label} loss did not fall by {MIN_LOSS_DROP:.0%}: {losses[0]:.4f} -> {losses[-1]:.4f}")
    if not single:
        problems.append("the single-GPU reference produced no loss curve to compare with")
    elif len(single) != len(losses):
        problems.append(f"{len(losses)} {label} steps against {len(single)} single-GPU steps")
    else:
        off = _steps_off_curve(losses, single, rtol, atol)
        if off:
            i = off[0]
            problems.append(f"the {label} loss left the single-GPU curve at step {i} ({losses[i]:.6g} against "
                            f"{single[i]:.6g}; tolerance {rtol:g} relative + {atol:g} x the first loss; "
                            f"{len(off)} of {len(single)} steps off)")
    return problems


def _learning_problems(ranks: dict) -> tuple[list[str], dict]:
    first = ranks[min(ranks)]
    fsdp = first["fsdp"]
    reference = first.get("single_device") or {}
    rtol = float(first.get("loss_relative_tolerance", 0.03))
    atol = float(first.get("loss_absolute_tolerance", 0.0))
    losses, single = fsdp["losses"], reference.get("losses") or []
    problems = _curve_problems("FSDP2", losses, single, rtol, atol)
    compiled_run = first.get("fsdp_compiled")
    if compiled_run:
        problems += _curve_problems("compiled FSDP2", compiled_run["losses"], single, rtol, atol)
    runs = ("fsdp", "fsdp_compiled") if compiled_run else ("fsdp",)
    for run in runs:
        curves = {r: v[run]["losses"] for r, v in ranks.items() if v.get(run)}
        if len({tuple(c) for c in curves.values()}) > 1:
            problems.append(f"the ranks disagree on the mean loss ({run}): {curves}")
        no_grad = set.intersection(*(set(v[run].get("lora_without_grad", ())) for v in ranks.values() if v.get(run)))
        if no_grad:
            problems.append(f"{len(no_grad)} of {fsdp['lora_tensors']} LoRA tensors got no non-zero gradient on any "
                            f"rank ({run}), e.g. {sorted(no_grad)[0]}")
        for key, what in (("nonfinite_grads", "non-finite gradients"),
                          ("base_with_grad", "frozen NF4 tensors with a gradient"),
                          ("base_changed", "frozen NF4 shards that changed")):
            hit = sorted({(r, n) for r, v in ranks.items() for n in (v.get(run) or {}).get(key, ())})
            if hit:
                problems.append(f"{what} on rank {hit[0][0]}: {hit[0][1]} ({len(hit)} in all, {run})")
    compiled = [v["fsdp_compiled"]["compile"] for v in ranks.values() if (v.get("fsdp_compiled") or {}).get("compile")]
    breaks = sum(c["graph_breaks"] for c in compiled)
    if breaks:
        problems.append(f"{breaks} graph breaks under --compile: {compiled[0]['break_reasons'][:3]}")
    if compiled and not all(c.get("graphs") for c in compiled):
        problems.append("--compile compiled no graph on some rank (Dynamo skipped the blocks), so it proved nothing")
    difference = _max_relative_difference(losses, single) if single else None
    figures = {"loss_first": losses[0] if losses else None, "loss_last": losses[-1] if losses else None,
               "single_device_losses": single, "fsdp_losses": losses,
               "compiled_fsdp_losses": compiled_run["losses"] if compiled_run else None,
               "max_relative_loss_difference": difference, "max_absolute_loss_difference":
                   max((abs(x - y) for x, y in zip(losses, single)), default=None),
               "tolerance": {"relative": rtol, "absolute_times_first_loss": atol},
               "graph_breaks": breaks if compiled else None}
    return problems, figures


def _memory(ranks: dict) -> dict:
    single = (ranks[min(ranks)].get("single_device") or {}).get("peak_memory_bytes")
    per_rank = {r: v["fsdp"].get("peak_memory_bytes") for r, v in ranks.items()}
    known = [x for x in per_rank.values() if x is not None]
    return {"single_device_peak_bytes": single, "per_rank_peak_bytes": per_rank,
            "max_rank_peak_bytes": max(known) if known else None,
            "fraction": (max(known) / single) if known and single else None}


def judge_fsdp(results: dict) -> tuple[list[Finding], list[CheckResult], dict]:
    """(findings, checks, summary): ``results`` is {"ranks": {rank: child result}, "missing": [...]}."""
    ranks: dict = {int(r): v for r, v in (results.get("ranks") or {}).items()}
    missing = list(results.get("missing") or [])
    hung = sorted([r for r, v in ranks.items() if v.get("timed_out")] + missing)
    findings: list[Finding] = []
    if hung:
        findings.append(finding("nccl-timeout", f"Ranks {hung} did not finish the FSDP2 pass before the deadline: a "
                                "collective hung (or the rank died without a word).",
                                {"ranks": hung, "deadline_s": results.get("timeout_s")}, fixes_for("nccl-timeout")))
    for rank, result in sorted(ranks.items()):
        if result.get("error") and not result.get("timed_out"):
            findings.extend(_failure_findings(rank, result))
    if findings:
        return findings, [CheckResult(CHECK_ID, CheckStatus.FAIL, findings[0].message, findings=tuple(findings))], {}
    problems, figures = _learning_problems(ranks)
    memory = _memory(ranks)
    first = ranks[min(ranks)]
    summary = {"preset": first.get("preset"), "mode": first.get("mode"), "world_size": first.get("world_size"),
               "global_batch": first.get("global_batch"), "steps": first.get("steps"), **figures, **memory,
               "step_ms": {r: v["fsdp"]["step_ms"] for r, v in ranks.items()}}
    if problems:
        diverged = finding("training-pass-diverged", "The FSDP2 QLoRA pass did not train like the single-GPU pass: "
                           + "; ".join(problems) + ".", {"problems": problems, **figures},
                           fixes_for("training-pass-diverged", {"situation": "diverged", "preset": first.get("preset")}))
        return [diverged], [CheckResult(CHECK_ID, CheckStatus.FAIL, diverged.message, findings=(diverged,))], summary
    curve = f"loss {figures['loss_first']:.3f} -> {figures['loss_last']:.3g}, every step on the single-GPU curve " \
            f"(at most {figures['max_absolute_loss_difference']:.2g} apart; tolerance {figures['tolerance']['relative']:g} " \
            f"relative + {figures['tolerance']['absolute_times_first_loss']:g} x the first loss)"
    compiled = "" if figures["graph_breaks"] is None else ", torch.compile per block with 0 graph breaks"
    if first.get("mode") != "gpu":
        return [], [CheckResult(CHECK_ID, CheckStatus.PASS,
                                f"{len(ranks)} ranks over gloo, no GPU ({first.get('preset')} preset in Triton's "
                                f"interpreter): {curve}{compiled}; GPU memory not measured")], summary
    fraction = memory["fraction"]
    peak = (f"peak memory per rank {format_bytes(memory['max_rank_peak_bytes'])} against "
            f"{format_bytes(memory['single_device_peak_bytes'])} on one GPU")
    if fraction is None or fraction >= 1.0:
        return [], [CheckResult(CHECK_ID, CheckStatus.ERROR,
                                f"{curve}, but sharding did not lower memory: {peak}; the pass did not prove FSDP2 "
                                "shards this model")], summary
    return [], [CheckResult(CHECK_ID, CheckStatus.PASS,
                            f"{len(ranks)} ranks, {first.get('preset')} preset: {curve}; {peak} "
                            f"({fraction:.0%}){compiled}")], summary


def fsdp_lines(results: dict, summary: dict) -> list[str]:
    ranks: dict = results.get("ranks") or {}
    if not summary:
        return [f"[bold]FSDP2 QLoRA pass[/]: did not complete on {len(ranks)} rank(s) (see the findings)"]
    lines = [f"[bold]FSDP2 QLoRA pass[/] ({summary['world_size']} ranks, {summary['preset']} preset, "
             f"global batch {summary['global_batch']}, {summary['steps']} steps)"]
    fsdp = ", ".join(f"{x:.3f}" for x in summary["fsdp_losses"])
    single = ", ".join(f"{x:.3f}" for x in summary["single_device_losses"])
    lines.append(f"  loss FSDP2:      {fsdp}")
    lines.append(f"  loss single GPU: {single}")
    if summary.get("compiled_fsdp_losses"):
        compiled = ", ".join(f"{x:.3f}" for x in summary["compiled_fsdp_losses"])
        lines.append(f"  loss compiled:   {compiled} (graph breaks: {summary.get('graph_breaks')})")
    if summary.get("max_rank_peak_bytes") is not None:
        per = ", ".join(f"rank {r} {format_bytes(b)}" for r, b in sorted(summary["per_rank_peak_bytes"].items()))
        lines.append(f"  peak memory: {per}; single GPU {format_bytes(summary['single_device_peak_bytes'])}")
    steps = summary.get("step_ms") or {}
    if steps:
        rank0 = steps[min(steps)]
        if len(rank0) > 1:
            warm = sorted(rank0[1:])[len(rank0[1:]) // 2]
            lines.append(f"  step time (rank 0, median after the first): {warm:.1f} ms; first step {rank0[0]:.0f} ms")
    return lines
