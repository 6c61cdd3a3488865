"""Hardware health facts: NVML's per-GPU answers (recorded by the driver probe's NVML session)
decoded into what the checks judge: which clock-event reasons are slowdowns, whether a PCIe
link runs narrower or slower than it can."""

from __future__ import annotations

from typing import NamedTuple

from ..host.base import NvmlHealth

# nvmlClocksEventReason* bits (nvml.h, "Clock Event Reasons"). Only those that mean the
# hardware or its cooling is holding the GPU back: idle, application clocks, the software
# power cap and sync boost are how a healthy GPU runs, so they are named but never judged.
CLOCK_EVENT_REASONS = {
    0x1: "GPU idle",
    0x2: "application clocks setting",
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake slowdown",
    0x100: "display clock setting",
}
SLOWDOWN_REASONS = 0x8 | 0x20 | 0x40 | 0x80


def clock_reasons(mask: int) -> list[str]:
    return [name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit]


class GpuHealth(NamedTuple):
    """One GPU's health as NVML reports it, with the GPU's name for messages."""

    name: str
    nvml: NvmlHealth

    @property
    def index(self) -> int:
        return self.nvml.index

    @property
    def label(self) -> str:
        bus = f", {self.nvml.pci_bus_id}" if self.nvml.pci_bus_id else ""
        return f"GPU {self.index} ({self.name}{bus})"

    @property
    def slowdowns(self) -> list[str]:
        mask = self.nvml.clocks_event_reasons
        return [] if mask is None else clock_reasons(mask & SLOWDOWN_REASONS)

    @property
    def pcie_width_degraded(self) -> bool | None:
        current, best = self.nvml.pcie_width_current, self.nvml.pcie_width_max
        return None if current is None or best is None else current < best

    @property
    def pcie_slot_limits_gen(self) -> bool | None:
        """The link's maximum generation is below the GPU's own: the slot, a riser or the BIOS
        caps it. (The *current* generation drops at idle to save power, so it is not judged.)"""
        link, gpu = self.nvml.pcie_gen_max, self.nvml.pcie_gen_gpu_max
        return None if link is None or gpu is None else link < gpu


class HealthFacts(NamedTuple):
    """The health of every GPU NVML lists, or why there is none to judge."""

    gpus: tuple[GpuHealth, ...]
    unavailable: str | None = None  # why there is nothing to judge (no NVML, not recorded)


def probe_health(driver) -> HealthFacts:
    """From the driver facts: the health NVML reported for each GPU it listed."""
    nvml = driver.nvml
    if not nvml.ok:
        return HealthFacts((), f"no GPU information: NVML {nvml.error_kind} ({nvml.error})")
    if nvml.health is None:
        return HealthFacts((), "GPU health was not recorded (a snapshot from before the health checks)")
    names = {device.index: device.name for device in nvml.devices}
    gpus = tuple(GpuHealth(names.get(h.index, "GPU"), h) for h in nvml.health)
    return HealthFacts(gpus, None if gpus else "no GPU visible")
