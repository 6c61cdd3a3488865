"""Checks on the driver and its libraries."""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

from ..knowledge import load_tables
from ..model import Severity
from ..probes.driver import HIDDEN_VISIBLE_DEVICES
from .base import Skip, finding, fixes_for


def check_no_nvidia_driver(driver):
    if driver.gpu_present is None:
        raise Skip("cannot tell whether an NVIDIA GPU is present (/sys/bus/pci unreadable and NVML unavailable)")
    if not driver.pci_gpus and not driver.module_version and not driver.nvml.ok:
        raise Skip("no NVIDIA GPU on this machine")
    if driver.module_version is None and driver.nvml.error_kind in ("library-not-found", "driver-not-loaded"):
        return [finding(
            "no-nvidia-driver",
            f"{len(driver.pci_gpus)} NVIDIA GPU(s) on the PCI bus, but the kernel module is not loaded "
            f"({driver.module_error}) and NVML says: {driver.nvml.error}.",
            {"pci_gpus": list(driver.pci_gpus), "nvml_error": driver.nvml.error, "module": driver.module_error},
            fixes_for("no-nvidia-driver"),
        )]
    return []


def check_no_gpu_visible(driver):
    visible = driver.cuda_visible_devices
    if visible is not None and visible.strip() in HIDDEN_VISIBLE_DEVICES:
        return [finding(
            "no-gpu-visible",
            f"CUDA_VISIBLE_DEVICES={visible!r} hides every GPU from CUDA.",
            {"CUDA_VISIBLE_DEVICES": visible},
            fixes_for("no-gpu-visible", {"cuda_visible_devices_hides_all": True}),
        )]
    if not driver.nvml.ok:
        raise Skip(f"NVML unavailable ({driver.nvml.error_kind}: {driver.nvml.error})")
    if not driver.nvml.devices:
        return [finding("no-gpu-visible", "The driver is loaded but reports no GPU.",
                        {"driver_version": driver.nvml.driver_version},
                        fixes_for("no-gpu-visible"))]
    return []


def check_driver_library_mismatch(driver):
    if driver.nvml.error_kind == "mismatch":
        return [finding(
            "driver-library-mismatch",
            f"NVML: {driver.nvml.error}. The loaded kernel module is {driver.module_version or 'unknown'}; "
            "the user-space libraries are from another driver release (usually an upgrade without a reboot).",
            {"module_version": driver.module_version, "nvml_error": driver.nvml.error},
            fixes_for("driver-library-mismatch"),
        )]
    if not driver.nvml.ok or not driver.module_version or not driver.nvml.driver_version:
        raise Skip("needs both the kernel module version and NVML")
    if driver.module_version != driver.nvml.driver_version:
        return [finding(
            "driver-library-mismatch",
            f"Kernel module {driver.module_version} but NVML library {driver.nvml.driver_version}.",
            {"module_version": driver.module_version, "library_version": driver.nvml.driver_version},
            fixes_for("driver-library-mismatch"),
        )]
    return []


def check_driver_too_old(driver, packages):
    torch_cuda = packages.torch_cuda
    if torch_cuda is None:
        raise Skip("no CUDA build of torch installed")
    if driver.cuda_driver is None:
        raise Skip("driver CUDA version unknown (NVML unavailable)")
    tables = load_tables()["cuda_min_driver"]
    need_major = tables["major"].get(str(torch_cuda[0]))
    full = tables["toolkit"].get(f"{torch_cuda[0]}.{torch_cuda[1]}")
    evidence = {
        "driver_version": driver.driver_version,
        "driver_cuda": f"{driver.cuda_driver[0]}.{driver.cuda_driver[1]}",
        "torch": str(packages.version("torch")),
        "torch_cuda": f"{torch_cuda[0]}.{torch_cuda[1]}",
    }
    if driver.cuda_driver[0] < torch_cuda[0]:
        return [finding(
            "driver-too-old",
            f"torch {packages.version('torch')} is built for CUDA {torch_cuda[0]}.{torch_cuda[1]}, but driver "
            f"{driver.driver_version} supports CUDA {driver.cuda_driver[0]}.{driver.cuda_driver[1]}; "
            f"CUDA {torch_cuda[0]}.x needs driver >= {need_major}.",
            {**evidence, "minimum_driver": need_major},
            fixes_for("driver-too-old", {"min_driver": full or need_major, "torch_cuda": evidence["torch_cuda"]}),
        )]
    if driver.cuda_driver < torch_cuda:
        return [finding(
            "driver-too-old",
            f"Driver {driver.driver_version} supports CUDA {driver.cuda_driver[0]}.{driver.cuda_driver[1]}, older than "
            f"torch's CUDA {torch_cuda[0]}.{torch_cuda[1]}. It runs through minor-version compatibility, but "
            "kernels compiled to newer PTX (Triton, JIT extensions) may fail to load.",
            {**evidence, "recommended_driver": full},
            fixes_for("driver-too-old", {"min_driver": full, "torch_cuda": evidence["torch_cuda"]}),
            severity=Severity.WARNING,
        )]
    return []


