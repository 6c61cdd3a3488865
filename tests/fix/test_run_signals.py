"""Issue 14 item f: a SIGINT sent to the `gpudoctor run` process alone (``kill -INT PID``, not to
its process group, so the command does not get it from the kernel) is forwarded to the command,
once, and gpudoctor exits with the command's status. A Ctrl-C at the terminal, which the
terminal already sends to the command (same process group), is not forwarded a second time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

RUN = [sys.executable, "-m", "gpudoctor", "run", "--no-diagnose", "--"]


def _trapping_child(marker, exit_code: int) -> str:
    """Appends a line to ``marker`` per SIGINT, waits 0.5 s for a duplicate, exits ``exit_code``."""
    return ("import signal, sys, time\n"
            "got = []\n"
            "def on_int(*_):\n"
            f"    open({str(marker)!r}, 'a').write('INT\\n')\n"
            "    got.append(time.monotonic())\n"
            "signal.signal(signal.SIGINT, on_int)\n"
            "print('ready', flush=True)\n"
            "deadline = time.monotonic() + 30\n"
            "while time.monotonic() < deadline and (not got or time.monotonic() - got[0] < 0.5):\n"
            "    time.sleep(0.02)\n"
            f"sys.exit({exit_code} if got else 99)\n")


def _env():
    return dict(os.environ, PYTHONPATH=os.getcwd())


def test_sigint_to_gpudoctor_alone_is_forwarded_once_and_its_status_returned(home, tmp_path):
    marker = tmp_path / "ints"
    proc = subprocess.Popen(RUN + [sys.executable, "-c", _trapping_child(marker, 7)], stdout=subprocess.PIPE,
                            text=True, env=_env(), start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        os.kill(proc.pid, signal.SIGINT)  # gpudoctor alone, as `kill -INT PID` does
        assert proc.wait(timeout=20) == 7
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert marker.read_text() == "INT\n"


def test_a_command_killed_by_the_forwarded_sigint_gives_130(home):
    proc = subprocess.Popen(RUN + [sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(30)"],
                            stdout=subprocess.PIPE, text=True, env=_env(), start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        started = time.monotonic()
        os.kill(proc.pid, signal.SIGINT)
        # the command's default handling: an uncaught KeyboardInterrupt ends Python by SIGINT itself
        # (bpo-1054041), which gpudoctor reports as 128 + 2
        assert proc.wait(timeout=20) == 130 and time.monotonic() - started < 15
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def test_ctrl_c_at_the_terminal_reaches_the_command_once(home, tmp_path):
    """The terminal sends SIGINT to the whole foreground group: the command has it already."""
    import pty

    marker = tmp_path / "ints"
    pid, master = pty.fork()
    if pid == 0:
        try:
            os.environ["PYTHONPATH"] = os.getcwd()
            os.execv(sys.executable, [*RUN, sys.executable, "-c", _trapping_child(marker, 4)])
        finally:
            os._exit(99)
    seen, deadline = b"", time.monotonic() + 20
    while b"ready" not in seen and time.monotonic() < deadline:
        seen += os.read(master, 1024)
    os.write(master, b"\x03")  # Ctrl-C typed at the terminal
    try:
        while os.read(master, 1024):
            pass
    except OSError:
        pass
    os.close(master)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 4
    assert marker.read_text() == "INT\n"  # once: not forwarded on top of the terminal's own


def test_sigterm_to_gpudoctor_alone_is_forwarded_once(home, tmp_path):
    marker = tmp_path / "terms"
    child = _trapping_child(marker, 6).replace("signal.SIGINT", "signal.SIGTERM").replace("'INT", "'TERM")
    proc = subprocess.Popen(RUN + [sys.executable, "-c", child], stdout=subprocess.PIPE, text=True, env=_env(),
                            start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=20) == 6
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert marker.read_text() == "TERM\n"
