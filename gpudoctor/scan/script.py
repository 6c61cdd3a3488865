"""``preflight(scan=True)``: scan the script that called preflight, in bounded time, never raising.

The script (found by gpudoctor.hook, whose cached path must not import this package) is the
``__main__`` module's file (never ``sys.argv[0]``: under Jupyter that is ipykernel_launcher.py);
an interactive session has none, and the scan says so (not ok, never a silent pass). The scan runs in a daemon thread joined with a timeout, so a slow filesystem (a network
home holding the Hugging Face cache) costs the training script at most ``timeout_s``; what was
not done is returned as the reason, for the gate to say instead of passing."""

from __future__ import annotations

import threading
from dataclasses import dataclass

SCAN_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class ScriptScan:
    """What ``preflight(scan=True)`` learned from the script it scanned: its findings, the judgements it could
    not make and the files it could not read, or why the scan was not done."""

    script: str
    findings: tuple = ()
    not_judged: tuple[str, ...] = ()  # "rule: file:line: why" for each judgement that could not be made
    error: str = ""  # why the scan was not done (no script, timed out, crashed)


def scan_script(path: str, facts, timeout_s: float = SCAN_TIMEOUT_S) -> ScriptScan:
    if not path:
        return ScriptScan("", error="no script file to scan (interactive session?)")
    box: dict = {}

    def work() -> None:
        try:
            from . import scan_paths

            box["result"] = scan_paths([path], facts=facts)
        except BaseException as exc:  # noqa: BLE001 - reported as the scan's error, never raised into training
            box["error"] = f"{type(exc).__name__}: {exc}"

    worker = threading.Thread(target=work, name="gpudoctor-preflight-scan", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        return ScriptScan(path, error=f"the scan took longer than {timeout_s:g} s and was left unfinished")
    if "error" in box:
        return ScriptScan(path, error=f"the scan failed: {box['error']}; please report this")
    result = box["result"]
    from ..model import CheckStatus

    not_judged = tuple(f"{c.id}: {c.reason}" for c in result.checks if c.status in (CheckStatus.SKIP, CheckStatus.ERROR))
    not_judged += tuple(f"not read: {p}: {why}" for p, why in result.not_read)
    return ScriptScan(path, result.findings, not_judged)
