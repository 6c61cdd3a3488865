"""Issue 14 items 5 (gpudoctor run's part) and 15: an unreadable env file is named, not blamed on
the command; `run -- yes | head -1` ends; a repeated Ctrl-C never leaves the command running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from gpudoctor.cli.main import main

RUN = [sys.executable, "-m", "gpudoctor", "run", "--no-diagnose", "--"]


@pytest.mark.parametrize("damage", ["directory", "not-utf8", "unreadable"])
def test_unreadable_env_file_is_named_not_blamed_on_the_command(home, damage, capsys):
    os.makedirs(os.path.dirname(home.env_file), mode=0o700)
    if damage == "directory":
        os.mkdir(home.env_file)
    else:
        with open(home.env_file, "wb") as handle:
            handle.write(b"# gpudoctor-env: {\"name\": \"X\", \"value\": \"\xff\xfe\"}\n")
        if damage == "unreadable":
            if os.geteuid() == 0:
                pytest.skip("root reads every file")
            os.chmod(home.env_file, 0)
    code = main(["run", "--", "echo", "hi"])
    err = capsys.readouterr().err
    assert code == 2 and "cannot read the env file" in err and "echo" not in err


def test_run_into_a_closed_pipe_ends(home):
    started = time.monotonic()
    done = subprocess.run(" ".join(RUN) + " yes | head -1", shell=True, capture_output=True, text=True, timeout=30,
                          env=dict(os.environ, PYTHONPATH=os.getcwd()))
    assert done.stdout == "y\n" and time.monotonic() - started < 20


def test_second_and_third_interrupt_stop_the_command(home, tmp_path):
    # the child ignores SIGINT (as a training loop catching KeyboardInterrupt might) and TERM
    child = "import signal,time; signal.signal(signal.SIGINT, signal.SIG_IGN); signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"
    proc = subprocess.Popen(RUN + [sys.executable, "-c", child], stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=os.getcwd()), start_new_session=True)
    assert proc.stdout.readline() == "up\n"
    for _ in range(3):
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal sends it: to the whole group
        time.sleep(0.3)
    proc.wait(timeout=10)
    time.sleep(0.2)
    leftover = subprocess.run(["pgrep", "-g", str(proc.pid)], capture_output=True, text=True).stdout.split()
    assert leftover == [], "the command outlived gpudoctor run"
