"""The environment a bug report needs (what ``collect_env``, ``accelerate env`` and ``ds_report``
print), as plain data: ``check --json``'s additive ``environment`` object and ``gpudoctor report``'s
Markdown block. Built from facts the checks already gathered (a fact not gathered is absent, never
probed here) plus the CPU, read through the same Host. Secrets are redacted (host/redact.py)."""

from __future__ import annotations

from .host.redact import redact_value, relevant_env

PACKAGES = ("torch", "triton", "pytorch-triton", "flash-attn", "flash-attn-3", "xformers", "bitsandbytes",
            "transformers", "accelerate", "peft", "trl", "unsloth", "unsloth-zoo", "deepspeed")
# torch's cuDNN and NCCL are the nvidia-* wheels it depends on (read as distributions: no torch import)
LIBRARIES = {"cudnn": ("nvidia-cudnn-cu13", "nvidia-cudnn-cu12", "nvidia-cudnn-cu11"),
             "nccl": ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11")}


def _dotted(version) -> str | None:
    return ".".join(map(str, version)) if version else None


def cpu(host) -> dict:
    """Model and logical CPU count from /proc/cpuinfo (bounded read), None where unknown."""
    if host is None:
        return {"model": None, "logical_cpus": None}
    text = host.read_text("/proc/cpuinfo", max_bytes=1 << 20).text or ""
    models = [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")]
    count = sum(1 for line in text.splitlines() if line.startswith("processor"))
    return {"model": models[0] if models else None, "logical_cpus": count or None}


def _system(facts) -> dict | None:
    system = facts.gathered("system")
    if system is None or system.info is None:
        return None
    info = system.info
    return {"os": info.distro_name, "kernel": info.kernel, "libc": info.libc, "machine": info.machine,
            "python": info.python_version, "python_executable": info.python_executable,
            "python_env": system.python_env, "container": system.container, "wsl": system.is_wsl,
            "ram_bytes": info.ram_total}


def _gpus(facts) -> dict | None:
    driver = facts.gathered("driver")
    if driver is None:
        return None
    nvml = driver.nvml
    return {"driver": nvml.driver_version if nvml.ok else None, "cuda_driver": _dotted(driver.cuda_driver),
            "nvml_error": None if nvml.ok else nvml.error,
            "gpus": [{"index": g.index, "name": g.name, "compute_capability": _dotted(g.compute_capability),
                      "memory_bytes": g.memory_total} for g in (nvml.devices if nvml.ok else ())]}


def _packages(facts) -> dict | None:
    packages = facts.gathered("packages")
    if packages is None:
        return None
    versions = {name: (packages.get(name).version if packages.get(name) else None) for name in PACKAGES}
    libraries = {}
    for library, names in LIBRARIES.items():
        found = next((packages.get(n) for n in names if packages.get(n)), None)
        libraries[library] = found.version if found else None
    return {"torch_cuda_build": _dotted(packages.torch_cuda), **libraries, "packages": versions}


def _toolchain(facts) -> dict | None:
    toolchain = facts.gathered("toolchain")
    if toolchain is None:
        return None
    return {"toolkits": [{"root": t.root, "version": _dotted(t.version), "max_gcc": t.max_gcc} for t in toolchain.toolkits],
            "cc": toolchain.triton_cc, "gcc_on_path": toolchain.default_gcc}


def environment(facts, host=None) -> dict:
    """The environment object (schema 1, additive): each section None when its fact was not gathered."""
    env = relevant_env(getattr(host, "env", None) or {}) if host is not None else {}
    interpreter = getattr(host, "interpreter", None)  # set when --python (or the torch search) chose one
    return {
        "inspected_python": ({"executable": interpreter.executable, "version": interpreter.version,
                              "chosen_because": interpreter.chosen_because or "--python"} if interpreter else None),
        "system": _system(facts),
        "cpu": cpu(host),
        "nvidia": _gpus(facts),
        "python_packages": _packages(facts),
        "toolchain": _toolchain(facts),
        "env": {k: redact_value(v) for k, v in env.items()},
    }
