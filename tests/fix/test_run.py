"""`gpudoctor run -- CMD`: env applied, output live, own exit code, diagnosis on failure."""

from __future__ import annotations

import os
import sys

from gpudoctor.cli.main import main
from gpudoctor.cli.run import Tail
from gpudoctor.fix import envfile


def test_exit_code_output_and_env_file(home, capfd):
    os.makedirs(home.config)
    envfile.write_entries(home.env_file, [envfile.EnvEntry("GPUDOCTOR_TEST_VAR", "from env file")])
    code = main(["run", "--", sys.executable, "-c",
                 "import os, sys; print(os.environ['GPUDOCTOR_TEST_VAR']); print('oops', file=sys.stderr); sys.exit(7)"])
    assert code == 7
    out, err = capfd.readouterr()
    assert "from env file" in out and "oops" in err
    assert "exited 7" in err


def test_diagnoses_a_known_failure(home, capfd):
    code = main(["run", "--", "sh", "-c", "echo '/usr/bin/ld: cannot find -lcuda: No such file or directory' >&2; exit 1"])
    assert code == 1
    assert "libcuda-unversioned-missing" in capfd.readouterr().err


def test_success_is_quiet_and_killed_by_signal_is_128_plus_n(home, capfd):
    assert main(["run", "--", "true"]) == 0
    assert "gpudoctor" not in capfd.readouterr().err
    assert main(["run", "--no-diagnose", "--", "sh", "-c", "kill -TERM $$"]) == 128 + 15


def test_command_not_found_is_127(home, capfd):
    assert main(["run", "--", "/nonexistent/gpudoctor-test-cmd"]) == 127


def test_tail_is_bounded_in_lines_and_bytes():
    tail = Tail(max_lines=5, max_bytes=100)
    tail.feed(b"".join(b"line %d\n" % i for i in range(50)))
    assert list(tail.lines) == [f"line {i}" for i in range(45, 50)]
    tail.feed(b"x" * 10_000 + b"\rprogress 100%\n")
    assert tail.size <= 100 and list(tail.lines)[-1] == "progress 100%"
    tail.feed(b"y" * 100_000)  # no newline at all: still bounded
    tail.close()
    assert tail.size <= 100


def test_sigterm_to_gpudoctor_reaches_the_command(home, tmp_path):
    import signal
    import subprocess
    import time

    marker = tmp_path / "got-term"
    child = ("import signal, sys, time, pathlib\n"
             f"signal.signal(signal.SIGTERM, lambda *a: (pathlib.Path({str(marker)!r}).write_text('x'), sys.exit(5)))\n"
             "print('ready', flush=True)\ntime.sleep(30)\n")
    proc = subprocess.Popen([sys.executable, "-m", "gpudoctor", "run", "--no-diagnose", "--", sys.executable, "-c", child],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 5 and marker.exists()


UNSLOTH_BANNER = "Unsloth 2024.8 patched 32 layers with 0 QKV layers, 0 O layers and 0 MLP layers."


def _run_in_a_pty(argv: list[str], timeout: float = 30) -> tuple[int, str]:
    """gpudoctor run as a user at a terminal starts it: stdin, stdout and stderr a pty."""
    import pty
    import time

    pid, master = pty.fork()
    if pid == 0:  # the child: becomes gpudoctor
        try:
            os.environ["PYTHONPATH"] = os.getcwd()
            os.execv(sys.executable, [sys.executable, "-m", "gpudoctor", "run", *argv])
        finally:
            os._exit(99)
    chunks, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every holder of the pty's slave side has gone
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), b"".join(chunks).decode("utf-8", "replace")


ISATTY = "import sys; print('tty', sys.stdout.isatty(), sys.stderr.isatty(), flush=True); sys.exit(3)"


def test_a_terminal_passes_through_as_a_pty(home):
    code, out = _run_in_a_pty(["--no-diagnose", "--", sys.executable, "-c", ISATTY])
    assert code == 3
    assert "tty True True" in out


def test_a_pipe_stays_a_pipe(home, capfd):
    assert main(["run", "--no-diagnose", "--", sys.executable, "-c", ISATTY]) == 3
    assert "tty False False" in capfd.readouterr().out


def test_a_successful_run_reports_its_warnings(home, capfd):
    code = main(["run", "--", sys.executable, "-c", f"print({UNSLOTH_BANNER!r}); print('training done')"])
    assert code == 0
    out, err = capfd.readouterr()
    assert UNSLOTH_BANNER in out and "training done" in out
    assert "succeeded" in err and "unsloth-layers-not-patched" in err and "lora_dropout" in err


def test_warning_seen_long_before_the_end_is_still_reported(home, capfd):
    # the banner is printed once at the start; the tail kept for failures would have dropped it
    child = f"print({UNSLOTH_BANNER!r})\nfor i in range(5000): print('step', i)"
    assert main(["run", "--", sys.executable, "-c", child]) == 0
    assert "unsloth-layers-not-patched" in capfd.readouterr().err


def test_a_clean_success_and_no_diagnose_stay_quiet(home, capfd):
    assert main(["run", "--", sys.executable, "-c", "print('fine')"]) == 0
    assert "gpudoctor" not in capfd.readouterr().err
    assert main(["run", "--no-diagnose", "--", sys.executable, "-c", f"print({UNSLOTH_BANNER!r})"]) == 0
    assert "unsloth" not in capfd.readouterr().err


def test_warnings_through_the_pty_too(home):
    code, out = _run_in_a_pty(["--", sys.executable, "-c", f"print({UNSLOTH_BANNER!r})"])
    assert code == 0 and UNSLOTH_BANNER in out and "unsloth-layers-not-patched" in out


def test_ctrl_c_at_the_terminal_still_reaches_the_command(home):
    import pty
    import time

    pid, master = pty.fork()
    if pid == 0:
        try:
            os.environ["PYTHONPATH"] = os.getcwd()
            os.execv(sys.executable, [sys.executable, "-m", "gpudoctor", "run", "--no-diagnose", "--", sys.executable,
                                      "-c", "import time; print('up', flush=True); time.sleep(30)"])
        finally:
            os._exit(99)
    seen, deadline = b"", time.monotonic() + 20
    while b"up" not in seen and time.monotonic() < deadline:
        seen += os.read(master, 1024)
    os.write(master, b"\x03")  # Ctrl-C typed at the terminal: SIGINT to the foreground group
    try:
        while os.read(master, 1024):
            pass
    except OSError:
        pass
    os.close(master)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 130  # the command's own death by SIGINT, 128+2
