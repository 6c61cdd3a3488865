"""Hardware health checks over NVML's answers: memory errors, retired rows, slowdowns, the PCIe
link and persistence mode. Each judges every GPU and says which ones it could not see."""

from __future__ import annotations

from ..model import Severity
from .base import PassedWithin, Skip, finding, fixes_for


def _gpus(health, fields: tuple[str, ...], what: str):
    """The GPUs that answered at least one of ``fields``; Skip (with NVML's reason) when none did."""
    if health.unavailable:
        raise Skip(health.unavailable)
    answered = [g for g in health.gpus if any(getattr(g.nvml, f) is not None for f in fields)]
    if not answered:
        reasons = sorted({g.nvml.why_unknown(fields[0]) for g in health.gpus})
        raise Skip(f"NVML does not report {what} on this GPU ({'; '.join(reasons)})")
    return answered


def _unseen(health, answered) -> list[str]:
    return [g.label for g in health.gpus if g not in answered]


def check_gpu_ecc_errors(health):
    findings = []
    gpus = _gpus(health, ("ecc_uncorrected_volatile", "ecc_uncorrected_aggregate"), "ECC error counts")
    for gpu in gpus:
        volatile, aggregate = gpu.nvml.ecc_uncorrected_volatile, gpu.nvml.ecc_uncorrected_aggregate
        evidence = {"gpu": gpu.index, "uuid": gpu.nvml.uuid, "pci_bus_id": gpu.nvml.pci_bus_id,
                    "uncorrected_volatile": volatile, "uncorrected_aggregate": aggregate,
                    "not_checked": _unseen(health, gpus)}
        if volatile:
            findings.append(finding(
                "gpu-ecc-errors",
                f"{gpu.label} has {volatile} uncorrectable ECC error(s) since the driver was loaded "
                f"({aggregate if aggregate is not None else '?'} over its lifetime).",
                evidence,
                fixes_for("gpu-ecc-errors", {"gpu_index": gpu.index, "volatile": True}),
            ))
        elif aggregate:
            findings.append(finding(
                "gpu-ecc-errors",
                f"{gpu.label} had {aggregate} uncorrectable ECC error(s) over its lifetime, none since the driver "
                "was loaded.",
                evidence,
                fixes_for("gpu-ecc-errors", {"gpu_index": gpu.index}),
                severity=Severity.WARNING,
            ))
    return findings


def check_gpu_row_remap_pending(health):
    findings = []
    gpus = _gpus(health, ("row_remap_pending", "retired_pages_pending"), "row remapping or page retirement")
    for gpu in gpus:
        pending = gpu.nvml.row_remap_pending or gpu.nvml.retired_pages_pending
        failed = gpu.nvml.row_remap_failure
        if not (pending or failed):
            continue
        evidence = {"gpu": gpu.index, "uuid": gpu.nvml.uuid, "pci_bus_id": gpu.nvml.pci_bus_id,
                    "row_remap_pending": gpu.nvml.row_remap_pending, "row_remap_failure": failed,
                    "retired_pages_pending": gpu.nvml.retired_pages_pending,
                    "remapped_rows_uncorrectable": gpu.nvml.remapped_rows_uncorrectable}
        if failed:
            message = (f"{gpu.label}: a row remapping failed (NVML reports a remapping failure); the bad memory "
                       "cannot be retired and the GPU needs service.")
            fixes = fixes_for("gpu-row-remap-pending", {"gpu_index": gpu.index, "remap_failed": True})
        else:
            what = "a row remapping" if gpu.nvml.row_remap_pending else "a page retirement"
            message = (f"{gpu.label}: {what} is pending; until the GPU is reset the faulty memory stays in use and "
                       "jobs on it can die with uncorrectable ECC errors.")
            fixes = fixes_for("gpu-row-remap-pending", {"gpu_index": gpu.index})
        findings.append(finding("gpu-row-remap-pending", message, evidence, fixes))
    return findings


def check_gpu_throttled(health):
    findings = []
    for gpu in _gpus(health, ("clocks_event_reasons",), "clock event reasons"):
        slowdowns = gpu.slowdowns
        if not slowdowns:
            continue
        findings.append(finding(
            "gpu-throttled",
            f"{gpu.label} is held back right now: {', '.join(slowdowns)}.",
            {"gpu": gpu.index, "pci_bus_id": gpu.nvml.pci_bus_id, "clocks_event_reasons": gpu.nvml.clocks_event_reasons,
             "slowdowns": slowdowns},
            fixes_for("gpu-throttled", {"gpu_index": gpu.index}),
        ))
    return findings


def check_pcie_link_degraded(health):
    findings = []
    for gpu in _gpus(health, ("pcie_width_current", "pcie_gen_max"), "the PCIe link"):
        h = gpu.nvml
        problems = []
        if gpu.pcie_width_degraded:
            problems.append(f"the link runs at x{h.pcie_width_current} of x{h.pcie_width_max}")
        if gpu.pcie_slot_limits_gen:
            problems.append(f"the link allows PCIe gen {h.pcie_gen_max} while the GPU supports gen {h.pcie_gen_gpu_max}")
        if not problems:
            continue
        findings.append(finding(
            "pcie-link-degraded",
            f"{gpu.label}: {' and '.join(problems)}; host-to-GPU copies (and NCCL without NVLink) get that much less "
            "bandwidth.",
            {"gpu": gpu.index, "pci_bus_id": h.pci_bus_id, "width_current": h.pcie_width_current,
             "width_max": h.pcie_width_max, "gen_current": h.pcie_gen_current, "gen_link_max": h.pcie_gen_max,
             "gen_gpu_max": h.pcie_gen_gpu_max},
            fixes_for("pcie-link-degraded", {"gpu_index": gpu.index}),
        ))
    return findings


