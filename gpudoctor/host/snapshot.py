"""SnapshotHost replays a machine recorded by ``gpudoctor snapshot``; RecordingHost records one.

A snapshot is a directory with one ``snapshot.json``: every question the probes asked and the
live machine's answer. A question that was never recorded is answered "not recorded", which the
probes turn into a skipped check, so a partial snapshot degrades instead of failing.
"""

from __future__ import annotations

import datetime as _dt
import errno
import json
import os
import stat
from typing import Any

from .. import __version__
from .base import (
    DEFAULT_TIMEOUT_S,
    CommandResult,
    Distribution,
    FileRead,
    HostHelpers,
    KernelLog,
    LinkResult,
    NvmlInfo,
    PathInfo,
    SystemInfo,
    from_json,
    nvml_info_from_json,
    to_json,
)
from .errors import HostError
from .redact import relevant_env

SNAPSHOT_SCHEMA = 1
SNAPSHOT_FILE = "snapshot.json"
NOT_RECORDED = "not recorded in the snapshot"
# A recorded machine is a few hundred KiB (fixtures/snapshots: the largest well under 1 MiB); the
# bound only stops a hostile or mistaken path (/dev/zero, a huge file) from taking all memory.
MAX_SNAPSHOT_BYTES = 256 * 2**20


def _command_key(argv) -> str:
    return "\x00".join(argv)


def _link_key(cc: str, lib_dirs, lib_flag: str, library_path: str) -> str:
    return "\x00".join([cc, ":".join(lib_dirs), lib_flag, library_path])


