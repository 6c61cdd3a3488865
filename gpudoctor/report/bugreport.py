"""``gpudoctor report``: one Markdown block to paste into a bug report (the environment and the
findings), like ``collect_env`` / ``accelerate env`` / ``ds_report`` but without importing torch.
Renders ``environment.environment``'s data (secrets already redacted there)."""

from __future__ import annotations

from .. import __version__
from .text import code_fence, printable


# set by NVIDIA's base images, the same on every machine built from them; kept in the JSON
NOISE = {"NVIDIA_REQUIRE_CUDA", "NVIDIA_DRIVER_CAPABILITIES", "NVIDIA_PRODUCT_NAME"}


def _gib(value) -> str:
    return f"{value / 2**30:.1f} GiB" if value else "?"


def _or(value, unknown="not found") -> str:
    return str(value) if value not in (None, "") else unknown


class BugReportReporter:
    """``render(view) -> str``: a fenced Markdown block from ``view.extra['environment']`` and the findings."""

    def render(self, report) -> str:
        env = report.extra.get("environment") or {}
        lines = [f"gpudoctor {__version__}"]
        lines += list(report.summary)  # which interpreter was inspected, when not gpudoctor's own
        system = env.get("system")
        if system:
            lines += [f"OS: {system['os']} ({system['machine']}), kernel {system['kernel']}, {_or(system['libc'], 'libc ?')}"
                      + (f", {system['container']}" if system.get("container") else "") + (", WSL2" if system.get("wsl") else ""),
                      f"Python: {system['python']} ({system['python_env']}) at {system['python_executable']}",
                      f"RAM: {_gib(system.get('ram_bytes'))}"]
        cpu = env.get("cpu") or {}
        lines.append(f"CPU: {_or(cpu.get('model'), '?')} ({_or(cpu.get('logical_cpus'), '?')} logical CPUs)")
        nvidia = env.get("nvidia")
        if nvidia is not None:
            lines.append(f"NVIDIA driver: {_or(nvidia['driver'], 'none')}, CUDA (driver): {_or(nvidia['cuda_driver'], '?')}"
                         + (f" [NVML: {nvidia['nvml_error']}]" if nvidia.get("nvml_error") else ""))
            for gpu in nvidia["gpus"]:
                lines.append(f"GPU {gpu['index']}: {gpu['name']} (compute {gpu['compute_capability']}, "
                             f"{_gib(gpu['memory_bytes'])})")
        packages = env.get("python_packages")
        if packages is not None:
            lines += [f"torch CUDA build: {_or(packages['torch_cuda_build'], 'none (CPU build or no torch)')}",
                      f"cuDNN (wheel): {_or(packages['cudnn'])}", f"NCCL (wheel): {_or(packages['nccl'])}"]
            lines += [f"{name}: {_or(version)}" for name, version in packages["packages"].items()]
        toolchain = env.get("toolchain")
        if toolchain is not None:
            kits = ", ".join(f"{t['version']} at {t['root']} (gcc <= {t['max_gcc']})" for t in toolchain["toolkits"])
            lines += [f"CUDA toolkit: {kits or 'not found'}", f"C compiler (Triton's): {_or(toolchain['cc'])}"]
        for name, value in (env.get("env") or {}).items():
            if name in NOISE:
                continue
            lines.append(f"env {name}={value if len(value) <= 300 else value[:300] + ' ...'}")
        lines.append("")
        if report.findings:
            lines.append(f"Findings ({len(report.findings)}):")
            lines += [f"  [{f.severity.value}] {f.id}: {f.title}" for f in report.findings]
        else:
            ran = sum(c.status.value in ("pass", "fail") for c in report.checks)
            lines.append(f"Findings: none in the {ran} checks that ran ({len(report.checks) - ran} could not run)")
        # Everything above is machine text, shown literally inside one code block (no entity
        # escaping there: GitHub would show "&lt;"). A value with its own ``` line would close the
        # block and turn the rest, a "</details><script>" included, into raw HTML: the fence is
        # longer than any backtick run inside, and controls are escaped (issue 14 item 15).
        lines = printable("\n".join(lines)).splitlines()
        fence = code_fence(lines)
        return "\n".join(["<details><summary>gpudoctor report</summary>", "", f"{fence}text", *lines, fence, "",
                          "</details>"]) + "\n"
