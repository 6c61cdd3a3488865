"""Issue 14 item h: ``RecordingHost.write`` (``gpudoctor snapshot DIR``) writes snapshot.json
atomically (a temp file in the same directory, then os.replace) and never through a symlink
planted at the target, even when the CLI's check before the write was raced."""

from __future__ import annotations

import errno
import json
import os
import stat

import pytest

from gpudoctor.host import LiveHost, RecordingHost, SnapshotHost
from gpudoctor.host.snapshot import SNAPSHOT_FILE


def _recording() -> RecordingHost:
    host = RecordingHost(LiveHost({"PATH": "/usr/bin:/bin"}))
    host.stat("/usr/bin")  # one recorded answer, to tell the files apart
    return host


def test_a_planted_symlink_at_snapshot_json_is_replaced_not_followed(tmp_path):
    out = tmp_path / "snap"
    out.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    os.symlink(victim, out / SNAPSHOT_FILE)

    path = _recording().write(str(out))

    assert victim.read_text() == "precious\n"  # the link was not followed
    info = os.lstat(path)
    assert stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) == 0o600
    assert SnapshotHost(str(out)).stat("/usr/bin").exists


def test_a_failed_write_leaves_the_previous_snapshot_whole_and_no_temp_file(tmp_path, monkeypatch):
    out = tmp_path / "snap"
    _recording().write(str(out))
    before = (out / SNAPSHOT_FILE).read_bytes()

    real_write = os.write

    def full_disk(fd, data):
        real_write(fd, bytes(data[:10]))  # a few bytes land, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full_disk)
    with pytest.raises(OSError):
        _recording().write(str(out), note="second")
    monkeypatch.undo()

    assert (out / SNAPSHOT_FILE).read_bytes() == before
    assert json.loads(before)["schema"] == 1
    assert sorted(os.listdir(out)) == [SNAPSHOT_FILE]


def test_a_symlinked_directory_is_refused_at_write_time(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, tmp_path / "snap")
    with pytest.raises(OSError, match="symlink"):
        _recording().write(str(tmp_path / "snap"))
    assert os.listdir(elsewhere) == []


def test_a_new_directory_is_private(tmp_path):
    path = _recording().write(str(tmp_path / "new" / "snap"))
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
