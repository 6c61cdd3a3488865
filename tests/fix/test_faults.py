"""Fault injection for `gpudoctor fix` (issue 14): kill -9 at every step, a full disk at every
step, a read-only HOME, concurrent fix and undo. After each, `gpudoctor fix --undo` must return
HOME to its exact previous state (every path, type, mode, link target and content hash).

A step is one mutating call (os.mkdir, os.symlink, os.open for writing, os.write, os.fsync,
os.replace, os.unlink, os.rmdir, os.chmod, os.fchmod, open() for writing). A forked gpudoctor
process counts them and SIGKILLs itself at step k; the full disk raises ENOSPC there."""

from __future__ import annotations

import builtins
import errno
import json
import os
import signal
import sys

import pytest
from fixhelpers import libcuda_finding, tree

from gpudoctor.cli.main import main
from gpudoctor.engine import Report
from gpudoctor.fix import envfile
from gpudoctor.model import Finding, Fix, SetEnv, Severity
from gpudoctor.paths import GpudoctorDirs

MUTATORS = ("mkdir", "symlink", "write", "fsync", "replace", "rename", "unlink", "rmdir", "chmod", "fchmod")



def _child_main(argv, driver: str, fault: str, extra: str) -> int:
    """In a forked child: a static diagnosis (the libcuda finding, plus GD_<extra> when set),
    the step counter (FAULT kill:K or enospc:K), then `gpudoctor ARGV`."""
    import gpudoctor.cli.fix as cli_fix

    def diagnose(env, only):
        findings = [libcuda_finding(GpudoctorDirs.from_env(env), driver)]
        if extra:
            findings.append(Finding("extra-" + extra, Severity.WARNING, "t", "m",
                                    fixes=(Fix("user", "s", (SetEnv("GD_" + extra, "v" + extra),)),)))
        return Report(tuple(findings), ())

    cli_fix.run_diagnosis = diagnose
    kind, _, at = fault.partition(":")
    at, count = int(at), [0]

    def step():
        count[0] += 1
        if count[0] == at:
            if kind == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise OSError(errno.ENOSPC, "No space left on device (injected)")

    def wrap(owner, name, writes_only=None):
        real = getattr(owner, name)

        def wrapper(*args, **kwargs):
            if writes_only is None or writes_only(*args, **kwargs):
                step()
            return real(*args, **kwargs)

        setattr(owner, name, wrapper)

    for name in MUTATORS:
        wrap(os, name)
    wrap(os, "open", lambda path, flags, *a, **k: flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
    wrap(builtins, "open", lambda file, mode="r", *a, **k: any(c in mode for c in "wax+"))
    return main(list(argv))


class _Child:
    """`gpudoctor ARGV` in a forked process (a real process: SIGKILL really kills it mid-call),
    its output in a file; ``wait()`` gives (output, exit code or -9)."""

    def __init__(self, scene, argv, fault: str, extra: str) -> None:
        self.log = os.path.join(scene["logs"], f"{os.getpid()}-{id(self)}.log")
        self.pid = os.fork()
        if self.pid == 0:  # the child
            code = 70
            try:
                fd = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                sys.stdout = open(1, "w", closefd=False)
                sys.stderr = open(2, "w", closefd=False)
                code = _child_main(argv, scene["driver"], fault, extra)
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)

    def wait(self):
        _, status = os.waitpid(self.pid, 0)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        with open(self.log) as handle:
            return handle.read(), code


def _child(scene, *argv, fault="none:0", extra="", wait=True):
    child = _Child(scene, argv, fault, extra)
    if not wait:
        return child
    out, code = child.wait()
    return out, out, code


@pytest.fixture
def scene(home, tmp_path):
    """HOME with a user's .bashrc (for --profile) and a driver dir; returns what `tree` saw."""
    driver = tmp_path / "driver"
    driver.mkdir()
    (driver / "libcuda.so.1").write_bytes(b"\x7fELF")
    bashrc = tmp_path / "home" / ".bashrc"
    bashrc.write_text("# the user's own\nalias ll='ls -l'")  # no final newline, on purpose
    logs = tmp_path / "logs"
    logs.mkdir()
    return {"driver": str(driver), "home": tmp_path / "home", "before": tree(tmp_path / "home"),
            "bashrc": str(bashrc), "logs": str(logs)}


def _fix_argv(scene):
    return ("fix", "--profile", scene["bashrc"])


