"""The EditFile action: apply records the original bytes first, replaces atomically with the same
mode, refuses a file changed since the scan; undo restores byte for byte or leaves a changed file."""

from __future__ import annotations

import json
import os
import stat

from gpudoctor.fix.actions.base import GONE, KEPT, UNDONE, UndoContext
from gpudoctor.fix.actions.edit_file import record_problem, sha256_hex, undo_edit_file
from gpudoctor.fix.apply import apply_plan
from gpudoctor.fix.plan import Plan, Step
from gpudoctor.model import EditFile
from gpudoctor.paths import GpudoctorDirs

ORIGINAL = b"args = TrainingArguments(evaluation_strategy='steps')  # keep\r\n\xff tail without newline"


def _setup(tmp_path):
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    dirs = GpudoctorDirs.from_env({"HOME": str(home)})
    script = tmp_path / "train.py"
    script.write_bytes(ORIGINAL)
    os.chmod(script, 0o640)
    return dirs, script


def _apply(dirs, script, new_text, digest=None):
    action = EditFile(str(script), digest or sha256_hex(ORIGINAL), new_text)
    return apply_plan(Plan("user", (Step(action, ("transformers-removed-kwarg",)),), (), ()), dirs)


def _record(dirs):
    with open(dirs.manifest_file, encoding="utf-8") as handle:
        return next(c for c in json.load(handle)["changes"] if c["op"] == "edit_file")


def test_apply_then_undo_byte_for_byte(tmp_path):
    dirs, script = _setup(tmp_path)
    result = _apply(dirs, script, "args = TrainingArguments(eval_strategy='steps')  # keep\n")
    assert [o.status for o in result.outcomes] == ["done"]
    assert script.read_text() == "args = TrainingArguments(eval_strategy='steps')  # keep\n"
    assert stat.S_IMODE(os.stat(script).st_mode) == 0o640
    change = _record(dirs)
    assert record_problem(change) == ""
    assert undo_edit_file(change, UndoContext(dirs))[0] == UNDONE
    assert script.read_bytes() == ORIGINAL
    assert stat.S_IMODE(os.stat(script).st_mode) == 0o640
    assert undo_edit_file(change, UndoContext(dirs))[0] == GONE  # a second undo finds it original


def test_changed_since_scan_is_refused(tmp_path):
    dirs, script = _setup(tmp_path)
    result = _apply(dirs, script, "new\n", digest=sha256_hex(b"what the scan saw"))
    assert result.outcomes[0].status == "refused" and "changed since it was scanned" in result.outcomes[0].message
    assert script.read_bytes() == ORIGINAL


def test_changed_since_edit_is_left_and_named(tmp_path):
    dirs, script = _setup(tmp_path)
    _apply(dirs, script, "new\n")
    script.write_text("new\nthe user's line\n")
    status, message = undo_edit_file(_record(dirs), UndoContext(dirs))
    assert status == KEPT and str(script) in message
    assert script.read_text() == "new\nthe user's line\n"


def test_forged_record_is_refused():
    good = {"path": "/x/train.py", "original": "eA==", "sha256_before": sha256_hex(b"x"), "sha256_after": sha256_hex(b"y")}
    assert record_problem(good) == ""
    assert "does not match" in record_problem({**good, "original": "eQ=="})
    assert "clean absolute" in record_problem({**good, "path": "/x/../etc/passwd"})
