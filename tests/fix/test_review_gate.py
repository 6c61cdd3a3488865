"""Adversarial review of preflight() as a gate and of the fixers: each test here failed on the
code before its fix (the defect and how it was found are in the commit that fixed it)."""

from __future__ import annotations

import importlib
import json
import os

import pytest
from fixhelpers import finding_record

import gpudoctor

pf = importlib.import_module("gpudoctor.hook")




def _cache_file() -> str:
    directory = os.path.join(pf._cache_dir(), "preflight")
    (name,) = [n for n in os.listdir(directory) if n.endswith(".json")]
    return os.path.join(directory, name)


def _rewrite(path: str, **fields) -> None:
    with open(path) as handle:
        entry = json.load(handle)
    entry.update(fields)
    with open(path, "w") as handle:
        json.dump(entry, handle)


# -- preflight: the cache ------------------------------------------------------------------------


@pytest.mark.parametrize("field, value", [
    ("requirements", "x"), ("requirements", [1]), ("requirements", [{}]),
    ("requirements", [{"feature": "bf16", "status": "NOT met", "reason": ["r"]}]),
    ("scan", "x"), ("scan", {"error": 5}), ("not_run", 5),
    ("findings", [{"id": "a", "severity": ["error"]}]),
])
def test_a_well_formed_json_cache_entry_of_the_wrong_shape_is_a_miss_not_a_crash(checks, tmp_path, field, value, capsys):
    """Valid JSON whose fields are not what preflight writes (a damaged or planted file) crashed
    the training script with AttributeError/KeyError/TypeError from the result or the summary."""
    gpudoctor.preflight(project_dir=str(tmp_path))
    fields = {field: value}
    if field == "findings":
        fields["blocking"] = {"default": [0], "strict": [0]}
    _rewrite(_cache_file(), **fields)
    result = gpudoctor.preflight(project_dir=str(tmp_path))
    assert result.ok and not result.cached and len(checks.calls) == 2
    assert "OK (3 checks" in capsys.readouterr().err


def _uname_on(node: str):
    real = os.uname()
    return lambda: os.uname_result((real.sysname, node, real.release, real.version, real.machine))


def test_a_cache_shared_between_nodes_does_not_pass_another_node(checks, tmp_path, monkeypatch):
    """A cluster's shared HOME (NFS, Apptainer's home bind) and one image on every node: node b
    found node a's entry, because nothing in the fingerprint told the nodes apart (same env,
    same paths and, from one image, the same mtimes), and passed without checking."""
    monkeypatch.setattr(os, "uname", _uname_on("node-a"))
    assert gpudoctor.preflight(project_dir=str(tmp_path), quiet=True).ok
    monkeypatch.setattr(os, "uname", _uname_on("node-b"))
    checks.findings.append(finding_record("no-gpu-visible", "error"))  # node b's GPU is gone
    with pytest.raises(gpudoctor.PreflightError, match="no-gpu-visible"):
        gpudoctor.preflight(project_dir=str(tmp_path), quiet=True)
    assert len(checks.calls) == 2


def _plant_a_pass(path: str) -> None:
    _rewrite(path, findings=[], blocking={"default": [], "strict": []})


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
def test_a_cache_entry_owned_by_another_user_is_not_trusted(checks, tmp_path):
    checks.findings.append(finding_record("libcuda-unversioned-missing", "error"))
    with pytest.raises(gpudoctor.PreflightError):
        gpudoctor.preflight(project_dir=str(tmp_path), quiet=True)
    path = _cache_file()
    _plant_a_pass(path)
    os.chown(path, 4242, 4242)  # e.g. written into a shared XDG_CACHE_HOME by someone else
    with pytest.raises(gpudoctor.PreflightError):
        gpudoctor.preflight(project_dir=str(tmp_path), quiet=True)


@pytest.mark.parametrize("what", ["file", "directory"])
def test_a_cache_others_can_write_is_not_trusted(checks, tmp_path, what):
    """A cache file or directory writable by group or others (a shared cache dir, a umask 000
    setup): anyone could have put a pass there."""
    checks.findings.append(finding_record("libcuda-unversioned-missing", "error"))
    with pytest.raises(gpudoctor.PreflightError):
        gpudoctor.preflight(project_dir=str(tmp_path), quiet=True)
    path = _cache_file()
    _plant_a_pass(path)
    os.chmod(path if what == "file" else os.path.dirname(path), 0o666 if what == "file" else 0o777)
    with pytest.raises(gpudoctor.PreflightError):
        gpudoctor.preflight(project_dir=str(tmp_path), quiet=True)


def test_a_symlinked_cache_dir_of_the_users_own_still_caches(checks, tmp_path, monkeypatch):
    """What held up, kept: ~/.cache linked to a scratch disk the user owns is an ordinary setup."""
    scratch = tmp_path / "scratch"
    scratch.mkdir(mode=0o700)
    os.symlink(scratch, os.path.join(os.environ["HOME"], ".cache"))
    gpudoctor.preflight(project_dir=str(tmp_path), quiet=True)
    assert gpudoctor.preflight(project_dir=str(tmp_path), quiet=True).cached


