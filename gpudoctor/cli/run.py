"""`gpudoctor run -- CMD ARGS…`: run a training command with the user-local fixes applied.

Output passes through live (raw chunks, so progress bars keep working) while a bounded tail is
kept; the exit status is the command's own (128+N when killed by signal N); when the command
fails, gpudoctor diagnoses the tail with the log signatures. When gpudoctor's stdout is a terminal
the command gets a pseudo-terminal instead of a pipe, so it behaves as it would run directly
(tqdm, rich and colours check isatty). The whole output is also scanned as it streams, in constant
memory, so warning-level signatures seen in a successful run (Unsloth's `patched ... with 0 QKV
layers`, printed once at the start) are reported after it instead of passing silently."""

from __future__ import annotations

import argparse
import collections
import errno
import os
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
    parser.add_argument("--no-diagnose", action="store_true",
                        help="do not diagnose the output (the cause of a failure, the warnings of a success)")
    parser.add_argument("argv", nargs=argparse.REMAINDER, metavar="CMD", help="the command and its arguments (after --)")
    parser.set_defaults(run=run)


def child_environment(base=None) -> dict[str, str]:
    from ..fix.verify import fixed_environment

    env = fixed_environment(os.environ if base is None else base)
    env.setdefault("PYTHONUNBUFFERED", "1")  # a piped Python child would otherwise buffer: not live
    return env


def _pump(stream, sink, tail: Tail, watch=None) -> None:
    fd = stream.fileno()
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError as exc:
            if exc.errno == errno.EIO:  # a pty's master reads EIO, not b"", once the command's side closed
                break
            raise
        if not chunk:
            break
        tail.feed(chunk)
        if watch is not None:
            watch.feed(chunk)
        try:
            sink.write(chunk)
            sink.flush()
        except (BrokenPipeError, ValueError):
            # our own stdout went away (`gpudoctor run -- yes | head -1`): close the child's end
            # too, so its next write gets SIGPIPE as it would in the plain pipeline, instead of
            # both running forever (issue 14 item 15)
            stream.close()
            return


def _copy_window_size(from_fd: int, to_fd: int) -> None:
    import fcntl
    import termios

    try:
        fcntl.ioctl(to_fd, termios.TIOCSWINSZ, fcntl.ioctl(from_fd, termios.TIOCGWINSZ, b"\0" * 8))
    except OSError:  # no size to copy: the pty keeps its default
        pass


def _start(argv: list[str], env: dict[str, str], terminal: bool):
    """The command, started with a pipe for each of stdout/stderr, or (``terminal``) with a pty
    for stdout, and for stderr too when gpudoctor's stderr is also a terminal (`2>log` keeps
    its pipe). stdin is always inherited, so the command stays in gpudoctor's process group
    and a Ctrl-C at the terminal reaches it exactly as before.
    Returns (proc, [(stream, sink)], pty master fd or None)."""
    if not terminal:
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        return proc, [(proc.stdout, sys.stdout.buffer), (proc.stderr, sys.stderr.buffer)], None
    import pty

    master, slave = pty.openpty()
    try:
        _copy_window_size(sys.stdout.fileno(), slave)
        stderr_is_terminal = sys.stderr.isatty()
        proc = subprocess.Popen(argv, env=env, stdout=slave, stderr=slave if stderr_is_terminal else subprocess.PIPE)
    except BaseException:
        os.close(master)
        raise
    finally:
        os.close(slave)  # the command holds its own copy; ours would keep the master from ever seeing EIO
    streams = [(os.fdopen(master, "rb", buffering=0), sys.stdout.buffer)]
    if not stderr_is_terminal:
        streams.append((proc.stderr, sys.stderr.buffer))
    return proc, streams, master


