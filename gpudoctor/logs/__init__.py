"""Diagnose a failed run from its log: which catalogue rules the text shows, cause first.

Public API (used by ``gpudoctor explain``, ``check --log``, ``gpudoctor run`` and the training
pass): ``diagnose_lines`` for text already in memory, ``diagnose_paths`` for files (``-`` is
stdin, ``.gz`` is read transparently), and ``LogDiagnoser`` to feed a child process's output
as it arrives (constant memory, however long the run) and ask for findings at the end.

logs/ never looks at the machine itself: the caller passes a ``Machine`` (built from the same
Facts its checks use, by ``gpudoctor.remedies.machine_from_facts``), a callable that builds one
on demand, or None for a log from an unknown machine. The fixes come from ``gpudoctor.remedies``.
"""

from __future__ import annotations

import functools
from typing import Callable, Iterable, Union

from ..model import Finding
from ..remedies.machine import Machine
from .findings import build_finding
from .matcher import Matcher, Scanner
from .ranking import rank
from .reader import LogInputError, check_readable, iter_byte_chunks
from .signatures import load_signatures

__all__ = ["diagnose_lines", "diagnose_paths", "LogDiagnoser", "LogInputError", "Machine"]

_BATCH_CHARS = 1 << 20


@functools.lru_cache(maxsize=None)
def default_matcher() -> Matcher:
    return Matcher(load_signatures())


MachineSource = Union[Machine, Callable[[], Machine], None]


def _findings(scanner: Scanner, machine: MachineSource, source_order: dict[str, int]) -> list[Finding]:
    scanner.close()
    diagnoses = rank(scanner.hits.values(), source_order)
    if diagnoses and callable(machine):
        machine = machine()  # the machine is looked at only when a failure was recognised
    return [build_finding(d, machine if diagnoses else None) for d in diagnoses]


class LogDiagnoser:
    """Incremental diagnosis: ``feed`` raw bytes (or ``feed_text``) as output arrives."""

    def __init__(self, source: str = "<output>") -> None:
        self._scanner = default_matcher().scanner()
        self._scanner.start_source(source)
        self._source = source

    def feed(self, data: bytes) -> None:
        self._scanner.feed(data)

    def feed_text(self, text: str) -> None:
        self._scanner.feed(text.encode("utf-8", "replace"))

    def findings(self, machine: MachineSource = None) -> list[Finding]:
        """Findings, most likely cause first. Finishes the current partial line, so call it when
        the output has ended (a new LogDiagnoser starts the next run)."""
        return _findings(self._scanner, machine, {self._source: 0})


def diagnose_lines(lines: Iterable[str], machine: MachineSource = None, source: str = "<lines>") -> list[Finding]:
    """Findings for log lines (with or without their line endings), most likely cause first."""
    scanner = default_matcher().scanner()
    scanner.start_source(source)
    batch: list[str] = []
    size = 0
    for line in lines:
        if not line.endswith(("\n", "\r")):
            line += "\n"
        batch.append(line)
        size += len(line)
        if size >= _BATCH_CHARS:
            scanner.feed("".join(batch).encode("utf-8", "replace"))
            batch, size = [], 0
    scanner.feed("".join(batch).encode("utf-8", "replace"))
    return _findings(scanner, machine, {source: 0})


def diagnose_paths(paths: list[str], machine: MachineSource = None) -> list[Finding]:
    """Findings for log files; raises LogInputError (one-line message) for unreadable input."""
    for path in paths:
        check_readable(path)
    scanner = default_matcher().scanner()
    order: dict[str, int] = {}
    for path in paths:
        name = "<stdin>" if path == "-" else path
        order.setdefault(name, len(order))
        scanner.start_source(name)
        for chunk in iter_byte_chunks(path):
            scanner.feed(chunk)
    return _findings(scanner, machine, order)
