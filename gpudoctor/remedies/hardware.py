"""Remedies for GPU hardware health (NVML) and for multi-rank jobs: these fixes are steps for a
person with access to the node or the launcher, so they are manual, with the commands to run."""

from __future__ import annotations

from typing import Any, Mapping

from ..model import Fix, SuggestCommand


def gpu_ecc_errors(v: Mapping[str, Any]) -> list[Fix]:
    index = v.get("gpu_index", 0)
    if v.get("volatile"):
        return [Fix("manual", "Drain this GPU: stop jobs on it, then reset it (as root) or reboot; if errors return, "
                              "report the GPU to your provider for replacement.", (SuggestCommand(f"sudo nvidia-smi -r -i {index}"),))]
    return [Fix("manual", "Watch it: a count that grows means the memory is failing.",
                (SuggestCommand(f"nvidia-smi -q -d ECC,ROW_REMAPPER -i {index}"),))]


def gpu_row_remap_pending(v: Mapping[str, Any]) -> list[Fix]:
    if v.get("remap_failed"):
        return [Fix("manual", "Take the GPU out of service and report it to your provider (a failed remapping is a "
                              "hardware fault).")]
    return [Fix("manual", "Drain the GPU and reset it (as root) or reboot the node, so the remapping takes effect.",
                (SuggestCommand(f"sudo nvidia-smi -r -i {v.get('gpu_index', 0)}"),))]


def gpu_throttled(v: Mapping[str, Any]) -> list[Fix]:
    return [Fix("manual", "Check cooling and power: airflow, fans, the power supply and its cabling; a hardware slowdown "
                          "that persists on a cool GPU is a fault to report.",
                (SuggestCommand(f"nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER -i {v.get('gpu_index', 0)}"),))]


def pcie_link_degraded(v: Mapping[str, Any]) -> list[Fix]:
    return [Fix("manual", "Reseat the GPU or its riser and check the slot's wiring and the BIOS PCIe setting; compare "
                          "the link's capability with its status (LnkCap vs LnkSta).",
                (SuggestCommand(f"nvidia-smi -q -d PCIE -i {v.get('gpu_index', 0)}"), SuggestCommand("lspci -vv")))]


def gpu_persistence_mode_off(v: Mapping[str, Any]) -> list[Fix]:
    return [Fix("manual", "Run the persistence daemon, or turn persistence mode on until the next reboot.",
                (SuggestCommand("sudo systemctl enable --now nvidia-persistenced"), SuggestCommand("sudo nvidia-smi -pm 1")))]


def ranks_differ(v: Mapping[str, Any]) -> list[Fix]:
    return [Fix("manual", f"Make {v.get('subject', 'it')} the same everywhere ({v.get('agreeing', '?')}): {v.get('how', '')}.")]


def rank_unreachable(v: Mapping[str, Any]) -> list[Fix]:
    which = v.get("which", "the missing ranks")
    return [Fix("manual", f"Find {which}'s host in the launcher's log: check the process is alive and can reach "
                          "MASTER_ADDR:MASTER_PORT; raise --rank-timeout if that node is only slow to start.",
                (SuggestCommand("nc -zv $MASTER_ADDR $MASTER_PORT"),))]


def nccl_bandwidth_low(v: Mapping[str, Any]) -> list[Fix]:
    return [Fix("manual", "Unset the NCCL_*_DISABLE variables named above; if P2P is blocked, disable PCIe ACS on the "
                          "switches between the GPUs (NCCL troubleshooting guide) and confirm with nccl-tests' "
                          "all_reduce_perf.")]
