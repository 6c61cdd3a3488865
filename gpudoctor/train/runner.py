"""The parent side: launch the child with a timeout, follow its progress, keep its output.

No torch here. The child runs in its own process group, so a timeout kills the compilers it
spawned as well; stderr is read line by line (progress events to the display, everything else to
the log matcher and a bounded tail kept as evidence).
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from .protocol import INSTALL_HINT, parse_event

DEFAULT_TIMEOUT_S = 300.0
_TAIL_CHARS = 20000


@dataclass
class ChildOutcome:
    """How the training-pass child ended: its command, return code (negative: the signal that killed it),
    whether it timed out, wall time, its JSON result (None when it printed none), its progress events, a
    tail of its stderr, and the findings the log matcher read there."""

    command: list[str]
    returncode: int | None = None
    timed_out: bool = False
    wall_s: float = 0.0
    result: dict | None = None
    events: list[dict] = field(default_factory=list)
    stderr_tail: str = ""
    log_findings: list = field(default_factory=list)  # Findings the log matcher saw in stderr

    @property
    def signal_name(self) -> str | None:
        if self.returncode is not None and self.returncode < 0:
            try:
                return signal.Signals(-self.returncode).name
            except ValueError:
                return f"signal {-self.returncode}"
        return None

    def running_stage(self) -> dict | None:
        """The stage that started and never ended (where a crash or hang happened)."""
        open_stages: dict[str, dict] = {}
        for event in self.events:
            if event.get("event") == "stage-start":
                open_stages[event["id"]] = event
            elif event.get("event") == "stage-end":
                open_stages.pop(event.get("id"), None)
        return next(reversed(open_stages.values()), None) if open_stages else None


def missing_extra() -> str | None:
    """The first of torch/triton that is not installed, found without importing either."""
    for name in ("torch", "triton"):
        if importlib.util.find_spec(name) is None:
            return name
    return None


# The full backend matrix (every third-party backend, a cold-cache compile) costs seconds, so the
# default pass runs gpudoctor's kernels against the float64 reference beside one torch backend
# each; GPUDOCTOR_TRAIN_MATRIX=full (or full_matrix=True) asks for everything.
FULL_MATRIX_ENV = "GPUDOCTOR_TRAIN_MATRIX"


def wants_full_matrix(full_matrix: bool | None = None) -> bool:
    if full_matrix is not None:
        return full_matrix
    return os.environ.get(FULL_MATRIX_ENV, "").strip().lower() == "full"


def child_command(preset: str | None = None, compile: bool = False, peft: bool = False,
                  extra: list[str] | None = None, full_matrix: bool | None = None) -> list[str]:
    command = [sys.executable, "-m", "gpudoctor.train", "--json"]
    if preset:
        command += ["--preset", preset]
    if compile:
        command.append("--compile")
    if peft:
        command.append("--peft")
    if wants_full_matrix(full_matrix):
        command.append("--full-matrix")
    return command + list(extra or [])


class ChildProcess:
    """The running child: started at once, waited for later (the parent runs the static checks
    meanwhile). Events that arrive before a listener is attached are kept and replayed to it."""

    def __init__(self, command: list[str], timeout_s: float = DEFAULT_TIMEOUT_S, env: dict | None = None):
        from ..logs import LogDiagnoser

        self.outcome = ChildOutcome(command=command)
        self.timeout_s = timeout_s
        self._diagnoser = LogDiagnoser(source="training pass (child stderr)")
        self._tail: list[str] = []
        self._tail_size = 0
        self._stdout: list[bytes] = []
        self._listener: Callable[[dict], None] | None = None
        self._lock = threading.Lock()
        self._start = time.perf_counter()
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        self._readers = [threading.Thread(target=self._read_stderr, daemon=True),
                         threading.Thread(target=lambda: self._stdout.append(self.process.stdout.read()), daemon=True)]
        for reader in self._readers:
            reader.start()

    def _read_stderr(self) -> None:
        for raw in iter(self.process.stderr.readline, b""):
            line = raw.decode("utf-8", "replace")
            event = parse_event(line)
            if event is not None:
                with self._lock:
                    self.outcome.events.append(event)
                    listener = self._listener
                if listener:
                    listener(event)
                continue
            self._diagnoser.feed(raw)
            self._tail.append(line)
            self._tail_size += len(line)
            while self._tail_size > _TAIL_CHARS and len(self._tail) > 1:
                self._tail_size -= len(self._tail.pop(0))

    def wait(self, on_event: Callable[[dict], None] | None = None, machine=None) -> ChildOutcome:
        """The outcome once the child ended; ``machine`` (remedies.Machine) names the paths and the
        interpreter in the fixes of what the log matcher found in its output."""
        if on_event:
            with self._lock:
                for event in self.outcome.events:
                    on_event(event)
                self._listener = on_event
        remaining = max(0.1, self.timeout_s - (time.perf_counter() - self._start))
        try:
            self.process.wait(timeout=remaining)
        except subprocess.TimeoutExpired:
            self.outcome.timed_out = True
            _kill_group(self.process)
        except KeyboardInterrupt:
            _kill_group(self.process)
            raise
        for reader in self._readers:
            reader.join(timeout=5)
        outcome = self.outcome
        outcome.wall_s = time.perf_counter() - self._start
        outcome.returncode = self.process.returncode
        outcome.stderr_tail = "".join(self._tail)
        outcome.log_findings = self._diagnoser.findings(machine)
        stdout = b"".join(self._stdout).decode("utf-8", "replace").strip()
        if stdout:
            try:
                outcome.result = json.loads(stdout.splitlines()[-1])
            except ValueError:
                outcome.result = None
        return outcome


def launch(command: list[str], timeout_s: float = DEFAULT_TIMEOUT_S, env: dict | None = None,
           on_event: Callable[[dict], None] | None = None) -> ChildOutcome:
    return ChildProcess(command, timeout_s, env).wait(on_event)


def _kill_group(process: subprocess.Popen) -> None:
    # The child leads its own process group (start_new_session): this ends it and the compilers
    # or workers it started, and nothing else.
    from ..host.live import kill_process_group

    kill_process_group(process)


class PendingPass:
    """A training pass under way; ``finish()`` waits for it and returns diagnosis.TrainPass."""

    def __init__(self, child: ChildProcess | None, done=None):
        self.child, self.done = child, done

    def cancel(self) -> None:
        """End the child and everything it started (Ctrl-C in the parent before finish())."""
        if self.child is not None:
            _kill_group(self.child.process)

    def finish(self, show_progress: bool = False, console=None, machine=None):
        from .diagnosis import diagnose_outcome

        if self.done is not None:
            return self.done
        if machine is not None:  # the pass ran in its own interpreter, which need not be the one check inspected
            machine = machine.for_interpreter(self.child.process.args[0])
        if show_progress:
            from .display import LiveProgress

            with LiveProgress(console) as progress:
                outcome = self.child.wait(on_event=progress.update, machine=machine)
        else:
            outcome = self.child.wait(machine=machine)
        return diagnose_outcome(outcome, self.child.timeout_s, machine)


def start_training_pass(preset: str | None = None, compile: bool = False, peft: bool = False,
                        timeout_s: float = DEFAULT_TIMEOUT_S, command: list[str] | None = None,
                        env: dict | None = None, full_matrix: bool | None = None) -> PendingPass:
    """Launch the child now (it spends seconds importing torch: the caller works meanwhile)."""
    from .diagnosis import skipped_pass

    missing = missing_extra() if command is None else None
    if missing:
        return PendingPass(None, skipped_pass(f"{missing} is not installed, so the training pass cannot run: "
                                              f"{INSTALL_HINT}", hint=INSTALL_HINT))
    return PendingPass(ChildProcess(command or child_command(preset, compile, peft, full_matrix=full_matrix),
                                    timeout_s, env))


def run_training_pass(preset: str | None = None, compile: bool = False, peft: bool = False,
                      timeout_s: float = DEFAULT_TIMEOUT_S, show_progress: bool = False, console=None,
                      command: list[str] | None = None, env: dict | None = None, full_matrix: bool | None = None):
    """Run the pass and diagnose it: returns diagnosis.TrainPass (findings, checks, JSON)."""
    return start_training_pass(preset, compile, peft, timeout_s, command, env,
                               full_matrix).finish(show_progress, console)
