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
    Check("c-compiler-missing", ("toolchain", "packages", "env", "system"), toolchain.check_c_compiler_missing),
    Check("nvcc-host-compiler-unsupported", ("toolchain", "system"), toolchain.check_nvcc_host_compiler_unsupported),
    Check("cuda-home-missing", ("toolchain", "packages"), toolchain.check_cuda_home_missing),
    Check("cuda-version-mismatch", ("toolchain", "packages"), toolchain.check_cuda_version_mismatch),
    Check("python-headers-missing", ("python_headers", "packages", "system"), builds.check_python_headers_missing),
    Check("host-compiler-too-old", ("toolchain", "packages", "system"), builds.check_host_compiler_too_old),
    # GPU capability
    Check("torch-arch-unsupported", ("driver", "packages", "system"), capability.check_torch_arch_unsupported),
    Check("bf16-unsupported", ("driver",), capability.check_bf16_unsupported),
    Check("flash-attn-arch-unsupported", ("driver", "packages"), capability.check_flash_attn_arch_unsupported),
    Check("flash-attn-head-dim-unsupported", ("driver", "packages", "requirements"), capability.check_flash_attn_head_dim_unsupported),
    Check("triton-arch-unsupported", ("driver", "packages"), capability.check_triton_arch_unsupported),
    # packages
    Check("torch-cpu-only", ("packages", "driver", "system"), packages.check_torch_cpu_only),
    Check("triton-missing", ("packages", "system"), packages.check_triton_missing),
    Check("triton-version-mismatch", ("packages", "system"), packages.check_triton_version_mismatch),
    Check("flash-attn-abi-mismatch", ("packages", "system"), packages.check_flash_attn_abi_mismatch),
    Check("bitsandbytes-cuda-setup", ("packages", "driver", "env", "system"), packages.check_bitsandbytes_cuda_setup),
    Check("duplicate-distributions", ("packages", "system"), packages.check_duplicate_distributions),
    Check("peft-transformers-incompatible", ("packages", "system"), compat.check_peft_transformers_incompatible),
    Check("bitsandbytes-triton-incompatible", ("packages", "system"), compat.check_bitsandbytes_triton_incompatible),
    Check("xformers-abi-mismatch", ("packages", "xformers", "system"), compat.check_xformers_abi_mismatch),
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
