"""gpu-xid-errors: the kernel-log reader, the Xid parser, the judgement, recording and replay.

Every kernel-log line here is real and verbatim, with its source named; where lines of two
machines are put together (a driver reload after an Xid), the comment says so.
"""

from __future__ import annotations

import copy
import json
import os

import pytest

from gpudoctor.engine import run_checks
from gpudoctor.facts import Facts
from gpudoctor.fix.actions import fix_commands
from gpudoctor.host.base import CommandResult, KernelLog
from gpudoctor.host.kernel_log import DMESG, JOURNAL, MAX_KEPT, driver_lines, read_kernel_log
from gpudoctor.host.snapshot import RecordingHost, SnapshotHost, read_snapshot_data
from gpudoctor.model import CheckStatus, Severity
from gpudoctor.probes.kernel_log import probe_kernel_log
from gpudoctor.probes.xid import parse_xid_line, pci_key, xid_kind, xid_table

from rule_cases import FIXTURES

H200X2 = os.path.join(FIXTURES, "snapshots", "h200x2-baseline")

# NVIDIA/open-gpu-kernel-modules#1151 (RTX 5080, journalctl paste: host name dropped by the user)
ISSUE_1151 = """\
May 18 19:02:39 kernel: NVRM: GPU at PCI:0000:2b:00: GPU-0b11d014-1685-04bd-26ed-5fc0bc1c44ae
May 18 19:02:39 kernel: NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.
May 18 19:02:39 kernel: NVRM: GPU 0000:2b:00.0: GPU has fallen off the bus.
"""
# https://gist.github.com/kohsuke/84ce815d0a8ad85ecaf6 (syslog with the kernel's own stamps, host "rescue")
GIST = """\
Dec 23 23:28:17 rescue kernel: [ 20.544453] nvidia 0000:01:00.0: irq 52 for MSI/MSI-X
Dec 23 23:30:56 rescue kernel: [ 179.437927] NVRM: GPU at PCI:0000:01:00: GPU-bc0fa0b9-cac2-f507-b715-9bebdb69c71e
Dec 23 23:30:56 rescue kernel: [ 179.437933] NVRM: Xid (PCI:0000:01:00): 32, Channel ID 00000005 intr 00008000
Dec 23 23:30:56 rescue kernel: [ 179.438803] NVRM: Xid (PCI:0000:01:00): 69, Class Error: ChId 0005, Class 0000a097, Offset 00000d9c, Data ffffffff, ErrorCode 0000000c
Dec 23 23:32:27 rescue kernel: [ 270.439207] NVRM: Xid (PCI:0000:01:00): 62, 0096(1c54) 00000000 00000000
"""
# NVIDIA/NVSentinel#155: the driver's load line, from an H100 node's dmesg
LOAD_LINE = ("[ 1843.439669] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  570.158.01  Release Build  "
             "(dvs-builder@U22-I3-B10-02-5)  Mon Jun  2 13:13:04 UTC 2025")
# NVIDIA's examples in the driver source (open-gpu-kernel-modules kern_gpu_ga100.c, _gpuGenerateErrorLog_GA100)
MIG_94 = "NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9). RST: No, D-RST: No"
# pastebin.com/xJaypMZt: a driver from before the "PCI:" prefix
OLD_FORMAT = "Jan 18 11:38:05 localhost kernel: [ 269.517039] NVRM: Xid (0000:01:00): 3, C 00000005 SC 00000007 M 00001ffc Data ffffffff"
# kubernetes-sigs/dra-driver-nvidia-gpu#904: dmesg on a Grace machine (PCI domain 0009)
GRACE_43 = "[1231741.378609] NVRM: Xid (PCI:0009:01:00): 43, pid=3188489, name=trigger_xid, channel 0x0b00000a"
# Recorded on this development machine (Debian 12, util-linux 2.38.1, systemd 252) as `nobody`
# with kernel.dmesg_restrict=1: `dmesg` and `journalctl -k -q --no-pager -o short-monotonic -n 20000`.
NOBODY_DMESG = CommandResult(DMESG, 1, "", "dmesg: read kernel buffer failed: Operation not permitted\n")
NOBODY_JOURNAL = CommandResult(JOURNAL, 0, "", "")
UPTIME = "11686.08 17763.12\n"  # this machine's /proc/uptime, read the same day


