"""Python package facts, from the installed metadata files only (never importing torch or triton)."""

from __future__ import annotations

import json
import re
from typing import NamedTuple

from packaging.version import InvalidVersion, Version

from ..host.base import Distribution
from ..host.distributions import canonicalize_name

WATCHED = (
    "torch", "triton", "pytorch-triton", "bitsandbytes", "flash-attn", "flash-attn-3", "xformers",
    "transformers", "trl", "peft", "accelerate", "unsloth", "unsloth-zoo", "deepspeed",
)
_LOCAL_CUDA = re.compile(r"^cu(\d+)$")
_CUDA_RUNTIME_REQ = re.compile(r"^nvidia-cuda-runtime(?:-cu\d+)?$")
_WHEEL_TORCH = re.compile(r"torch(\d+\.\d+)")


class PackageFacts(NamedTuple):
    """Every installed distribution by canonical name, every copy of each (a package installed
    twice is a finding)."""

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
        for name, versions, _ in self._torch_requirements(_is_cuda_requirement):
            if _CUDA_RUNTIME_REQ.match(name):
                for spec_version in versions:
                    parts = spec_version.split(".")
                    if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
                        return (int(parts[0]), int(parts[1]))
            if name == "cuda-toolkit":
                for spec_version in versions:
                    parts = spec_version.split(".")
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
        for name, versions, pinned in self._torch_requirements(lambda n: n in ("triton", "pytorch-triton"), _LINUX):
            if pinned is not None:
                return (name, pinned)
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

    def _torch_requirements(self, wanted, environment: dict | None = None) -> list[tuple[str, list[str], str | None]]:
        """(canonical name, specifier versions, the `==` version or None) for each of torch's
        Requires-Dist lines whose name ``wanted(name)`` accepts and, given an ``environment``,
        whose marker holds in it. The two line shapes torch's wheels use
        (``triton==3.6.0; platform_system == "Linux"``, ``cuda-toolkit[cudart]==13.0.2; ...``)
        are read by a strict pattern; anything else goes to packaging.requirements, whose import
        (10-19 ms: it compiles the requirement grammar's regexes) preflight's first call would pay."""
        dist = self.get("torch")
        found = []
        for line in dist.requires if dist else ():
            head = _REQUIREMENT_NAME.match(line)
            if head is None or not wanted(canonicalize_name(head.group(1))):
                continue
            simple = _SIMPLE_REQUIREMENT.match(line)
            marker = simple.group(5) if simple else None
            if simple and (environment is None or marker is None or _SIMPLE_MARKER.match(marker)):
                if environment is not None and marker is not None and not _simple_marker_holds(marker, environment):
                    continue
                name, operator, version = canonicalize_name(simple.group(1)), simple.group(3), simple.group(4)
                found.append((name, [version], version if operator == "==" else None))
                continue
            parsed = _parse_requirement(line)
            if parsed is None:
                continue
            if environment is not None and parsed.marker is not None and not parsed.marker.evaluate(environment):
                continue
            pinned = next((spec.version for spec in parsed.specifier if spec.operator == "=="), None)
            found.append((canonicalize_name(parsed.name), [spec.version for spec in parsed.specifier], pinned))
        return found


# What torch's triton pin is evaluated against: gpudoctor diagnoses Linux x86_64 machines.
_LINUX = {"platform_system": "Linux", "platform_machine": "x86_64", "sys_platform": "linux", "python_version": "3.12",
          "extra": ""}
_REQUIREMENT_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
# name[extras] OP version [; marker], one specifier, nothing else.
_SIMPLE_REQUIREMENT = re.compile(
    r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[A-Za-z0-9._,\s-]*\])?\s*(==|>=|<=|~=|!=)\s*([0-9][0-9A-Za-z.+!]*)\s*(?:;\s*(.*?))?\s*$")
# var == "value" clauses joined by `and`, for the variables in _LINUX.
_MARKER_CLAUSE = r'(platform_system|platform_machine|sys_platform)\s*==\s*"([^"]*)"'
_SIMPLE_MARKER = re.compile(rf"^{_MARKER_CLAUSE}(\s+and\s+{_MARKER_CLAUSE})*$")


def _simple_marker_holds(marker: str, environment: dict) -> bool:
    return all(environment.get(var) == value for var, value in re.findall(_MARKER_CLAUSE, marker))


def _is_cuda_requirement(name: str) -> bool:
    return name == "cuda-toolkit" or _CUDA_RUNTIME_REQ.match(name) is not None


def _parse_requirement(line: str):
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        return Requirement(line)
    except InvalidRequirement:
        return None


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
