"""A file gpudoctor wrote whole is undone only while it holds exactly what was written; a prefix
is accepted only for a write that never finished (killed, disk full)."""

from __future__ import annotations

import json
import os

from gpudoctor.fix.actions import write_file
from gpudoctor.fix.actions.base import DONE, KEPT, UNDONE
from gpudoctor.fix.apply import Applier
from gpudoctor.fix.manifest import state_lock
from gpudoctor.model import WriteFile


def _written(home, name="note.conf", content="/opt/lib\n"):
    path = os.path.join(home.stub_lib_dir, name)
    with state_lock(home.state) as manifest:
        assert write_file.apply(Applier(home, manifest), WriteFile(path, content)) == DONE
    change = next(c for c in manifest.changes if c["op"] == "write_file")
    with open(home.manifest_file) as handle:  # what undo will read: durable, marked whole
        assert json.load(handle)["changes"][-1] == change
    return path, change


def test_a_whole_write_is_marked_and_undone_while_unchanged(home):
    path, change = _written(home)
    assert change["written"] is True
    status, _ = write_file.undo_write_file(change, None)
    assert status == UNDONE and not os.path.lexists(path)


def test_a_file_the_user_emptied_is_kept(home):
    path, change = _written(home)
    open(path, "w").close()
    status, message = write_file.undo_write_file(change, None)
    assert status == KEPT and "changed" in message and os.path.exists(path)


def test_a_file_the_user_cut_is_kept(home):
    path, change = _written(home, content="/opt/lib\n/opt/lib64\n")
    with open(path, "w") as handle:
        handle.write("/opt/lib\n")
    assert write_file.undo_write_file(change, None)[0] == KEPT


def test_a_write_cut_short_is_still_undone(home):
    """No "written" mark: the write never finished, and what it left is a prefix of the content."""
    path, change = _written(home)
    unfinished = {key: value for key, value in change.items() if key != "written"}
    with open(path, "w") as handle:
        handle.write("/opt/")
    assert write_file.undo_write_file(unfinished, None)[0] == UNDONE
    assert not os.path.lexists(path)


def test_the_content_is_durable_before_the_record_says_written(home, monkeypatch):
    """The record is fsynced; a file closed but not fsynced can be empty after a power cut
    (delayed allocation) while the record says it was written whole: undo would then keep an
    empty file gpudoctor made, as "changed since gpudoctor wrote it"."""
    from gpudoctor.fix.manifest import Manifest

    path = os.path.join(home.stub_lib_dir, "durable.conf")
    synced, events = set(), []
    real_fsync, real_update = os.fsync, Manifest.update

    def fsync(fd):
        synced.add(os.path.realpath(f"/proc/self/fd/{fd}"))
        return real_fsync(fd)

    def update(self, change, **details):
        events.append((details, os.path.realpath(path) in synced))
        return real_update(self, change, **details)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(Manifest, "update", update)
    with state_lock(home.state) as manifest:
        assert write_file.apply(Applier(home, manifest), WriteFile(path, "/opt/lib\n")) == DONE
    assert events == [({"written": True}, True)]