def _version(text):
    try:
        return Version(text)
    except (InvalidVersion, TypeError):
        return None


def check_cuda_compat_lib_mismatch(driver, libcuda):
    if not driver.module_version:
        raise Skip("kernel module version unknown")
    module = _version(driver.module_version)
    findings = []
    for entry in libcuda.dirs:
        if not entry.is_compat or not entry.version:
            continue
        active = any(s in entry.sources for s in ("ldconfig", "LD_LIBRARY_PATH"))
        if not active:
            continue
        compat = _version(entry.version)
        if compat is None or module is None or compat == module:
            continue
        older = compat < module
        findings.append(finding(
            "cuda-compat-lib-mismatch",
            f"Forward-compat libcuda {entry.version} in {entry.path} is on the library path, but the kernel "
            f"driver is {driver.module_version}"
            + (" — an older compat library than the driver breaks CUDA (error 803)." if older else
               " — forward compatibility only works on datacenter GPUs with a supported driver branch."),
            {"compat_dir": entry.path, "compat_version": entry.version, "module_version": driver.module_version,
             "via": list(entry.sources)},
            fixes_for("cuda-compat-lib-mismatch", {"compat_dir": entry.path}),
            severity=Severity.ERROR if older else None,
        ))
    return findings


def check_libcuda_not_in_linker_cache(libcuda, packages):
    real = libcuda.real_dirs()
    if libcuda.ldconfig_paths:
        return []
    if not real:
        raise Skip("no libcuda.so.1 found on this machine (see the driver checks)")
    on_loader_path = [d for d in real if "LD_LIBRARY_PATH" in d.sources]
    triton_ok = libcuda.triton_dirs_error is None
    if on_loader_path and triton_ok:
        return []  # the loader and Triton both find it through LD_LIBRARY_PATH
    where = (on_loader_path or real)[0].path
    reason = (f"`/sbin/ldconfig -p` fails ({libcuda.ldconfig_error})" if not libcuda.ldconfig_ok
              else "`/sbin/ldconfig -p` does not list libcuda.so.1")
    consequences = []
    if not on_loader_path:
        consequences.append("the dynamic loader cannot load it (torch reports no CUDA driver)")
    if not triton_ok and packages.triton:
        consequences.append("Triton fails with `libcuda.so cannot found!`")
    message = f"{reason}, but libcuda.so.1 exists in {where}: " + " and ".join(consequences or ["tools that ask ldconfig miss it"]) + "."
    fixes = fixes_for("libcuda-not-in-linker-cache", {"libcuda_dirs": (where,)})
    return [finding(
        "libcuda-not-in-linker-cache", message,
        {"libcuda_dirs": [d.path for d in real], "ldconfig_ok": libcuda.ldconfig_ok,
         "on_ld_library_path": bool(on_loader_path), "triton_dirs_error": libcuda.triton_dirs_error},
        fixes,
    )]


def check_libcuda_unversioned_missing(link, libcuda, dirs):
    if link.skip_reason:
        raise Skip(link.skip_reason)
    result = link.result
    evidence = {"triton": link.triton_version, "link_flag": link.flag, "cc": link.cc,
                "lib_dirs": list(link.lib_dirs), "link_command": " ".join(result.command),
                "link_output": result.output.strip()[-500:]}
    if result.ok:
        return []
    real = [d for d in libcuda.real_dirs() if d.path in link.lib_dirs] or libcuda.real_dirs()
    if not real:
        raise Skip("the link failed but no real libcuda.so.1 exists to point at")
    target_dir = real[0].path
    return [finding(
        "libcuda-unversioned-missing",
        f"Triton {link.triton_version} links its launcher with `{link.flag}`, and that link fails here: "
        f"{result.output.strip().splitlines()[0] if result.output.strip() else 'the linker failed'}. "
        f"{target_dir} has libcuda.so.1 but no unversioned libcuda.so.",
        evidence,
        fixes_for("libcuda-unversioned-missing", {"libcuda_dirs": (target_dir,), "dirs": dirs}),
    )]


def check_libcuda_stub_at_runtime(libcuda):
    findings = []
    for entry in libcuda.dirs:
        if not entry.is_stub:
            continue
        runtime = [s for s in entry.sources if s in ("LD_LIBRARY_PATH", "ldconfig")]
        if not runtime:
            continue
        findings.append(finding(
            "libcuda-stub-at-runtime",
            f"The stub libcuda in {entry.path} is on the runtime search path ({', '.join(runtime)}); "
            "CUDA calls will fail with CUDA_ERROR_STUB_LIBRARY.",
            {"stub_dir": entry.path, "via": runtime},
            fixes_for("libcuda-stub-at-runtime", {"stub_dirs": (entry.path,)}),
        ))
    return findings
