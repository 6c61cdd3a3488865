"""The Host interface: the only way gpudoctor's probes touch a machine.

``LiveHost`` asks the real machine, ``SnapshotHost`` answers from a recorded snapshot and
``RecordingHost`` wraps a live host and keeps every answer. Every answer is plain data (the
records below) so it can be recorded as JSON and replayed byte for byte.

The records are ``typing.NamedTuple``s, not frozen dataclasses: preflight()'s first call creates
every one of them, and on Python 3.12 a frozen dataclass takes 0.7-1.2 ms to create (six ``exec``s
of generated methods) against ~0.2 ms for a NamedTuple (bench/preflight_floor.py: 38 dataclasses
46 ms, 38 namedtuples 5 ms on the H200). The same holds for the probes' facts (probes/).
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import stat as statmod
from typing import Any, Mapping, NamedTuple, Protocol

DEFAULT_TIMEOUT_S = 5.0


class FileRead(NamedTuple):
    """A file's text (decoded as UTF-8 with replacement) or why it could not be read."""

    text: str | None = None
    error: str | None = None  # "missing" | "permission" | "<errno text>"


class PathInfo(NamedTuple):
    """What ``lstat`` and ``stat`` said about one path; ``error`` says why it could not be read."""

    exists: bool
    is_dir: bool = False
    is_file: bool = False
    is_symlink: bool = False
    link_target: str | None = None
    mode: int = 0
    uid: int = -1
    size: int = 0
    realpath: str | None = None
    error: str | None = None

    @property
    def world_writable(self) -> bool:
        return bool(self.mode & statmod.S_IWOTH)

    @property
    def sticky(self) -> bool:
        return bool(self.mode & statmod.S_ISVTX)


class CommandResult(NamedTuple):
    """One command's outcome: exit status and (bounded) output, or why it did not run or finish."""

    argv: tuple[str, ...]
    returncode: int | None
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    error: str | None = None  # "not-found" | "permission" | other OSError text

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and self.error is None

    def why_not(self) -> str:
        if self.error == "not-found":
            return f"{self.argv[0]} not found"
        if self.error:
            return f"{self.argv[0]}: {self.error}"
        if self.timed_out:
            return f"{' '.join(self.argv)} timed out"
        tail = (self.stderr or self.stdout).strip().splitlines()
        return f"{' '.join(self.argv)} exited {self.returncode}" + (f": {tail[-1][:200]}" if tail else "")


class LinkResult(NamedTuple):
    """Outcome of linking a tiny shared object the way Triton links its launcher."""

    ok: bool
    command: tuple[str, ...]
    output: str = ""
    error: str | None = None  # set when the test could not run at all (no compiler, timeout)


class Distribution(NamedTuple):
    """One installed Python distribution, as its ``*.dist-info`` / ``*.egg-info`` metadata says."""

    name: str  # as in the metadata
    version: str
    location: str
    requires: tuple[str, ...] = ()
    files: tuple[str, ...] = ()  # only the files gpudoctor asks about (native libs), relative
    direct_url: str | None = None


class NvmlDevice(NamedTuple):
    """One GPU as NVML lists it."""

    index: int
    name: str
    compute_capability: tuple[int, int]
    memory_total: int


class NvmlHealth(NamedTuple):
    """One GPU's hardware health, as NVML's device queries return it (nvml.h). A field is None
    when NVML did not answer it; ``unknown`` then says why, per field (``not supported`` on
    GPUs without ECC or row remapping, for instance), so a check can say what it could not see."""

    index: int
    uuid: str | None = None
    pci_bus_id: str | None = None
    ecc_enabled: bool | None = None  # nvmlDeviceGetEccMode, current mode
    ecc_uncorrected_volatile: int | None = None  # nvmlDeviceGetTotalEccErrors(UNCORRECTED, VOLATILE_ECC): since the last driver load
    ecc_uncorrected_aggregate: int | None = None  # (UNCORRECTED, AGGREGATE_ECC): over the GPU's life
    retired_pages_pending: bool | None = None  # nvmlDeviceGetRetiredPagesPendingStatus (pre-Ampere page retirement)
    remapped_rows_uncorrectable: int | None = None  # nvmlDeviceGetRemappedRows (Ampere and newer)
    row_remap_pending: bool | None = None
    row_remap_failure: bool | None = None
    clocks_event_reasons: int | None = None  # nvmlDeviceGetCurrentClocksEventReasons bitmask
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None  # the link's maximum: min(GPU, slot)
    pcie_gen_gpu_max: int | None = None  # the GPU's own maximum
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    persistence_mode: bool | None = None
    mig_enabled: bool | None = None  # nvmlDeviceGetMigMode, current mode
    unknown: tuple[tuple[str, str], ...] = ()  # (field, why NVML did not answer it)

    def why_unknown(self, name: str) -> str:
        return dict(self.unknown).get(name, "not recorded")


class NvmlInfo(NamedTuple):
    """NVML's answer for this machine: the driver, its CUDA version and every GPU, or why NVML
    could not answer (``error_kind``)."""

    ok: bool
    error_kind: str | None = None  # library-not-found | driver-not-loaded | mismatch | no-permission | timeout | other
    error: str | None = None
    driver_version: str | None = None
    cuda_driver_version: int | None = None  # e.g. 13000
    devices: tuple[NvmlDevice, ...] = ()
    health: tuple[NvmlHealth, ...] | None = None  # None: not asked (snapshots recorded before it existed)


