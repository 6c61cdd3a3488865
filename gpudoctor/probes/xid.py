"""Xid lines of the kernel log: one ``NVRM: Xid`` line parsed into an event with the GPU's PCI
address, and the Xid table (rules/xid.toml) that says how to judge it. Imported only where the
log holds an Xid line (probes/kernel_log.py) or a check judges one: on a machine without Xid
errors, preflight's first call does not create these classes.

The driver prints (NVIDIA/open-gpu-kernel-modules, src/nvidia/src/kernel/gpu/rc/kernel_rc.c):
  NVRM: Xid (PCI:%04x:%02x:%02x): %d, pid=%s, name=%s, %s
  NVRM: Xid (PCI:%04x:%02x:%02x GPU-I:%02u GPU-CI:%02u): ...      (an error in a MIG instance)
and drivers before ~2016 printed ``NVRM: Xid (0000:01:00): 3, ...`` without "PCI:". The address
is domain:bus:device, the same numbers as NVML's bus id ``00000000:01:00.0`` without the function.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from ..knowledge import load_rules_toml
from .kernel_log import STAMP

_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<domain>[0-9a-fA-F]+):(?P<bus>[0-9a-fA-F]+):(?P<device>[0-9a-fA-F]+)(?:\.[0-9a-fA-F])?"
    r"(?P<instance>[^)]*)\): (?P<code>\d+)(?:, ?(?P<detail>.*))?"
)
# Xid 154's text (the catalog): "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"
_RECOVERY_ACTION = re.compile(r"to 0x[0-9a-fA-F]+ \(([^)]+)\)")


@dataclass(frozen=True)
class XidKind:
    """What one Xid code means and what to do about it (a row of ``rules/xid.toml``, from NVIDIA's
    Xid catalogue)."""

    code: int
    mnemonic: str
    description: str
    action: str  # NVIDIA's immediate-action bucket
    severity: str  # error | warning | info | ignore (rules/xid.toml says why)
    advice: str


@dataclass(frozen=True)
class XidEvent:
    """One ``NVRM: Xid`` line of the kernel log, parsed."""

    code: int
    pci: tuple[int, int, int]  # domain, bus, device
    at_s: float | None  # seconds since boot, from the log's stamp
    detail: str  # what follows the code
    instance: str  # "GPU-I:05" for an error inside a MIG instance, else ""
    line: str

    @property
    def pci_text(self) -> str:
        return f"{self.pci[0]:04x}:{self.pci[1]:02x}:{self.pci[2]:02x}"

    @property
    def recovery_action(self) -> str | None:
        """Xid 154's requested action ("Node Reboot Required"); None for other codes."""
        match = _RECOVERY_ACTION.search(self.detail) if self.code == 154 else None
        return match.group(1).strip() if match else None


def parse_xid_line(line: str) -> XidEvent | None:
    match = _XID.search(line)
    if not match:
        return None
    stamp = STAMP.match(line)
    return XidEvent(
        code=int(match.group("code")),
        pci=(int(match.group("domain"), 16), int(match.group("bus"), 16), int(match.group("device"), 16)),
        at_s=float(stamp.group(1)) if stamp else None,
        detail=(match.group("detail") or "").strip(),
        instance=match.group("instance").strip(),
        line=line,
    )


def pci_key(nvml_bus_id: str | None) -> tuple[int, int, int] | None:
    """NVML's ``00000000:00:06.0`` as (domain, bus, device); None when it does not parse."""
    if not nvml_bus_id:
        return None
    parts = nvml_bus_id.split(":")
    if len(parts) != 3:
        return None
    try:
        return int(parts[0], 16), int(parts[1], 16), int(parts[2].split(".")[0], 16)
    except ValueError:
        return None


@functools.lru_cache(maxsize=None)
def xid_table() -> dict[int, XidKind]:
    return {raw["code"]: XidKind(**raw) for raw in load_rules_toml("xid.toml")["xid"]}


def xid_kind(event: XidEvent) -> XidKind:
    """How to judge one event: the table's entry (Xid 154 by the action it names), or info for
    a code the table does not list."""
    kind = xid_table().get(event.code)
    if kind is None:
        return XidKind(event.code, "", "not in gpudoctor's Xid table", "", "info",
                       "see NVIDIA's Xid catalog for this code")
    if event.code == 154:
        action = event.recovery_action
        if action is None or action.lower() == "none":
            return XidKind(154, kind.mnemonic, kind.description, kind.action, "ignore", "no recovery action needed")
        return XidKind(154, kind.mnemonic, kind.description, kind.action, "error",
                       f"the driver asks for: {action}")
    return kind
