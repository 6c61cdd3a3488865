"""`nvidia-smi topo -m`: how each pair of GPUs is connected, read from its matrix. Pure
functions of text (parse) and of the parsed matrix (judge), plus the bounded run. Torch-free.

The matrix (nvidia-smi 580, 2x H200; the header is underlined with ANSI escapes):
  \\x1b[4m\\tGPU0\\tGPU1\\tCPU Affinity\\tNUMA Affinity\\tGPU NUMA ID\\x1b[0m
  GPU0\\t X \\tNV18\\t0-31\\t0\\t\\tN/A
  GPU1\\tNV18\\t X \\t0-31\\t0\\t\\tN/A
Devices are GPUn and NICn (older versions name NICs mlx5_0, …; NIC rows have no affinity
columns); pasted copies often have spaces for the tabs, so cells are split on whitespace and
the header on tabs or runs of spaces ("CPU Affinity" is one column).
"""

from __future__ import annotations

import re

TOPO_ARGV = ("nvidia-smi", "topo", "-m")
TOPO_TIMEOUT_S = 10.0  # tens of milliseconds with persistence mode; seconds without it on many GPUs
_TEXT_KEPT = 16384  # the raw matrix is kept with the result (8 GPUs and 9 NICs: ~3 KB)

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_DEVICE = re.compile(r"^(GPU\d+|NIC\d+|mlx\d+_\d+|[a-z]+\d*_\d+)$")

# The legend nvidia-smi prints under the matrix, in plain words; closest first.
CONNECTIONS = {
    "NV": "a bonded set of {n} NVLinks",
    "PIX": "at most one PCIe bridge",
    "PXB": "several PCIe bridges, without the PCIe host bridge",
    "PHB": "PCIe and a PCIe host bridge (the CPU)",
    "NODE": "PCIe and the interconnect between PCIe host bridges within a NUMA node",
    "SYS": "PCIe and the SMP interconnect between NUMA nodes (across CPU sockets, e.g. QPI/UPI)",
}
_ORDER = ("NV", "PIX", "PXB", "PHB", "NODE", "SYS")
# Paths through the CPU: NCCL_P2P_LEVEL (docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html)
# sets how far NCCL uses P2P (the 2.4 docs give the default as PHB, "potentially going through
# the CPU"; later NCCL picks it per platform); farther pairs go through host memory (SHM).
THROUGH_THE_CPU = ("PHB", "NODE", "SYS")


def parse_topology(text: str) -> dict:
    """{"devices": [...], "links": {a: {b: code}}, "cpu_affinity": {gpu: cpus}, "numa_affinity": {...}}
    or {"error": why} when no matrix is found."""
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines()]
    header_at, columns = None, []
    for i, line in enumerate(lines):
        cells = [c for c in re.split(r"\t+| {2,}", line.strip()) if c]
        # the header names GPU0 first; GPU0's own row follows its name with "X"
        if cells[:1] == ["GPU0"] and (len(cells) == 1 or cells[1] != "X"):
            header_at, columns = i, cells
            break
    if header_at is None:
        return {"error": "no GPU matrix in nvidia-smi topo -m's output"}
    devices = []
    for column in columns:
        if not _DEVICE.match(column):
            break
        devices.append(column)
    extra = columns[len(devices):]  # "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"
    links: dict[str, dict[str, str]] = {}
    cpu_affinity: dict[str, str] = {}
    numa_affinity: dict[str, str] = {}
    for line in lines[header_at + 1:]:
        cells = line.split()
        if not cells or cells[0] not in devices:
            if links and not cells:
                break  # the blank line before "Legend:"
            continue
        name, row = cells[0], cells[1:1 + len(devices)]
        links[name] = {other: cell for other, cell in zip(devices, row) if other != name}
        rest = cells[1 + len(devices):]
        if name.startswith("GPU") and rest and "CPU Affinity" in extra:
            cpu_affinity[name] = rest[0]
            if len(rest) > 1 and "NUMA Affinity" in extra:
                numa_affinity[name] = rest[1]
    if not links:
        return {"error": "nvidia-smi topo -m printed a header but no rows"}
    return {"devices": devices, "links": links, "cpu_affinity": cpu_affinity, "numa_affinity": numa_affinity}


def connection(topology: dict, gpu_a: int, gpu_b: int) -> str | None:
    """The matrix cell between two GPUs by NVML index ("NV18", "SYS", …), None if not in it."""
    return (topology.get("links") or {}).get(f"GPU{gpu_a}", {}).get(f"GPU{gpu_b}")


def kind(code: str) -> str:
    """"NV18" -> "NV"; the legend's other codes as they are."""
    return "NV" if re.fullmatch(r"NV\d+", code or "") else code


def describe(code: str) -> str:
    """The legend's meaning of one cell, in words."""
    if kind(code) == "NV":
        return CONNECTIONS["NV"].format(n=code[2:])
    return CONNECTIONS.get(code, f"'{code}' (not in nvidia-smi's legend)")


def weakest_pair(topology: dict, gpus: list[int]) -> tuple[int, int, str] | None:
    """Among the measured GPUs, the pair with the farthest connection (a ring all-reduce runs
    at the speed of its slowest hop); None when the matrix lacks any of them."""
    pairs = []
    for i, a in enumerate(gpus):
        for b in gpus[i + 1:]:
            code = connection(topology, a, b)
            if code is None:
                return None
            rank = _ORDER.index(kind(code)) if kind(code) in _ORDER else len(_ORDER)
            pairs.append((rank, a, b, code))
    if not pairs:
        return None
    _, a, b, code = max(pairs)
    return a, b, code


def run_topology(run) -> dict:
    """``nvidia-smi topo -m`` through a host's bounded ``run`` (timeout, output bound): the parsed
    matrix with the raw text kept, or {"error": why}; never raises."""
    result = run(TOPO_ARGV, TOPO_TIMEOUT_S)
    if not result.ok:
        return {"error": result.why_not()}
    parsed = parse_topology(result.stdout)
    parsed["text"] = result.stdout[:_TEXT_KEPT]
    return parsed