# -- preflight: config and arguments -------------------------------------------------------------


@pytest.mark.parametrize("body, note", [
    ('[tool.gpudoctor]\nraise_on_error = "false"\n', "ignoring raise_on_error = 'false'"),
    ('[tool.gpudoctor\nrequire = ["bf16"]\n', "ignoring"),
])
def test_an_ignored_config_is_said_on_every_call_not_only_the_first(checks, tmp_path, body, note, capsys):
    """The note that [tool.gpudoctor] was ignored was written while reading the config, which
    only the uncached call does: every later run passed silently without the strictness or the
    requirement the project asked for."""
    (tmp_path / "pyproject.toml").write_text(body)
    for _call in range(2):
        result = gpudoctor.preflight(project_dir=str(tmp_path), quiet=True)
        assert note in capsys.readouterr().err
    assert result.cached


@pytest.mark.parametrize("name", ["strict", "raise_on_error", "quiet"])
@pytest.mark.parametrize("value", ["false", object()])
def test_a_flag_that_is_not_a_bool_is_the_callers_error(checks, tmp_path, name, value):
    """strict="false" turned the gate strict (a non-empty string is true), and any other object
    crashed in the cache write with 'Object of type ... is not JSON serializable'."""
    with pytest.raises(TypeError, match=f"gpudoctor.preflight: {name} must be True, False or None"):
        gpudoctor.preflight(project_dir=str(tmp_path), **{name: value})
    assert checks.calls == []


_PLANT_AND_CALL = """
import os, sys, gpudoctor, gpudoctor.hook as pf
kw = dict(project_dir=sys.argv[1], raise_on_error=False, quiet=True)
gpudoctor.preflight(**kw)
directory = os.path.join(pf._cache_dir(), "preflight")
(name,) = [n for n in os.listdir(directory) if n.endswith(".json")]
path = os.path.join(directory, name)
os.unlink(path)
if sys.argv[2] == "fifo-in-a-shared-dir":
    os.chmod(directory, 0o777)
    os.mkfifo(path)
elif sys.argv[2] == "own-fifo":
    os.mkfifo(path)
else:
    os.symlink("/dev/zero", path)
result = gpudoctor.preflight(**kw)
print("cached" if result.cached else "miss")
"""


