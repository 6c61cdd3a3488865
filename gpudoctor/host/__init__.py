"""The only code that touches the machine. See ``base.Host`` for what probes may ask."""

# Every name is imported on first use: preflight() starts its NVML child (host/nvml_query.py)
# before anything else, so this package must cost nothing to enter, and every module imported
# here is paid by every training script that calls preflight().
_LAZY = {
    **dict.fromkeys(("CommandResult", "Distribution", "FileRead", "Host", "LinkResult", "NvmlDevice",
                     "NvmlInfo", "PathInfo", "SystemInfo"), ".base"),
    "HostError": ".errors", "LiveHost": ".live", "RecordingHost": ".snapshot", "SnapshotHost": ".snapshot",
}


def __getattr__(name: str):
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CommandResult", "Distribution", "FileRead", "Host", "HostError", "LinkResult", "LiveHost",
    "NvmlDevice", "NvmlInfo", "PathInfo", "RecordingHost", "SnapshotHost", "SystemInfo",
]
