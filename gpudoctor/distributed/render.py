"""Rank 0's one report, as text or as the schema-1 JSON with a ``ranks`` array (and the same for
`gpudoctor diff`). The findings and checks go through the shared reporters."""

from __future__ import annotations

from typing import Any

from .compare import Comparison, describe

# Shown on one line each in "same everywhere"; the rest of the identical facts only with -v.
HEADLINE = ("NVIDIA driver", "CUDA (driver)", "GPU model", "GPU memory", "torch", "triton", "nvidia-nccl-cu12",
            "nvidia-nccl-cu13", "bitsandbytes", "Python")


def identical_lines(comparison: Comparison, verbose: bool) -> list[str]:
    items = [(k, v) for k, v in comparison.identical.items()
             if verbose or (k in HEADLINE and v != "absent")]
    return [f"{k}: {v}" for k, v in items]


def difference_lines(comparison: Comparison) -> list[str]:
    lines = []
    for diff in comparison.differences:
        sides = "; ".join(f"{value} on {describe(members)}" for value, members in diff.groups)
        note = " (expected to differ per rank)" if diff.kind == "placement" else ""
        lines.append(f"{diff.key}{note}: {sides}")
    return lines


def ranks_json(comparison: Comparison) -> list[dict[str, Any]]:
    from ..report.json import report_dict

    out = []
    for m in comparison.members:
        out.append({"rank": m.rank, "host": m.host, "local_rank": m.local_rank, "gpu": m.gpu, "reachable": True,
                    "findings": report_dict(m.findings)["findings"]})
    for missing in comparison.missing:
        out.append({"rank": missing.rank, "host": None, "local_rank": None, "gpu": None, "reachable": False,
                    "findings": [], "why": missing.why})
    return sorted(out, key=lambda r: (r["rank"] is None, r["rank"] if r["rank"] is not None else 0))


def comparison_json(comparison: Comparison) -> dict[str, Any]:
    return {
        "identical": dict(comparison.identical),
        "differences": [{"fact": d.key, "kind": d.kind,
                         "values": [{"value": value, "members": [m.rank if m.rank is not None else m.label for m in ms],
                                     "hosts": sorted({m.host for m in ms})} for value, ms in d.groups]}
                        for d in comparison.differences],
    }


def render_distributed_json(report) -> str:
    import json

    from ..report.json import report_dict

    comparison = report.comparison
    extra: dict[str, Any] = {
        "ranks": ranks_json(comparison),
        "distributed": {"world_size": report.env.world_size, "launcher": report.env.launcher,
                        "hosts": comparison.hosts, "rank_timeout_s": comparison.timeout_s,
                        **comparison_json(comparison)},
    }
    if report.nccl is not None:
        extra["nccl"] = report.nccl
    if report.train is not None:
        extra["train"] = report.train
    return json.dumps(report_dict(report.findings, report.checks, **extra), indent=2, default=str)


def print_distributed(console, report, verbose: bool = False) -> None:
    from ..report.terminal import print_report

    comparison = report.comparison
    env = report.env
    answered = len(comparison.members)
    hosts = comparison.hosts
    head = (f"{answered} of {env.world_size} ranks answered on {len(hosts)} host{'s' if len(hosts) != 1 else ''} "
            f"({', '.join(hosts)}), launched by {env.launcher}")
    summary = [head, "same on every rank: " + "; ".join(identical_lines(comparison, verbose))]
    diffs = difference_lines(comparison)
    summary += ["differs: " + line for line in diffs] or ["no differences across ranks"]
    for m in comparison.members:
        gpu = m.gpu
        where = f"GPU {gpu['index']} {gpu['name']}" + (f" ({gpu['pci_bus_id']})" if gpu.get("pci_bus_id") else "") if gpu else "no GPU"
        summary.append(f"rank {m.rank} (local {m.local_rank}) on {m.host}: {where}, {len(m.findings)} finding(s)")
    print_report(console, report.findings, report.checks, title="gpudoctor check --distributed", summary=summary,
                 verbose=verbose)
    if report.nccl is not None:
        from .nccl_judge import nccl_lines

        for line in nccl_lines(report.nccl):
            console.print(line, highlight=False)
    if report.train is not None:
        from .fsdp_judge import fsdp_lines

        for line in fsdp_lines(report.train, report.train.get("summary") or {}):
            console.print(line, highlight=False)


def print_diff(console, comparison: Comparison, labels: tuple[str, str], verbose: bool = False) -> None:
    from ..report.terminal import print_findings

    console.print(f"[bold]gpudoctor diff[/] {labels[0]} {labels[1]}")
    if verbose:
        for line in identical_lines(comparison, True):
            console.print(f"  [dim]same: {line}[/]", highlight=False)
    if not comparison.differences and not _finding_differences(comparison):
        console.print(f"[green]No differences[/] ({len(comparison.identical)} facts compared, findings the same).")
        return
    for line in difference_lines(comparison):
        console.print(f"  [yellow]≠[/] {line}", highlight=False)
    only = _finding_differences(comparison)
    if only:
        console.print("[bold]Findings on one side only[/]")
        print_findings(console, only, verbose)


def _finding_differences(comparison: Comparison):
    return [f for f in comparison.findings if "ranks" in f.evidence and f.id not in ("ranks-differ", "rank-unreachable")]
