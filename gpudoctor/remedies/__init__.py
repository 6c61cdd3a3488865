"""Remedies: the one owner of every fixable rule's fixes.

One builder per rule, from plain values (what the detector saw: a captured gcc limit, the
compat directory, …) merged with the values of the machine (``Machine.values()``: the real
libcuda directory, installed compilers, the package manager, gpudoctor's directories). Every
detector (static checks, log signatures, the training pass, the project scan) calls
``fixes_for``; none writes a fix of its own, so the same facts always give the same fix."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ..model import Fix
from . import capability, code, diagnosis, driver, hardware, packages, runtime, toolchain, training
from .machine import Machine, machine_from_facts

Remedy = Callable[[Mapping[str, Any]], list[Fix]]

REMEDIES: dict[str, Remedy] = {
    # driver and libraries
    "no-nvidia-driver": driver.no_nvidia_driver,
    "no-gpu-visible": driver.no_gpu_visible,
    "driver-library-mismatch": driver.driver_library_mismatch,
    "driver-too-old": driver.driver_too_old,
    "cuda-compat-lib-mismatch": driver.cuda_compat_lib_mismatch,
    "libcuda-not-in-linker-cache": driver.libcuda_not_in_linker_cache,
    "libcuda-unversioned-missing": driver.libcuda_unversioned_missing,
    "libcuda-stub-at-runtime": driver.libcuda_stub_at_runtime,
    # toolchain
    "c-compiler-missing": toolchain.c_compiler_missing,
    "nvcc-host-compiler-unsupported": toolchain.nvcc_host_compiler_unsupported,
    "cuda-home-missing": toolchain.cuda_home_missing,
    "cuda-version-mismatch": toolchain.cuda_version_mismatch,
    # GPU capability
    "torch-arch-unsupported": capability.torch_arch_unsupported,
    "bf16-unsupported": capability.bf16_unsupported,
    "flash-attn-arch-unsupported": capability.flash_attn_arch_unsupported,
    "flash-attn-head-dim-unsupported": capability.flash_attn_head_dim_unsupported,
    "triton-arch-unsupported": capability.triton_arch_unsupported,
    # packages
    "torch-cpu-only": packages.torch_cpu_only,
    "triton-missing": packages.triton_missing,
    "triton-version-mismatch": packages.triton_version_mismatch,
    "flash-attn-abi-mismatch": packages.flash_attn_abi_mismatch,
    "bitsandbytes-cuda-setup": packages.bitsandbytes_cuda_setup,
    "duplicate-distributions": packages.duplicate_distributions,
    # runtime
    "triton-cache-unwritable": runtime.triton_cache_unwritable,
    "shm-too-small": runtime.shm_too_small,
    "ld-library-path-insecure": runtime.ld_library_path_insecure,
    "cuda-oom": runtime.cuda_oom,
    "nccl-failure": runtime.nccl_failure,
    # training code and the training pass
    "unsloth-layers-not-patched": training.unsloth_layers_not_patched,
    "transformers-removed-kwarg": training.transformers_removed_kwarg,
    "trl-sfttrainer-api-change": training.trl_sfttrainer_api_change,
    "training-config-key-changed": code.training_config_key_changed,
    "triton-jit-failed": training.triton_jit_failed,
    "kernel-numerics-mismatch": training.kernel_numerics_mismatch,
    "training-pass-diverged": training.training_pass_diverged,
    # failures only a log shows (gpudoctor/remedies/diagnosis.py)
    "nccl-timeout": diagnosis.nccl_timeout,
    "fp16-params-with-grad-scaler": diagnosis.fp16_params_with_grad_scaler,
    "gradient-checkpointing-no-input-grads": diagnosis.gradient_checkpointing_no_input_grads,
    "bitsandbytes-triton-incompatible": diagnosis.bitsandbytes_triton_incompatible,
    "windows-dll-load-failed": diagnosis.windows_dll_load_failed,
    "cuda-library-shadowed": diagnosis.cuda_library_shadowed,
    "python-headers-missing": diagnosis.python_headers_missing,
    "host-compiler-too-old": diagnosis.host_compiler_too_old,
    "xformers-abi-mismatch": diagnosis.xformers_abi_mismatch,
    "token-id-out-of-range": diagnosis.token_id_out_of_range,
    "weights-offloaded-to-cpu": diagnosis.weights_offloaded_to_cpu,
    "peft-transformers-incompatible": diagnosis.peft_transformers_incompatible,
    # GPU hardware health and multi-rank jobs
    "gpu-ecc-errors": hardware.gpu_ecc_errors,
    "gpu-row-remap-pending": hardware.gpu_row_remap_pending,
    "gpu-throttled": hardware.gpu_throttled,
    "pcie-link-degraded": hardware.pcie_link_degraded,
    "gpu-persistence-mode-off": hardware.gpu_persistence_mode_off,
    "gpu-xid-errors": hardware.gpu_xid_errors,
    "ranks-differ": hardware.ranks_differ,
    "rank-unreachable": hardware.rank_unreachable,
    "nccl-bandwidth-low": hardware.nccl_bandwidth_low,
}


def fixes_for(rule_id: str, values: Mapping[str, Any] | None = None, machine: Machine | None = None) -> tuple[Fix, ...]:
    """The rule's fixes for what the detector saw (``values``) on ``machine`` (None: a log from
    an unknown machine; the remedy then says how to get the exact fix there). When the static
    check found the rule on ``machine``, its fixes are the answer: same facts, same fix."""
    if machine is not None and rule_id in machine.static_fixes:
        return machine.static_fixes[rule_id]  # the static check saw it here, with every value
    remedy = REMEDIES.get(rule_id)
    if remedy is None:
        return ()
    merged = {**(machine.values() if machine is not None else {}), **(values or {})}
    return tuple(remedy(merged))


__all__ = ["REMEDIES", "Machine", "fixes_for", "machine_from_facts"]
