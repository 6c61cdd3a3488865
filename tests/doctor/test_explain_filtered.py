"""Issue 13 item e: `explain` whose every finding is filtered away by --only/--skip says that N
findings were filtered out and names them; it never claims that no known cause was recognised."""

from __future__ import annotations

import json

import pytest

from gpudoctor.cli.main import main

LOG_LINES = ("/usr/bin/ld: cannot find -lcuda: No such file or directory\n"
             "Unsloth 2024.8 patched 32 layers with 0 QKV layers, 0 O layers and 0 MLP layers.\n")
LIBCUDA, UNSLOTH = "libcuda-unversioned-missing", "unsloth-layers-not-patched"


@pytest.fixture
def log(tmp_path):
    path = tmp_path / "train.log"
    path.write_text(LOG_LINES)
    return str(path)


def test_all_filtered_by_skip_names_them_and_claims_no_unknown(log, capsys):
    code = main(["explain", "--no-probe", log, "--skip", LIBCUDA, UNSLOTH])
    out = capsys.readouterr().out
    assert code == 0  # nothing reported, as check --skip
    assert "No known cause" not in out and "not a sign" not in out
    assert "2 findings filtered out by --only/--skip" in out
    assert LIBCUDA in out and UNSLOTH in out


def test_all_filtered_by_only_names_what_was_left_out(log, capsys):
    code = main(["explain", "--no-probe", log, "--only", "cuda-oom"])
    out = capsys.readouterr().out
    assert code == 0 and "No known cause" not in out
    assert "2 findings filtered out by --only/--skip" in out and LIBCUDA in out and UNSLOTH in out


def test_json_says_filtered_out_not_unrecognised(log, capsys):
    assert main(["explain", "--no-probe", "--json", log, "--skip", f"{LIBCUDA},{UNSLOTH}"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["findings"] == [] and "unrecognised" not in data
    assert data["filtered_out"] == sorted([LIBCUDA, UNSLOTH])


def test_some_filtered_are_mentioned_below_the_rest(log, capsys):
    assert main(["explain", "--no-probe", log, "--skip", UNSLOTH]) == 1
    out = capsys.readouterr().out
    assert LIBCUDA in out and f"1 finding filtered out by --only/--skip: {UNSLOTH}" in out


def test_nothing_recognised_is_still_an_honest_unknown(tmp_path, capsys):
    path = tmp_path / "quiet.log"
    path.write_text("step 1 loss 2.3\nstep 2 loss 2.1\n")
    assert main(["explain", "--no-probe", str(path), "--skip", LIBCUDA]) == 0
    out = capsys.readouterr().out
    assert "No known cause recognised" in out and "filtered out" not in out
