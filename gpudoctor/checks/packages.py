"""Checks on installed Python packages (metadata only)."""

from __future__ import annotations

import posixpath
import re

from packaging.version import Version

from ..knowledge import load_tables
from ..model import Severity
from ..probes.packages import WATCHED
from .base import Skip, finding, fixes_for, judged_python

_BNB_LIB = re.compile(r"libbitsandbytes_cuda(\d+)(?:_nocublaslt)?\.so$")


def check_torch_cpu_only(packages, driver, system=None):
    cpu_only = packages.torch_is_cpu_only
    if cpu_only is None:
        raise Skip("torch is not installed")
    if driver.gpu_present is not True:
        raise Skip("no NVIDIA GPU here, so a CPU build is fine")
    if not cpu_only:
        return []
    return [finding(
        "torch-cpu-only",
        f"torch {packages.get('torch').version} is a CPU-only build, but this machine has an NVIDIA GPU: "
        "`Torch not compiled with CUDA enabled`.",
        {"torch": packages.get("torch").version, "location": packages.get("torch").location},
        fixes_for("torch-cpu-only", judged_python(system, packages)),
    )]


def _expected_triton(packages) -> tuple[str, str, str] | None:
    pin = packages.torch_triton_pin
    if pin:
        return pin[0], pin[1], "torch's metadata"
    torch = packages.version("torch")
    if torch is None:
        return None
    value = load_tables()["torch_triton_pin"].get(f"{torch.major}.{torch.minor}")
    return ("triton", value, "tables.toml") if value else None


def check_triton_missing(packages, system=None):
    if packages.torch_cuda is None:
        raise Skip("no CUDA build of torch installed")
    if packages.triton is not None:
        return []
    expected = _expected_triton(packages)
    spec = f"{expected[0]}=={expected[1]}" if expected else "triton"
    severity = Severity.ERROR if packages.get("unsloth") else None
    return [finding(
        "triton-missing",
        f"torch {packages.version('torch')} (CUDA) is installed without Triton ({spec} expected): torch.compile and Unsloth need it.",
        {"torch": str(packages.version("torch")), "expected": spec},
        fixes_for("triton-missing", {"expected": spec, **judged_python(system, packages)}),
        severity=severity,
    )]


def check_triton_version_mismatch(packages, system=None):
    if packages.version("torch") is None:
        raise Skip("torch is not installed")
    installed = packages.triton
    if installed is None:
        raise Skip("Triton is not installed")
    expected = _expected_triton(packages)
    if expected is None:
        raise Skip(f"no Triton pin known for torch {packages.version('torch')}")
    name, version, source = expected
    if Version(installed.version) == Version(version):
        return []
    return [finding(
        "triton-version-mismatch",
        f"torch {packages.version('torch')} pins {name}=={version} ({source}) but {installed.name} {installed.version} is installed.",
        {"torch": str(packages.version("torch")), "pinned": f"{name}=={version}", "installed": f"{installed.name}=={installed.version}",
         "source": source},
        fixes_for("triton-version-mismatch", {"pinned": f"{name}=={version}", **judged_python(system, packages)}),
    )]


def check_flash_attn_abi_mismatch(packages, system=None):
    fa = packages.get("flash-attn")
    if fa is None:
        raise Skip("flash-attn is not installed")
    torch = packages.version("torch")
    if torch is None:
        raise Skip("torch is not installed")
    built_for = packages.flash_attn_built_for_torch
    if built_for is None:
        raise Skip("flash-attn's wheel does not say which torch it was built for (installed from source or PyPI sdist)")
    if built_for == f"{torch.major}.{torch.minor}":
        return []
    return [finding(
        "flash-attn-abi-mismatch",
        f"flash-attn {fa.version} was built for torch {built_for} but torch {torch} is installed: importing it fails "
        "with `undefined symbol`.",
        {"flash_attn": fa.version, "built_for_torch": built_for, "torch": str(torch)},
        fixes_for("flash-attn-abi-mismatch", judged_python(system, packages)),
    )]


def check_bitsandbytes_cuda_setup(packages, driver, env, system=None):
    bnb = packages.get("bitsandbytes")
    if bnb is None:
        raise Skip("bitsandbytes is not installed")
    torch_cuda = packages.torch_cuda
    if torch_cuda is None:
        raise Skip("no CUDA build of torch installed")
    if driver.gpu_present is not True:
        raise Skip("no NVIDIA GPU here")
    if not bnb.files:
        raise Skip("bitsandbytes' file list is unavailable")
    bundled = sorted({m.group(1) for f in bnb.files if (m := _BNB_LIB.search(posixpath.basename(f)))})
    wanted = env.get("BNB_CUDA_VERSION") or f"{torch_cuda[0]}{torch_cuda[1]}"
    if wanted in bundled:
        return []
    return [finding(
        "bitsandbytes-cuda-setup",
        f"bitsandbytes {bnb.version} has no native library for CUDA {wanted} "
        f"(bundled: {', '.join('cuda' + b for b in bundled) or 'none'}): 4-bit loading will fail.",
        {"bitsandbytes": bnb.version, "wanted": wanted, "bundled": bundled},
        fixes_for("bitsandbytes-cuda-setup", {"bnb_cuda_version_set": bool(env.get("BNB_CUDA_VERSION")),
                                              **judged_python(system, packages)}),
    )]


def check_duplicate_distributions(packages, system=None):
    if not packages.recorded:
        raise Skip("the installed distributions could not be listed")
    duplicates = packages.duplicates()
    if not duplicates:
        return []
    # Import-relevant packages first: a second torch or triton matters more than a second pip.
    watched = [d for d in duplicates if d[0] in WATCHED or d[0] == "triton+pytorch-triton"]
    ordered = watched + [d for d in duplicates if d not in watched]
    described = "; ".join(f"{name}: " + ", ".join(f"{c.version} in {c.location}" for c in copies)
                          for name, copies in ordered[:6])
    more = f" (and {len(ordered) - 6} more)" if len(ordered) > 6 else ""
    first = ordered[0][1][0].name
    return [finding(
        "duplicate-distributions",
        f"{len(ordered)} package(s) installed more than once — {described}{more}. Which copy Python imports depends on sys.path order.",
        {"duplicates": {name: [{"name": c.name, "version": c.version, "location": c.location} for c in copies]
                        for name, copies in ordered}},
        fixes_for("duplicate-distributions", {"first": first, **judged_python(system, packages)}),
    )]
