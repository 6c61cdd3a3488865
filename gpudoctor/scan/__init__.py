"""``gpudoctor scan``: read a training project (Python with ``ast``, configs as data; nothing is
imported or run) and find, before the first step, the code failures the seeds lost hours to:
keywords a library removed or renamed in the installed version, and Unsloth settings that turn
its fast path off. ``code_fix_plan`` turns the findings' edits into file edits (libcst)."""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from ..model import EditFile, Finding, sort_findings
from .changes import Knowledge, load_knowledge
from .codemod import edit_config, edit_python
from .configs import read_config
from .python_file import read_python
from .rules import config_findings, python_findings
from .versions import NEWEST_KNOWN, Versions, installed_versions
from .walk import MAX_FILE_BYTES, is_python, project_files

__all__ = ["ScanResult", "FileEdit", "scan_paths", "code_fix_plan", "installed_versions", "Versions"]


@dataclass(frozen=True)
class ScanResult:
    findings: tuple[Finding, ...]
    python_files: int
    config_files: int
    not_read: tuple[tuple[str, str], ...]  # (path, why): said, never passed over silently
    assumed: tuple[str, ...]  # packages judged at the newest known version (not installed)


def scan_paths(paths: Sequence[str], versions: Versions | None = None, knowledge: Knowledge | None = None) -> ScanResult:
    knowledge = knowledge or load_knowledge()
    versions = versions if versions is not None else installed_versions(newest_known=knowledge.newest_known)
    findings: list[Finding] = []
    not_read: list[tuple[str, str]] = []
    counts = {"python": 0, "config": 0}
    for path in project_files(paths):
        root = paths[0] if len(paths) == 1 and os.path.isdir(paths[0]) else ""
        try:
            if os.path.getsize(path) > MAX_FILE_BYTES:
                not_read.append((path, f"larger than {MAX_FILE_BYTES} bytes"))
                continue
            if is_python(path):
                counts["python"] += 1
                source = read_python(path)
                if source.error:
                    not_read.append((path, source.error))
                findings.extend(python_findings(source, knowledge, versions, root))
            else:
                counts["config"] += 1
                config = read_config(path)
                if config.error:
                    not_read.append((path, config.error))
                findings.extend(config_findings(config, knowledge, versions, root))
        except OSError as exc:
            not_read.append((path, exc.strerror or str(exc)))
    used = {f.evidence.get("package") for f in findings if f.evidence.get("version_source") == NEWEST_KNOWN}
    return ScanResult(tuple(sort_findings(findings)), counts["python"], counts["config"], tuple(not_read),
                      tuple(sorted(p for p in used if p)))


@dataclass(frozen=True)
class FileEdit:
    path: str
    action: EditFile | None  # None: nothing mechanical could be done in this file
    diff: str
    done: tuple[Mapping[str, Any], ...]
    refused: tuple[tuple[Mapping[str, Any], str], ...]


def code_fix_plan(findings: Iterable[Finding]) -> list[FileEdit]:
    """One EditFile per file, made from every finding's ``edit`` in that file at once (two
    findings in one file become one edit, so neither undoes the other)."""
    from ..fix.actions.edit_file import sha256_hex

    by_file: dict[str, list[Mapping[str, Any]]] = {}
    for finding in findings:
        edit = finding.evidence.get("edit")
        if isinstance(edit, Mapping) and edit.get("file"):
            by_file.setdefault(edit["file"], []).append(edit)
    plan = []
    for path, edits in by_file.items():
        with open(path, "rb") as handle:
            original = handle.read()
        text = original.decode("utf-8")
        result = edit_python(text, edits) if is_python(path) else edit_config(text, edits, path)
        diff = "".join(difflib.unified_diff(text.splitlines(keepends=True), result.new_text.splitlines(keepends=True),
                                            fromfile=path, tofile=path))
        action = EditFile(path, sha256_hex(original), result.new_text) if result.new_text != text else None
        plan.append(FileEdit(path, action, diff, result.done, result.refused))
    return plan
