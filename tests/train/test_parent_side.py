"""The parent never dies with its child: crashes, hangs and a missing torch become findings or a
hint. These run real child processes (tiny Python programs, or the real child with torch hidden)."""

import os
import sys
import textwrap
import time

from gpudoctor.train import runner
from gpudoctor.train.protocol import INSTALL_HINT

_ANNOUNCE = ("from gpudoctor.train.protocol import emit; "
             "emit('stage-start', id='training', title='QLoRA training'); ")


def test_child_killed_by_a_signal_is_a_finding():
    # A genuine segfault: reading address 0 through ctypes.
    command = [sys.executable, "-c", _ANNOUNCE + "import ctypes; ctypes.string_at(0)"]
    train = runner.run_training_pass(command=command, timeout_s=60)
    finding = next(f for f in train.findings if f.id == "triton-jit-failed")
    assert "SIGSEGV" in finding.message and "QLoRA training" in finding.message
    assert finding.evidence["signal"] == "SIGSEGV" and finding.fixes
    assert train.data["child"]["returncode"] < 0


def test_child_that_hangs_is_killed_and_diagnosed():
    command = [sys.executable, "-c", _ANNOUNCE + "import time; time.sleep(600)"]
    start = time.perf_counter()
    train = runner.run_training_pass(command=command, timeout_s=2)
    assert time.perf_counter() - start < 30
    finding = next(f for f in train.findings if f.id == "triton-jit-failed")
    assert "hung" in finding.message and finding.evidence["timeout_s"] == 2
    from gpudoctor.fix.actions import fix_commands

    assert any("--train-timeout" in c for fix in finding.fixes for c in fix_commands(fix))
    assert train.data["child"]["timed_out"]


def test_compiler_output_on_stderr_names_the_cause():
    # What Triton's launcher build prints on a machine without the unversioned libcuda.so, then dies.
    script = textwrap.dedent("""
        import sys
        from gpudoctor.train.protocol import emit
        emit('stage-start', id='triton-jit', title='Triton JIT')
        sys.stderr.write('/usr/bin/ld: cannot find -lcuda: No such file or directory\\n')
        sys.stderr.write('collect2: error: ld returned 1 exit status\\n')
        sys.exit(1)
    """)
    train = runner.run_training_pass(command=[sys.executable, "-c", script], timeout_s=60)
    ids = [f.id for f in train.findings]
    assert "libcuda-unversioned-missing" in ids and "triton-jit-failed" in ids


def test_missing_torch_gives_the_install_hint(tmp_path):
    # The real child, with torch hidden behind a package that fails to import as a missing one would.
    shim = tmp_path / "torch"
    shim.mkdir()
    (shim / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    train = runner.run_training_pass(command=runner.child_command("tiny"), env=env, timeout_s=60)
    assert train.data["status"] == "skipped" and train.data["hint"] == INSTALL_HINT
    assert INSTALL_HINT in train.data["reason"] and train.findings == []


def test_parent_checks_for_torch_before_launching(monkeypatch):
    monkeypatch.setattr(runner, "missing_extra", lambda: "torch")
    monkeypatch.setattr(runner, "ChildProcess", lambda *a, **k: (_ for _ in ()).throw(AssertionError("launched")))
    train = runner.run_training_pass()
    assert train.data["status"] == "skipped" and INSTALL_HINT in train.data["reason"]
    assert {c.status.value for c in train.checks} == {"skip"}


def test_third_party_probe_that_crashes_is_a_matrix_entry():
    from gpudoctor.train.side_probes import SideProbe

    crash = [sys.executable, "-c", "import ctypes; ctypes.string_at(0)"]
    row = SideProbe("nf4-dequant", "bitsandbytes", "tiny", command=crash).row(timeout_s=60)
    assert row.status == "fails" and row.stage == "process" and "SIGSEGV" in row.reason


def test_side_probe_imports_its_backend_on_a_thread():
    from gpudoctor.train.child import _import_in_background

    thread, box = _import_in_background("json")
    thread.join(timeout=30)
    assert not thread.is_alive() and box["ms"] >= 0
    thread, box = _import_in_background("no_such_module_gpudoctor")  # left to the main thread to raise
    thread.join(timeout=30)
    assert not thread.is_alive() and "ms" in box
