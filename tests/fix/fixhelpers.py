"""Helpers for the fixer tests (a module, not conftest, so tests can import them)."""

from __future__ import annotations

import hashlib
import os

from gpudoctor.model import CheckResult, CheckStatus, Finding, Fix, MakeDir, RootCommand, SetEnv, Severity, Symlink
from gpudoctor.paths import GpudoctorDirs

LIBCUDA_ID = "libcuda-unversioned-missing"


def link_ok(env, driver_dir: str) -> bool:
    """Triton's launcher link, the old way: -lcuda with the driver dir on -L."""
    from gpudoctor.probes.linktest import link_test

    return link_test("gcc", [driver_dir], "-lcuda", env).ok


def libcuda_finding(dirs: GpudoctorDirs, driver_dir: str) -> Finding:
    """The shape the lead's libcuda check emits."""
    stub = os.path.join(dirs.stub_lib_dir, "libcuda.so")
    return Finding(
        LIBCUDA_ID, Severity.ERROR, "Triton cannot link -lcuda", f"{driver_dir} has libcuda.so.1 but no libcuda.so",
        fixes=(
            Fix("user", "private libcuda.so on LIBRARY_PATH",
                actions=(MakeDir(dirs.stub_lib_dir), Symlink(stub, os.path.join(driver_dir, "libcuda.so.1")),
                         SetEnv("LIBRARY_PATH", dirs.stub_lib_dir, prepend=True), SetEnv("TRITON_LIBCUDA_PATH", driver_dir))),
            Fix("system", "unversioned symlink",
                actions=(RootCommand(("ln", "-s", "libcuda.so.1", os.path.join(driver_dir, "libcuda.so")),
                                     undo_argv=("rm", os.path.join(driver_dir, "libcuda.so"))),)),
        ),
    )


class FakeMachine:
    """Stands in for the engine: the libcuda check is the real link test under ``env``."""

    def __init__(self, dirs: GpudoctorDirs, driver_dir: str) -> None:
        self.dirs, self.driver_dir, self.calls = dirs, driver_dir, []

    def __call__(self, env, only):
        from gpudoctor.engine import Report

        self.calls.append((dict(env), list(only or [])))
        ok = link_ok(env, self.driver_dir)
        findings = () if ok else (libcuda_finding(self.dirs, self.driver_dir),)
        status = CheckStatus.PASS if ok else CheckStatus.FAIL
        return Report(findings, (CheckResult(LIBCUDA_ID, status, findings=findings),))


def tree(root) -> list[tuple]:
    """Every path under root with its type, mode, link target and content hash."""
    entries = []
    for directory, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            path = os.path.join(directory, name)
            st = os.lstat(path)
            if os.path.islink(path):
                entries.append((os.path.relpath(path, root), "link", os.readlink(path)))
            elif os.path.isdir(path):
                entries.append((os.path.relpath(path, root), "dir", oct(st.st_mode & 0o7777)))
            else:
                with open(path, "rb") as handle:
                    digest = hashlib.sha256(handle.read()).hexdigest()
                entries.append((os.path.relpath(path, root), "file", oct(st.st_mode & 0o7777), digest))
    return sorted(entries)


def finding_record(fid, severity):
    """A finding as preflight caches it (report.json's form), with a user-local fix."""
    return {"id": fid, "severity": severity, "title": f"{fid} title", "message": "m", "evidence": {},
            "fixes": [{"kind": "user", "summary": "s", "commands": ["gpudoctor fix"], "env": {}}]}
