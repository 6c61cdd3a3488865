"""``gpudoctor scan``: read a training project (Python with ``ast``, configs as data; nothing is
imported or run) and find, before the first step, the code failures the seeds lost hours to:
keywords a library removed or renamed in the installed version, Unsloth settings that turn its
fast path off, what the code asks of the GPU (the model's real head_dim under FlashAttention,
bf16, 4-bit loading) judged against this machine's Facts, and the static forms of two
diagnosis rules (checkpointing a PEFT model without input grads, fp16 weights under GradScaler).
``code_fix_plan`` turns the findings' edits into file edits (libcst)."""

from __future__ import annotations

import codecs
import difflib
import io
import os
import tokenize
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from ..model import CheckResult, CheckStatus, EditFile, Finding, sort_findings
from . import sites
from .against_gpu import judge_against_gpu
from .changes import Knowledge, load_knowledge
from .configs import read_config
from .diagnosis import diagnosis_judgements
from .python_file import read_python
from .rules import config_dialect, config_findings, python_findings, shown_path
from .versions import NEWEST_KNOWN, Versions, installed_versions, versions_from_packages
from .walk import MAX_FILE_BYTES, is_python, not_regular, project_files

__all__ = ["ScanResult", "FileEdit", "scan_paths", "code_fix_plan", "installed_versions", "Versions",
           "versions_from_packages"]


@dataclass(frozen=True)
class ScanResult:
    """What ``scan_paths`` found: the findings, how many Python and config files it looked at, the files it
    could not read and why, the packages judged at the newest known version (not installed), and its
    check results."""

    findings: tuple[Finding, ...]
    python_files: int
    config_files: int
    not_read: tuple[tuple[str, str], ...]  # (path, why): said, never passed over silently
    assumed: tuple[str, ...]  # packages judged at the newest known version (not installed)
    # the judgements against the machine and the static diagnosis forms, one per place in the code:
    # pass, fail, or skip with the reason (no GPU facts, no config.json, a model named by a variable)
    checks: tuple[CheckResult, ...] = ()


class _Recorded:
    """The versions, remembering which packages were judged at the newest known release."""

    def __init__(self, versions: Versions) -> None:
        self.versions = versions
        self.probe_error = versions.probe_error
        self.assumed: set[str] = set()

    def of(self, package: str):
        version = self.versions.of(package)
        if version.source == NEWEST_KNOWN:
            self.assumed.add(package)
        return version


def scan_paths(paths: Sequence[str], versions: Versions | None = None, knowledge: Knowledge | None = None,
               facts=None, env: Mapping[str, str] | None = None, no_facts_reason: str = "") -> ScanResult:
    """Scan files and directories. ``facts`` (a ``gpudoctor.facts.Facts``, probing lazily) is the
    machine the code is judged against: the installed packages decide the keyword versions when
    ``versions`` is not given, and the GPU the model-shape/precision/quantization judgements; None
    skips those judgements with ``no_facts_reason``. ``env`` finds the Hugging Face cache."""
    knowledge = knowledge or load_knowledge()
    if versions is None:
        versions = _versions_from(facts, knowledge)
    recorded = _Recorded(versions)
    env = os.environ if env is None else env
    findings: list[Finding] = []
    checks: list[CheckResult] = []
    not_read: list[tuple[str, str]] = []
    loads, precisions, quantizations = [], [], []
    counts = {"python": 0, "config": 0}
    root = paths[0] if len(paths) == 1 and os.path.isdir(paths[0]) else ""
    for path in project_files(paths):
        try:
            irregular = not_regular(path)
            if irregular:
                not_read.append((path, irregular))
                continue
            if os.path.getsize(path) > MAX_FILE_BYTES:
                not_read.append((path, f"larger than {MAX_FILE_BYTES} bytes"))
                continue
            if is_python(path):
                counts["python"] += 1
                source = read_python(path)
                if source.error:
                    not_read.append((path, source.error))
                checks.extend(_each_a_check(python_findings(source, knowledge, recorded, root), findings))
                if source.calls:
                    shown = shown_path(path, root)
                    found, judged = diagnosis_judgements(source, shown, knowledge, recorded)
                    findings.extend(found)
                    checks.extend(judged)
                    loads.extend(sites.python_loads(source, shown))
                    precisions.extend(sites.python_precision(source, shown, knowledge.training_arguments))
                    quantizations.extend(sites.python_quantization(source, shown))
            else:
                counts["config"] += 1
                config = read_config(path)
                if config.error:
                    not_read.append((path, config.error))
                checks.extend(_each_a_check(config_findings(config, knowledge, recorded, root), findings))
                dialect = config_dialect(config)
                if dialect is not None:
                    shown = shown_path(path, root)
                    loads.extend(sites.config_loads(config, shown, dialect))
                    precisions.extend(sites.config_precision(config, shown))
                    quantizations.extend(sites.config_quantization(config, shown, dialect))
        except OSError as exc:
            not_read.append((path, exc.strerror or str(exc)))
    found, judged = judge_against_gpu(loads, precisions, quantizations, facts, env, no_facts_reason)
    findings.extend(found)
    checks.extend(judged)
    return ScanResult(tuple(sort_findings(findings)), counts["python"], counts["config"], tuple(not_read),
                      tuple(sorted(recorded.assumed)), tuple(checks))