def to_json(record) -> Any:
    """A record as plain JSON values: a dict of its fields, nested records too (a tuple of records
    stays a tuple of dicts); what ``from_json`` reads back."""
    if hasattr(record, "_asdict"):
        return {name: to_json(value) for name, value in zip(record._fields, record)}
    if isinstance(record, (list, tuple)):
        return type(record)(to_json(value) for value in record)
    if isinstance(record, dict):
        return {key: to_json(value) for key, value in record.items()}
    return record


def from_json(cls, data: Mapping[str, Any]):
    """Rebuild one of the records above from its JSON form (``to_json``), tolerating unknown
    keys; JSON's lists come back as the tuples the fields hold."""
    names = set(cls._fields)
    kwargs = {k: v for k, v in data.items() if k in names}
    for key, value in list(kwargs.items()):
        if isinstance(value, list):
            kwargs[key] = tuple(tuple(v) if isinstance(v, list) else v for v in value)
    return cls(**kwargs)


def nvml_info_from_json(data: Mapping[str, Any]) -> NvmlInfo:
    """An NvmlInfo from its JSON form: a snapshot's record, or host/nvml_query.py's answer."""
    devices = tuple(from_json(NvmlDevice, d) for d in data.get("devices") or [])
    # absent from snapshots older than the health checks: None, not asked
    health = None if data.get("health") is None else tuple(from_json(NvmlHealth, h) for h in data["health"])
    return from_json(NvmlInfo, {**data, "devices": [], "health": None})._replace(devices=devices, health=health)


class KernelLog(NamedTuple):
    """What the kernel log says about the NVIDIA driver: its ``NVRM: Xid`` lines and the lines
    where it was loaded, or why the log could not be read. Only those lines are kept (from
    "NVRM:" on, after the log's own ``[seconds]`` stamp): the parsers read nothing else, and a
    kernel log also carries host names, addresses and serial numbers a snapshot should not."""

    source: str | None = None  # the command that answered: "dmesg" or "journalctl -k"
    lines: tuple[str, ...] = ()  # the kept lines, oldest first (the last MAX_KEPT of them)
    lines_read: int = 0  # kernel-log lines searched (a log that printed none is reported as unread)
    first_stamp_s: float | None = None  # the oldest line's seconds since boot: how far back the log reaches
    error: str | None = None  # why no source could be read (each source's answer), or "not recorded"


class SystemInfo(NamedTuple):
    """The operating system, C library, memory and Python interpreter of the machine."""

    machine: str
    kernel: str
    libc: str | None
    ram_total: int | None
    distro_id: str
    distro_version: str
    distro_name: str
    distro_like: str
    python_version: str
    python_executable: str
    prefix: str
    base_prefix: str
    euid: int
    shm: tuple[int, int] | None = None  # (total, free) bytes of /dev/shm
    # uv on PATH, for an environment without pip (a fix then says `uv pip`); "" none found, None not looked
    # (a snapshot recorded before gpudoctor looked)
    uv: str | None = None


class Host(Protocol):
    """What probes may ask. Implementations never raise for machine trouble: they answer it."""

    env: Mapping[str, str]

    def read_text(self, path: str, max_bytes: int | None = None) -> FileRead: ...
    def listdir(self, path: str) -> list[str] | None: ...
    def stat(self, path: str) -> PathInfo: ...
    def run(self, argv: tuple[str, ...], timeout: float = DEFAULT_TIMEOUT_S) -> CommandResult: ...
    def nvml(self) -> NvmlInfo: ...
    def kernel_log(self) -> KernelLog: ...
    def distributions(self) -> list[Distribution]: ...
    def system(self) -> SystemInfo: ...
    def disk_free(self, path: str) -> int | None: ...
    def writable(self, path: str) -> bool: ...
    def link_test(self, cc: str, lib_dirs: tuple[str, ...], lib_flag: str, library_path: str) -> LinkResult: ...


class HostHelpers:
    """Derived queries, written once over the primitive ones so snapshots replay them too."""

    env: Mapping[str, str]

    def which(self, name: str) -> str | None:
        """``shutil.which`` over this host's PATH and stat answers."""
        if "/" in name:
            info = self.stat(name)  # type: ignore[attr-defined]
            return name if info.exists and not info.is_dir and info.mode & 0o111 else None
        for directory in self.env.get("PATH", "").split(os.pathsep):
            if not directory:
                continue
            candidate = posixpath.join(directory, name)
            info = self.stat(candidate)  # type: ignore[attr-defined]
            if info.exists and not info.is_dir and info.mode & 0o111:
                return candidate
        return None

    def glob(self, pattern: str) -> list[str]:
        """Glob with wildcards in the last component only (e.g. /usr/local/cuda-*)."""
        parent, leaf = posixpath.split(pattern)
        entries = self.listdir(parent)  # type: ignore[attr-defined]
        if not entries:
            return []
        return sorted(posixpath.join(parent, e) for e in entries if fnmatch.fnmatchcase(e, leaf))

    def exists(self, path: str) -> bool:
        return self.stat(path).exists  # type: ignore[attr-defined]


def __getattr__(name: str):
    # HostError is raised only for unusable snapshots (host/errors.py): created on first use, so
    # a live preflight() never pays for it (a dataclass costs ~0.7-1.2 ms on Python 3.12).
    if name == "HostError":
        from .errors import HostError

        return HostError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
