"""What one rank (or one recorded snapshot) contributes to the comparison: a flat mapping of
named, comparable values, taken from the same facts the static checks use. Torch-free, so
`gpudoctor diff` compares snapshots with it on any machine."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..host.redact import redact_env

# Distributions whose versions must match across ranks. NCCL ships in torch's CUDA wheels as
# nvidia-nccl-cu1x (conda builds carry it inside torch, where only torch's version tells).
VERSIONED_PACKAGES = ("torch", "triton", "pytorch-triton", "nvidia-nccl-cu11", "nvidia-nccl-cu12", "nvidia-nccl-cu13",
                      "bitsandbytes", "flash-attn", "xformers", "transformers", "peft", "trl", "accelerate",
                      "deepspeed", "unsloth")
ENV_NAMES = ("LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES")
ENV_PREFIXES = ("NCCL_",)

# kind -> how a difference is judged: versions are errors (collectives of different NCCL or torch
# versions hang or crash), the rest warnings, placement is shown but expected to differ per rank.
KINDS = ("version", "gpu", "system", "env", "placement")


@dataclass(frozen=True)
class Compared:
    """One value compared across ranks, with its kind (one of KINDS), which decides how a difference is judged."""

    kind: str
    value: str


def _try(facts, name: str):
    try:
        return facts.get(name)
    except Exception:  # noqa: BLE001 - a failed probe is reported by its checks; here it is "unknown"
        return None


def rank_gpu_index(cuda_visible_devices: str | None, local_rank: int, health=None) -> int | None:
    """The NVML index of the GPU this rank uses (cuda:LOCAL_RANK after CUDA_VISIBLE_DEVICES
    remaps it); None when it cannot be told (MIG instances, too few visible devices)."""
    if cuda_visible_devices is None or cuda_visible_devices.strip() == "":
        return local_rank if cuda_visible_devices is None else None
    entries = [e.strip() for e in cuda_visible_devices.split(",") if e.strip()]
    if local_rank >= len(entries):
        return None
    entry = entries[local_rank]
    if entry.isdigit():
        return int(entry)
    if entry.startswith("GPU-") and health:
        return next((h.index for h in health if h.uuid and h.uuid.startswith(entry)), None)
    return None


def rank_gpu(facts, local_rank: int) -> dict[str, Any] | None:
    """The rank's own GPU as plain values (for the report's ``ranks`` array)."""
    driver = _try(facts, "driver")
    if driver is None or not driver.nvml.ok:
        return None
    index = rank_gpu_index(driver.cuda_visible_devices, local_rank, driver.nvml.health)
    device = next((d for d in driver.nvml.devices if d.index == index), None)
    if device is None:
        return None
    health = next((h for h in driver.nvml.health or () if h.index == index), None)
    return {"index": device.index, "name": device.name, "memory_total": device.memory_total,
            "compute_capability": f"{device.compute_capability[0]}.{device.compute_capability[1]}",
            "uuid": health.uuid if health else None, "pci_bus_id": health.pci_bus_id if health else None,
            "mig": health.mig_enabled if health else None}


def comparable_facts(facts, local_rank: int = 0) -> dict[str, Compared]:
    """name -> (kind, value) for everything compared across ranks. A value that could not be
    learned is 'unknown (…)', and an absent package or variable 'absent', so an absence that
    differs is a difference too."""
    out: dict[str, Compared] = {}
    driver = _try(facts, "driver")
    if driver is not None:
        out["NVIDIA driver"] = Compared("version", driver.driver_version or f"unknown ({driver.nvml.error or driver.module_error})")
        cuda = driver.cuda_driver
        out["CUDA (driver)"] = Compared("version", f"{cuda[0]}.{cuda[1]}" if cuda else "unknown")
        gpu = rank_gpu(facts, local_rank)
        if gpu is not None:
            out["GPU model"] = Compared("gpu", gpu["name"])
            out["GPU memory"] = Compared("gpu", f"{gpu['memory_total'] / 2**30:.1f} GiB")
            out["GPU compute capability"] = Compared("gpu", gpu["compute_capability"])
            out["GPU MIG mode"] = Compared("gpu", {True: "on", False: "off", None: "unknown"}[gpu["mig"]])
            out["GPU index"] = Compared("placement", str(gpu["index"]))
        else:
            out["GPU model"] = Compared("gpu", "none visible" if driver.nvml.ok else f"unknown (NVML {driver.nvml.error_kind})")
        out["GPUs on the host"] = Compared("gpu", str(len(driver.nvml.devices)) if driver.nvml.ok else "unknown")
    packages = _try(facts, "packages")
    if packages is not None:
        for name in VERSIONED_PACKAGES:
            dist = packages.get(name)
            out[name] = Compared("version", dist.version if dist else "absent")
    system = _try(facts, "system")
    if system is not None and system.info is not None:
        out["Python"] = Compared("version", system.info.python_version)
        out["OS"] = Compared("system", system.info.distro_name)
        out["kernel"] = Compared("system", system.info.kernel)
    env = redact_env(_try(facts, "env") or {})
    for name in ENV_NAMES:
        kind = "placement" if name == "CUDA_VISIBLE_DEVICES" else "env"
        out[f"${name}"] = Compared(kind, env.get(name, "absent"))
    for name in sorted(k for k in env if k.startswith(ENV_PREFIXES)):
        out[f"${name}"] = Compared("env", env[name])
    return out


def to_json(values: Mapping[str, Compared]) -> dict[str, list[str]]:
    return {key: [c.kind, c.value] for key, c in values.items()}


def from_json(data: Mapping[str, Any]) -> dict[str, Compared]:
    return {key: Compared(str(kind), str(value)) for key, (kind, value) in data.items()}
