"""The explicit registry of static checks: one per rule id, in report order."""

from __future__ import annotations

from . import builds, capability, compat, driver, health, libraries, packages, runtime, toolchain
from .base import Check, Skip

CHECKS: tuple[Check, ...] = (
    # driver and libraries
    Check("no-nvidia-driver", ("driver",), driver.check_no_nvidia_driver),
    Check("no-gpu-visible", ("driver",), driver.check_no_gpu_visible),
    Check("driver-library-mismatch", ("driver",), driver.check_driver_library_mismatch),
    Check("driver-too-old", ("driver", "packages"), driver.check_driver_too_old),
    Check("cuda-compat-lib-mismatch", ("driver", "libcuda"), driver.check_cuda_compat_lib_mismatch),
    Check("libcuda-not-in-linker-cache", ("libcuda", "packages"), driver.check_libcuda_not_in_linker_cache),
    Check("libcuda-unversioned-missing", ("link", "libcuda", "dirs"), driver.check_libcuda_unversioned_missing),
    Check("libcuda-stub-at-runtime", ("libcuda",), driver.check_libcuda_stub_at_runtime),
    # toolchain
    Check("c-compiler-missing", ("toolchain", "packages", "env"), toolchain.check_c_compiler_missing, wording=("system",)),
    Check("nvcc-host-compiler-unsupported", ("toolchain",), toolchain.check_nvcc_host_compiler_unsupported, wording=("system",)),
    Check("cuda-home-missing", ("toolchain", "packages"), toolchain.check_cuda_home_missing),
    Check("cuda-version-mismatch", ("toolchain", "packages"), toolchain.check_cuda_version_mismatch),
    Check("python-headers-missing", ("python_headers", "packages"), builds.check_python_headers_missing, wording=("system",)),
    Check("host-compiler-too-old", ("toolchain", "packages"), builds.check_host_compiler_too_old, wording=("system",)),
    # GPU capability
    Check("torch-arch-unsupported", ("driver", "packages"), capability.check_torch_arch_unsupported, wording=("system",)),
    Check("bf16-unsupported", ("driver",), capability.check_bf16_unsupported),
    Check("flash-attn-arch-unsupported", ("driver", "packages"), capability.check_flash_attn_arch_unsupported),
    Check("flash-attn-head-dim-unsupported", ("driver", "packages", "requirements"), capability.check_flash_attn_head_dim_unsupported),
    Check("triton-arch-unsupported", ("driver", "packages"), capability.check_triton_arch_unsupported),
    # packages
    Check("torch-cpu-only", ("packages", "driver"), packages.check_torch_cpu_only, wording=("system",)),
    Check("triton-missing", ("packages",), packages.check_triton_missing, wording=("system",)),
    Check("triton-version-mismatch", ("packages",), packages.check_triton_version_mismatch, wording=("system",)),
    Check("flash-attn-abi-mismatch", ("packages",), packages.check_flash_attn_abi_mismatch, wording=("system",)),
    Check("bitsandbytes-cuda-setup", ("packages", "driver", "env"), packages.check_bitsandbytes_cuda_setup, wording=("system",)),
    Check("duplicate-distributions", ("packages",), packages.check_duplicate_distributions, wording=("system",)),
    Check("peft-transformers-incompatible", ("packages",), compat.check_peft_transformers_incompatible, wording=("system",)),
    Check("bitsandbytes-triton-incompatible", ("packages",), compat.check_bitsandbytes_triton_incompatible, wording=("system",)),
    Check("xformers-abi-mismatch", ("packages", "xformers"), compat.check_xformers_abi_mismatch, wording=("system",)),
    Check("cuda-library-shadowed", ("ld_path_libraries", "packages"), libraries.check_cuda_library_shadowed),
    # runtime
    Check("triton-cache-unwritable", ("runtime", "packages", "dirs"), runtime.check_triton_cache_unwritable),
    Check("shm-too-small", ("system",), runtime.check_shm_too_small),
    Check("ld-library-path-insecure", ("runtime",), runtime.check_ld_library_path_insecure),
    # hardware health (NVML)
    Check("gpu-ecc-errors", ("health",), health.check_gpu_ecc_errors),
    Check("gpu-row-remap-pending", ("health",), health.check_gpu_row_remap_pending),
    Check("gpu-throttled", ("health",), health.check_gpu_throttled),
    Check("pcie-link-degraded", ("health",), health.check_pcie_link_degraded),
    Check("gpu-persistence-mode-off", ("health",), health.check_gpu_persistence_mode_off),
    Check("gpu-xid-errors", ("kernel_log", "health"), health.check_gpu_xid_errors),
)

CHECKS_BY_ID = {check.id: check for check in CHECKS}

__all__ = ["CHECKS", "CHECKS_BY_ID", "Check", "Skip"]