def _host(kernel_log: KernelLog | None, bus0: str | None = None, files: dict | None = None) -> SnapshotHost:
    data = copy.deepcopy(read_snapshot_data(H200X2))
    if kernel_log is not None:
        data["kernel_log"] = {"source": kernel_log.source, "lines": list(kernel_log.lines),
                              "lines_read": kernel_log.lines_read, "first_stamp_s": kernel_log.first_stamp_s,
                              "error": kernel_log.error}
    if bus0:
        data["nvml"]["health"][0]["pci_bus_id"] = bus0
    data.setdefault("files", {}).update({path: {"text": text, "error": None} for path, text in (files or {}).items()})
    return SnapshotHost(H200X2, data)


def _check(host):
    (result,) = run_checks(Facts(host), only=["gpu-xid-errors"])
    return result


def _log(text: str) -> KernelLog:
    lines, count, first = driver_lines(text)
    return KernelLog("dmesg", tuple(lines), count, first)


# -- reading the log ---------------------------------------------------------------------

def test_only_the_driver_lines_are_kept_without_the_host_name():
    lines, count, first = driver_lines(ISSUE_1151)
    assert lines == ["NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus."] and count == 3 and first is None
    lines, count, first = driver_lines(GIST)
    assert count == 5 and first == 20.544453
    assert lines[0] == "[179.437933] NVRM: Xid (PCI:0000:01:00): 32, Channel ID 00000005 intr 00008000"
    assert not any("rescue" in line for line in lines)  # the host name stays out of snapshots


def test_the_newest_lines_are_kept_at_the_bound():
    storm = "".join(f"[{i}.000000] NVRM: Xid (PCI:0000:01:00): 31, pid={i}\n" for i in range(MAX_KEPT + 50))
    lines, count, _ = driver_lines(storm)
    assert count == MAX_KEPT + 50 and len(lines) == MAX_KEPT and lines[-1].startswith(f"[{MAX_KEPT + 49}.000000]")


def test_a_refused_dmesg_and_a_silent_journal_are_unread_never_empty():
    answers = {DMESG: NOBODY_DMESG, JOURNAL: NOBODY_JOURNAL}
    log = read_kernel_log(lambda argv, timeout: answers[argv])
    assert log.source is None and log.lines == ()
    assert "Operation not permitted" in log.error and "journalctl -k printed no kernel message" in log.error


def test_journalctl_answers_when_dmesg_is_refused():
    journal = CommandResult(JOURNAL, 0, "".join(f"[ 1.0] h kernel: {line}\n" for line in ISSUE_1151.splitlines()), "")
    log = read_kernel_log(lambda argv, timeout: NOBODY_DMESG if argv == DMESG else journal)
    assert log.source == "journalctl -k" and log.lines_read == 3 and len(log.lines) == 1


def test_live_dmesg_when_this_user_may_read_it():
    from gpudoctor.host import LiveHost

    log = LiveHost().kernel_log()
    if log.error:
        pytest.skip(f"the kernel log is not readable here: {log.error}")
    assert log.source in ("dmesg", "journalctl -k") and log.lines_read > 0
    assert all(line.split("] ", 1)[-1].startswith("NVRM: ") for line in log.lines)


# -- parsing -----------------------------------------------------------------------------

