"""LiveHost: answers from the real machine, with a timeout on everything that can hang."""

from __future__ import annotations

import errno
import os
import platform
import shutil
import signal
import subprocess
import sys
import threading
from typing import Mapping

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
    nvml_info_from_json,
)

MAX_READ_BYTES = 4 << 20  # /proc files are tiny; anything larger is not what we want
MAX_OUTPUT_BYTES = 4 << 20
NVML_TIMEOUT_S = 5.0
# A link of an empty object takes ~10 ms; seconds only on a cold cache or a slow file system.
LINK_TIMEOUT_S = 10.0


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _oserror_kind(exc: OSError) -> str:
    if exc.errno == errno.ENOENT:
        return "missing"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission"
    return exc.strerror or type(exc).__name__


class LiveHost(HostHelpers):
    def __init__(self, env: Mapping[str, str] | None = None, nvml_query: subprocess.Popen | None = None) -> None:
        """``nvml_query``: a child already started by ``host.nvml_query.spawn()`` (preflight
        starts it before this module is even imported), collected by ``nvml()``."""
        self.env = dict(os.environ if env is None else env)
        self._nvml_pending: subprocess.Popen | _InProcessQuery | None = nvml_query  # start_nvml()'s query
        self._nvml_lock = threading.Lock()

    # -- files ---------------------------------------------------------------------------
    def read_text(self, path: str, max_bytes: int | None = None) -> FileRead:
        try:
            with open(path, "rb") as handle:
                data = handle.read(min(max_bytes or MAX_READ_BYTES, MAX_READ_BYTES))
        except OSError as exc:
            return FileRead(None, _oserror_kind(exc))
        return FileRead(_decode(data))

    def listdir(self, path: str) -> list[str] | None:
        try:
            return sorted(os.listdir(path))
        except OSError:
            return None

    def stat(self, path: str) -> PathInfo:
        try:
            lst = os.lstat(path)
        except OSError as exc:
            return PathInfo(exists=False, error=_oserror_kind(exc))
        is_link = os.path.islink(path)
        target = None
        if is_link:
            try:
                target = os.readlink(path)
            except OSError:
                target = None
        try:
            st = os.stat(path)
        except OSError as exc:  # dangling symlink
            return PathInfo(exists=False, is_symlink=is_link, link_target=target, error=_oserror_kind(exc))
        import stat as statmod

        return PathInfo(
            exists=True,
            is_dir=statmod.S_ISDIR(st.st_mode),
            is_file=statmod.S_ISREG(st.st_mode),
            is_symlink=is_link,
            link_target=target,
            mode=st.st_mode & 0o7777,
            uid=st.st_uid if not is_link else lst.st_uid,
            size=st.st_size,
            realpath=os.path.realpath(path),
        )

    def disk_free(self, path: str) -> int | None:
        try:
            return shutil.disk_usage(path).free
        except OSError:
            return None

    def writable(self, path: str) -> bool:
        return os.access(path, os.W_OK | os.X_OK)

    # -- commands ------------------------------------------------------------------------
    def run(self, argv: tuple[str, ...], timeout: float = DEFAULT_TIMEOUT_S) -> CommandResult:
        return self._run(tuple(argv), timeout, self.env)

    def _run(self, argv: tuple[str, ...], timeout: float, env: Mapping[str, str]) -> CommandResult:
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                start_new_session=True,  # so a timeout kills the whole process group
            )
        except FileNotFoundError:
            return CommandResult(argv, None, error="not-found")
        except PermissionError:
            return CommandResult(argv, None, error="permission")
        except OSError as exc:
            return CommandResult(argv, None, error=exc.strerror or str(exc))
        out, err, outcome = read_bounded_output(proc, timeout, MAX_OUTPUT_BYTES)
        if outcome == "timeout":
            return CommandResult(argv, None, _decode(out), _decode(err), timed_out=True)
        if outcome == "too-large":
            return CommandResult(argv, None, _decode(out), _decode(err),
                                 error=f"printed over {MAX_OUTPUT_BYTES >> 20} MiB; stopped it")
        return CommandResult(argv, proc.returncode, _decode(out), _decode(err))

    def link_test(self, cc: str, lib_dirs: tuple[str, ...], lib_flag: str, library_path: str,
                  timeout: float = LINK_TIMEOUT_S) -> LinkResult:
        """Link an empty shared object exactly as Triton's ``_build`` links its launcher:
        ``cc src -O3 -shared -fPIC -Wno-psabi -o out.so <lib_flag> -L<dir>...``, with gcc's
        LIBRARY_PATH as given (it is how the user-local fix reaches the linker)."""
        import tempfile  # here: ~2.5 ms to import (random, weakref), and only the link test uses it

        with tempfile.TemporaryDirectory(prefix="gpudoctor-link-") as tmp:
            # An empty assembler file, not C: the question is whether the linker finds the
            # library (`cannot find -lcuda` is a search failure, reported with or without a
            # reference to it, and a -shared link leaves references unresolved anyway), and .s
            # input skips cc1, about half of the 21 ms this command took on the H200, which
            # preflight()'s first call pays. Works for gcc and clang, on any architecture.
            src = os.path.join(tmp, "launcher.s")
            out = os.path.join(tmp, "launcher.so")
            open(src, "w").close()
            argv = (cc, src, "-O3", "-shared", "-fPIC", "-Wno-psabi", "-o", out, lib_flag, *[f"-L{d}" for d in lib_dirs])
            env = dict(self.env)
            if library_path:
                env["LIBRARY_PATH"] = library_path
            else:
                env.pop("LIBRARY_PATH", None)
            # Its own environment, never self.env swapped: probes run in parallel threads.
            result = self._run(argv, timeout, env)
        shown = (cc, "<src>", "-O3", "-shared", "-fPIC", "-Wno-psabi", "-o", "<out>", lib_flag, *[f"-L{d}" for d in lib_dirs])
        if result.error or result.timed_out:
            return LinkResult(False, shown, result.stderr, error=result.why_not())
        return LinkResult(result.returncode == 0, shown, (result.stderr + result.stdout)[-4000:])

    # -- NVML ----------------------------------------------------------------------------
    def start_nvml(self, child: bool = True) -> None:
        """Begin this host's NVML query now, for ``nvml()`` to collect: a child Python process
        (host/nvml_query.py says why not a thread, and when a thread after all), so nvmlInit's
        tens of milliseconds in the driver and pynvml's import overlap what the caller does next."""
        with self._nvml_lock:
            if self._nvml_pending is None:
                self._nvml_pending = _start_nvml_query() if child else _InProcessQuery()

    def discard_nvml(self) -> None:
        """Stop a query started but never collected (preflight with ``skip=`` may need no NVML,
        or fail before it): the child is killed and reaped without waiting on it (a child inside
        nvmlInit dies only when the driver call returns), and a later ``nvml()`` on this host
        answers that it was stopped instead of starting another."""
        with self._nvml_lock:
            started, self._nvml_pending = self._nvml_pending, _DISCARDED
        if isinstance(started, subprocess.Popen):
            stop_child(started, wait_s=0.5)

    def nvml(self) -> NvmlInfo:
        with self._nvml_lock:
            started = self._nvml_pending
            if started is not _DISCARDED:
                self._nvml_pending = None
        if started is _DISCARDED:
            return NvmlInfo(False, "other", "the NVML query was stopped: preflight had finished")
        query = started or _start_nvml_query()
        if isinstance(query, _InProcessQuery):
            return query.result(NVML_TIMEOUT_S)
        answer = _nvml_answer(query)
        if answer is None:  # the child could not run (an interpreter that needs PYTHONHOME): ask here
            return _InProcessQuery().result(NVML_TIMEOUT_S)
        return answer

    # -- the kernel log ------------------------------------------------------------------
    def kernel_log(self) -> KernelLog:
        """The NVIDIA driver's Xid and load lines (host/kernel_log.py: dmesg, else journalctl -k)."""
        from .kernel_log import read_kernel_log

        return read_kernel_log(self.run)

    # -- Python packages -----------------------------------------------------------------
    def distributions(self) -> list[Distribution]:
        """Every installed distribution on sys.path (see host/distributions.py for why it does
        not go through importlib.metadata)."""
        from .distributions import installed_distributions

        return installed_distributions()

    # -- the system ----------------------------------------------------------------------
    def system(self) -> SystemInfo:
        release = _os_release() or _distro_release()
        ram = _physical_memory()
        try:
            shm_usage = shutil.disk_usage("/dev/shm")
            shm = (shm_usage.total, shm_usage.free)
        except OSError:
            shm = None
        libc_name, libc_version = platform.libc_ver()
        return SystemInfo(
            machine=platform.machine(),
            kernel=platform.release(),
            libc=f"{libc_name} {libc_version}".strip() or None,
            ram_total=ram,
            distro_id=release[0],
            distro_version=release[1],
            distro_name=release[2],
            distro_like=release[3],
            python_version=platform.python_version(),
            python_executable=sys.executable,
            prefix=sys.prefix,
            base_prefix=sys.base_prefix,
            euid=os.geteuid(),
            shm=shm,
            uv=shutil.which("uv", path=self.env.get("PATH", "")) or "",
        )


