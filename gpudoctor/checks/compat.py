"""Installed versions known not to work together (issue 15): peft with transformers, bitsandbytes
with Triton, xformers with torch. Decided on the installed metadata only; the pairs come from
gpudoctor/rules/compat.toml, each with its source."""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

from ..probes.compat_data import compat_tables
from .base import Skip, finding, fixes_for, judged_python
from .specifiers import contains


def _installed(packages, name: str) -> Version:
    dist = packages.get(name)
    if dist is None:
        raise Skip(f"{name} is not installed")
    try:
        return Version(dist.version)
    except InvalidVersion:
        raise Skip(f"{name}'s version {dist.version!r} cannot be compared") from None


def _matching_rows(table: str, versions: dict[str, Version]) -> list[dict]:
    # prereleases=True in SpecifierSet's terms: a 5.0.0rc1 of transformers already lacks what 5.0.0 lacks
    return [row for row in compat_tables()[table]
            if all(contains(row[name], version) for name, version in versions.items())]


def check_peft_transformers_incompatible(packages, system=None):
    peft = _installed(packages, "peft")
    transformers = _installed(packages, "transformers")
    rows = _matching_rows("peft_transformers", {"peft": peft, "transformers": transformers})
    if not rows:
        return []
    row = rows[0]
    return [finding(
        "peft-transformers-incompatible",
        f"peft {peft} with transformers {transformers}: `import peft` fails with `{row['missing']}` "
        f"({row['source']}). Works with {row['fixed_by']}.",
        {"peft": str(peft), "transformers": str(transformers), "error": row["missing"], "fixed_by": row["fixed_by"],
         "source": row["source"], "references": list(row["references"])},
        fixes_for("peft-transformers-incompatible", {"package": "peft", "fixed_by": row["fixed_by"],
                                                     **judged_python(system, packages)}),
    )]


def check_bitsandbytes_triton_incompatible(packages, system=None):
    bnb = _installed(packages, "bitsandbytes")
    triton_dist = packages.triton
    if triton_dist is None:
        raise Skip("Triton is not installed (bitsandbytes imports its Triton kernels only when it is)")
    triton = packages.triton_version
    if triton is None:
        raise Skip(f"{triton_dist.name}'s version {triton_dist.version!r} cannot be compared")
    rows = _matching_rows("bitsandbytes_triton", {"bitsandbytes": bnb, "triton": triton})
    if not rows:
        return []
    row = rows[0]
    return [finding(
        "bitsandbytes-triton-incompatible",
        f"bitsandbytes {bnb} imports triton.ops, which {triton_dist.name} {triton} no longer has (removed in Triton "
        f"3.2): `import bitsandbytes` fails with `{row['missing']}`, and with it 4-/8-bit loading. Fixed in "
        f"{row['fixed_by']}.",
        {"bitsandbytes": str(bnb), "triton": f"{triton_dist.name}=={triton}", "fixed_by": row["fixed_by"],
         "source": row["source"]},
        fixes_for("bitsandbytes-triton-incompatible", {"fixed_by": row["fixed_by"], **judged_python(system, packages)}),
    )]


def _torch_requirement(requires):
    # here, not at module level: the requirement grammar costs 10-19 ms to import (probes/packages.py)
    from packaging.requirements import InvalidRequirement, Requirement

    for line in requires:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if requirement.name.lower() == "torch" and (requirement.marker is None or requirement.marker.evaluate({"extra": ""})):
            return requirement
    return None


def check_xformers_abi_mismatch(packages, xformers, system=None):
    if xformers.version is None:
        raise Skip("xformers is not installed")
    torch = _installed(packages, "torch")
    if xformers.unknown_reason:
        raise Skip(xformers.unknown_reason)
    requirement = _torch_requirement(xformers.requires)
    if requirement is None or not requirement.specifier:
        raise Skip(f"xformers {xformers.version}'s metadata names no torch version (a build from source is compiled "
                   "against the torch present when it was built, which the metadata does not record)")
    specifier = requirement.specifier
    pinned = next((s.version for s in specifier if s.operator == "=="), None)
    if pinned is None and xformers.built_here is not False:
        # A wheel pip built here (or one whose WHEEL file is unreadable) declares only what its
        # setup.py asks (torch>=2.4): the torch it was compiled against is not recorded anywhere.
        raise Skip(f"xformers {xformers.version} was " + ("built on this machine" if xformers.built_here else
                   "installed without a readable WHEEL file") + f"; its metadata ({requirement}) does not say which torch "
                   "it was compiled against")
    # Local labels (+cu126) do not take part: pip matches `torch==2.5.1` to 2.5.1+cu124 too.
    if specifier.contains(Version(torch.public), prereleases=True):
        return []
    built_for = f"torch {pinned}" if pinned else f"torch{specifier}"
    return [finding(
        "xformers-abi-mismatch",
        f"xformers {xformers.version} was built for {built_for} (its metadata: `Requires-Dist: {requirement}`) but "
        f"torch {torch} is installed: its C++/CUDA extensions will not load (`xFormers can't load C++/CUDA "
        "extensions`) and memory_efficient_attention has no operator.",
        {"xformers": xformers.version, "requires": str(requirement), "torch": str(torch),
         "metadata": xformers.metadata_path},
        fixes_for("xformers-abi-mismatch", {"torch": str(torch), "built_for": built_for, **judged_python(system, packages)}),
    )]