@pytest.mark.parametrize("plant", ["fifo-in-a-shared-dir", "own-fifo", "link-to-dev-zero"])
def test_a_fifo_or_device_at_the_cache_entry_is_a_miss_not_a_hang(home, tmp_path, plant):
    """A FIFO at the entry's name (anyone's, in a shared cache dir) blocked open() forever: the
    training script hung before it started."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _PLANT_AND_CALL, str(tmp_path), plant], capture_output=True,
                         text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "miss"


# -- preflight and run: the env file -------------------------------------------------------------


def _unset(monkeypatch, name):
    """Unset, and restored afterwards: monkeypatch.delenv of an unset name records nothing, so
    a value preflight applies would outlive the test."""
    monkeypatch.setenv(name, "")
    monkeypatch.delenv(name)


def _write_env_file(dirs, name="LD_PRELOAD", value="/tmp/planted.so"):
    from gpudoctor.fix import envfile

    os.makedirs(dirs.config, mode=0o700, exist_ok=True)
    envfile.write_entries(dirs.env_file, [envfile.EnvEntry(name, value)])


@pytest.mark.parametrize("damage", ["foreign-owner", "file-writable-by-others", "directory-writable-by-others"])
def test_an_env_file_someone_else_could_write_is_not_applied(checks, home, tmp_path, monkeypatch, damage, capsys):
    """preflight() put every entry of the env file into the training process whoever wrote it:
    an env.sh another user owns, in a shared XDG_CONFIG_HOME, set LD_PRELOAD for the training
    and every compiler it starts. ``fix`` refuses to write there; now the readers refuse too."""
    if damage == "foreign-owner" and os.geteuid() != 0:
        pytest.skip("chown to another uid needs root")
    _unset(monkeypatch, "LD_PRELOAD")
    _write_env_file(home)
    if damage == "foreign-owner":
        os.chown(home.env_file, 4242, 4242)
    elif damage == "file-writable-by-others":
        os.chmod(home.env_file, 0o666)
    else:
        os.chmod(home.config, 0o777)
    result = gpudoctor.preflight(project_dir=str(tmp_path), quiet=True)
    assert result.env_changed == {} and "LD_PRELOAD" not in os.environ
    assert "its entries are not applied" in capsys.readouterr().err
    from gpudoctor.fix.verify import fixed_environment  # gpudoctor run's environment

    with pytest.raises(OSError, match="not applied"):
        fixed_environment({"HOME": os.environ["HOME"]}, home)


def test_the_users_own_env_file_is_still_applied(checks, home, tmp_path, monkeypatch):
    _unset(monkeypatch, "TRITON_LIBCUDA_PATH")
    _write_env_file(home, "TRITON_LIBCUDA_PATH", "/drv")
    assert gpudoctor.preflight(project_dir=str(tmp_path), quiet=True).env_changed == {"TRITON_LIBCUDA_PATH": "/drv"}


def test_a_fifo_as_the_env_file_is_said_not_a_hang(home, tmp_path):
    import subprocess
    import sys

    os.makedirs(home.config, mode=0o700)
    os.mkfifo(home.env_file)
    code = "import gpudoctor; print(gpudoctor.preflight(quiet=True, raise_on_error=False).env_changed)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.strip() == "{}", out.stderr
    assert "not a regular file" in out.stderr


def test_a_removed_working_directory_does_not_crash_the_script(home, tmp_path):
    """python -c, a notebook kernel: no script file, so the project is looked for from the
    working directory, and os.getcwd() raised FileNotFoundError into the caller when it had
    been removed."""
    import subprocess
    import sys

    gone = tmp_path / "gone"
    gone.mkdir()
    code = ("import os, gpudoctor; os.chdir(os.environ['GONE']); os.rmdir(os.environ['GONE']); "
            "print(gpudoctor.preflight(quiet=True, raise_on_error=False).checks > 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "GONE": str(gone)})
    assert out.returncode == 0 and out.stdout.strip() == "True", out.stderr


# -- fix --undo ----------------------------------------------------------------------------------


def _fixed_once(dirs):
    from gpudoctor.fix.apply import apply_plan
    from gpudoctor.fix.plan import build_plan
    from gpudoctor.model import Finding, Fix, SetEnv, Severity

    finding = Finding("triton-cache-unwritable", Severity.ERROR, "t", "m",
                      fixes=(Fix("user", "s", actions=(SetEnv("TRITON_CACHE_DIR", "/tmp/own-triton-cache"),)),))
    assert [o.status for o in apply_plan(build_plan([finding], "user"), dirs).outcomes] == ["done"]


@pytest.mark.parametrize("dry_run", [False, True])
def test_undo_from_a_state_dir_others_can_write_is_refused_and_said_so(home, dry_run, capsys):
    """A state dir others can write holds a manifest anyone could have edited. --undo refused it,
    but as 'internal error: UnsafeDirectory ... (rerun with --debug)'; --undo --dry-run listed
    that manifest's records as what undo would do, exit 0, though undo itself would refuse."""
    from gpudoctor.cli.main import main

    _fixed_once(home)
    os.chmod(home.state, 0o770)
    code = main(["fix", "--undo"] + (["--dry-run"] if dry_run else []))
    out, err = capsys.readouterr()
    assert code == 2 and "would undo" not in out
    assert "gpudoctor: error: refusing to keep gpudoctor's state in" in err and "internal error" not in err
    os.chmod(home.state, 0o700)
    assert main(["fix", "--undo"]) == 0 and not os.path.exists(home.env_file)


# -- fix --dry-run (held up in review; kept as a guard) --------------------------------------------


def _fail_cases():
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "doctor"))
    import rule_cases

    return [c for c in rule_cases.load_cases() if c.expect == "fail"]


def test_dry_run_of_every_recorded_failure_changes_nothing(home, tmp_path, monkeypatch, capsys):
    """Every fail fixture (recorded snapshots, each rule's failing machine): the user and system
    plans, --profile, --json and --undo --dry-run print a plan and leave HOME and the working
    directory byte for byte as they were."""
    from fixhelpers import tree

    import gpudoctor.cli.fix as cli_fix
    from gpudoctor.cli.main import main
    from gpudoctor.engine import diagnose

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SHELL", "/bin/bash")
    planned = 0
    for case in _fail_cases():
        report = diagnose(case.host(), requirements=case.requirements)
        monkeypatch.setattr(cli_fix, "_diagnosis", lambda args, report=report: (lambda env, only: report))
        for extra in ([], ["--system"], ["--profile"], ["--json"], ["--undo"]):
            before = tree(tmp_path)
            assert main(["fix", "--dry-run", *extra]) in (0, 1), (case.rule_id, case.name, extra)
            planned += "gpudoctor" in capsys.readouterr().out
            assert tree(tmp_path) == before, (case.rule_id, case.name, extra)
    assert planned > 100  # the plans were printed, not skipped


def test_gpudoctor_env_refuses_an_untrusted_env_file_in_one_line(home, capsys):
    """`gpudoctor env` printed "internal error: UntrustedEnvFile" once the readers refused such a
    file (found by the review that made them refuse): it is the env file's problem, said as one."""
    from gpudoctor.cli.main import main

    _write_env_file(home)
    os.chmod(home.env_file, 0o666)
    assert main(["env"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gpudoctor: error: cannot use the env file {home.env_file}: ") and len(err.splitlines()) == 1
    assert "internal error" not in err
