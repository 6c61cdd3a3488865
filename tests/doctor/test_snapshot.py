"""Snapshots: record, replay, redaction, and corrupt or partial input."""

import json

import pytest

from gpudoctor.cli.main import main
from gpudoctor.engine import diagnose
from gpudoctor.host import HostError, LiveHost, RecordingHost, SnapshotHost
from gpudoctor.model import CheckStatus


def test_record_then_replay_gives_the_same_report(tmp_path):
    recording = RecordingHost(LiveHost())
    live = diagnose(recording)
    recording.write(str(tmp_path / "snap"))
    replay = diagnose(SnapshotHost(str(tmp_path / "snap")))
    assert [(c.id, c.status, c.reason) for c in live.checks] == [(c.id, c.status, c.reason) for c in replay.checks]
    assert list(live.findings) == list(replay.findings)


def test_secrets_are_redacted_and_unrelated_env_is_dropped(tmp_path):
    env = {"PATH": "/usr/bin", "HOME": str(tmp_path), "HF_TOKEN": "hf_abc", "CUDA_API_KEY": "k",
           "TRITON_PASSWORD": "p", "MY_UNRELATED": "x"}
    recording = RecordingHost(LiveHost(env))
    diagnose(recording)
    path = recording.write(str(tmp_path / "snap"))
    text = open(path).read()
    assert "hf_abc" not in text and '"k"' not in text and '"p"' not in text
    saved = json.loads(text)["env"]
    assert saved["CUDA_API_KEY"] == "<redacted>" and saved["TRITON_PASSWORD"] == "<redacted>"
    assert "MY_UNRELATED" not in saved


@pytest.mark.parametrize("content", [b"", b"{not json", b"\xff\xfe\x00", b"[]", b'{"schema": 99}',
                                     b'{"schema": 1, "commands": [{"nope": 1}]}'])
def test_corrupt_snapshot_is_one_line_and_exit_2(tmp_path, capsys, content):
    (tmp_path / "snapshot.json").write_bytes(content)
    with pytest.raises(HostError):
        SnapshotHost(str(tmp_path))
    assert main(["check", "--snapshot", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpudoctor: error:") and err.count("\n") == 1 and "Traceback" not in err


def test_partial_snapshot_skips_checks_with_reasons(tmp_path):
    (tmp_path / "snapshot.json").write_text('{"schema": 1}')
    report = diagnose(SnapshotHost(str(tmp_path)))
    assert report.checks
    assert all(c.status in (CheckStatus.SKIP, CheckStatus.PASS) for c in report.checks), [
        (c.id, c.status, c.reason) for c in report.checks if c.status not in (CheckStatus.SKIP, CheckStatus.PASS)]
    assert all(c.reason for c in report.checks if c.status == CheckStatus.SKIP)


def test_missing_snapshot_dir_is_exit_2(tmp_path, capsys):
    assert main(["check", "--snapshot", str(tmp_path / "nope")]) == 2
    assert "cannot read snapshot" in capsys.readouterr().err
