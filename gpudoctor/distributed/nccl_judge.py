"""Judging the NCCL measurement every rank sent: failures, hangs, and bandwidth far below what
the GPUs' links allow (with the likely cause)."""

from __future__ import annotations

from ..checks.base import finding
from ..knowledge import load_catalogue
from ..model import CheckResult, CheckStatus, Finding
from ..remedies import fixes_for
from ..report.text import format_bytes
from .nccl_parse import LOW_FRACTION, link_bandwidth
from .nccl_topology import THROUGH_THE_CPU, describe, kind, weakest_pair

CHECK_ID = "nccl-bandwidth-low"
DISABLING_VARS = ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_IB_DISABLE", "NCCL_NET", "NCCL_P2P_LEVEL",
                  "NCCL_NET_GDR_LEVEL", "NCCL_ALGO", "NCCL_PROTO")


def _failure_id(timed_out: bool) -> str:
    # nccl-timeout belongs to the log-diagnosis rules; fall back where this build lacks it.
    return "nccl-timeout" if timed_out and "nccl-timeout" in load_catalogue() else "nccl-failure"


def measured_link(ranks: dict) -> dict | None:
    """How the measured GPUs are connected, from `nvidia-smi topo -m` (recorded by local rank 0):
    {"gpus": (a, b), "connection": "NV18"} for the farthest pair of them, else None (no matrix,
    a GPU index unknown, ranks on several hosts)."""
    topology = next((v["topology"] for v in ranks.values() if (v.get("topology") or {}).get("links")), None)
    gpus = sorted({v.get("gpu_index") for v in ranks.values()}, key=lambda g: (g is None, g))
    if topology is None or None in gpus or len(gpus) < 2:
        return None
    pair = weakest_pair(topology, gpus)
    return None if pair is None else {"gpus": pair[:2], "connection": pair[2]}


def _pair_text(link: dict) -> str:
    a, b = link["gpus"]
    return f"GPUs {a} and {b}: {link['connection']} ({describe(link['connection'])})"


def judge_nccl(results: dict) -> tuple[list[Finding], list[CheckResult]]:
    ranks: dict = results.get("ranks") or {}
    missing = results.get("missing") or []
    failed = {r: v for r, v in ranks.items() if v.get("error")}
    if missing or failed:
        timed_out = bool(missing) or any(v.get("timed_out") for v in failed.values())
        parts = [f"rank {r}: {v['error']}" for r, v in sorted(failed.items())]
        if missing:
            parts.append(f"ranks {missing} sent no result")
        tail = next((v.get("stderr_tail") for v in failed.values() if v.get("stderr_tail")), "")
        lost = finding(_failure_id(timed_out), "The NCCL measurement failed: " + "; ".join(parts) + ".",
                       {"failed_ranks": sorted(failed), "missing_ranks": missing, "stderr_tail": tail[-2000:]},
                       fixes_for(_failure_id(timed_out)))
        return [lost], [CheckResult(CHECK_ID, CheckStatus.SKIP, f"not judged: {lost.message}")]
    first = ranks[min(ranks)]
    if first.get("backend") != "nccl":
        return [], [CheckResult(CHECK_ID, CheckStatus.SKIP,
                                "no GPU: the collectives ran over gloo on the CPU, so NCCL was not measured")]
    hosts = {v.get("host") for v in ranks.values()}
    if len(hosts) > 1:
        return [], [CheckResult(CHECK_ID, CheckStatus.SKIP, "ranks on several hosts: the network's bandwidth is not "
                                                            "known to gpudoctor, so the figures are shown, not judged")]
    link = measured_link(ranks)
    # NVML counts a GPU's active NVLinks whichever GPU they lead to: when the matrix says the
    # measured pair is not joined by NVLink, their traffic is bound by PCIe.
    pcie_only = link is not None and kind(link["connection"]) != "NV"
    allowed = [link_bandwidth({**(v.get("links") or {}), **({"nvlink_active": 0} if pcie_only else {})})
               for v in ranks.values()]
    if any(gbs is None for gbs, _ in allowed):
        return [], [CheckResult(CHECK_ID, CheckStatus.SKIP, "the GPUs' link bandwidth is unknown (NVML did not say)")]
    expected, basis = min(allowed)
    largest = first["all_reduce"][-1]
    measured = largest["busbw_gbs"]
    if measured >= LOW_FRACTION * expected:
        return [], [CheckResult(CHECK_ID, CheckStatus.PASS,
                                f"all-reduce {format_bytes(largest['bytes'])}: {measured:g} GB/s bus bandwidth, "
                                f"{measured / expected:.0%} of {expected:g} GB/s ({basis})"
                                + (f"; {_pair_text(link)}" if link else ""))]
    causes = _likely_causes(ranks, link)
    low = finding(
        CHECK_ID,
        f"All-reduce of {format_bytes(largest['bytes'])} reached {measured:g} GB/s bus bandwidth, "
        f"{measured / expected:.0%} of the {expected:g} GB/s the links allow ({basis}); "
        + (f"likely cause: {'; '.join(causes)}." if causes else "no disabling setting found: check PCIe ACS/IOMMU."),
        {"measured_busbw_gbs": measured, "expected_gbs": expected, "basis": basis, "bytes": largest["bytes"],
         "transports": first.get("transports"), "p2p": first.get("p2p"), "causes": causes,
         "nccl_env": first.get("nccl_env"), "topology": link},
        fixes_for(CHECK_ID),
    )
    return [low], [CheckResult(CHECK_ID, CheckStatus.FAIL, low.message, findings=(low,))]


