"""System facts: distro, kernel, glibc, CPU, memory, /dev/shm, WSL2, containers, Colab, envs."""

from __future__ import annotations

from typing import NamedTuple

from ..host.base import SystemInfo


class SystemFacts(NamedTuple):
    """The machine's operating system and what it runs in: WSL, a container, Colab, and the kind
    of Python environment."""

    info: SystemInfo | None
    is_wsl: bool
    container: str | None  # docker | podman | kubernetes | container | None
    is_colab: bool
    python_env: str  # conda | venv | system
    unknown_reason: str | None = None


def probe_system(host) -> SystemFacts:
    info = host.system()
    version = host.read_text("/proc/version").text or ""
    kernel = info.kernel if info else ""
    is_wsl = "microsoft" in (version + kernel).lower() or host.exists("/usr/lib/wsl/lib")
    container = None
    if host.exists("/.dockerenv"):
        container = "docker"
    elif host.exists("/run/.containerenv"):
        container = "podman"
    elif host.env.get("KUBERNETES_SERVICE_HOST"):
        container = "kubernetes"
    else:
        cgroup = host.read_text("/proc/1/cgroup").text or ""
        if any(word in cgroup for word in ("docker", "kubepods", "containerd", "lxc")):
            container = "container"
    is_colab = bool(host.env.get("COLAB_RELEASE_TAG") or host.env.get("COLAB_GPU"))
    if host.env.get("CONDA_PREFIX") or (info and host.exists(f"{info.prefix}/conda-meta")):
        python_env = "conda"
    elif info and info.prefix != info.base_prefix or host.env.get("VIRTUAL_ENV"):
        python_env = "venv"
    else:
        python_env = "system"
    return SystemFacts(info, is_wsl, container, is_colab, python_env,
                       None if info else "system information was not recorded")
