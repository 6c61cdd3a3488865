"""torch's Requires-Dist lines: the strict fast pattern must agree with packaging.requirements
(the reference) on every line it takes, and hand the rest to packaging."""

from __future__ import annotations

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name as reference_canonicalize

from gpudoctor.host.base import Distribution
from gpudoctor.probes.packages import _LINUX, PackageFacts, canonicalize_name

# Lines as torch wheels write them (2.4 to 2.11, CUDA builds and nightlies), plus odd ones.
LINES = [
    'triton==3.6.0; platform_system == "Linux"',
    'triton==3.1.0; platform_system == "Linux" and platform_machine == "x86_64" and python_version < "3.13"',
    'triton==3.0.0; platform_system == "Linux" and platform_machine == "x86_64"',
    'pytorch-triton==3.2.0+git4b3bb1f8; platform_system == "Linux" and platform_machine == "aarch64"',
    'pytorch-triton==3.2.0+git35c6c7c6; platform_system == "Linux" and platform_machine == "x86_64"',
    'triton>=2.0; extra == "dynamo"',
    'triton==2.1.0',
    'cuda-toolkit[cublas,cudart,cufft,cufile,cupti,curand,cusolver,cusparse,nvjitlink,nvrtc,nvtx]==13.0.2; platform_system == "Linux"',
    'nvidia-cuda-runtime-cu12==12.4.127; platform_system == "Linux" and platform_machine == "x86_64"',
    'nvidia-cuda-runtime==13.0.96; platform_system == "Linux"',
    'nvidia_cuda_runtime_cu12 (==12.1.105) ; platform_system == "Linux"',
    'nvidia-cuda-runtime-cu11>=11.8,<12; sys_platform == "linux"',
    'filelock',
    'sympy>=1.13.3',
]


def _torch(*lines: str) -> PackageFacts:
    dist = Distribution("torch", "2.11.0", "/site", requires=tuple(lines))
    return PackageFacts({"torch": (dist,)}, recorded=True)


def _reference_pin(line: str):
    requirement = Requirement(line)
    name = reference_canonicalize(requirement.name)
    if name not in ("triton", "pytorch-triton"):
        return None
    if requirement.marker is not None and not requirement.marker.evaluate(_LINUX):
        return None
    return next(((name, spec.version) for spec in requirement.specifier if spec.operator == "=="), None)


def _reference_cuda(line: str):
    requirement = Requirement(line)
    name = reference_canonicalize(requirement.name)
    if not (name == "cuda-toolkit" or name.startswith("nvidia-cuda-runtime")):
        return None
    for spec in requirement.specifier:
        parts = spec.version.split(".")
        if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
            return (int(parts[0]), int(parts[1]))
    return None


@pytest.mark.parametrize("line", LINES)
def test_each_line_agrees_with_packaging(line):
    facts = _torch(line)
    assert facts.torch_triton_pin == _reference_pin(line)
    assert facts.torch_cuda == _reference_cuda(line)


def test_first_matching_line_wins():
    facts = _torch(LINES[3], LINES[4], LINES[0])  # aarch64 nightly skipped, x86_64 one taken
    assert facts.torch_triton_pin == ("pytorch-triton", "3.2.0+git35c6c7c6")


@pytest.mark.parametrize("name", ["Flash_Attn", "flash.attn", "flash--attn", "PyTorch-Triton", "a_.-b"])
def test_canonicalize_name_is_pep503(name):
    assert canonicalize_name(name) == reference_canonicalize(name)


def test_torch_wheel_lines_need_no_packaging_requirements(monkeypatch):
    # The shapes torch 2.11's CUDA wheel uses are read without importing the grammar.
    import gpudoctor.probes.packages as packages

    monkeypatch.setattr(packages, "_parse_requirement", lambda line: pytest.fail(f"slow path for {line!r}"))
    facts = _torch("filelock", LINES[7], LINES[0])
    assert facts.torch_triton_pin == ("triton", "3.6.0")
    assert facts.torch_cuda == (13, 0)
