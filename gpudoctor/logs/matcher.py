"""Find signature matches in a stream of log text, fast and in bounded memory.

Speed comes from never looking at most lines in Python: raw bytes arrive in large chunks
(never decoded as a whole: decoding UTF-8 progress bars alone runs at ~90 MB/s) and a few
literal *triggers* are searched with ``bytes.find`` (C speed, GB/s). Only a line holding a
trigger is cut out, cleaned, checked for the keywords of the signatures behind that trigger,
and only then are those signatures' regexes run on it. Every signature keyword contains (or
is) a trigger, so nothing a regex could match is skipped.

Memory stays bounded whatever the input: a line longer than ``MAX_PENDING`` characters (a
100 MB progress bar without a newline) is scanned in pieces, and each regex sees at most
``WINDOW`` characters on either side of its trigger.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from . import cuda_errors
from .cleaning import JoinedContext, decode_line, joined_context, unescaped_pieces
from .gated_find import gate_of, line_starts
from .signatures import Signature

# Short literals that most keywords contain: one str.find pass each per chunk. Chosen so that
# they are rare in healthy training logs (loss lines, progress bars, NCCL INFO lines).
# A keyword containing none of them becomes a trigger of its own.
# Order matters: a keyword uses the first trigger it contains, so rarer ones come first.
# "hared" and "ibrary" (not "shared", "library") so that a keyword can stay a literal of a
# message users retype with a capital ("Shared memory", "Driver/Library"): same rarest byte, same cost.
CURATED_TRIGGERS = (
    "rror",
    "riton",
    "libcuda.so",
    "FlashAttention",
    "CUDA",
    "hared",
    "driver",
    "ibrary",
    "compile",
    "support",
)

WINDOW = 4096  # characters a regex may see on each side of the trigger
MAX_PENDING = 1 << 20  # longest partial line kept between chunks before it is scanned anyway
OVERLAP = 2 * WINDOW  # tail of a scanned long-line piece kept so a match spanning pieces is found
EXCERPT = 300  # characters of the matched line kept as evidence


def _line_breaks(block: bytes, pos: int, lo: int, hi: int) -> tuple[int, int]:
    """Start and end of the line around ``pos``; '\\n' and '\\r' both end a line (progress bars)."""
    start = max(block.rfind(b"\n", lo, pos), block.rfind(b"\r", lo, pos)) + 1
    start = max(start, lo)
    ends = [e for e in (block.find(b"\n", pos, hi), block.find(b"\r", pos, hi)) if e != -1]
    return start, (min(ends) if ends else hi)


@dataclass
class SignatureHit:
    """What one signature matched: how often, where first, and the values it captured."""

    signature: Signature
    count: int = 0
    source: str = ""
    line_number: int = 0
    line: str = ""
    values: dict[str, str] = field(default_factory=dict)


class Matcher:
    """Compiled once for a signature set; ``scan`` creates a fresh scanner per diagnosis."""

    def __init__(self, signatures: Iterable[Signature], decode_cuda_errors: bool = True) -> None:
        self.signatures = tuple(signatures)
        by_trigger: dict[bytes, list[Signature]] = {}
        for sig in self.signatures:
            by_trigger.setdefault(self.trigger_for(sig.keyword).encode("utf-8"), []).append(sig)
        # CUDA error numbers and enum names are decoded on the lines holding these literals.
        self.decode_triggers = frozenset(t.encode("utf-8") for t in cuda_errors.TRIGGERS) if decode_cuda_errors else frozenset()
        for trigger in self.decode_triggers:
            by_trigger.setdefault(trigger, [])
        # Highest weight first so that, on a line two signatures claim, evidence is stable.
        self.by_trigger = {t: sorted(s, key=lambda x: -x.weight) for t, s in by_trigger.items()}
        self.gates = {t: gate_of(t) for t in self.by_trigger}  # each literal's rarest byte (gated_find.py)

    @staticmethod
    def trigger_for(keyword: str) -> str:
        return next((t for t in CURATED_TRIGGERS if t in keyword), keyword)

    def scanner(self) -> "Scanner":
        return Scanner(self)


class Scanner:
    """Feed UTF-8 (or any ASCII-compatible) bytes in chunks of any size; ``hits`` collects what
    matched, keyed by signature id."""

    def __init__(self, matcher: Matcher) -> None:
        self._matcher = matcher
        self._pending = b""
        self._pending_scanned = 0  # chars at the start of _pending already searched for triggers
        self._line_number = 1  # number of the line where _pending starts
        self.source = ""
        self.hits: dict[str, SignatureHit] = {}

    def start_source(self, name: str) -> None:
        """Begin a new input (file); a partial line of the previous one is finished first."""
        self.close()
        self.source = name
        self._line_number = 1

    def feed(self, data: bytes) -> None:
        if not data:
            return
        buf = self._pending + data if self._pending else data
        last_newline = buf.rfind(b"\n")
        if last_newline == -1:
            self._pending = buf
            if len(buf) > MAX_PENDING:
                self._scan_long_line_piece()
            return
        complete = buf[: last_newline + 1]
        self._scan(complete, self._pending_scanned)
        self._line_number += complete.count(b"\n")
        self._pending = buf[last_newline + 1 :]
        self._pending_scanned = 0
        if len(self._pending) > MAX_PENDING:
            self._scan_long_line_piece()

    def close(self) -> None:
        if self._pending:
            self._scan(self._pending, self._pending_scanned)
            self._pending = b""
            self._pending_scanned = 0

    def _scan_long_line_piece(self) -> None:
        """Scan a huge partial line now and keep only its tail, so memory stays bounded."""
        self._scan(self._pending, self._pending_scanned)
        self._pending = self._pending[-OVERLAP:]
        self._pending_scanned = len(self._pending)

    def _scan(self, block: bytes, search_from: int) -> None:
        positions: list[tuple[int, bytes]] = []
        size = len(block)
        gates = self._matcher.gates
        for trigger in self._matcher.by_trigger:
            # Occurrences wholly before search_from were found when that text was scanned; one
            # visit per line and trigger (line_starts resumes after each hit's line).
            start = max(0, search_from - len(trigger) + 1)
            positions.extend((pos, trigger) for pos in line_starts(block, trigger, gates[trigger], start))
        if not positions:
            return
        positions.sort()
        counted_to, line_number = 0, self._line_number
        decoded: set[int] = set()  # line starts already decoded (a line holds several triggers)
        # (signatures missed, line number, line start, end, window lo, hi); the line is decoded
        # again if needed rather than kept, so a block of many trigger lines costs little memory.
        second_chances: list[tuple[list[Signature], int, int, int, int, int]] = []
        for pos, trigger in positions:
            line_number += block.count(b"\n", counted_to, pos)
            counted_to = pos
            lo, hi = max(0, pos - WINDOW), min(size, pos + WINDOW)
            start, end = _line_breaks(block, pos, lo, hi)
            line = decode_line(block[start:end])
            signatures = self._matcher.by_trigger[trigger]
            missed = [sig for sig in signatures if not self._match(sig, line, line, line_number)]
            if trigger in self._matcher.decode_triggers and start not in decoded:
                decoded.add(start)
                for entry in cuda_errors.decode(line):
                    self._record(entry.signature, {"cuda_error_code": str(entry.code)}, line, line_number)
            if missed:
                second_chances.append((missed, line_number, start, end, lo, hi))
        # Second chances, only for signatures that no line of this block showed by itself (a
        # direct match anywhere in the block wins: it is the line the message is on, and an
        # occurrence is not counted twice): the same text unescaped (a cause quoted in a
        # RuntimeError('…') repr or a JSON log line, its newlines written as \n) and the line
        # joined with its neighbours (a message wrapped or indented by pip, setuptools, CMake or tqdm).
        for missed, line_number, start, end, lo, hi in second_chances:
            missed = [sig for sig in missed if sig.id not in self.hits]
            if not missed:
                continue
            line = decode_line(block[start:end])
            if "\\" in line:
                for piece in unescaped_pieces(line):
                    missed = [sig for sig in missed if not self._match(sig, piece, line, line_number)]
            if missed:
                joined = joined_context(block, start, end, lo, hi)
                if joined is not None:
                    for sig in missed:
                        self._match_joined(sig, joined, line_number)

    def _match(self, sig: Signature, text: str, line: str, line_number: int) -> bool:
        if sig.keyword not in text:
            return False
        match = sig.regex.search(text)
        if match is None:
            return False
        self._record(sig, match.groupdict(), line, line_number)
        return True

    def _match_joined(self, sig: Signature, joined: JoinedContext, line_number: int) -> None:
        if sig.keyword not in joined.text:
            return
        match = sig.regex.search(joined.text)
        if match is not None:
            # Evidence: the line the matched text starts on (ex-bug: the trigger line that asked
            # for the join, one line early when the match was on the next line).
            line_offset, line = joined.line_at(match.start())
            self._record(sig, match.groupdict(), line, line_number + line_offset)

    def _record(self, sig: Signature, groups: dict[str, str | None], line: str, line_number: int) -> None:
        values = {k: v for k, v in groups.items() if v is not None}
        if sig.only_if_zero and not any(values.get(name) == "0" for name in sig.only_if_zero):
            return
        hit = self.hits.get(sig.id)
        if hit is None:
            hit = self.hits[sig.id] = SignatureHit(sig, source=self.source, line_number=line_number)
            hit.line = line.strip()[:EXCERPT]
        hit.count += 1
        for key, value in values.items():
            if key.startswith(TRACK_MIN):
                _track_extremes(hit.values, key[len(TRACK_MIN):], values)
            else:
                hit.values.setdefault(key, value)


# A capture named ``track_min_<name>`` (digits) is followed over every matching line, not just the
# first: the hit keeps ``<name>`` (first), ``<name>_min``, ``<name>_max`` and, from the line with
# the smallest value, the line's other captures as ``<other>_at_<name>_min``. NCCL watchdog lines
# use it to name the rank that is furthest behind (lowest collective SeqNum).
TRACK_MIN = "track_min_"


def _track_extremes(kept: dict[str, str], name: str, values: dict[str, str]) -> None:
    raw = values[TRACK_MIN + name]
    if not raw.isdigit():
        return
    number = int(raw)
    kept.setdefault(name, raw)
    if f"{name}_max" not in kept or number > int(kept[f"{name}_max"]):
        kept[f"{name}_max"] = raw
    if f"{name}_min" not in kept or number < int(kept[f"{name}_min"]):
        kept[f"{name}_min"] = raw
        for other, value in values.items():
            if other != TRACK_MIN + name:
                kept[f"{other}_at_{name}_min"] = value
