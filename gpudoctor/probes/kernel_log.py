"""Xid events from the kernel log: the NVIDIA driver's lines (host.kernel_log()) parsed into
typed events. The line format, the GPU's PCI address and the Xid table that says how to judge an
event are in probes/xid.py, imported only where the log holds an Xid line."""

from __future__ import annotations

import re
from typing import NamedTuple

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs ~1.5 ms
if TYPE_CHECKING:
    from .xid import XidEvent

STAMP = re.compile(r"\[\s*(\d+\.\d+)\] ")
_LOADED = "NVRM: loading NVIDIA"
_XID_LINE = "NVRM: Xid "  # what every line probes/xid.py parses holds


class KernelLogFacts(NamedTuple):
    """The NVIDIA driver's Xid errors in the kernel log, and how far back the log reaches."""

    events: tuple[XidEvent, ...]  # every Xid in the log, oldest first
    driver_loaded_at_s: float | None  # the last "NVRM: loading NVIDIA" line; None if the log no longer has it
    source: str | None
    lines_read: int
    first_stamp_s: float | None
    uptime_s: float | None
    unavailable: str | None = None  # why the log could not be read: the check is skipped with it

    @property
    def since_driver_load(self) -> tuple[XidEvent, ...]:
        """The Xids of the driver now loaded: an Xid before a driver reload is history, like the
        volatile ECC counters NVML resets at the same moment. Without a load line in the log
        (the buffer wrapped) every Xid counts."""
        loaded = self.driver_loaded_at_s
        if loaded is None:
            return self.events
        return tuple(e for e in self.events if e.at_s is None or e.at_s >= loaded)

    def age(self, event: XidEvent) -> float | None:
        if event.at_s is None or self.uptime_s is None:
            return None
        return max(0.0, self.uptime_s - event.at_s)


def probe_kernel_log(host) -> KernelLogFacts:
    log = host.kernel_log()
    uptime = _uptime(host)
    if log.error or not log.source:
        return KernelLogFacts((), None, None, 0, None, uptime, _why_unread(host, log.error or "not read"))
    xid_lines = [line for line in log.lines if _XID_LINE in line]
    events: tuple[XidEvent, ...] = ()
    if xid_lines:  # the Xid types and table are created only for a log that has an Xid (~1 ms of import each)
        from .xid import parse_xid_line

        events = tuple(e for e in map(parse_xid_line, xid_lines) if e is not None)
    loads = [line for line in log.lines if _LOADED in line]
    loaded_stamp = STAMP.match(loads[-1]) if loads else None
    return KernelLogFacts(events, float(loaded_stamp.group(1)) if loaded_stamp else None, log.source,
                          log.lines_read, log.first_stamp_s, uptime)


def _uptime(host) -> float | None:
    read = host.read_text("/proc/uptime", 256)
    try:
        return float((read.text or "").split()[0])
    except (IndexError, ValueError):
        return None


def _why_unread(host, error: str) -> str:
    """The skip reason, with the sysctl that explains a refused dmesg."""
    why = f"the kernel log could not be read ({error})"
    if "dmesg" in error and "not permitted" in error.lower():
        restrict = (host.read_text("/proc/sys/kernel/dmesg_restrict", 64).text or "").strip()
        if restrict == "1":
            why += "; kernel.dmesg_restrict=1 lets only root (or CAP_SYSLOG) read it"
    return why
