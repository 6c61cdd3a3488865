"""Issue 13 item 7: one grammar for --only/--skip across check, fix and explain: `--only a b`,
`--only a,b` and repeated options all select the same ids; an unknown id, or one the command can
never report, is a usage error (exit 2) that lists the valid ids."""

from __future__ import annotations

import json

import pytest

from gpudoctor.cli import fix as fix_cli
from gpudoctor.cli.main import main
from gpudoctor.engine import Report

LOG_LINES = ("/usr/bin/ld: cannot find -lcuda: No such file or directory\n"
             "Unsloth 2024.8 patched 32 layers with 0 QKV layers, 0 O layers and 0 MLP layers.\n")
LIBCUDA, UNSLOTH = "libcuda-unversioned-missing", "unsloth-layers-not-patched"


@pytest.fixture
def log(tmp_path):
    path = tmp_path / "train.log"
    path.write_text(LOG_LINES)
    return str(path)


def _explain_ids(capsys, *argv) -> tuple[int, list[str]]:
    code = main(["explain", *argv, "--no-probe", "--json"])
    out = capsys.readouterr().out
    return code, [f["id"] for f in json.loads(out)["findings"]] if out else []


def test_explain_without_selection_reports_both(log, capsys):
    code, ids = _explain_ids(capsys, log)
    assert code == 1 and set(ids) == {LIBCUDA, UNSLOTH}


@pytest.mark.parametrize("only", [[f"{LIBCUDA}"], [LIBCUDA, "cuda-oom"], [f"{LIBCUDA},cuda-oom"]])
def test_explain_only_every_spelling(log, capsys, only):
    code, ids = _explain_ids(capsys, log, "--only", *only)
    assert code == 1 and ids == [LIBCUDA]


def test_explain_skip(log, capsys):
    code, ids = _explain_ids(capsys, log, "--skip", UNSLOTH)
    assert code == 1 and ids == [LIBCUDA]
    code, ids = _explain_ids(capsys, log, "--skip", f"{UNSLOTH},{LIBCUDA}")
    assert code == 0 and ids == []


@pytest.mark.parametrize("argv", [["--only", "bogus"], ["--skip", "bogus"], ["--only", LIBCUDA, "bogus"]])
def test_explain_unknown_id_is_a_usage_error(log, capsys, argv):
    assert main(["explain", log, "--no-probe", *argv]) == 2
    err = capsys.readouterr().err
    assert "bogus" in err and "valid:" in err and LIBCUDA in err and "Traceback" not in err


def test_explain_only_a_static_only_rule_is_a_usage_error(log, capsys):
    # cuda-compat-lib-mismatch is decided by the static checks alone: explain could never report it
    assert main(["explain", log, "--no-probe", "--only", "cuda-compat-lib-mismatch"]) == 2
    assert "gpudoctor check" in capsys.readouterr().err


@pytest.fixture
def recorded_fix(monkeypatch, tmp_path):
    """fix's diagnosis replaced by one that records the ids it was asked for and finds nothing."""
    monkeypatch.setenv("HOME", str(tmp_path))
    asked = []
    monkeypatch.setattr(fix_cli, "run_diagnosis", lambda env, only: asked.append(list(only)) or Report((), ()))
    return asked


@pytest.mark.parametrize("argv", [["--only", "bogus"], ["--skip", "bogus"], ["--only", "cuda-oom"]])
def test_fix_unknown_or_log_only_id_is_a_usage_error(recorded_fix, capsys, argv):
    # `fix --only bogus` used to exit 0; cuda-oom is only ever seen in logs: nothing to fix statically
    assert main(["fix", "--dry-run", *argv]) == 2
    err = capsys.readouterr().err
    assert argv[1] in err and "Traceback" not in err
    assert recorded_fix == [], "nothing may be diagnosed or fixed on a bad selection"


@pytest.mark.parametrize("only", [["triton-missing", "shm-too-small"], ["triton-missing,shm-too-small"],
                                  ["triton-missing", "--only", "shm-too-small"]])
def test_fix_only_every_spelling_selects_the_same_ids(recorded_fix, capsys, only):
    assert main(["fix", "--dry-run", "--only", *only]) == 0
    assert recorded_fix == [["triton-missing", "shm-too-small"]]


def test_fix_skip_drops_the_finding_from_the_plan(monkeypatch, tmp_path, capsys):
    from gpudoctor.model import Finding, Severity

    monkeypatch.setenv("HOME", str(tmp_path))
    finding = Finding(id="shm-too-small", severity=Severity.WARNING, title="t", message="m")
    monkeypatch.setattr(fix_cli, "run_diagnosis", lambda env, only: Report((finding,), ()))
    assert main(["fix", "--dry-run", "--json"]) == 0
    assert "shm-too-small" in capsys.readouterr().out
    assert main(["fix", "--dry-run", "--json", "--skip", "shm-too-small"]) == 0
    assert "shm-too-small" not in capsys.readouterr().out


def test_check_and_fix_agree_on_unknown_ids(recorded_fix, capsys):
    assert main(["check", "--only", "bogus"]) == 2
    check_err = capsys.readouterr().err
    assert main(["fix", "--only", "bogus"]) == 2
    assert capsys.readouterr().err == check_err