def run_command(argv: list[str], env: dict[str, str], tail: Tail, terminal: bool = False, watches=None) -> int:
    """Run ``argv``; its output goes to our stdout/stderr and into ``tail``, and each stream
    into its own object of ``watches`` (a list to fill, one ``feed(bytes)`` object per
    stream; see ``new_watch``) when given."""
    from .child_signals import ChildSignals

    proc, streams, master = _start(argv, env, terminal)
    # SIGINT/SIGTERM/SIGHUP sent to gpudoctor alone go to the command (a scheduler stopping the
    # job: it can checkpoint), a Ctrl-C from the terminal is not sent twice, and a resized
    # terminal resizes the pty (cli/child_signals.py). Threads start inside: they inherit the block.
    on_resize = (lambda: _copy_window_size(sys.stdout.fileno(), master)) if master is not None else None
    pumps = []
    with ChildSignals(proc, on_resize) as signals:
        for stream, sink in streams:
            watch = None
            if watches is not None:
                watch = new_watch()
                if watch is not None:
                    watches.append(watch)
            pumps.append(threading.Thread(target=_pump, args=(stream, sink, tail, watch), daemon=True))
        for pump in pumps:
            pump.start()
        code = signals.wait()
    for pump in pumps:
        pump.join()
    for stream, _sink in streams:
        if not stream.closed:
            stream.close()
    tail.close()
    return 128 - code if code < 0 else code


def new_watch():
    """An incremental log diagnoser for one stream, or None where log diagnosis is not installed."""
    try:
        from ..logs import LogDiagnoser
    except ImportError:
        return None
    return LogDiagnoser("<output>")


def run(args) -> int:
    argv = list(args.argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        sys.stderr.write("gpudoctor run: no command given (gpudoctor run -- CMD ARGS...)\n")
        return 2
    tail = Tail()
    watches: list | None = None if args.no_diagnose else []
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
        code = run_command(argv, env, tail, terminal=_is_terminal(sys.stdout), watches=watches)
    except FileNotFoundError:
        sys.stderr.write(f"gpudoctor run: command not found: {argv[0]}\n")
        return 127
    except PermissionError:
        sys.stderr.write(f"gpudoctor run: permission denied: {argv[0]}\n")
        return 126
    if code != 0 and not args.no_diagnose:
        _diagnose(list(tail.lines), code)
    elif code == 0 and watches:
        _report_warnings(watches)
    return code


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # replaced or closed stdout (tests, embedding)
        return False


def _report_warnings(watches) -> None:
    """After a successful run: the warning-level signatures its output showed (the exit code
    stays the command's; a warning is not a failure), through the run reporter."""
    from ..model import Severity

    found: dict[str, object] = {}
    extra: dict = {}
    probed: list = []
    try:
        for watch in watches:
            for finding in watch.findings(machine=_remembered_machine(probed)):
                if finding.severity == Severity.WARNING:
                    found.setdefault(finding.id, finding)
    except Exception as exc:  # noqa: BLE001 - the command succeeded; our scan failing must not change that
        extra = {"scan_error": f"{type(exc).__name__}: {exc}"}
    _print_run_report(0, 0, tuple(found.values()), {**extra, **_fixable_here(probed)})


def _print_run_report(code: int, lines_read: int, findings, extra) -> None:
    from ..report.base import ReportView
    from ..report.run import RunReporter

    view = ReportView(tuple(findings), title="gpudoctor run", extra=extra)
    sys.stderr.write(RunReporter(code, lines_read).render(view))


def _this_machine():
    """The machine the command ran on, for fixes that name its paths (probed only on a match), with
    the interpreter `check` would inspect (its own, or the one with torch), as `explain` does."""
    from ..facts import Facts
    from ..host import LiveHost
    from ..remedies import machine_from_facts
    from .check import inspected_host

    return machine_from_facts(Facts(inspected_host(LiveHost(), None, None)[0]))


def _diagnose(lines: list[str], code: int) -> None:
    findings, extra, probed = (), {}, []
    try:
        from ..logs import diagnose_lines
    except ImportError:
        extra = {"scan_error": "log diagnosis is not available in this install; try `gpudoctor check`"}
    else:
        try:
            findings = diagnose_lines(lines, machine=_remembered_machine(probed))
        except Exception as exc:  # noqa: BLE001 - the command's exit code matters more than our diagnosis
            extra = {"scan_error": f"{type(exc).__name__}: {exc}"}
    _print_run_report(code, len(lines), findings, {**extra, **_fixable_here(probed)})


def _remembered_machine(probed: list):
    """``_this_machine``, probed at most once, kept in ``probed`` for ``_fixable_here``."""
    def machine():
        if not probed:
            probed.append(_this_machine())
        return probed[0]
    return machine


def _fixable_here(probed: list) -> dict:
    """The ids `gpudoctor fix` would plan on this machine (what its static checks found); a
    finding outside them shows its steps by hand, never a `gpudoctor fix` that finds nothing."""
    return {"fixable_here": sorted(probed[0].static_fixes) if probed else []}
