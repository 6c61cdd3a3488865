"""The last exception a log shows, and where it was raised: what ``gpudoctor explain`` prints
when no catalogue rule matched, so an unknown failure is still named honestly.

Streaming and bounded: one pass over the lines, keeping only the traceback being read (its
last frame) and the last exception seen. Understands Python tracebacks (also with a per-line
prefix such as torchrun's ``[rank0]: `` or a logger's timestamp), chained tracebacks (the last
one wins), bare ``SomeError: message`` lines, and C++ ``terminate called after throwing``
with its ``what():`` line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Iterator

from .cleaning import strip_ansi
from .reader import iter_byte_chunks

MAX_LINE = 4096  # characters of a line looked at; the rest of a huge line cannot be a header
MAX_MESSAGE = 500

_TRACEBACK = "Traceback (most recent call last):"
_FRAME = re.compile(r'^\s{0,16}File "(?P<file>[^"]{1,1000})", line (?P<line>\d{1,9})(?:, in (?P<function>\S{1,200}))?')
# "ValueError: x", "torch.OutOfMemoryError: x", "KeyboardInterrupt", "subprocess.CalledProcessError: x"
_EXCEPTION = re.compile(
    r"^(?P<type>(?:[A-Za-z_]\w{0,60}\.){0,8}[A-Z]\w{0,80}(?:Error|Exception|Interrupt|Exit|Failure|Fault|Warning)?)"
    r"(?::[ \t]{0,4}(?P<message>.{0,%d})|$)" % MAX_MESSAGE
)
_BARE_ERROR = re.compile(
    r"^(?P<type>(?:[A-Za-z_]\w{0,60}\.){0,8}[A-Z]\w{0,80}(?:Error|Exception))(?::[ \t]{1,4}(?P<message>.{1,%d}))"
    % MAX_MESSAGE
)
_CPP_THROW = re.compile(r"terminate called after throwing an instance of '(?P<type>[^']{1,200})'")
_CPP_WHAT = re.compile(r"^\s{0,8}what\(\):\s{0,4}(?P<message>.{1,%d})" % MAX_MESSAGE)


@dataclass(frozen=True)
class LastException:
    """The last exception a log shows: its type and message, the log line it is on and, when a traceback
    precedes it, the innermost frame (file, line, function)."""

    type: str
    message: str
    line_number: int  # 1-based line of the exception line in the log
    file: str | None = None  # innermost frame of its traceback, when the log shows one
    line: int | None = None
    function: str | None = None

    @property
    def where(self) -> str | None:
        if self.file is None:
            return None
        return f"{self.file}:{self.line}" + (f" in {self.function}" if self.function else "")

    def describe(self) -> str:
        head = f"{self.type}: {self.message}" if self.message else self.type
        return head + (f" (raised at {self.where})" if self.where else "")


def last_exception(lines: Iterable[str]) -> LastException | None:
    """The last exception the log shows, or None. ``lines`` may keep their line endings."""
    last: LastException | None = None
    prefix: str | None = None  # set while inside a traceback: the text before "Traceback"
    frame: re.Match[str] | None = None
    cpp_type: str | None = None
    needs_message = False  # "RuntimeError:" alone: its message is on the next line
    for number, raw in enumerate(lines, 1):
        text = strip_ansi(raw[:MAX_LINE].rstrip("\r\n"))
        if needs_message and last is not None and text.strip():
            needs_message = False
            last = LastException(last.type, text.strip()[:MAX_MESSAGE], last.line_number, last.file, last.line,
                                 last.function)
            continue
        at = text.find(_TRACEBACK)
        if at != -1:
            prefix, frame = text[:at], None
            continue
        if prefix is not None:
            body = text[len(prefix):] if prefix and text.startswith(prefix) else text
            found = _FRAME.match(body)
            if found is not None:
                frame = found
                continue
            if not body.strip() or body[:1].isspace() or body.startswith(("^", "~")):
                continue  # source lines, carets, blank lines inside the traceback
            exc = _EXCEPTION.match(body)
            if exc is not None:
                last = _make(exc, number, frame)
                needs_message = body.rstrip().endswith(":")
            prefix, frame = None, None
            continue
        if cpp_type is not None:
            what = _CPP_WHAT.match(text)
            if what is not None:
                last = LastException(cpp_type, what.group("message").strip(), number)
                cpp_type = None
                continue
        throw = _CPP_THROW.search(text)
        if throw is not None:
            cpp_type = throw.group("type")
            last = LastException(cpp_type, "", number)
            continue
        bare = _BARE_ERROR.match(text.strip())
        if bare is not None:
            last = _make(bare, number, None)
    return last


def _make(match: re.Match[str], number: int, frame: re.Match[str] | None) -> LastException:
    message = (match.group("message") or "").strip()
    if frame is None:
        return LastException(match.group("type"), message, number)
    return LastException(match.group("type"), message, number, frame.group("file"), int(frame.group("line")),
                         frame.group("function"))


def _lines_of(path: str) -> Iterator[str]:
    """The lines of one log (gzip, stdin and UTF-16 handled by the reader), each cut to MAX_LINE
    characters while reading, so a 100 MB line costs no more memory than a short one."""
    partial: list[str] = []
    kept = 0
    for chunk in iter_byte_chunks(path):
        text = chunk.decode("utf-8", "replace")
        pieces = text.split("\n")
        for piece in pieces[:-1]:
            if kept < MAX_LINE:
                partial.append(piece[: MAX_LINE - kept])
            yield "".join(partial)
            partial, kept = [], 0
        tail = pieces[-1]
        if kept < MAX_LINE and tail:
            partial.append(tail[: MAX_LINE - kept])
            kept += len(partial[-1])
    if partial:
        yield "".join(partial)


def last_exception_in_paths(paths: Iterable[str]) -> LastException | None:
    """The last exception across log files, read as ``diagnose_paths`` reads them; raises
    LogInputError (one line) for unreadable input."""
    last: LastException | None = None
    for path in paths:
        found = last_exception(_lines_of(path))
        if found is not None:
            last = found
    return last
