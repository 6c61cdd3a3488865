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


def gpu_xid_errors(v: Mapping[str, Any]) -> list[Fix]:
    """Nothing automatic: a reset or reboot ends every job on the GPU, which is the admin's call."""
    index, pci = v.get("gpu_index"), v.get("pci", "?")
    see = SuggestCommand("sudo dmesg | grep 'NVRM: Xid'")
    if index is None:
        return [Fix("manual", f"Find the GPU at PCI {pci}: if it is this machine's and NVML no longer lists it, it fell "
                              "off the bus and the node needs a reboot; if it is another container's, tell its owner "
                              "or the node's admin.",
                    (SuggestCommand(f"lspci -s {pci}"), SuggestCommand("nvidia-smi --query-gpu=index,pci.bus_id --format=csv"), see))]
    if v.get("severity") == "error":
        if v.get("reboot"):  # a GPU that fell off the bus does not answer a reset
            return [Fix("manual", "Drain the node (stop its jobs) and reboot it, as the Xid asks; if the GPU fails again "
                                  "after that, report it to your admin or provider (power, seating, or the GPU itself).",
                        (see,))]
        return [Fix("manual", "Drain the GPU (stop the jobs on it) and reset it as root, as NVIDIA's catalog asks for "
                              "this Xid (or reboot the node); if it comes back after that, report the GPU to your admin "
                              "or provider for service.",
                    (SuggestCommand(f"sudo nvidia-smi -r -i {index}"), see))]
    if v.get("severity") == "warning":
        return [Fix("manual", "Keep jobs off it if they die again; reset the GPU when convenient (as root) and watch its "
                              "memory error counters: a count that grows means the GPU needs service.",
                    (SuggestCommand(f"nvidia-smi -q -d ECC,ROW_REMAPPER -i {index}"), see))]
    return [Fix("manual", "Most likely the application that ran then (NVIDIA: restart it); if it recurs with correct "
                          "code, run it under compute-sanitizer to find the faulting kernel.",
                (SuggestCommand("compute-sanitizer python your_script.py"), see))]


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
