"""The machine summary (the report's header lines), from facts the checks already gathered.

Printing never probes: with ``--only bf16-unsupported`` only the driver was asked, so the
header shows the GPU and nothing that would have cost compiler subprocesses.
"""

from __future__ import annotations

HEADER_PACKAGES = ("torch", "triton", "pytorch-triton", "bitsandbytes", "flash-attn", "transformers", "trl",
                   "peft", "unsloth")


def _version(version) -> str:
    return ".".join(map(str, version)) if version else "?"


def machine_summary(facts) -> list[str]:
    """Header lines from ``facts.gathered(...)``; a fact not gathered (or whose probe failed)
    gives no line: the checks report probe failures, the header only describes."""
    lines: list[str] = []
    system = facts.gathered("system")
    if system is not None and system.info:
        info = system.info
        extras = [x for x in (system.container, "WSL2" if system.is_wsl else None,
                              "Colab" if system.is_colab else None) if x]
        lines.append(f"{info.distro_name}, kernel {info.kernel}, {info.libc or 'libc ?'}, "
                     f"Python {info.python_version} ({system.python_env})" + (f", {', '.join(extras)}" if extras else ""))
    driver = facts.gathered("driver")
    if driver is not None:
        if driver.nvml.ok:
            cuda = driver.cuda_driver
            for gpu in driver.nvml.devices:
                major, minor = gpu.compute_capability
                lines.append(f"GPU {gpu.index}: {gpu.name} (compute {major}.{minor}, {gpu.memory_total / 2**30:.0f} GiB), "
                             f"driver {driver.nvml.driver_version}" + (f", CUDA {cuda[0]}.{cuda[1]}" if cuda else ""))
        elif driver.gpu_present:
            lines.append(f"NVIDIA GPU present; NVML: {driver.nvml.error}")
        else:
            lines.append("no NVIDIA GPU found")
    packages = facts.gathered("packages")
    if packages is not None:
        found = [f"{n} {packages.get(n).version}" for n in HEADER_PACKAGES if packages.get(n)]
        if not packages.get("torch"):  # never read as fine: the checks that need torch did not run
            how = ("`gpudoctor snapshot --python PATH` records the one you train with"
                   if getattr(getattr(facts, "host", None), "replays_a_snapshot", False) else "--python PATH names the one you train with")
            found.insert(0, f"no torch in the inspected Python environment ({how})")
        if found:
            lines.append(", ".join(found))
    toolchain = facts.gathered("toolchain")
    if toolchain is not None:
        parts = []
        if toolchain.triton_cc:
            cc = toolchain.compiler_at(toolchain.triton_cc) or next(
                (c for c in toolchain.compilers if c.path.endswith("/" + toolchain.triton_cc)), None)
            parts.append(f"cc {toolchain.triton_cc}" + (f" {_version(cc.version)}" if cc and cc.version else ""))
        for toolkit in toolchain.toolkits:
            parts.append(f"CUDA toolkit {_version(toolkit.version)} at {toolkit.root} (gcc <= {toolkit.max_gcc})")
        if parts:
            lines.append(", ".join(parts))
    return lines