def test_xid_line_forms():
    event = parse_xid_line(MIG_94)
    assert (event.code, event.pci, event.instance, event.at_s) == (94, (0, 1, 0), "GPU-I:05", None)
    old = parse_xid_line(driver_lines(OLD_FORMAT)[0][0])
    assert (old.code, old.pci_text, old.at_s) == (3, "0000:01:00", 269.517039)
    grace = parse_xid_line(GRACE_43)
    assert (grace.code, grace.pci_text, grace.at_s) == (43, "0009:01:00", 1231741.378609)
    assert parse_xid_line("[1.0] NVRM: GPU 0000:2b:00.0: GPU has fallen off the bus.") is None


def test_nvml_bus_ids_match_the_driver_addresses():
    # stas00/ml-engineering debug.md: nvidia-smi's "GPU 00000000:10:1C.0" and that A100's Xid line
    line = "NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate."
    assert pci_key("00000000:10:1C.0") == parse_xid_line(line).pci == (0, 0x10, 0x1C)
    assert pci_key("00000009:01:00.0") == parse_xid_line(GRACE_43).pci
    assert pci_key(None) is None and pci_key("bogus") is None


def test_xid_table_classes():
    table = xid_table()
    assert {c for c, k in table.items() if k.severity == "error"} >= {48, 64, 74, 79, 95}
    assert {table[c].severity for c in (63, 92, 94)} == {"warning"}
    assert table[43].severity == table[45].severity == "ignore"
    assert xid_kind(parse_xid_line("NVRM: Xid (PCI:0000:01:00): 32, Channel ID 00000005")).severity == "info"


def test_xid_154_is_judged_by_the_action_the_driver_asks_for():
    # NVIDIA's catalog gives Xid 154's text as "GPU recovery action changed from 0x0 (None) to
    # 0x2 (Node Reboot Required)"; here in the driver's Xid line format.
    reboot = parse_xid_line("NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 "
                            "(Node Reboot Required)")
    assert reboot.recovery_action == "Node Reboot Required"
    assert xid_kind(reboot).severity == "error" and "Node Reboot Required" in xid_kind(reboot).advice
    cleared = parse_xid_line("NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x2 "
                             "(Node Reboot Required) to 0x0 (None)")
    assert xid_kind(cleared).severity == "ignore"


# -- the check ---------------------------------------------------------------------------

def test_an_unreadable_log_is_skipped_with_the_reason_never_passed():
    log = read_kernel_log(lambda argv, timeout: {DMESG: NOBODY_DMESG, JOURNAL: NOBODY_JOURNAL}[argv])
    result = _check(_host(log, files={"/proc/sys/kernel/dmesg_restrict": "1\n"}))
    assert result.status == CheckStatus.SKIP
    assert "Operation not permitted" in result.reason and "kernel.dmesg_restrict=1" in result.reason
    assert "Xid errors were not checked" in result.reason


def test_a_snapshot_from_before_the_check_is_skipped():
    result = _check(SnapshotHost(H200X2))
    assert result.status == CheckStatus.SKIP and "not recorded" in result.reason


def test_severity_is_the_worst_class_and_age_comes_from_uptime():
    # The gist's Xid 32, 69 (not in the table: info) and 62 (PMU halt, RESET_GPU: error) on GPU 0,
    # with this machine's /proc/uptime: the arithmetic of "h ago", not a claim about that machine.
    result = _check(_host(_log(GIST), bus0="00000000:01:00.0", files={"/proc/uptime": UPTIME}))
    (finding,) = result.findings
    assert result.status == CheckStatus.FAIL and finding.severity == Severity.ERROR
    assert "Xid 62 (Internal micro-controller halt), last 3.2 h ago" in finding.message
    assert "Xid 32 (an Xid not in gpudoctor's Xid table)" in finding.message
    assert [x["code"] for x in finding.evidence["xids"]] == [32, 69, 62]
    assert finding.fixes[0].kind == "manual" and "sudo nvidia-smi -r -i 0" in fix_commands(finding.fixes[0])