def check_gpu_persistence_mode_off(health):
    gpus = _gpus(health, ("persistence_mode",), "persistence mode")
    off = [g for g in gpus if g.nvml.persistence_mode is False]
    if not off:
        return []
    labels = ", ".join(g.label for g in off)
    return [finding(
        "gpu-persistence-mode-off",
        f"Persistence mode is off on {labels}: the driver tears the GPU state down whenever no process holds it, "
        "so each job's first CUDA call pays the initialization again.",
        {"gpus": [g.index for g in off]},
        fixes_for("gpu-persistence-mode-off"),
    )]


_SEVERITY = {"error": Severity.ERROR, "warning": Severity.WARNING, "info": Severity.INFO}


def _ago(seconds: float | None) -> str:
    """", last 5 min ago" (the log's stamp against /proc/uptime), or nothing when either is unknown."""
    if seconds is None:
        return ""
    if seconds < 3600:
        return f", last {seconds / 60:.0f} min ago"
    return f", last {seconds / 3600:.1f} h ago" if seconds < 48 * 3600 else f", last {seconds / 86400:.1f} days ago"


def check_gpu_xid_errors(kernel_log, health):
    """The driver's Xid lines since it was loaded, per GPU (matched to NVML's list by PCI address),
    judged by rules/xid.toml. Xids on an address NVML does not list are reported as warnings: the
    GPU may have fallen off the bus, or belong to another container on the same host."""
    if kernel_log.unavailable:
        raise Skip(f"{kernel_log.unavailable}; Xid errors were not checked")
    events = kernel_log.since_driver_load
    if not events and health.unavailable:
        raise Skip(health.unavailable)  # no Xid, and no GPU to say it about
    gpus: dict = {}
    by_address: dict = {}
    if events:  # the Xid types and table (probes/xid.py) only for a log with an Xid: not on a healthy machine
        from ..probes.xid import pci_key, xid_kind

        gpus = {pci_key(g.nvml.pci_bus_id): g for g in health.gpus if pci_key(g.nvml.pci_bus_id)}
        for event in events:
            kind = xid_kind(event)
            if kind.severity != "ignore":
                by_address.setdefault(event.pci, []).append((event, kind))
    findings = []
    for address, judged in sorted(by_address.items()):
        gpu = gpus.get(address)
        judged_as = max((_SEVERITY[k.severity] for _, k in judged), key=lambda s: s.rank)
        # not known to be this machine's GPU: never an error
        worst = Severity.WARNING if gpu is None and judged_as is Severity.ERROR else judged_as
        summary = []
        for code in dict.fromkeys(e.code for e, _ in judged):
            same = [(e, k) for e, k in judged if e.code == code]
            last, kind = same[-1]
            what = kind.description if kind.mnemonic else "an Xid " + kind.description
            count = f" x{len(same)}" if len(same) > 1 else ""
            summary.append(f"Xid {code} ({what}){count}{_ago(kernel_log.age(last))}: {kind.advice}")
        first = judged[0][0]
        label = gpu.label if gpu else (f"PCI {first.pci_text}, a GPU NVML does not list here (fallen off the bus, "
                                       "or another container's)")
        findings.append(finding(
            "gpu-xid-errors",
            f"{label}: the NVIDIA driver logged " + "; ".join(summary) + ".",
            {"gpu": gpu.index if gpu else None, "pci_bus_id": gpu.nvml.pci_bus_id if gpu else first.pci_text,
             "xids": [{"code": e.code, "severity": k.severity, "nvidia_action": k.action, "seconds_ago": kernel_log.age(e),
                       "line": e.line} for e, k in judged[-20:]],
             "source": kernel_log.source, "driver_loaded_at_s": kernel_log.driver_loaded_at_s},
            fixes_for("gpu-xid-errors", {"gpu_index": gpu.index if gpu else None, "pci": first.pci_text,
                                         "severity": judged_as.value,
                                         "reboot": any(e.code == 79 or "reboot" in (e.recovery_action or "").lower() for e, _ in judged)}),
            severity=worst,
        ))
    if not findings and kernel_log.driver_loaded_at_s is None:
        # The log wrapped: the driver's load line is gone, so "none since it was loaded" would
        # claim more than was read (found in review). Say how far back the log reaches.
        reach = ""
        if (kernel_log.first_stamp_s is not None and kernel_log.uptime_s is not None
                and kernel_log.uptime_s >= kernel_log.first_stamp_s):
            reach = f" (the last {(kernel_log.uptime_s - kernel_log.first_stamp_s) / 3600:.1f} h)"
        raise PassedWithin(f"no Xid in the part of the kernel log still kept{reach}; the driver's load line has "
                           "been rotated out, so Xids older than that are not known")
    return findings
