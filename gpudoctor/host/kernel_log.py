"""Reading the NVIDIA driver's lines out of the kernel log, for LiveHost.kernel_log().

The driver prints Xid events to the kernel log (NVIDIA, "Xid Errors": "grep for NVRM: Xid");
they stay there until the ring buffer wraps or the machine reboots. Two sources, each bounded:

- ``dmesg``: the ring buffer itself. With kernel.dmesg_restrict=1 (the default on Debian and
  Ubuntu since 2020 and on most distributions) only root or CAP_SYSLOG may read it; others get
  ``dmesg: read kernel buffer failed: Operation not permitted`` and exit 1.
- ``journalctl -k``: the kernel messages journald kept for this boot, readable by the adm and
  systemd-journal groups. Run as anyone else with ``-q`` it prints nothing and exits 0 (checked
  on Debian 12, systemd 252, as nobody), so an empty answer counts as unread, never as "no Xid".

Only the driver's own lines are kept (``NVRM: Xid`` and ``NVRM: loading NVIDIA``), cut to what
follows "NVRM:" with the log's ``[seconds]`` stamp in front: journalctl puts the host name in
every line, and the rest of the log is not the doctor's business.
"""

from __future__ import annotations

import re
from typing import Callable

from .base import CommandResult, KernelLog

TIMEOUT_S = 3.0  # dmesg answers in ~4 ms; journalctl reads journal files and can take longer
JOURNAL_MESSAGES = 20000  # the newest kernel messages of this boot journalctl is asked for
MAX_KEPT = 500  # driver lines kept (the newest): a GPU in an Xid storm prints thousands

DMESG = ("dmesg",)
JOURNAL = ("journalctl", "-k", "-q", "--no-pager", "-o", "short-monotonic", "-n", str(JOURNAL_MESSAGES))

# "[ 1234.567890]": first on a dmesg or journalctl short-monotonic line, after the syslog prefix
# ("Dec 23 23:30:56 host kernel: [ 179.437933] NVRM: …") where a kernel stamps its messages
_STAMP = re.compile(r"\[\s*(\d+\.\d+)\]")
_DRIVER = re.compile(r"NVRM: (?:Xid |loading NVIDIA )")


def driver_lines(text: str) -> tuple[list[str], int, float | None]:
    """(the driver's lines as kept, how many log lines there were, the oldest line's stamp)."""
    kept: list[str] = []
    count = 0
    first: float | None = None
    for line in text.splitlines():
        if not line.strip() or line.startswith("-- "):  # journalctl's "-- No entries --", "-- Boot … --"
            continue
        count += 1
        at = line.find("NVRM: ")
        stamp = _STAMP.search(line, 0, at if at >= 0 else len(line))
        if first is None and stamp:
            first = float(stamp.group(1))
        if at < 0 or not _DRIVER.match(line, at):
            continue
        kept.append((f"[{stamp.group(1)}] " if stamp else "") + line[at:].rstrip())
    return kept[-MAX_KEPT:], count, first


def read_kernel_log(run: Callable[[tuple[str, ...], float], CommandResult]) -> KernelLog:
    """dmesg, else journalctl -k; ``run`` is the host's bounded command runner."""
    refused = []
    for argv, name in ((DMESG, "dmesg"), (JOURNAL, "journalctl -k")):
        result = run(argv, TIMEOUT_S)
        if not result.ok:
            refused.append(result.why_not())
            continue
        lines, count, first = driver_lines(result.stdout)
        if count == 0:
            said = (result.stderr or "").strip().splitlines()
            refused.append(f"{name} printed no kernel message" + (f" ({said[-1][:200]})" if said else ""))
            continue
        return KernelLog(source=name, lines=tuple(lines), lines_read=count, first_stamp_s=first)
    return KernelLog(error="; ".join(refused))
