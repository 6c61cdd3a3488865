"""How the child talks to the parent. No torch here: both sides import it.

stdout carries exactly one JSON document, the final result (the child points fd 1 at stderr while
it works, so nothing a library prints can corrupt it). stderr carries everything else: library
and compiler output, which the parent feeds to the log matcher, and progress events, one JSON
object per line after EVENT_PREFIX, which drive the progress display and survive a crash: when
the child dies, the parent still knows every stage that finished and the one that was running.
"""

from __future__ import annotations

import json
import sys

EVENT_PREFIX = "@@gpudoctor-train@@ "
RESULT_SCHEMA = 1
INSTALL_HINT = "pip install 'gpudoctor[train]'"


def emit(event: str, **fields) -> None:
    sys.stderr.write(EVENT_PREFIX + json.dumps({"event": event, **fields}, default=str) + "\n")
    sys.stderr.flush()


def parse_event(line: str) -> dict | None:
    if not line.startswith(EVENT_PREFIX):
        return None
    try:
        return json.loads(line[len(EVENT_PREFIX):])
    except ValueError:
        return None