def test_kill_at_every_step_of_fix_then_undo_restores_home_exactly(scene):
    k, completed, kills = 0, False, 0
    while not completed:
        k += 1
        _, err, code = _child(scene, *_fix_argv(scene), fault=f"kill:{k}")
        completed = code != -signal.SIGKILL
        kills += not completed
        uout, uerr, ucode = _child(scene, "fix", "--undo")
        assert ucode == 0, (k, uout, uerr)
        assert tree(scene["home"]) == scene["before"], f"kill at step {k} left a difference after --undo"
        assert k < 200
    assert kills >= 20  # the run really has that many steps; each was a kill point
    _report("kill -9 at every step of fix, then --undo", kills)


def test_kill_at_every_step_of_undo_then_undo_again_restores_home_exactly(scene):
    k, completed = 0, False
    while not completed:
        k += 1
        _child(scene, *_fix_argv(scene))
        _, err, code = _child(scene, "fix", "--undo", fault=f"kill:{k}")
        completed = code != -signal.SIGKILL
        _, uerr, ucode = _child(scene, "fix", "--undo")
        assert ucode == 0, (k, uerr)
        assert tree(scene["home"]) == scene["before"], f"kill at step {k} of undo"
    _report("kill -9 at every step of --undo, then --undo", k - 1)