# How long a killed child may take to die before it is left behind: a process inside a driver
# call (nvidia-smi or NVML on a GPU that fell off the bus, Xid 79) takes SIGKILL only when the
# call returns, which can be never; waiting for it would hang the caller with it.
KILL_WAIT_S = 5.0


def kill_process_group(proc: subprocess.Popen, wait_s: float = KILL_WAIT_S) -> None:
    """SIGKILL the group a child leads (started with start_new_session=True): the child and the
    compilers or workers it started, and nothing else; then reap it, waiting at most ``wait_s``
    (an unkillable child is left to subprocess's own reaping of abandoned children)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:  # already gone
        pass
    try:
        proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        pass


# distro's own id normalization for os-release IDs (distro.NORMALIZED_OS_ID).
_NORMALIZED_OS_ID = {"ol": "oracle", "opensuse-leap": "opensuse"}


def read_bounded_output(proc: subprocess.Popen, timeout: float, limit: int) -> tuple[bytes, bytes, str]:
    """Read stdout and stderr together, at most ``limit`` bytes each: a command that prints
    without end (a broken or hostile ``gcc`` on PATH) is killed at the bound instead of
    ``communicate()`` buffering all of it first (issue 14 measured 13.6 GB for one check).
    Returns (stdout, stderr, "exited" | "timeout" | "too-large")."""
    import selectors
    import time

    deadline = time.monotonic() + timeout
    streams = (proc.stdout, proc.stderr)
    chunks: list[list[bytes]] = [[], []]
    sizes = [0, 0]
    outcome = "exited"
    with selectors.DefaultSelector() as selector:
        for index, stream in enumerate(streams):
            selector.register(stream, selectors.EVENT_READ, index)
        while selector.get_map() and outcome == "exited":
            left = deadline - time.monotonic()
            if left <= 0:
                outcome = "timeout"
                break
            for key, _ in selector.select(left):
                data = os.read(key.fileobj.fileno(), 65536)
                if not data:
                    selector.unregister(key.fileobj)
                    continue
                index = key.data
                chunks[index].append(data[: max(0, limit - sizes[index])])
                sizes[index] += len(data)
                if sizes[index] > limit:
                    outcome = "too-large"
    if outcome == "exited":
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            outcome = "timeout"
    if outcome != "exited":
        kill_process_group(proc)
    for stream in streams:
        stream.close()
    return b"".join(chunks[0]), b"".join(chunks[1]), outcome


def _os_release() -> tuple[str, str, str, str] | None:
    """(id, version, pretty name, like) from os-release, as distro reports them, through the
    standard library: distro's import costs 7-8 ms of CPU on preflight's first call (argparse,
    logging), and os-release is all it reads on a current system. None when os-release is
    missing or lacks ID, VERSION_ID or PRETTY_NAME (Debian testing, old releases): distro
    handles those its own way. platform fills a missing ID with "linux" and a missing
    PRETTY_NAME with "Linux", so those values mean "absent" here."""
    try:
        fields = platform.freedesktop_os_release()
    except OSError:
        return None
    os_id = fields.get("ID", "").lower().replace(" ", "_")  # distro's normalization
    version, name = fields.get("VERSION_ID", ""), fields.get("PRETTY_NAME", "")
    if os_id in ("", "linux") or not version or name in ("", "Linux"):
        return None
    return _NORMALIZED_OS_ID.get(os_id, os_id), version, name, fields.get("ID_LIKE", "")


def _distro_release() -> tuple[str, str, str, str]:
    import distro

    # Files only: with its defaults distro also runs `lsb_release -a` and `uname -rs`, with
    # no timeout, for version() (the static path runs nothing without a timeout).
    release = distro.LinuxDistribution(include_lsb=False, include_uname=False, include_oslevel=False)
    return release.id(), release.version(), release.name(pretty=True), release.like()


def _start_nvml_query() -> subprocess.Popen | _InProcessQuery:
    from . import nvml_query

    return nvml_query.start() or _InProcessQuery()


class _InProcessQuery:
    """nvml_query.query() in a thread of this process, where a child would not run beside the
    caller (too few CPUs) or cannot be started (no ``sys.executable``)."""

    def __init__(self) -> None:
        from . import nvml_query

        self._answer: list[dict] = []
        self._worker = threading.Thread(target=lambda: self._answer.append(nvml_query.query()), daemon=True,
                                        name="gpudoctor-nvml")
        self._worker.start()

    def result(self, timeout: float) -> NvmlInfo:
        self._worker.join(timeout)
        if not self._answer:
            return NvmlInfo(False, "timeout", f"NVML did not answer within {timeout:.0f} s")
        return nvml_info_from_json(self._answer[0])


_DISCARDED = object()  # LiveHost._nvml_pending after discard_nvml()


def stop_child(proc: subprocess.Popen, wait_s: float = KILL_WAIT_S) -> None:
    """Kill ``proc``'s process group, reap it (within ``wait_s``) and close its pipes."""
    kill_process_group(proc, wait_s)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def _nvml_answer(proc: subprocess.Popen) -> NvmlInfo | None:
    """The child's JSON answer, read bounded and within NVML_TIMEOUT_S; a child that hung or
    printed something else, or died of a signal inside NVML, becomes an NvmlInfo that says so
    (a skipped check, never a pass). None: the child exited without an answer (an interpreter
    that cannot start under ``-I -S``, one that needs PYTHONHOME for instance); the caller then
    asks in-process."""
    import json

    from .nvml_query import MAX_ANSWER_BYTES

    try:
        out, err, outcome = read_bounded_output(proc, NVML_TIMEOUT_S, MAX_ANSWER_BYTES)
    except BaseException:  # KeyboardInterrupt while waiting: the child must not outlive the question
        stop_child(proc)
        raise
    if outcome == "timeout":
        return NvmlInfo(False, "timeout", f"NVML did not answer within {NVML_TIMEOUT_S:.0f} s")
    if outcome == "too-large":
        return NvmlInfo(False, "other", f"the NVML query process printed over {MAX_ANSWER_BYTES} bytes; stopped it")
    try:
        return nvml_info_from_json(json.loads(out))
    except (ValueError, TypeError, AttributeError, KeyError):
        pass
    if proc.returncode is not None and proc.returncode < 0:  # a crash inside NVML: not asked again here
        tail = (_decode(err).strip().splitlines() or ["no output"])[-1]
        return NvmlInfo(False, "other", f"the NVML query process died of signal {-proc.returncode}: {tail}")
    return None


def _physical_memory() -> int | None:
    """Total RAM in bytes. sysconf answers on Linux without psutil's ~12-40 ms import (paid on
    preflight's first call); psutil stays the fallback where sysconf lacks the names."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        pass
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except Exception:  # noqa: BLE001
        return None


