"""Reading NCCL's NCCL_DEBUG=INFO lines and judging bandwidth against the links: pure functions
of text and numbers, unit-tested on real lines.

Lines look like (NCCL 2.18-2.28):
  host:1234:1290 [0] NCCL INFO NCCL version 2.28.9+cuda13.0
  host:1234:1290 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
  host:1234:1290 [0] NCCL INFO Channel 01/0 : 1[1] -> 0[0] [send] via NET/Socket/0
  host:1234:1290 [0] NCCL INFO Using network Socket
  host:1234:1290 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1.
"""

from __future__ import annotations

import re
from collections import Counter

_CHANNEL = re.compile(r"NCCL INFO Channel \d+(?:/\d+)? ?: (\d+)\[[^\]]*\] -> (\d+)\[[^\]]*\](?: \[\w+\])? via ([^\r\n]+)")
_NETWORK = re.compile(r"NCCL INFO Using network (\S+)")
_VERSION = re.compile(r"NCCL version (\S+)")  # printed with and without the "NCCL INFO" prefix
_SET_BY_ENV = re.compile(r"NCCL INFO (NCCL_\w+) set by environment to ([^\s.]+)")

# nvmlDeviceGetNvLinkVersion answers nvml.h's NVML_NVLINK_VERSION_* enum, not the generation:
# 1: 1.0, 2: 2.0, 3: 2.2, 4: 3.0, 5: 3.1, 6: 4.0, 7: 5.0 (an H200 answers 6, seen on the device).
NVLINK_GENERATION = {1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 5}
# Unidirectional GB/s of one link by generation (1: P100, 2: V100, 3: A100, 4: H100/H200,
# 5: B200): NVIDIA's per-GPU totals (160/300/600/900/1800 GB/s bidirectional) over their link
# counts (4/6/12/18/18), halved for one direction.
NVLINK_GBS_PER_LINK = {1: 20.0, 2: 25.0, 3: 25.0, 4: 25.0, 5: 50.0}
# PCIe usable GB/s per lane and direction after line coding (gen1-2 8b/10b, gen3+ 128b/130b).
PCIE_GBS_PER_LANE = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
LOW_FRACTION = 0.4  # below 40% of what the link allows is a fault, not tuning


def parse_nccl_info(text: str) -> dict:
    transports = Counter()
    for match in _CHANNEL.finditer(text):
        transports[re.sub(r"/\d+$", "", match.group(3).strip())] += 1  # NET/Socket/0 -> NET/Socket
    network = _NETWORK.search(text)
    version = _VERSION.search(text)
    return {
        "transports": dict(transports),
        "network": network.group(1) if network else None,
        "nccl_version": version.group(1) if version else None,
        "set_by_environment": dict(_SET_BY_ENV.findall(text)),
    }


def link_bandwidth(links: dict) -> tuple[float | None, str]:
    """What one GPU's links allow in one direction (GB/s), and how that was decided."""
    active = links.get("nvlink_active") or 0
    generation = NVLINK_GENERATION.get(links.get("nvlink_version"))
    if active:
        if generation is None:
            return None, f"{active} NVLinks of an unknown version ({links.get('nvlink_version')})"
        per_link = NVLINK_GBS_PER_LINK[generation]
        return active * per_link, f"{active} NVLink {generation} links x {per_link:g} GB/s"
    gen, width = links.get("pcie_gen_max"), links.get("pcie_width_max")
    if gen in PCIE_GBS_PER_LANE and width:
        return PCIE_GBS_PER_LANE[gen] * width, f"PCIe gen {gen} x{width}"
    return None, "link bandwidth unknown"
