"""Text from logs and the machine, made safe to show: a log line can carry terminal escape
sequences (a title change, a screen clear, a full reset), so every human reporter shows control
characters escaped (``\\x1b``) instead of sending them to the reader's terminal (issue 14 item 15).

The log reader already strips well-formed ANSI colour codes; this is the last line of defence for
what it leaves (``ESC c``, C1 controls such as ``0x9b`` = CSI, over-long sequences).

Also the one way a byte count is written (``format_bytes``), so every report says sizes alike.
"""

from __future__ import annotations

import re

# C0 controls except \t and \n, DEL, C1 controls; and the Unicode bidirectional overrides and
# isolates, which reorder how the rest of a line is displayed (CVE-2021-42574, "Trojan Source").
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escaped(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object) -> str:
    """``text`` as a string with every control character shown as an escape; \\n and \\t kept."""
    text = str(text)
    return _UNSAFE.sub(_escaped, text) if _UNSAFE.search(text) else text


def _code_span(text: str) -> str:
    """A Markdown code span that no backtick inside ``text`` can close (CommonMark: the closing
    run must be as long as the opening one; a space pads a span that starts or ends with one)."""
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def markdown_text(text: object) -> str:
    """Text for a Markdown paragraph, heading or table cell: controls escaped, and <, >, & as
    entities, so a value from a log or the machine cannot become raw HTML in a rendered report."""
    return printable(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def markdown_cell(text: object) -> str:
    """``markdown_text`` for a table cell: a | or a newline would end the cell or the row."""
    return markdown_text(text).replace("|", "\\|").replace("\n", " ")


def markdown_code(text: object, cell: bool = False) -> str:
    """A code span (literal in Markdown: no HTML, no entities), controls escaped, one line. In a
    table ``cell`` a | still ends the cell inside a code span unless escaped (GFM spec, tables)."""
    span = _code_span(printable(text).replace("\n", " "))
    return span.replace("|", "\\|") if cell else span


def code_fence(lines: list[str]) -> str:
    """A backtick fence longer than any backtick run in ``lines``, so no line can close it early."""
    longest = max((len(run) for line in lines for run in re.findall("`+", line)), default=0)
    return "`" * max(3, longest + 1)


_BINARY_UNITS = ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"))


def format_bytes(n: float | None, missing: str = "?") -> str:
    """A byte count in the largest binary unit it fills, to three significant digits with trailing
    zeros dropped: "1 GiB", "1.5 GiB", "79.2 GiB", "460 MiB", "512 KiB", "100 B"; ``missing``
    for None (not measured)."""
    if n is None:
        return missing
    for size, unit in _BINARY_UNITS:
        # the unit whose rounded value stays under 1000: 1023.9 MiB reads "1 GiB", not "1024 MiB"
        if n >= size or round(n / size * 1024) >= 1000:
            value = n / size
            break
    else:
        return f"{n:.0f} B"
    digits = 2 if value < 9.995 else 1 if value < 99.95 else 0
    text = f"{value:.{digits}f}"
    return (text.rstrip("0").rstrip(".") if digits else text) + f" {unit}"
