"""The only code that touches the machine. See ``base.Host`` for what probes may ask."""

from .base import (
    CommandResult,
    Distribution,
    FileRead,
    Host,
    HostError,
    LinkResult,
    NvmlDevice,
    NvmlInfo,
    PathInfo,
    SystemInfo,
)

# The hosts are imported on first use: preflight() needs only LiveHost, and every module
# imported here is paid by every training script that calls it.
_LAZY = {"LiveHost": ".live", "RecordingHost": ".snapshot", "SnapshotHost": ".snapshot"}


def __getattr__(name: str):
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CommandResult", "Distribution", "FileRead", "Host", "HostError", "LinkResult", "LiveHost",
    "NvmlDevice", "NvmlInfo", "PathInfo", "RecordingHost", "SnapshotHost", "SystemInfo",
]
