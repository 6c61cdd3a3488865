"""How the child talks to the parent. No torch here: both sides import it.

stdout carries exactly one JSON document, the final result (the child points fd 1 at stderr while
it works, so nothing a library prints can corrupt it). stderr carries everything else: library
and compiler output, which the parent feeds to the log matcher, and progress events, one JSON
object per line after EVENT_PREFIX, which drive the progress display and survive a crash: when
the child dies, the parent still knows every stage that finished and the one that was running.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

EVENT_PREFIX = "@@gpudoctor-train@@ "
RESULT_SCHEMA = 1


def install_hint() -> str:
    """The command that installs the `train` extra into the interpreter that runs the pass.

    The child runs under this interpreter (sys.executable), so a bare `pip` could install into
    another environment. gpudoctor is installed from a checkout (the README's `pip install .`), so
    the source is read from the install's PEP 610 record (direct_url.json) when there is one.
    """
    python = shlex.quote(sys.executable or "python3")
    source, editable = _install_source()
    target = f"{source}[train]" if source else "gpudoctor[train]"
    return f"{python} -m pip install {'-e ' if editable else ''}{shlex.quote(target)}"


def _install_source() -> tuple[str | None, bool]:
    from importlib import metadata

    try:
        record = json.loads(metadata.distribution("gpudoctor").read_text("direct_url.json") or "null")
    except (metadata.PackageNotFoundError, ValueError):
        record = None
    if isinstance(record, dict) and str(record.get("url", "")).startswith("file://"):
        return unquote(urlparse(record["url"]).path), bool(record.get("dir_info", {}).get("editable"))
    checkout = Path(__file__).resolve().parents[2]  # running from a source tree that was never installed
    if (checkout / "pyproject.toml").is_file() and (checkout / "gpudoctor").is_dir():
        return str(checkout), True
    return None, False


INSTALL_HINT = install_hint()


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
