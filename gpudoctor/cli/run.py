"""`gpudoctor run -- CMD ARGS…`: run a training command with the user-local fixes applied.

Output passes through live (raw chunks, so progress bars keep working) while a bounded tail is
kept; the exit status is the command's own (128+N when killed by signal N); when the command
fails, gpudoctor diagnoses the tail with the log signatures."""

from __future__ import annotations

import argparse
import collections
import os
import signal
import subprocess
import sys
import threading

TAIL_LINES = 400
TAIL_BYTES = 256 * 1024
MAX_LINE_BYTES = 8 * 1024  # a progress bar without newlines must not grow one line forever


class Tail:
    """The last lines of a stream: at most TAIL_LINES lines and TAIL_BYTES bytes."""

    def __init__(self, max_lines: int = TAIL_LINES, max_bytes: int = TAIL_BYTES) -> None:
        self.lines: collections.deque[str] = collections.deque()
        self.max_lines, self.max_bytes, self.size = max_lines, max_bytes, 0
        self.pending = b""
        self.lock = threading.Lock()

    def feed(self, chunk: bytes) -> None:
        with self.lock:
            data = self.pending + chunk
            *complete, self.pending = data.split(b"\n")
            if len(self.pending) > MAX_LINE_BYTES:
                complete.append(self.pending[-MAX_LINE_BYTES:])
                self.pending = b""
            for raw in complete:
                self._push(raw[-MAX_LINE_BYTES:].decode("utf-8", "replace").rstrip("\r"))

    def close(self) -> None:
        with self.lock:
            if self.pending:
                self._push(self.pending.decode("utf-8", "replace"))
                self.pending = b""

    def _push(self, line: str) -> None:
        # a carriage-return progress bar keeps only its last state
        line = line.rsplit("\r", 1)[-1]
        self.lines.append(line)
        self.size += len(line) + 1
        while self.lines and (len(self.lines) > self.max_lines or self.size > self.max_bytes):
            self.size -= len(self.lines.popleft()) + 1


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("run", help="run a command with the user-local fixes applied; diagnose it if it fails")
    parser.add_argument("--no-diagnose", action="store_true", help="do not diagnose the output when the command fails")
    parser.add_argument("argv", nargs=argparse.REMAINDER, metavar="CMD", help="the command and its arguments (after --)")
    parser.set_defaults(run=run)


def child_environment(base=None) -> dict[str, str]:
    from ..fix.verify import fixed_environment

    env = fixed_environment(os.environ if base is None else base)
    env.setdefault("PYTHONUNBUFFERED", "1")  # a piped Python child would otherwise buffer: not live
    return env


def _pump(stream, sink, tail: Tail) -> None:
    fd = stream.fileno()
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        tail.feed(chunk)
        try:
            sink.write(chunk)
            sink.flush()
        except (BrokenPipeError, ValueError):
            # our own stdout went away (`gpudoctor run -- yes | head -1`): close the child's end
            # too, so its next write gets SIGPIPE as it would in the plain pipeline, instead of
            # both running forever (issue 14 item 15)
            stream.close()
            return


def _forward_signals(proc) -> dict:
    """SIGTERM/SIGHUP sent to gpudoctor (a scheduler stopping the job) go to the command too,
    so it can checkpoint; its exit code then comes back as usual."""
    previous = {}
    for signum in (signal.SIGTERM, signal.SIGHUP):
        try:
            previous[signum] = signal.signal(signum, lambda sig, _frame: proc.send_signal(sig))
        except ValueError:  # not the main thread: leave signals alone
            break
    return previous


def run_command(argv: list[str], env: dict[str, str], tail: Tail) -> int:
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    pumps = [
        threading.Thread(target=_pump, args=(proc.stdout, sys.stdout.buffer, tail), daemon=True),
        threading.Thread(target=_pump, args=(proc.stderr, sys.stderr.buffer, tail), daemon=True),
    ]
    for pump in pumps:
        pump.start()
    previous = _forward_signals(proc)
    interrupts = 0
    try:
        while True:
            try:
                code = proc.wait()
                break
            except KeyboardInterrupt:
                # The first Ctrl-C reached the child from the terminal too: let it finish. A
                # second one asks it to stop (SIGTERM), a third stops it (SIGKILL): gpudoctor
                # never returns while the child it started runs on (issue 14 item 15).
                interrupts += 1
                if interrupts >= 2:
                    proc.send_signal(signal.SIGTERM if interrupts == 2 else signal.SIGKILL)
    finally:
        if proc.poll() is None:  # leaving on an exception: never leave the command behind
            proc.kill()
            proc.wait()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    for pump in pumps:
        pump.join()
    tail.close()
    return 128 - code if code < 0 else code


def run(args) -> int:
    argv = list(args.argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        sys.stderr.write("gpudoctor run: no command given (gpudoctor run -- CMD ARGS...)\n")
        return 2
    tail = Tail()
    try:
        env = child_environment()
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        # the env file, not the command: say which (issue 14 item 5: an unreadable env.sh was
        # reported as "permission denied: echo", exit 126)
        from ..paths import GpudoctorDirs

        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        sys.stderr.write(f"gpudoctor run: cannot read the env file {GpudoctorDirs.from_env().env_file}: {reason}; "
                         "fix or remove it (gpudoctor fix --undo), then run again\n")
        return 2
    try:
        code = run_command(argv, env, tail)
    except FileNotFoundError:
        sys.stderr.write(f"gpudoctor run: command not found: {argv[0]}\n")
        return 127
    except PermissionError:
        sys.stderr.write(f"gpudoctor run: permission denied: {argv[0]}\n")
        return 126
    if code != 0 and not args.no_diagnose:
        _diagnose(list(tail.lines), code)
    return code


def _this_machine():
    """The machine the command ran on, for fixes that name its paths (probed only on a match)."""
    from ..facts import Facts
    from ..host import LiveHost
    from ..remedies import machine_from_facts

    return machine_from_facts(Facts(LiveHost()))


def _diagnose(lines: list[str], code: int) -> None:
    err = sys.stderr
    try:
        from ..logs import diagnose_lines
        from ..report.base import ReportView
        from ..report.run import RunReporter
    except ImportError:
        err.write(f"\ngpudoctor: the command exited {code}\n"
                  "gpudoctor: log diagnosis is not available in this install; try `gpudoctor check`\n")
        return
    try:
        findings = diagnose_lines(lines, machine=_this_machine)
    except Exception as exc:  # noqa: BLE001 - the command's exit code matters more than our diagnosis
        err.write(f"\ngpudoctor: the command exited {code}\n"
                  f"gpudoctor: could not diagnose the output ({type(exc).__name__}: {exc})\n")
        return
    err.write(RunReporter(code, len(lines)).render(ReportView(tuple(findings), title="gpudoctor run")))
