"""The CLI contract: exit codes, JSON schema, one-line errors, no torch on the static path."""

import json
import os
import subprocess
import sys

import pytest

from gpudoctor.cli.main import main
from gpudoctor.knowledge import load_catalogue

from rule_cases import FIXTURES

SNAP_FAIL = os.path.join(FIXTURES, "snapshots", "cpu-triton35-driver-without-unversioned")
SNAP_OK = os.path.join(FIXTURES, "snapshots", "cpu-libcuda-on-ld-library-path")


def test_json_report_follows_the_schema(capsys):
    code = main(["check", "--snapshot", SNAP_FAIL, "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1
    assert data["schema"] == 1 and data["tool"]["name"] == "gpudoctor"
    assert {"findings", "checks"} <= set(data)
    finding = data["findings"][0]
    assert finding["id"] == "libcuda-unversioned-missing" and finding["severity"] == "error"
    assert set(finding) == {"id", "severity", "title", "message", "evidence", "fixes"}
    assert {fix["kind"] for fix in finding["fixes"]} == {"user", "system"}
    # schema 1 plus the additive "actions"; commands and env are derived from the actions
    assert all(set(fix) == {"kind", "summary", "commands", "env", "actions"} for fix in finding["fixes"])
    user = next(fix for fix in finding["fixes"] if fix["kind"] == "user")
    assert any(a["type"] == "Symlink" for a in user["actions"])
    assert any(c.startswith("ln -s ") for c in user["commands"]) and "LIBRARY_PATH" in user["env"]
    ranks = {"error": 2, "warning": 1, "info": 0}
    severities = [ranks[f["severity"]] for f in data["findings"]]
    assert severities == sorted(severities, reverse=True)
    for check in data["checks"]:
        assert check["status"] in ("pass", "fail", "skip", "error") and isinstance(check["duration_ms"], float)


def test_fail_on_and_exit_zero(capsys):
    assert main(["check", "--snapshot", SNAP_FAIL, "--only", "cuda-home-missing"]) == 0  # a warning
    assert main(["check", "--snapshot", SNAP_FAIL, "--only", "cuda-home-missing", "--fail-on", "warning"]) == 1
    assert main(["check", "--snapshot", SNAP_FAIL, "--exit-zero"]) == 0
    assert main(["check", "--snapshot", SNAP_FAIL, "--skip", "libcuda-unversioned-missing"]) == 0


def test_terminal_report_shows_the_finding_and_its_fix(capsys):
    main(["check", "--snapshot", SNAP_FAIL])
    out = capsys.readouterr().out
    assert "cannot find -lcuda" in out and "sudo ln -s libcuda.so.1" in out and "Driver and libcuda" in out


def test_markdown_report(capsys):
    main(["check", "--snapshot", SNAP_FAIL, "--markdown"])
    out = capsys.readouterr().out
    assert out.startswith("# gpudoctor report") and "`libcuda-unversioned-missing`" in out


@pytest.mark.parametrize("argv", [["check", "--only", "no-such-rule"], ["check", "--bogus"],
                                  ["rules", "no-such-rule"], ["check", "--require", "head_dim=eighty"]])
def test_usage_errors_are_one_line_and_exit_2(argv, capsys):
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse exits by itself
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gpudoctor: error:") and "\n" not in err


def test_rules_lists_and_documents_every_rule(capsys):
    assert main(["rules"]) == 0
    listing = capsys.readouterr().out
    for rule_id in load_catalogue():
        assert rule_id in listing
    assert main(["rules", "libcuda-unversioned-missing"]) == 0
    doc = capsys.readouterr().out
    for section in ("## What it checks", "## Why it breaks training", "## Fix", "## References"):
        assert section in doc


def test_static_check_never_imports_torch_or_triton():
    code = ("import sys; from gpudoctor.cli.main import main; main(['check', '--exit-zero', '--json']); "
            "bad = [m for m in ('torch', 'triton') if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout[-300:] + result.stderr[-300:]


def test_check_runs_as_a_module_and_finishes_fast():
    result = subprocess.run([sys.executable, "-m", "gpudoctor", "check", "--exit-zero"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0 and "gpudoctor check" in result.stdout


def test_snapshot_command_writes_a_replayable_snapshot(tmp_path, capsys):
    assert main(["snapshot", str(tmp_path / "snap")]) == 0
    assert main(["check", "--snapshot", str(tmp_path / "snap"), "--exit-zero", "--json"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out[out.index("{"):])["schema"] == 1


def test_snapshot_to_unwritable_place_is_exit_2(capsys):
    assert main(["snapshot", "/proc/gpudoctor-cannot-write-here"]) == 2
    assert capsys.readouterr().err.startswith("gpudoctor: error:")


def test_readme_lists_every_rule():
    readme = open(os.path.join(os.path.dirname(FIXTURES), "README.md")).read()
    missing = [r for r in load_catalogue() if f"`{r}`" not in readme]
    assert missing == []


def test_readme_rule_rows_say_what_the_catalogue_says():
    """The README's rule table is the catalogue's severity, detectors and title, not a copy that drifts."""
    import re

    readme = open(os.path.join(os.path.dirname(FIXTURES), "README.md")).read()
    rows = {m.group(1): (m.group(2), {d.strip() for d in m.group(3).split(",")}, m.group(4))
            for m in re.finditer(r"^\| `([a-z0-9-]+)` \| (\w+) \| ([a-z, ]+) \| (.+) \|$", readme, re.M)}
    catalogue = load_catalogue()
    assert set(rows) == set(catalogue)
    drift = {rid: rows[rid] for rid, rule in catalogue.items()
             if rows[rid] != (rule.severity.value, set(rule.detected_by), rule.title)}
    assert drift == {}
