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
from .live import LiveHost
from .snapshot import RecordingHost, SnapshotHost

__all__ = [
    "CommandResult", "Distribution", "FileRead", "Host", "HostError", "LinkResult", "LiveHost",
    "NvmlDevice", "NvmlInfo", "PathInfo", "RecordingHost", "SnapshotHost", "SystemInfo",
]