def _read_bounded(path: str, follow_link: bool) -> bytes:
    """A regular file's bytes, at most ``MAX_SNAPSHOT_BYTES`` (issue 14 item 15: /dev/zero was
    read without end, and a FIFO blocked in open() until a writer came). O_NONBLOCK makes open()
    of a FIFO return at once; fstat then refuses anything but a regular file before a read."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow_link:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_link:
            raise HostError(f"cannot read snapshot {path}: it is a symbolic link (gpudoctor snapshot writes "
                            "a regular file; name the file itself)") from None
        raise HostError(f"cannot read snapshot {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise HostError(f"cannot read snapshot {path}: not a regular file")
        limit = f"larger than {MAX_SNAPSHOT_BYTES // 2**20} MiB, the most gpudoctor reads"
        if info.st_size > MAX_SNAPSHOT_BYTES:
            raise HostError(f"cannot read snapshot {path}: {limit}")
        try:
            raw = handle.read(MAX_SNAPSHOT_BYTES + 1)  # +1: a file that grew after fstat is still caught
        except OSError as exc:
            raise HostError(f"cannot read snapshot {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_SNAPSHOT_BYTES:
        raise HostError(f"cannot read snapshot {path}: {limit}")
    return raw


def read_snapshot_data(directory: str) -> dict[str, Any]:
    """The raw JSON of a snapshot directory (or file); HostError with one line if unusable."""
    inside = os.path.isdir(directory)
    path = os.path.join(directory, SNAPSHOT_FILE) if inside else directory
    # The file inside a snapshot directory is one gpudoctor wrote: a link there is refused. A file
    # named on the command line is the user's choice, links included; either way only a regular file.
    raw = _read_bounded(path, follow_link=not inside)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HostError(f"corrupt snapshot {path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise HostError(f"corrupt snapshot {path}: expected a JSON object")
    return data


class SnapshotHost(HostHelpers):
    """A machine recorded by `gpudoctor snapshot`, replayed: every answer comes from the file."""

    replays_a_snapshot = True  # its interpreter was chosen when it was recorded (snapshot --python)

    def __init__(self, directory: str, data: dict[str, Any] | None = None) -> None:
        self.directory = directory
        path = directory
        if data is None:
            data = read_snapshot_data(directory)
        if not isinstance(data, dict) or data.get("schema") != SNAPSHOT_SCHEMA:
            raise HostError(f"corrupt snapshot {path}: expected a gpudoctor snapshot with schema {SNAPSHOT_SCHEMA}")
        try:
            self._load(data)
        except (TypeError, ValueError, AttributeError, KeyError) as exc:
            raise HostError(f"corrupt snapshot {path}: {type(exc).__name__}: {exc}") from None
        self.meta = {k: data.get(k) for k in ("recorded_at", "gpudoctor", "note")}

    def _load(self, data: dict[str, Any]) -> None:
        self.env = dict(data.get("env") or {})
        self._files = {p: from_json(FileRead, v) for p, v in (data.get("files") or {}).items()}
        self._dirs = dict(data.get("dirs") or {})
        self._stats = {p: from_json(PathInfo, v) for p, v in (data.get("stats") or {}).items()}
        self._commands = {}
        for entry in data.get("commands") or []:
            result = from_json(CommandResult, entry)
            self._commands[_command_key(result.argv)] = result
        self._links = {}
        for entry in data.get("link_tests") or []:
            key = _link_key(entry["cc"], entry["lib_dirs"], entry["lib_flag"], entry["library_path"])
            self._links[key] = from_json(LinkResult, entry["result"])
        nvml = data.get("nvml")
        self._nvml = NvmlInfo(False, "other", NOT_RECORDED) if nvml is None else nvml_info_from_json(nvml)
        # Recorded kernel-log lines (absent from snapshots older than the Xid check: not recorded)
        kernel_log = data.get("kernel_log")
        self._kernel_log = KernelLog(error=NOT_RECORDED) if kernel_log is None else from_json(KernelLog, kernel_log)
        dists = data.get("distributions")
        self._dists = None if dists is None else [from_json(Distribution, d) for d in dists]
        system = data.get("system")
        self._system = None if system is None else from_json(SystemInfo, system)
        self._disk_free = dict(data.get("disk_free") or {})
        self._writable = dict(data.get("writable") or {})

    def read_text(self, path: str, max_bytes: int | None = None) -> FileRead:
        # max_bytes is not applied: recordings already keep only the lines the parsers read.
        return self._files.get(path, FileRead(None, NOT_RECORDED))

    def listdir(self, path: str) -> list[str] | None:
        return self._dirs.get(path)

    def stat(self, path: str) -> PathInfo:
        return self._stats.get(path, PathInfo(exists=False, error=NOT_RECORDED))

    def run(self, argv, timeout: float = DEFAULT_TIMEOUT_S) -> CommandResult:
        return self._commands.get(_command_key(argv), CommandResult(tuple(argv), None, error=NOT_RECORDED))

    def link_test(self, cc, lib_dirs, lib_flag, library_path) -> LinkResult:
        key = _link_key(cc, lib_dirs, lib_flag, library_path)
        return self._links.get(key, LinkResult(False, (cc, lib_flag), error=NOT_RECORDED))

    def nvml(self) -> NvmlInfo:
        return self._nvml

    def kernel_log(self) -> KernelLog:
        return self._kernel_log

    def distributions(self) -> list[Distribution]:
        return list(self._dists or [])

    def system(self) -> SystemInfo | None:  # type: ignore[override]
        return self._system

    def disk_free(self, path: str) -> int | None:
        return self._disk_free.get(path)

    def writable(self, path: str) -> bool:
        return bool(self._writable.get(path, False))


_TRIMMED_HEADERS = {
    "crt/host_config.h": lambda line: line.lstrip().startswith("#"),
    "include/cuda.h": lambda line: line.startswith("#define CUDA_VERSION"),
    "backends/nvidia/driver.py": lambda line: line.startswith("libraries"),
}


class RecordingHost(HostHelpers):
    """Wraps a live host and records every answer, for ``gpudoctor snapshot``."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.env = inner.env
        self.data: dict[str, Any] = {
            "files": {}, "dirs": {}, "stats": {}, "commands": [], "link_tests": [],
            "disk_free": {}, "writable": {},
        }

    def read_text(self, path, max_bytes=None):
        result = self.inner.read_text(path, max_bytes)
        recorded = result
        keep = next((rule for suffix, rule in _TRIMMED_HEADERS.items() if path.endswith(suffix)), None)
        if keep and result.text:
            # Keep only the lines the parsers read, not NVIDIA's whole header.
            recorded = FileRead("\n".join(line for line in result.text.splitlines() if keep(line)), result.error)
        self.data["files"][path] = to_json(recorded)
        return result

    def listdir(self, path):
        result = self.inner.listdir(path)
        self.data["dirs"][path] = result
        return result

    def stat(self, path):
        result = self.inner.stat(path)
        self.data["stats"][path] = to_json(result)
        return result

    def run(self, argv, timeout=DEFAULT_TIMEOUT_S):
        result = self.inner.run(argv, timeout)
        self.data["commands"].append(to_json(result))
        return result

    def link_test(self, cc, lib_dirs, lib_flag, library_path):
        result = self.inner.link_test(cc, lib_dirs, lib_flag, library_path)
        self.data["link_tests"].append(
            {"cc": cc, "lib_dirs": list(lib_dirs), "lib_flag": lib_flag, "library_path": library_path, "result": to_json(result)}
        )
        return result

    def nvml(self):
        result = self.inner.nvml()
        self.data["nvml"] = to_json(result)
        return result

    def kernel_log(self):
        result = self.inner.kernel_log()  # already only the driver's lines (host/kernel_log.py)
        self.data["kernel_log"] = to_json(result)
        return result

    def distributions(self):
        result = self.inner.distributions()
        self.data["distributions"] = [to_json(d) for d in result]
        return result

    def system(self):
        result = self.inner.system()
        self.data["system"] = to_json(result)
        return result

    def disk_free(self, path):
        result = self.inner.disk_free(path)
        self.data["disk_free"][path] = result
        return result

    def writable(self, path):
        result = self.inner.writable(path)
        self.data["writable"][path] = result
        return result

    def write(self, directory: str, note: str = "") -> str:
        """Write ``DIR/snapshot.json`` the way gpudoctor writes its state (issue 14): a new
        file made next to it (O_EXCL|O_NOFOLLOW, 0600, fsynced) and renamed over it, so a
        symlink planted at the target is replaced, never followed, and a failed write (a full
        disk, a kill) leaves the previous snapshot whole. ``DIR`` itself must not be a symlink:
        ``gpudoctor snapshot`` checks that before recording; it is checked again here, at the
        write, since the recording takes a while."""
        from ..paths import write_private_file

        os.makedirs(directory, mode=0o700, exist_ok=True)
        if os.path.islink(directory) or not os.path.isdir(directory):
            raise OSError(errno.ENOTDIR, f"{directory} is a symlink or not a directory; not written through it")
        payload = {
            "schema": SNAPSHOT_SCHEMA,
            "gpudoctor": __version__,
            "recorded_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "note": note,
            "env": relevant_env(self.env),
            **self.data,
        }
        path = os.path.join(directory, SNAPSHOT_FILE)
        text = json.dumps(payload, indent=1, sort_keys=True) + "\n"
        write_private_file(path, text.encode("utf-8"))
        return path
