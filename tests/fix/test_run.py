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
