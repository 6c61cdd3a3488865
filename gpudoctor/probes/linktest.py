"""The link test: does the C compiler link ``-lcuda`` (or ``-l:libcuda.so.1``) against the
directories Triton would pass? This decides libcuda-unversioned-missing by doing, not guessing."""

from __future__ import annotations

import posixpath
import re
from typing import Mapping, NamedTuple

from packaging.version import Version

from ..host.base import LinkResult
from ..knowledge import load_tables


class LinkFacts(NamedTuple):
    """The result of linking an empty shared object exactly as Triton links its launcher (or why
    the test was skipped)."""

    triton_version: str | None
    flag: str | None
    cc: str | None
    lib_dirs: tuple[str, ...]
    result: LinkResult | None
    skip_reason: str | None


_LIBRARIES_LINE = re.compile(r"^libraries\s*=\s*\[([^\]\n]*)\]", re.MULTILINE)


def link_flag_from_driver_source(text: str) -> str | None:
    """Triton's nvidia backend declares what it links: ``libraries = ['cuda']`` (-> ``-lcuda``)
    before PR #8668, ``libraries = ['libcuda.so.1']`` (-> ``-l:libcuda.so.1``) after it. Reading
    the installed file beats any version table: it is what this Triton will actually run."""
    match = _LIBRARIES_LINE.search(text)
    if not match:
        return None
    names = [n.strip().strip("'\"") for n in match.group(1).split(",") if n.strip()]
    if "libcuda.so.1" in names:
        return "-l:libcuda.so.1"
    if "cuda" in names:
        return "-lcuda"
    return None


def triton_link_flag(triton_version: Version) -> str:
    """How this Triton links its launcher against libcuda (tables.toml: triton_libcuda_link)."""
    flag = "-lcuda"
    for row in sorted(load_tables()["triton_libcuda_link"], key=lambda r: Version(r["min_triton"])):
        # Compare the release only: 3.6.0+git1234 and 3.6.0rc1 nightlies carry the change too.
        if Version(triton_version.base_version) >= Version(row["min_triton"]):
            flag = row["flag"]
    return flag


def probe_link(host, packages, triton_cc, libcuda) -> LinkFacts:
    """``libcuda``: a TritonLibcuda or LibcudaFacts (only the Triton dirs are used)."""
    triton = packages.triton
    version = packages.triton_version
    if triton is None or version is None:
        return LinkFacts(None, None, None, (), None, "Triton is not installed")
    driver_source = host.read_text(posixpath.join(triton.location, "triton", "backends", "nvidia", "driver.py"))
    flag = (link_flag_from_driver_source(driver_source.text) if driver_source.text else None) or triton_link_flag(version)
    if libcuda.triton_dirs_error:
        return LinkFacts(str(version), flag, triton_cc.cc, (), None,
                         f"Triton cannot locate libcuda at all ({libcuda.triton_dirs_error})")
    if not triton_cc.cc or not triton_cc.exists:
        return LinkFacts(str(version), flag, triton_cc.cc, (), None, "no C compiler for Triton")
    libdevice = posixpath.join(triton.location, "triton", "backends", "nvidia", "lib")
    lib_dirs = (libdevice, *libcuda.triton_dirs)
    result = host.link_test(triton_cc.cc, lib_dirs, flag, host.env.get("LIBRARY_PATH", ""))
    if result.error:
        return LinkFacts(str(version), flag, triton_cc.cc, lib_dirs, result, f"link test could not run: {result.error}")
    return LinkFacts(str(version), flag, triton_cc.cc, lib_dirs, result, None)


def link_test(cc: str, lib_dirs: list[str] | tuple[str, ...], lib_flag: str, env: Mapping[str, str],
              timeout: float | None = None) -> LinkResult:
    """Run the link test on this machine under ``env`` (its LIBRARY_PATH counts), for fixers
    verifying that a fix worked."""
    from ..host.live import LINK_TIMEOUT_S, LiveHost

    return LiveHost(env).link_test(cc, tuple(lib_dirs), lib_flag, env.get("LIBRARY_PATH", ""),
                                   LINK_TIMEOUT_S if timeout is None else timeout)
