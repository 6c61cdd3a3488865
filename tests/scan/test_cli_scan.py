"""The scan through the commands: `check --scan PATH` (merged into check's report, same exit
codes, --only/--skip), `fix --code --skip` and `fix --code --json` (report.json's envelope), and
`preflight(scan=True)` in a real subprocess (the calling script scanned, cached by its mtime)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

from gpudoctor.cli.main import main

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(REPO, "fixtures")
H200 = os.path.join(FIXTURES, "snapshots", "h200-baseline")
REAL = os.path.join(FIXTURES, "scan", "real")


def _check_json(capsys, *argv):
    code = main(["check", "--json", "--snapshot", H200, *argv])
    return code, json.loads(capsys.readouterr().out)


def test_check_scan_merges_the_scan_into_checks_report(capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", os.path.join(REAL, "hf-cache", "hub"))
    code, data = _check_json(capsys, "--scan", os.path.join(REAL, "willmiller-fp16"))
    ids = {f["id"] for f in data["findings"]}
    # the H200 recording has transformers 5.17.0: evaluation_strategy and logging_dir are gone
    assert {"transformers-removed-kwarg", "fp16-params-with-grad-scaler"} <= ids and code == 1
    assert data["scan"]["python_files"] == 1 and data["scan"]["paths"] == [os.path.join(REAL, "willmiller-fp16")]
    scan_checks = [c for c in data["checks"] if "train.py:" in c["reason"]]
    assert {c["id"] for c in scan_checks} == {"transformers-removed-kwarg", "fp16-params-with-grad-scaler"}


def test_check_scan_only_and_skip_select_scan_rules(capsys):
    path = os.path.join(REAL, "willmiller-fp16")
    code, data = _check_json(capsys, "--scan", path, "--skip", "transformers-removed-kwarg,fp16-params-with-grad-scaler")
    assert not {"transformers-removed-kwarg", "fp16-params-with-grad-scaler"} & {f["id"] for f in data["findings"]}
    code, data = _check_json(capsys, "--scan", path, "--only", "fp16-params-with-grad-scaler")
    assert [f["id"] for f in data["findings"]] == ["fp16-params-with-grad-scaler"] and code == 1
    # without --scan a scan-only rule is still refused for --only (nothing would decide it)
    assert main(["check", "--snapshot", H200, "--only", "training-config-key-changed"]) == 2


def test_check_scan_missing_path_is_a_usage_error(capsys):
    assert main(["check", "--snapshot", H200, "--scan", "/no/such/dir"]) == 2
    assert "no such file or directory" in capsys.readouterr().err


def _seed(tmp_path):
    project = tmp_path / "proj"
    shutil.copytree(os.path.join(FIXTURES, "scan", "unsloth_seed"), project, ignore=shutil.ignore_patterns("SOURCE.md"))
    return project


def _cli(args, cwd, home):
    env = {**os.environ, "HOME": str(home), "XDG_STATE_HOME": str(home / "state"),
           "XDG_CONFIG_HOME": str(home / "config"), "XDG_CACHE_HOME": str(home / "cache")}
    return subprocess.run([sys.executable, "-m", "gpudoctor", *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120)


def test_fix_code_skip_and_json_envelope(tmp_path):
    project = _seed(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    skipped = _cli(["fix", "--code", "--dry-run", "--skip", "unsloth-layers-not-patched"], project, home)
    assert skipped.returncode == 0, skipped.stderr
    assert "lora_dropout" not in skipped.stdout and "eval_strategy" in skipped.stdout
    as_json = _cli(["fix", "--code", "--dry-run", "--json", "--skip", "unsloth-layers-not-patched"], project, home)
    data = json.loads(as_json.stdout)
    assert data["schema"] == 1 and data["tool"]["name"] == "gpudoctor" and "checks" in data
    assert "unsloth-layers-not-patched" not in {f["id"] for f in data["findings"]}
    (entry,) = data["code"]
    assert entry["status"] == "dry run" and "+        eval_strategy" in entry["diff"]
    assert _cli(["fix", "--code", "--skip", "bogus-id"], project, home).returncode == 2


PREFLIGHT_SCRIPT = textwrap.dedent("""\
    import json, sys
    import gpudoctor
    result = gpudoctor.preflight(scan=True, raise_on_error=False, quiet=True)
    print(json.dumps({"ok": result.ok, "cached": result.cached, "ids": [r["id"] for r in result.records],
                      "scan": result.scan}))
    if False:
        from transformers import TrainingArguments
        TrainingArguments(output_dir="o", evaluation_strategy="steps")
    """)


def _preflight(cwd, home, *args):
    env = {**os.environ, "HOME": str(home), "XDG_CACHE_HOME": str(home / "cache"), "XDG_CONFIG_HOME": str(home / "config")}
    done = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_preflight_scan_scans_the_calling_script_and_caches_by_its_mtime(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    script = tmp_path / "train.py"
    script.write_text(PREFLIGHT_SCRIPT)
    first = _preflight(tmp_path, home, str(script))
    assert "transformers-removed-kwarg" in first["ids"] and first["scan"]["script"] == str(script)
    assert not first["ok"] and not first["scan"]["error"]
    again = _preflight(tmp_path, home, str(script))
    assert again["cached"] and again["ids"] == first["ids"]
    script.write_text(PREFLIGHT_SCRIPT.replace('evaluation_strategy="steps"', 'eval_strategy="steps"'))
    edited = _preflight(tmp_path, home, str(script))
    assert not edited["cached"] and "transformers-removed-kwarg" not in edited["ids"]


def test_preflight_scan_without_a_script_says_so_and_is_not_ok(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    code = PREFLIGHT_SCRIPT.split("if False")[0]
    result = _preflight(tmp_path, home, "-c", code)
    assert result["ok"] is False and "no script file" in result["scan"]["error"]


def test_check_scan_says_in_the_terminal_which_files_it_did_not_read(capsys, tmp_path):
    (tmp_path / "a.py").write_text("import transformers\n")
    (tmp_path / "b.py").write_text("import transformers\ndef f(:\n")
    code = main(["check", "--snapshot", H200, "--scan", str(tmp_path)])
    out = capsys.readouterr().out
    assert "scanned 2 files; not read: b.py (" in out and "line 2" in out.split("not read: b.py")[1].splitlines()[0]
    os.remove(tmp_path / "b.py")
    assert main(["check", "--snapshot", H200, "--scan", str(tmp_path)]) == code  # the exit code is unchanged
    assert "scanned 1 file; every file read" in capsys.readouterr().out
