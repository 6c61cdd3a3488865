"""Checks of what each GPU can run against what the installed software was built for."""

from __future__ import annotations

from packaging.version import Version

from ..knowledge import load_tables
from .base import Skip, cc_str, finding, fixes_for, gpus_or_skip, judged_python, parse_cc


def torch_arch_list(torch_version: Version, torch_cuda: tuple[int, int]) -> tuple[list[str], str] | None:
    """Archs of the official wheel for this torch and CUDA build, newest matching row first."""
    cuda = f"{torch_cuda[0]}.{torch_cuda[1]}"
    rows = [r for r in load_tables()["torch_cuda_archs"] if r["cuda"] == cuda
            and Version(torch_version.base_version) >= Version(r["min_torch"])]
    if not rows:
        return None
    row = max(rows, key=lambda r: Version(r["min_torch"]))
    return row["archs"].split(";"), f"tables.toml torch_cuda_archs (cu{cuda.replace('.', '')}, torch >= {row['min_torch']})"


def arch_supported(capability: tuple[int, int], archs: list[str]) -> bool:
    """Binary code for sm_XY runs on the same major with minor >= Y; PTX for compute_XY JITs on
    any GPU of capability >= XY."""
    for arch in archs:
        ptx = arch.endswith("+PTX")
        major, minor = parse_cc(arch.replace("+PTX", ""))
        if major == capability[0] and minor <= capability[1]:
            return True
        if ptx and (major, minor) <= capability:
            return True
    return False


def check_torch_arch_unsupported(driver, packages, system=None):
    torch = packages.version("torch")
    if torch is None or packages.torch_cuda is None:
        raise Skip("no CUDA build of torch installed")
    gpus = gpus_or_skip(driver)
    table = torch_arch_list(torch, packages.torch_cuda)
    if table is None:
        raise Skip(f"no arch table for torch {torch} (CUDA {cc_str(packages.torch_cuda)}); run `gpudoctor check --deep`")
    archs, source = table
    findings = []
    for gpu in gpus:
        if arch_supported(gpu.compute_capability, archs):
            continue
        sm = f"sm_{gpu.compute_capability[0]}{gpu.compute_capability[1]}"
        findings.append(finding(
            "torch-arch-unsupported",
            f"GPU {gpu.index} ({gpu.name}, {sm}) is not among the architectures torch {torch} was compiled for "
            f"({', '.join(archs)}): kernels fail with `no kernel image is available for execution on the device`.",
            {"gpu": gpu.name, "capability": cc_str(gpu.compute_capability), "torch": str(torch), "archs": archs, "source": source},
            fixes_for("torch-arch-unsupported", judged_python(system, packages)),
        ))
    return findings


def _min_cc(feature: str) -> tuple[int, int]:
    return parse_cc(load_tables()["feature_min_capability"][feature])


def check_bf16_unsupported(driver):
    gpus = gpus_or_skip(driver)
    need = _min_cc("bf16")
    return [finding(
        "bf16-unsupported",
        f"GPU {gpu.index} ({gpu.name}, compute {cc_str(gpu.compute_capability)}) has no native bf16 (needs {cc_str(need)}+): "
        "train with fp16=True instead of bf16.",
        {"gpu": gpu.name, "capability": cc_str(gpu.compute_capability)},
        fixes_for("bf16-unsupported"),
    ) for gpu in gpus if gpu.compute_capability < need]


def _flash_attn_generations(packages) -> list[tuple[str, str, str]]:
    found = []
    fa = packages.version("flash-attn")
    if fa is not None:
        feature = "flash_attn_1" if fa.major < 2 else "flash_attn_2"
        found.append(("flash-attn", str(fa), feature))
    fa3 = packages.version("flash-attn-3")
    if fa3 is not None:
        found.append(("flash-attn-3", str(fa3), "flash_attn_3"))
    return found


def check_flash_attn_arch_unsupported(driver, packages):
    generations = _flash_attn_generations(packages)
    if not generations:
        raise Skip("flash-attn is not installed")
    gpus = gpus_or_skip(driver)
    findings = []
    for dist, version, feature in generations:
        need = _min_cc(feature)
        for gpu in gpus:
            if gpu.compute_capability >= need:
                continue
            findings.append(finding(
                "flash-attn-arch-unsupported",
                f"{dist} {version} needs compute capability {cc_str(need)}+, but GPU {gpu.index} ({gpu.name}) is "
                f"{cc_str(gpu.compute_capability)}: `FlashAttention only supports Ampere GPUs or newer`.",
                {"package": dist, "version": version, "gpu": gpu.name, "capability": cc_str(gpu.compute_capability)},
                fixes_for("flash-attn-arch-unsupported"),
            ))
    return findings


def check_flash_attn_head_dim_unsupported(driver, packages, requirements):
    head_dims = requirements.get("head_dim") or []
    if not head_dims:
        raise Skip("no head_dim requested (use --require head_dim=N)")
    fa = packages.version("flash-attn")
    if fa is None:
        raise Skip("flash-attn is not installed")
    gpus = gpus_or_skip(driver)
    table = load_tables()["flash_attn_head_dim"]
    full_archs = {parse_cc(a) for a in table["large_backward_full_archs"]}
    threshold = (table["large_backward_threshold_new"] if fa >= Version(table["large_backward_min_version"])
                 else table["large_backward_threshold_old"])
    findings = []
    for head_dim in head_dims:
        for gpu in gpus:
            problem = None
            if head_dim > table["max"] or head_dim % table["multiple_of"]:
                problem = f"flash-attn supports head dims that are multiples of {table['multiple_of']} up to {table['max']}"
            elif gpu.compute_capability >= (8, 0) and gpu.compute_capability not in full_archs and head_dim > threshold:
                problem = (f"flash-attn {fa}'s backward for head dim > {threshold} needs an A100/H100 (sm80/sm90); "
                           f"this GPU is sm{gpu.compute_capability[0]}{gpu.compute_capability[1]}")
            elif gpu.compute_capability < (8, 0):
                problem = "flash-attn 2 does not run on this GPU at all"
            if problem:
                findings.append(finding(
                    "flash-attn-head-dim-unsupported",
                    f"head_dim {head_dim} on GPU {gpu.index} ({gpu.name}): {problem}.",
                    {"head_dim": head_dim, "flash_attn": str(fa), "gpu": gpu.name, "capability": cc_str(gpu.compute_capability)},
                    fixes_for("flash-attn-head-dim-unsupported"),
                ))
    return findings


def check_triton_arch_unsupported(driver, packages):
    version = packages.triton_version
    if version is None:
        raise Skip("Triton is not installed")
    gpus = gpus_or_skip(driver)
    tables = load_tables()
    minimum = _min_cc("triton")
    rows = [r for r in tables["triton_max_capability"] if Version(version.base_version) >= Version(r["min_triton"])]
    maximum = parse_cc(max(rows, key=lambda r: Version(r["min_triton"]))["max_capability"]) if rows else None
    findings = []
    for gpu in gpus:
        cc = gpu.compute_capability
        if cc < minimum:
            why = f"Triton needs compute capability {cc_str(minimum)}+"
        elif maximum and cc > maximum:
            why = f"Triton {version} knows GPUs up to {cc_str(maximum)}"
        else:
            continue
        findings.append(finding(
            "triton-arch-unsupported",
            f"GPU {gpu.index} ({gpu.name}, {cc_str(cc)}): {why}.",
            {"triton": str(version), "gpu": gpu.name, "capability": cc_str(cc)},
            fixes_for("triton-arch-unsupported"),
        ))
    return findings
