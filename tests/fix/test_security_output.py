"""Issue 14 item 2: a command that prints without end is stopped at the output bound."""

from __future__ import annotations

import os
import time

from gpudoctor.host.live import MAX_OUTPUT_BYTES, LiveHost


def _tool(tmp_path, body: str) -> str:
    path = tmp_path / "gcc"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


def test_endless_stdout_is_cut_at_the_bound_and_killed(tmp_path):
    gcc = _tool(tmp_path, "exec yes 'gcc (GCC) 12.2.0'")
    started = time.monotonic()
    result = LiveHost(dict(os.environ)).run((gcc, "--version"), timeout=30)
    assert time.monotonic() - started < 10  # before the bound: the 30 s timeout, or gigabytes
    assert not result.ok and "stopped" in (result.error or "")
    assert len(result.stdout) <= MAX_OUTPUT_BYTES


def test_endless_stderr_is_cut_too(tmp_path):
    gcc = _tool(tmp_path, "exec yes error >&2")
    result = LiveHost(dict(os.environ)).run((gcc, "--version"), timeout=30)
    assert not result.ok and len(result.stderr) <= MAX_OUTPUT_BYTES


def test_ordinary_output_and_exit_code_are_kept(tmp_path):
    gcc = _tool(tmp_path, "echo out; echo err >&2; exit 3")
    result = LiveHost(dict(os.environ)).run((gcc,))
    assert (result.returncode, result.stdout, result.stderr, result.error) == (3, "out\n", "err\n", None)


def test_a_silent_hang_still_times_out(tmp_path):
    gcc = _tool(tmp_path, "sleep 30")
    started = time.monotonic()
    result = LiveHost(dict(os.environ)).run((gcc,), timeout=0.5)
    assert result.timed_out and time.monotonic() - started < 5
