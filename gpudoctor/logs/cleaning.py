"""Make one raw log line readable for the signature regexes."""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

# CSI sequences (colours, cursor moves: ESC [ params intermediates final) and OSC sequences
# (terminal titles, hyperlinks: ESC ] ... BEL or ESC \). Bounded repetitions: a hostile line of
# escape characters costs linear time.
_ANSI = re.compile(r"\x1b\[[0-?]{0,64}[ -/]{0,16}[@-~]|\x1b\][^\x07\x1b]{0,2048}(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def strip_ansi(line: str) -> str:
    return _ANSI.sub("", line) if "\x1b" in line else line


# Typographic quotes pasted in place of ASCII ones: a blog, a word processor or a CJK input method
# turns "couldn't" into "couldn‘t" (qixuema/envs#4, held-out round 2). Every signature is written
# with ASCII quotes, so they are folded once, here, where each line the matcher looks at is decoded
# (not per signature, and not on the whole stream: a find pass per chunk for their UTF-8 lead bytes
# cost 19% of the throughput on a tqdm log, whose bars are E2 96 8x). The byte search before that
# sees the raw bytes, so no trigger literal may hold a quote (tests/logs/test_reader.py checks).
_TYPOGRAPHIC_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})


def fold_quotes(text: str) -> str:
    """``text`` with U+2018/U+2019 as ' and U+201C/U+201D as \" (nothing else changed)."""
    return text if text.isascii() else text.translate(_TYPOGRAPHIC_QUOTES)


def decode_line(raw: bytes) -> str:
    """A raw log line (or lines) as the signatures read it: UTF-8 with replacement, ANSI codes
    stripped, typographic quotes folded."""
    return fold_quotes(strip_ansi(raw.decode("utf-8", "replace")))


# Escapes that Python's repr() and JSON put in a quoted message. Unescaping is literal (no
# codecs: a log line is not guaranteed to be a valid literal).
_ESCAPES = (("\\r\\n", "\n"), ("\\n", "\n"), ("\\r", "\n"), ("\\t", " "), ('\\"', '"'), ("\\'", "'"),
            ("\\u001b", "\x1b"), ("\\x1b", "\x1b"), ("\\\\", "\\"))


def unescaped_pieces(line: str) -> list[str]:
    """The lines of a message quoted with escapes inside one log line: a cause inside a
    ``RuntimeError('…\\n…')`` repr or a JSON log record (``"message": "…"``)."""
    text = line
    for escaped, plain in _ESCAPES:
        if escaped in text:
            text = text.replace(escaped, plain)
    if text == line:
        return []
    return [strip_ansi(piece) for piece in text.split("\n") if piece.strip()]


JOIN_BEFORE = 2  # neighbouring lines joined to a trigger line: a wrapped message rarely spans more
JOIN_AFTER = 3
# Prefixes that build tools and log collectors put before every line of a child's output: syslog /
# journald's "Aug 12 10:38:34 host unit[pid]: ", torchrun's "[rank3]:", pip's and setuptools'
# indentation, CMake's "  ", Docker BuildKit's "#12 3.456 ", rich's box-drawing border.
_CONTINUATION_PREFIX = re.compile(
    r"^(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d [\w.-]{1,64} [\w./@-]{1,64}(?:\[\d{1,10}\])?: )?"
    r"(?:\[(?:rank|default)\d{1,6}\]:)?[ \t]{0,40}(?:#\d{1,4} \d{1,6}\.\d{1,4} )?[│┃|]?[ \t]{0,40}")


@dataclass(frozen=True)
class JoinedContext:
    """Neighbouring lines joined into one text, and where each piece of it came from."""

    text: str
    starts: tuple[int, ...]  # offset in ``text`` where each piece begins
    line_offsets: tuple[int, ...]  # each piece's line number minus the trigger line's ('\n' counts, '\r' not)
    lines: tuple[str, ...]  # each piece as the log has it (ANSI codes stripped, prefix kept)

    def line_at(self, pos: int) -> tuple[int, str]:
        """(line offset, raw line) of the piece holding character ``pos`` of ``text``."""
        index = max(bisect_right(self.starts, pos) - 1, 0)
        return self.line_offsets[index], self.lines[index]


def joined_context(block: bytes, start: int, end: int, lo: int, hi: int) -> JoinedContext | None:
    """The line block[start:end] joined with up to JOIN_BEFORE lines before and JOIN_AFTER after
    (within block[lo:hi]), each stripped of its continuation prefix, one space between: the
    text a wrapped message had before pip/setuptools/CMake/tqdm broke it. None if there are no
    neighbours. A match in it is mapped back to its own line with ``line_at``: the evidence is
    the line the matched text is on, not the trigger line that asked for the join."""
    first = start
    for _ in range(JOIN_BEFORE):
        if first <= lo:
            break
        previous = max(block.rfind(b"\n", lo, first - 1), block.rfind(b"\r", lo, first - 1)) + 1
        first = max(previous, lo)
    last = end
    for _ in range(JOIN_AFTER):
        if last >= hi:
            break
        ends = [e for e in (block.find(b"\n", last + 1, hi), block.find(b"\r", last + 1, hi)) if e != -1]
        last = min(ends) if ends else hi
    if first == start and last == end:
        return None
    # Line numbers count '\n' only (tqdm's '\r' splits lines for matching, not for numbering).
    line_offset = -block.count(b"\n", first, start)
    parts = re.split(r"([\r\n])", fold_quotes(block[first:last].decode("utf-8", "replace")))
    pieces: list[str] = []
    starts: list[int] = []
    offsets: list[int] = []
    lines: list[str] = []
    size = 0
    for index in range(0, len(parts), 2):
        if index and parts[index - 1] == "\n":
            line_offset += 1
        raw = strip_ansi(parts[index])
        piece = _CONTINUATION_PREFIX.sub("", raw).rstrip()
        if piece:
            starts.append(size)
            offsets.append(line_offset)
            lines.append(raw)
            pieces.append(piece)
            size += len(piece) + 1
    return JoinedContext(" ".join(pieces), tuple(starts), tuple(offsets), tuple(lines))