class _Faults:
    """In-process: raise ``error`` at mutating step ``at`` (every step from there with ``always``)."""

    def __init__(self, monkeypatch, at: int, error: int, always: bool = False) -> None:
        self.count, self.at, self.error, self.always = 0, at, error, always
        for name in MUTATORS:
            self._wrap(monkeypatch, os, name, None)
        self._wrap(monkeypatch, os, "open", lambda path, flags, *a, **k: flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
        self._wrap(monkeypatch, builtins, "open", lambda file, mode="r", *a, **k: any(c in mode for c in "wax+"))
        self.armed = True

    def _wrap(self, monkeypatch, owner, name, writes_only):
        real = getattr(owner, name)

        def wrapper(*args, **kwargs):
            if self.armed and (writes_only is None or writes_only(*args, **kwargs)):
                self.count += 1
                if self.count == self.at or (self.always and self.count >= self.at):
                    raise OSError(self.error, os.strerror(self.error) + " (injected)")
            return real(*args, **kwargs)

        monkeypatch.setattr(owner, name, wrapper)


@pytest.fixture
def in_process(scene, monkeypatch):
    def diagnose(env, only):
        return Report((libcuda_finding(GpudoctorDirs.from_env(env), scene["driver"]),), ())

    monkeypatch.setattr("gpudoctor.cli.fix.run_diagnosis", diagnose)
    return scene


def test_full_disk_at_every_step_leaves_an_undoable_state(in_process, monkeypatch, capsys):
    scene, k, completed = in_process, 0, False
    while not completed:
        k += 1
        with monkeypatch.context() as patch:
            faults = _Faults(patch, k, errno.ENOSPC)
            main(["fix", "--profile", scene["bashrc"]])
            completed = faults.count < k
        # a later fix (disk space back) must record what it finds, not call it "already done"
        main(["fix", "--profile", scene["bashrc"]])
        assert main(["fix", "--undo"]) == 0, capsys.readouterr()
        assert tree(scene["home"]) == scene["before"], f"ENOSPC at step {k}"
        capsys.readouterr()
    _report("full disk (ENOSPC) at every step of fix, then fix, then --undo", k - 1)


def test_read_only_home_changes_nothing_and_says_so(in_process, monkeypatch, capsys):
    with monkeypatch.context() as patch:
        _Faults(patch, 1, errno.EROFS, always=True)
        code = main(["fix", "--profile", in_process["bashrc"]])
    captured = capsys.readouterr()
    assert code != 0 and "Traceback" not in captured.err
    assert tree(in_process["home"]) == in_process["before"]
    _report("read-only HOME", 1)


def test_concurrent_fixes_lose_no_record_and_undo_is_exact(scene):
    procs = [_child(scene, "fix", extra=str(i), wait=False) for i in range(6)]
    for proc in procs:
        out, code = proc.wait()
        # 1: the stand-in diagnosis still reports its findings after the fix; anything else is a failed
        # fix, which would explain a missing record: say why it failed
        assert code in (0, 1) and "Traceback" not in out and "internal error" not in out, (code, out)
    dirs = GpudoctorDirs.from_env()
    names = {e.name for e in envfile.read_entries(dirs.env_file)}
    assert {f"GD_{i}" for i in range(6)} <= names and "LIBRARY_PATH" in names
    with open(dirs.manifest_file) as handle:
        recorded = {c["entry"]["name"] for c in json.load(handle)["changes"] if c["op"] == "env"}
    assert {f"GD_{i}" for i in range(6)} <= recorded
    _, err, code = _child(scene, "fix", "--undo")
    assert code == 0, err
    assert tree(scene["home"]) == scene["before"]
    _report("6 concurrent fix", 6)


def test_concurrent_fix_and_undo_then_undo_is_exact(scene):
    procs = [_child(scene, *(("fix", "--undo") if i % 3 == 2 else ("fix",)), extra=str(i), wait=False)
             for i in range(6)]
    for proc in procs:
        err, code = proc.wait()
        assert "Traceback" not in err and "internal error" not in err, err
        assert code in (0, 1), err
    _, err, code = _child(scene, "fix", "--undo")
    assert code == 0, err
    assert tree(scene["home"]) == scene["before"]
    _report("4 fix + 2 undo at once", 6)


def _report(what: str, attacks: int) -> None:
    """The counts docs/security.md quotes: GPUDOCTOR_FAULT_REPORT=FILE collects them."""
    target = os.environ.get("GPUDOCTOR_FAULT_REPORT")
    if target:
        with open(target, "a") as handle:
            handle.write(json.dumps({"what": what, "attacks": attacks}) + "\n")


def test_a_state_dir_removed_by_another_run_while_checked_is_made_again_not_refused(home, monkeypatch):
    """Concurrent fix and undo: a fix makes the state dir (and its parents), then an undo removes
    them (undo removes the directories gpudoctor made) while the fix checks them. The check's "No
    such file or directory" used to end the fix with exit 2 ("refusing to keep gpudoctor's
    state"); it now makes them again."""
    from gpudoctor import paths
    from gpudoctor.fix import manifest as manifest_module

    dirs = GpudoctorDirs.from_env()
    real_check, raced = paths.private_dir_problem, []

    def check_while_another_run_undoes(path):
        if path == dirs.state and not raced:
            raced.append(path)
            for directory in (dirs.state, os.path.dirname(dirs.state)):  # as undo: the chain it made
                for name in os.listdir(directory):
                    os.unlink(os.path.join(directory, name))
                os.rmdir(directory)
        return real_check(path)

    assert not os.path.lexists(os.path.dirname(dirs.state))  # the fix makes the parent too
    monkeypatch.setattr(paths, "private_dir_problem", check_while_another_run_undoes)
    with manifest_module.state_lock(dirs.state) as manifest:
        assert manifest is not None and raced and os.path.isdir(dirs.state)


def test_undo_plan_of_a_state_dir_removed_while_checked_is_empty_not_refused(home, monkeypatch):
    """`fix --undo --dry-run` beside a concurrent undo: the state dir it saw is removed while it
    checks it. Nothing is left to undo, which it says, rather than refusing the directory."""
    from gpudoctor.fix import undo as undo_module

    dirs = GpudoctorDirs.from_env()
    os.makedirs(dirs.state, mode=0o700)
    real_check = undo_module.private_dir_problem

    def check_while_another_run_undoes(path):
        os.rmdir(path)
        return real_check(path)

    monkeypatch.setattr(undo_module, "private_dir_problem", check_while_another_run_undoes)
    assert undo_module.undo_plan(dirs) == []
    assert not os.path.lexists(dirs.state)


def test_a_state_dir_made_by_another_run_after_the_check_is_used_not_a_crash(home, monkeypatch):
    """Concurrent fixes: a run sees no state dir, another renames its tree into place, then the
    first walks up to find what is missing and finds nothing missing. It used to raise IndexError
    (missing[-1]) and the fix died without its record; it now takes the other run's directory."""
    from gpudoctor.fix import manifest as manifest_module

    dirs = GpudoctorDirs.from_env()
    real_lexists, raced = os.path.lexists, []

    def lexists_after_another_run(path):  # the first look says "missing", the other run wins right after it
        if path == dirs.state and not raced:
            raced.append(path)
            os.makedirs(path, mode=0o700)
            return False
        return real_lexists(path)

    monkeypatch.setattr(manifest_module.os.path, "lexists", lexists_after_another_run)
    with manifest_module.state_lock(dirs.state) as manifest:
        assert manifest is not None and raced
