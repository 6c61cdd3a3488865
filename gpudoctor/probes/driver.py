"""Driver facts: NVIDIA PCI devices, the kernel module, NVML and visible devices."""

from __future__ import annotations

from typing import NamedTuple

from ..host.base import NvmlInfo
from .parse import cuda_from_int, kernel_module_version

NVIDIA_VENDOR = "0x10de"
PCI_ROOT = "/sys/bus/pci/devices"
HIDDEN_VISIBLE_DEVICES = ("", "-1", "none", "void", "NoDevFiles")


class DriverFacts(NamedTuple):
    """The NVIDIA driver as the machine shows it: the GPUs on the PCI bus, the loaded kernel
    module's version, NVML's answer and ``CUDA_VISIBLE_DEVICES``."""

    pci_known: bool  # False where /sys/bus/pci cannot be read (some VMs and sandboxes)
    pci_gpus: tuple[str, ...]  # PCI addresses of NVIDIA display/3D controllers
    module_version: str | None  # from /proc/driver/nvidia/version
    module_error: str | None
    nvml: NvmlInfo
    cuda_visible_devices: str | None

    @property
    def cuda_driver(self) -> tuple[int, int] | None:
        return cuda_from_int(self.nvml.cuda_driver_version)

    @property
    def driver_version(self) -> str | None:
        return self.nvml.driver_version or self.module_version

    @property
    def gpu_present(self) -> bool | None:
        """True/False when known; None when neither PCI nor NVML can tell."""
        if self.pci_gpus or (self.nvml.ok and self.nvml.devices) or self.module_version:
            return True
        if self.pci_known:
            return False
        return None


def probe_driver(host) -> DriverFacts:
    entries = host.listdir(PCI_ROOT)
    gpus: list[str] = []
    if entries is not None:
        for address in entries:
            vendor = (host.read_text(f"{PCI_ROOT}/{address}/vendor").text or "").strip().lower()
            if vendor != NVIDIA_VENDOR:
                continue
            pci_class = (host.read_text(f"{PCI_ROOT}/{address}/class").text or "").strip().lower()
            # 0x03xxxx: display / 3D controller. NVIDIA's audio, USB and NVSwitch functions are not GPUs.
            if pci_class.startswith("0x03"):
                gpus.append(address)
    proc = host.read_text("/proc/driver/nvidia/version")
    module = kernel_module_version(proc.text) if proc.text else None
    module_error = None if module else (proc.error or "unrecognised /proc/driver/nvidia/version")
    return DriverFacts(
        pci_known=entries is not None,
        pci_gpus=tuple(gpus),
        module_version=module,
        module_error=module_error,
        nvml=host.nvml(),
        cuda_visible_devices=host.env.get("CUDA_VISIBLE_DEVICES"),
    )