def _each_a_check(found: list[Finding], findings: list[Finding]) -> list[CheckResult]:
    """A keyword or key finding is its own failed check (reporters group findings by their
    check's area: these belong with the training code, not with the log findings)."""
    findings.extend(found)
    return [CheckResult(f.id, CheckStatus.FAIL, f.message, 0.0, (f,)) for f in found]


def _versions_from(facts, knowledge: Knowledge) -> Versions:
    """The inspected environment's packages, through the Facts the checks use when given (one
    probe for both), else the live host's."""
    if facts is not None:
        from ..facts import ProbeFailure

        try:
            return versions_from_packages(facts.get("packages"), knowledge.newest_known)
        except ProbeFailure as exc:  # every package judged at newest known, the probe's failure said
            return versions_from_packages(None, knowledge.newest_known, str(exc))
    return installed_versions(newest_known=knowledge.newest_known)


@dataclass(frozen=True)
class FileEdit:
    """The ``fix --code`` edit of one file: the EditFile action (None when the file does not change), its
    unified diff, and the findings' edits done and refused (with why)."""

    path: str
    action: EditFile | None  # None: nothing mechanical could be done in this file
    diff: str
    done: tuple[Mapping[str, Any], ...]
    refused: tuple[tuple[Mapping[str, Any], str], ...]


def code_fix_plan(findings: Iterable[Finding]) -> list[FileEdit]:
    """One EditFile per file, made from every finding's ``edit`` in that file at once (two
    findings in one file become one edit, so neither undoes the other)."""
    from ..fix.actions.edit_file import sha256_hex
    from .codemod import edit_config, edit_python  # libcst: only fix --code pays for it

    by_file: dict[str, list[Mapping[str, Any]]] = {}
    for finding in findings:
        edit = finding.evidence.get("edit")
        if isinstance(edit, Mapping) and edit.get("file"):
            by_file.setdefault(edit["file"], []).append(edit)
    plan = []
    for path, edits in by_file.items():
        with open(path, "rb") as handle:
            original = handle.read()
        text, why = _utf8_text(path, original)
        if text is None:  # that file only: the others are still edited
            plan.append(FileEdit(path, None, "", (), tuple((edit, why) for edit in edits)))
            continue
        result = edit_python(text, edits) if is_python(path) else edit_config(text, edits, path)
        diff = "".join(difflib.unified_diff(text.splitlines(keepends=True), result.new_text.splitlines(keepends=True),
                                            fromfile=path, tofile=path))
        action = EditFile(path, sha256_hex(original), result.new_text) if result.new_text != text else None
        plan.append(FileEdit(path, action, diff, result.done, result.refused))
    return plan


def _utf8_text(path: str, original: bytes) -> tuple[str | None, str]:
    """The file's text, or None and why it is not edited: EditFile writes UTF-8, so a file
    declared in another encoding (PEP 263) would be rewritten in bytes its declaration denies."""
    encoding = "utf-8"
    if is_python(path):
        try:
            encoding = tokenize.detect_encoding(io.BytesIO(original).readline)[0]
        except SyntaxError as exc:
            return None, f"its encoding declaration is not usable ({exc}); edit it by hand"
    if codecs.lookup(encoding).name not in ("utf-8", "utf-8-sig"):
        return None, f"the file is encoded in {encoding}, and gpudoctor writes only UTF-8; edit it by hand"
    try:
        return original.decode("utf-8"), ""
    except UnicodeDecodeError as exc:
        return None, f"the file is not valid UTF-8 (byte {exc.start}); edit it by hand"