def _likely_causes(ranks: dict, link: dict | None = None) -> list[str]:
    causes = []
    if link and kind(link["connection"]) in THROUGH_THE_CPU:
        a, b = link["gpus"]
        code = link["connection"]
        why = ("P2P crosses the CPU's root complex, which many CPUs forward slowly" if code == "PHB" else
               "NCCL does not use P2P that far unless NCCL_P2P_LEVEL allows it, so the data goes through host memory")
        causes.append(f"GPUs {a} and {b} are connected through {code} ({describe(code)}): {why}")
    env: dict = {}
    for v in ranks.values():
        env.update({k: val for k, val in (v.get("nccl_env") or {}).items() if k in DISABLING_VARS})
        env.update({k: val for k, val in (v.get("set_by_environment") or {}).items() if k in DISABLING_VARS})
    causes += [f"{k}={val} is set" for k, val in sorted(env.items())]
    blocked = sorted({pair for v in ranks.values() for pair, ok in (v.get("p2p") or {}).items() if not ok})
    if blocked:
        causes.append(f"CUDA reports no peer access between GPUs {', '.join(blocked)} (PCIe ACS or an IOMMU)")
    transports = {t for v in ranks.values() for t in (v.get("transports") or {})}
    fallback = sorted(t for t in transports if t.startswith(("SHM", "NET")))
    if fallback:
        causes.append(f"NCCL used {', '.join(fallback)} between GPUs of one host instead of P2P")
    return causes


def nccl_lines(results: dict) -> list[str]:
    ranks: dict = results.get("ranks") or {}
    if not ranks:
        return ["[bold]NCCL[/]: no measurement arrived"]
    first = ranks[min(ranks)]
    if first.get("error"):
        return [f"[bold]NCCL[/]: measurement failed on rank {min(ranks)}: {first['error']}"]
    if first.get("backend") == "nccl":
        head = f"[bold]NCCL {first.get('nccl_version') or ''}[/] ({first.get('world_size')} ranks, {first.get('device')})"
    else:
        head = f"[bold]Collectives over {first.get('backend')}[/] ({first.get('world_size')} ranks, no GPU: NCCL not measured)"
    lines = [head]
    for op in ("all_reduce", "all_gather"):
        figures = ", ".join(f"{format_bytes(r['bytes'])} {r['busbw_gbs']:g}" for r in first.get(op, []))
        lines.append(f"  {op.replace('_', '-')} bus bandwidth GB/s: {figures}")
    if first.get("transports"):
        lines.append("  transports: " + ", ".join(f"{t} ({n} channels)" for t, n in first["transports"].items()))
    if first.get("links"):
        gbs, basis = link_bandwidth(first["links"])
        lines.append(f"  links of rank 0's GPU: {basis}" + (f" = {gbs:g} GB/s per direction" if gbs else ""))
    if first.get("p2p"):
        ok = sum(first["p2p"].values())
        lines.append(f"  P2P access: {ok} of {len(first['p2p'])} GPU pairs")
    link = measured_link(ranks)
    if link:
        lines.append(f"  topology (nvidia-smi topo -m), farthest measured pair: {_pair_text(link)}")
    else:
        topology = next((v["topology"] for v in ranks.values() if v.get("topology")), None)
        if topology and topology.get("error"):
            lines.append(f"  topology: not read ({topology['error']})")
    return lines
