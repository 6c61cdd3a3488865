"""Issue 14 item 15: `--snapshot` reads only a regular file, and at most a bound: /dev/zero was
read without end, a FIFO hung before reading a byte. Each case ends quickly with one line, exit 2."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gpudoctor.host.base import HostError
from gpudoctor.host.snapshot import MAX_SNAPSHOT_BYTES, SNAPSHOT_FILE, read_snapshot_data

pytestmark = pytest.mark.timeout(10)


def _check(snapshot: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpudoctor", "check", "--snapshot", snapshot],
                          capture_output=True, text=True, timeout=8)


def _assert_refused(out: subprocess.CompletedProcess, words: str) -> None:
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], out.stderr


def test_dev_zero_is_refused_at_once():
    _assert_refused(_check("/dev/zero"), "not a regular file")


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "snap.json"
    os.mkfifo(fifo)
    _assert_refused(_check(str(fifo)), "not a regular file")


def test_a_fifo_as_snapshot_json_in_a_directory_is_refused(tmp_path):
    os.mkfifo(tmp_path / SNAPSHOT_FILE)
    _assert_refused(_check(str(tmp_path)), "not a regular file")


def test_snapshot_json_linked_to_dev_zero_is_refused(tmp_path):
    os.symlink("/dev/zero", tmp_path / SNAPSHOT_FILE)
    _assert_refused(_check(str(tmp_path)), SNAPSHOT_FILE)


def test_a_huge_snapshot_is_refused_naming_the_bound(tmp_path):
    path = tmp_path / SNAPSHOT_FILE
    with open(path, "wb") as handle:
        handle.truncate(MAX_SNAPSHOT_BYTES + 1)  # sparse: no disk used
    with pytest.raises(HostError, match=f"larger than {MAX_SNAPSHOT_BYTES // 2**20} MiB"):
        read_snapshot_data(str(tmp_path))
    _assert_refused(_check(str(tmp_path)), f"{MAX_SNAPSHOT_BYTES // 2**20} MiB")


def test_a_regular_snapshot_file_still_reads(tmp_path):
    fixture = "fixtures/snapshots/h200-baseline/" + SNAPSHOT_FILE
    assert read_snapshot_data(fixture)["schema"] == 1
    assert read_snapshot_data(os.path.dirname(fixture))["schema"] == 1
