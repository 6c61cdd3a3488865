"""preflight(scan=True)'s own parts, in-process: which file is the calling script, what the
summary says of the scan, and which results are cached."""

from __future__ import annotations

import sys
import types

from gpudoctor import hook


def test_the_script_is_the_main_modules_file_never_argv0(tmp_path, monkeypatch):
    # Under Jupyter __main__ has no __file__ and sys.argv[0] is ipykernel_launcher.py: that file is
    # not the user's code, and scanning it would report ok for code never looked at.
    launcher = tmp_path / "ipykernel_launcher.py"
    launcher.write_text("import transformers\n")
    monkeypatch.setitem(sys.modules, "__main__", types.ModuleType("__main__"))
    monkeypatch.setattr(sys, "argv", [str(launcher), "-f", "kernel.json"])
    assert hook._script_identity() == [""]
    script = tmp_path / "train.py"
    script.write_text("import transformers\n")
    main = types.ModuleType("__main__")
    main.__file__ = str(script)
    monkeypatch.setitem(sys.modules, "__main__", main)
    assert hook._script_identity()[0] == str(script)


def test_no_script_is_said_and_a_done_scan_names_its_file():
    from gpudoctor.scan.script import scan_script

    none = scan_script("", facts=None)
    assert none.error == "no script file to scan (interactive session?)"
    assert "NOT done: no script file to scan" in hook._scan_note({"script": "", "error": none.error, "not_judged": []})
    assert "scanned /p/train.py" in hook._scan_note({"script": "/p/train.py", "error": "", "not_judged": []})


def _preflight_twice(tmp_path, monkeypatch, main):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setitem(sys.modules, "__main__", main)
    monkeypatch.chdir(tmp_path)
    return [hook.preflight(scan=True, raise_on_error=False, quiet=True) for _ in range(2)]


def test_a_scan_not_done_is_not_cached_so_the_next_call_retries(tmp_path, monkeypatch):
    first, again = _preflight_twice(tmp_path, monkeypatch, types.ModuleType("__main__"))  # no script: an error
    assert first.scan["error"] and not first.ok
    assert not again.cached and again.scan["error"]
    script = tmp_path / "train.py"
    script.write_text("import os\n")
    main = types.ModuleType("__main__")
    main.__file__ = str(script)
    first, again = _preflight_twice(tmp_path, monkeypatch, main)
    assert not first.scan["error"] and again.cached  # a scan that was done is cached as before
