"""Python package facts, from importlib.metadata only (never importing torch or triton)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from ..host.base import Distribution

WATCHED = (
    "torch", "triton", "pytorch-triton", "bitsandbytes", "flash-attn", "flash-attn-3", "xformers",
    "transformers", "trl", "peft", "accelerate", "unsloth", "unsloth-zoo", "deepspeed",
)
_LOCAL_CUDA = re.compile(r"^cu(\d+)$")
_CUDA_RUNTIME_REQ = re.compile(r"^nvidia-cuda-runtime(?:-cu\d+)?$")
_WHEEL_TORCH = re.compile(r"torch(\d+\.\d+)")
_NAME_SEPARATORS = re.compile(r"[-_.]+")


def canonicalize_name(name: str) -> str:
    """PEP 503 name normalization (what packaging.utils.canonicalize_name does). Spelled out
    because importing packaging.utils also imports packaging.tags (~8 ms), paid by every
    preflight() first call."""
    return _NAME_SEPARATORS.sub("-", name).lower()


@dataclass(frozen=True)
class PackageFacts:
    installed: dict[str, tuple[Distribution, ...]]  # canonical name -> every copy found
    recorded: bool  # False when the distribution list could not be read

    def get(self, name: str) -> Distribution | None:
        copies = self.installed.get(canonicalize_name(name))
        return copies[0] if copies else None

    def version(self, name: str) -> Version | None:
        dist = self.get(name)
        if dist is None:
            return None
        try:
            return Version(dist.version)
        except InvalidVersion:
            return None

    @property
    def triton(self) -> Distribution | None:
        return self.get("triton") or self.get("pytorch-triton")

    @property
    def triton_version(self) -> Version | None:
        dist = self.triton
        try:
            return Version(dist.version) if dist else None
        except InvalidVersion:
            return None

    @property
    def torch_cuda(self) -> tuple[int, int] | None:
        """The CUDA version torch was built with: its +cuXYZ tag, else its nvidia-cuda-runtime pin."""
        version = self.version("torch")
        if version is None:
            return None
        if version.local:
            match = _LOCAL_CUDA.match(version.local)
            if match:
                digits = match.group(1)
                return (int(digits[:-1]), int(digits[-1]))
            return None  # +cpu, +rocm6.2, ...
        for requirement in self._torch_requirements():
            if _CUDA_RUNTIME_REQ.match(canonicalize_name(requirement.name)):
                for spec in requirement.specifier:
                    parts = spec.version.split(".")
                    if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
                        return (int(parts[0]), int(parts[1]))
            if canonicalize_name(requirement.name) == "cuda-toolkit":
                for spec in requirement.specifier:
                    parts = spec.version.split(".")
                    if len(parts) >= 2 and parts[0].isdigit():
                        return (int(parts[0]), int(parts[1]))
        return None

    @property
    def torch_is_cpu_only(self) -> bool | None:
        version = self.version("torch")
        if version is None:
            return None
        if version.local:
            return version.local == "cpu"
        return self.torch_cuda is None

    @property
    def torch_triton_pin(self) -> tuple[str, str] | None:
        """(distribution name, exact version) torch's metadata pins for Linux, if any."""
        for requirement in self._torch_requirements():
            name = canonicalize_name(requirement.name)
            if name in ("triton", "pytorch-triton"):
                if requirement.marker is not None and not requirement.marker.evaluate({"platform_system": "Linux", "platform_machine": "x86_64", "sys_platform": "linux", "python_version": "3.12", "extra": ""}):
                    continue
                for spec in requirement.specifier:
                    if spec.operator == "==":
                        return (name, spec.version)
        return None

    @property
    def flash_attn_built_for_torch(self) -> str | None:
        """torch major.minor a flash-attn wheel was built for, from its wheel name
        ('flash_attn-2.6.3+cu123torch2.4cxx11abiFALSE-...whl') in direct_url.json."""
        dist = self.get("flash-attn")
        if dist is None or not dist.direct_url:
            return None
        try:
            url = json.loads(dist.direct_url).get("url", "")
        except (ValueError, AttributeError):
            return None
        match = _WHEEL_TORCH.search(url.rsplit("/", 1)[-1])
        return match.group(1) if match else None

    def duplicates(self) -> list[tuple[str, tuple[Distribution, ...]]]:
        found = [(name, copies) for name, copies in sorted(self.installed.items()) if len(copies) > 1]
        if self.get("triton") and self.get("pytorch-triton"):
            found.append(("triton+pytorch-triton", (self.get("triton"), self.get("pytorch-triton"))))
        return found

    def _torch_requirements(self) -> list:
        # packaging.requirements costs ~12 ms to import; only torch's requirements need it.
        from packaging.requirements import InvalidRequirement, Requirement

        dist = self.get("torch")
        requirements = []
        for line in dist.requires if dist else ():
            try:
                requirements.append(Requirement(line))
            except InvalidRequirement:
                continue
        return requirements


def probe_packages(host) -> PackageFacts:
    dists = host.distributions()
    installed: dict[str, list[Distribution]] = {}
    seen_locations: set[tuple[str, str]] = set()
    for dist in dists:
        name = canonicalize_name(dist.name)
        # importlib.metadata lists a dist once per sys.path entry that holds it; the same
        # directory reached twice is not a duplicate.
        key = (name, dist.location)
        if key in seen_locations:
            continue
        seen_locations.add(key)
        installed.setdefault(name, []).append(dist)
    return PackageFacts({k: tuple(v) for k, v in installed.items()}, recorded=bool(dists))