def test_an_xid_before_the_driver_was_reloaded_is_history():
    # The gist's Xids (stamps 179-270 s) followed by the load line of NVSentinel#155 (1843 s):
    # two machines' lines put together to stand for a driver reloaded after the errors.
    reloaded = _log(GIST + LOAD_LINE + "\n")
    facts = probe_kernel_log(_host(reloaded))
    assert facts.driver_loaded_at_s == 1843.439669 and facts.since_driver_load == ()
    assert _check(_host(reloaded, bus0="00000000:01:00.0")).status == CheckStatus.PASS


def test_ignored_codes_alone_pass_and_other_gpus_are_not_blamed():
    assert _check(_host(_log(GRACE_43), bus0="00000009:01:00.0")).status == CheckStatus.PASS
    (finding,) = _check(_host(_log(ISSUE_1151))).findings  # 0000:2b:00 is neither recorded H200
    assert finding.severity == Severity.WARNING and finding.evidence["gpu"] is None
    assert "lspci -s 0000:2b:00" in fix_commands(finding.fixes[0])


def test_recorded_and_replayed(tmp_path):
    class Inner:
        env = {"PATH": "/usr/bin"}

        def kernel_log(self):
            return _log(GIST)

    recorder = RecordingHost(Inner())
    live = recorder.kernel_log()
    path = recorder.write(str(tmp_path / "snap"))
    with open(path, encoding="utf-8") as handle:
        stored = json.load(handle)["kernel_log"]
    assert stored["source"] == "dmesg" and "rescue" not in json.dumps(stored)
    assert SnapshotHost(str(tmp_path / "snap")).kernel_log() == live


def test_a_wrapped_log_passes_only_as_far_as_it_reaches():
    """No load line left in the log (rotated out after a long uptime): the pass says how far back
    it looked instead of "none since the driver was loaded" (found in review)."""
    wrapped = _log(GRACE_43)  # an ignored code, no load line: nothing to report, and no reach to the load
    result = _check(_host(wrapped, bus0="00000009:01:00.0", files={"/proc/uptime": UPTIME}))
    assert result.status == CheckStatus.PASS and result.findings == ()
    assert "load line has been rotated out" in result.reason
    with_load = _check(_host(_log(LOAD_LINE + "\n"), files={"/proc/uptime": UPTIME}))
    assert with_load.status == CheckStatus.PASS and with_load.reason == ""


def test_a_log_without_xid_lines_does_not_create_the_xid_types():
    # probes/xid.py (two dataclasses, the Xid regex) is imported only for a log that holds an Xid
    # line: on a machine without Xid errors, preflight's first call does not pay for it
    import subprocess
    import sys

    code = ("import sys; from gpudoctor.host.base import KernelLog; from gpudoctor.probes import kernel_log\n"
            "class Host:\n"
            f"    def kernel_log(self): return KernelLog('dmesg', ({LOAD_LINE!r}.split('] ', 1)[1],), 1, 1.0)\n"
            "    def read_text(self, path, max_bytes=None):\n"
            "        from gpudoctor.host.base import FileRead; return FileRead('100.0 1.0')\n"
            "facts = kernel_log.probe_kernel_log(Host())\n"
            "assert facts.events == () and facts.source == 'dmesg', facts\n"
            "from gpudoctor.checks.health import check_gpu_xid_errors\n"
            "from gpudoctor.checks.base import PassedWithin\n"
            "try:\n"
            "    check_gpu_xid_errors(facts, __import__('types').SimpleNamespace(unavailable=None, gpus=()))\n"
            "except PassedWithin:\n"
            "    pass  # the load line has no stamp here: passed as far as the log reaches\n"
            "print('gpudoctor.probes.xid' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
    events = probe_kernel_log(_host(_log(GIST + LOAD_LINE + "\n"))).events
    assert [e.code for e in events] == [32, 69, 62]  # and a log with Xid lines still has its events
