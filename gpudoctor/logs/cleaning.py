"""Make one raw log line readable for the signature regexes."""

from __future__ import annotations

import re

# CSI sequences (colours, cursor moves: ESC [ params intermediates final) and OSC sequences
# (terminal titles, hyperlinks: ESC ] ... BEL or ESC \). Bounded repetitions: a hostile line of
# escape characters costs linear time.
_ANSI = re.compile(r"\x1b\[[0-?]{0,64}[ -/]{0,16}[@-~]|\x1b\][^\x07\x1b]{0,2048}(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def strip_ansi(line: str) -> str:
    return _ANSI.sub("", line) if "\x1b" in line else line
