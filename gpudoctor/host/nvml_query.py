"""Ask NVML about the driver and every GPU, in a child Python process.

Why a process and not a thread: importing pynvml (~8,000 lines that define a ctypes structure
per NVML type) and making some twenty ctypes calls per GPU are Python work that holds the GIL,
and preflight's first call is bound by the GIL (bench/preflight_timeline.py: the main thread's
imports). In a child they run on another core, beside those imports, and the training process
does not load libnvidia-ml. Where a child cannot run beside it (fewer than MIN_CPUS_FOR_A_CHILD
usable CPUs, a frozen or embedded interpreter), the same ``query()`` runs in a thread instead.

This file is both a module of gpudoctor (``spawn()``: start the child) and the child's script
(``python -I -S nvml_query.py``, which reads the parent's ``sys.path`` as JSON on stdin and
prints ``query()``'s answer as JSON). As a script it must not import gpudoctor, so it uses the
standard library and pynvml alone; ``-I -S`` skip site (and every ``.pth`` file a big environment
carries), the parent's ``sys.path`` is handed over instead, in its order, so the child imports the
same pynvml the parent would. It goes through stdin, not argv: a big environment's path is long,
and a command line is public in ``/proc/<pid>/cmdline`` and ``ps``.

The JSON is ``host.base.NvmlInfo`` in the form snapshots record (``nvml_info_from_json``).

As the child, NVML's initialization starts first, in a thread (``_begin_nvml_init``), while the
main thread imports json and pynvml: measured on the H200 (bench/preflight_floor.py, 20 samples)
the child took 91 ms from spawn to answer, of which ``import pynvml`` 38 ms and ``nvmlInit`` 11.7 ms
one after the other, and that answer is on the critical path of preflight's first call. ctypes
releases the GIL for the foreign call, so the init runs beside the import. NVML counts its
initializations, so pynvml's own ``nvmlInit`` then returns at once and its ``nvmlShutdown`` leaves
one reference, which dies with the child. Only the child does this: the in-process ``query()``
(LiveHost's thread, where no child can run) must leave no NVML state in the user's process.
"""

from __future__ import annotations

import os
import sys

# json and subprocess are imported where used: as the child, this file starts NVML's init before
# them (_begin_nvml_init); the child never needs subprocess itself.
TYPE_CHECKING = False  # not typing.TYPE_CHECKING: the child would import typing for it
if TYPE_CHECKING:
    import subprocess

# The child's answer is a few kilobytes per GPU; anything beyond this is not ours.
MAX_ANSWER_BYTES = 1 << 20
# The path is written to the child's stdin before the child reads it: within one pipe buffer
# (64 KiB on Linux) the write cannot block. A longer sys.path (hundreds of entries) keeps the
# query in a thread rather than risk waiting on a child that does not read.
MAX_PATH_BYTES = 60_000
# A child pays for its own interpreter and pynvml's import (~35 ms of CPU on a 2-core box); that
# is free only on a core nobody else needs. With fewer usable CPUs than this (usable_cpus: the
# affinity mask and the cgroup quota) it would compete with the very imports it should run
# beside, so the query stays in a thread of this process.
MIN_CPUS_FOR_A_CHILD = 4
# How long the child waits for its early nvmlInit before calling pynvml's own anyway: the parent
# stops reading after host.live.NVML_TIMEOUT_S (5 s), so waiting longer would answer nobody.
NVML_INIT_WAIT_S = 5.0


def start() -> subprocess.Popen | None:
    """The child, started, where it can run beside the caller; None where the query should
    stay in-process (too few usable CPUs, no plain Python to start, or the start failed)."""
    if usable_cpus() < MIN_CPUS_FOR_A_CHILD:
        return None
    try:
        return spawn()
    except (OSError, ValueError):
        return None


def usable_cpus() -> int:
    """The CPUs this process may run on at once: its affinity mask (a cpuset), lowered by a
    cgroup CPU quota (a Kubernetes pod or ``docker --cpus`` limited to 2 CPUs on a 64-core node
    sees 64 in its mask). Read from the cgroup v2 ``cpu.max`` or v1 ``cpu.cfs_quota_us``."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    quota = _cgroup_cpu_quota()
    return max(1, min(cpus, quota)) if quota is not None else cpus


def _cgroup_cpu_quota(root: str = "/sys/fs/cgroup") -> int | None:
    """The CPU quota of this process's cgroup, rounded up to whole CPUs; None when unlimited or
    unknown. Only the cgroup at the mount root is read (what a container sees as its own)."""
    def read(name: str) -> str | None:
        try:
            with open(os.path.join(root, name), encoding="ascii") as handle:
                return handle.read(256).strip()
        except (OSError, ValueError):
            return None

    v2 = read("cpu.max")  # "max 100000" or "200000 100000"
    if v2 is not None:
        parts = v2.split()
        quota, period = (parts[0], parts[1]) if len(parts) == 2 else ("max", "1")
    else:
        quota, period = read("cpu/cpu.cfs_quota_us") or "-1", read("cpu/cpu.cfs_period_us") or "1"
    try:
        quota_us, period_us = int(quota), int(period)
    except ValueError:  # "max": no quota
        return None
    if quota_us <= 0 or period_us <= 0:
        return None
    return -(-quota_us // period_us)


def spawn() -> subprocess.Popen:
    """Start the child; ``host.live.LiveHost.nvml`` reads its answer (bounded, with a timeout).
    Raises OSError where this process cannot start a plain Python running this file: an
    embedded interpreter (empty ``sys.executable``, or uwsgi/httpd), a frozen application
    (PyInstaller: ``sys.executable`` is the application itself), gpudoctor imported from a zip."""
    import json
    import subprocess

    executable = sys.executable or ""
    if getattr(sys, "frozen", False) or not os.path.basename(executable).lower().startswith(("python", "pypy")):
        raise OSError(f"{executable or 'sys.executable'} is not a Python interpreter to start")
    script = os.path.abspath(__file__)
    if not os.path.isfile(script):
        raise OSError(f"{script} is not a file a child can run")
    path = json.dumps(_importable_path()).encode()
    if len(path) > MAX_PATH_BYTES:
        raise OSError(f"sys.path is {len(path)} bytes as JSON, over the {MAX_PATH_BYTES} a pipe takes without waiting")
    proc = subprocess.Popen(
        [executable, "-I", "-S", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # so a timeout kills it and nothing else
    )
    try:
        proc.stdin.write(path)
        proc.stdin.close()
        proc.stdin = None  # closed: communicate() would flush it (ValueError) if it kept the file
    except OSError:  # the child is gone already (BrokenPipeError): collect it and say so
        proc.stdin = None
        proc.kill()
        proc.communicate()
        raise
    return proc


def _importable_path() -> list[str]:
    """sys.path as the child needs it, in the parent's order: the entries the import system can
    use (str, bytes, os.PathLike), as text, absolute (the child's working directory is the same,
    but an absolute path says so)."""
    entries = []
    for entry in sys.path:
        if isinstance(entry, (str, bytes, os.PathLike)):
            text = os.fsdecode(entry)
            entries.append(os.path.abspath(text) if text else os.getcwd())
    return entries


def query(nvml_init_begun=None) -> dict:
    """What NVML says, as plain JSON values. Never raises: every failure is an answer
    (``ok`` false, ``error_kind``, ``error``). ``nvml_init_begun``: the child's early init
    (``_begin_nvml_init``), waited for once pynvml is imported and before pynvml's own init."""
    try:
        import pynvml
    except Exception as exc:  # noqa: BLE001
        return _failure("library-not-found", f"nvidia-ml-py not importable: {exc}")
    finally:
        if nvml_init_begun is not None:
            nvml_init_begun.acquire(timeout=NVML_INIT_WAIT_S)
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return _failure(_error_kind(pynvml, exc), str(exc))
    except Exception as exc:  # noqa: BLE001
        return _failure("other", str(exc))
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        try:
            cuda = int(pynvml.nvmlSystemGetCudaDriverVersion())
        except pynvml.NVMLError:
            cuda = None
        devices, health = [], []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            devices.append({"index": index, "name": _text(pynvml.nvmlDeviceGetName(handle)),
                            "compute_capability": [int(major), int(minor)],
                            "memory_total": int(pynvml.nvmlDeviceGetMemoryInfo(handle).total)})
            health.append(_health(pynvml, handle, index))
        return {"ok": True, "error_kind": None, "error": None, "driver_version": driver,
                "cuda_driver_version": cuda, "devices": devices, "health": health}
    except pynvml.NVMLError as exc:
        return _failure(_error_kind(pynvml, exc), str(exc))
    except Exception as exc:  # noqa: BLE001 - an nvidia-ml-py that answers in an unexpected shape
        return _failure("other", f"{type(exc).__name__}: {exc}")
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def _begin_nvml_init():
    """In the child only: NVML's initialization started in a thread, as pynvml's ``nvmlInit()``
    does it (nvidia-ml-py loads ``CDLL("libnvidia-ml.so.1")`` on Linux, then calls
    ``nvmlInitWithFlags(0)``, which NVML documents as nvmlInit_v2 with flags), so it runs while
    the main thread imports pynvml (see the module docstring). Returns a lock released once the
    call has returned, or None where no thread could start. Every failure (no library, an error
    code, no such function) is ignored: pynvml's own init meets it again and reports it as it
    would have without this.

    The main thread waits until the thread is at the call: its import of ctypes and the
    library's load hold the GIL (work pynvml would do on the main thread anyway), and a thread
    left to find the GIL free while the main thread imports waits out the 5 ms switch interval
    first, then forces switches. On the 2-core box (250 paired runs, no NVML library, so nothing
    to overlap) a child cost +1.5 ms with this wait, +1.9 ms without. ``_thread``, not
    ``threading``: under ``-I -S`` threading's import (functools, collections) takes 4-5 ms there
    before the init could start."""
    import _thread

    at_the_call, returned = _thread.allocate_lock(), _thread.allocate_lock()
    at_the_call.acquire()
    returned.acquire()

    def init() -> None:
        try:
            try:
                import ctypes

                nvml_init = ctypes.CDLL("libnvidia-ml.so.1").nvmlInitWithFlags
            finally:
                at_the_call.release()
            nvml_init(0)  # ctypes drops the GIL for the call: the main thread imports meanwhile
        except Exception:  # noqa: BLE001, S110 - pynvml's own nvmlInit says what went wrong
            pass
        finally:
            returned.release()

    try:
        _thread.start_new_thread(init, ())
    except RuntimeError:  # no thread to be had: pynvml's init runs as before
        return None
    at_the_call.acquire(timeout=NVML_INIT_WAIT_S)
    return returned


def _health(pynvml, handle, index: int) -> dict:
    """One GPU's health queries (host.base.NvmlHealth), each on its own: a GPU without ECC
    (GeForce) or row remapping (pre-Ampere) answers NVML_ERROR_NOT_SUPPORTED for that query
    alone. In the same NVML session as the device list: no second nvmlInit."""
    values: dict = {"index": index}
    unknown: list[list[str]] = []

    def ask(names, call, convert=lambda v: v):
        try:
            answer = convert(call())
        except pynvml.NVMLError as exc:
            why = "not supported" if getattr(exc, "value", None) == pynvml.NVML_ERROR_NOT_SUPPORTED else str(exc)
            unknown.extend([name, why] for name in names)
            return
        except Exception as exc:  # noqa: BLE001 - an older nvidia-ml-py lacks the function
            unknown.extend([name, f"{type(exc).__name__}: {exc}"] for name in names)
            return
        values.update(zip(names, answer if len(names) > 1 else (answer,)))

    uncorrected = pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    ask(("uuid",), lambda: pynvml.nvmlDeviceGetUUID(handle), _text)
    ask(("pci_bus_id",), lambda: pynvml.nvmlDeviceGetPciInfo(handle).busId, _text)
    ask(("ecc_enabled",), lambda: pynvml.nvmlDeviceGetEccMode(handle)[0], bool)
    ask(("ecc_uncorrected_volatile",),
        lambda: pynvml.nvmlDeviceGetTotalEccErrors(handle, uncorrected, pynvml.NVML_VOLATILE_ECC), int)
    ask(("ecc_uncorrected_aggregate",),
        lambda: pynvml.nvmlDeviceGetTotalEccErrors(handle, uncorrected, pynvml.NVML_AGGREGATE_ECC), int)
    ask(("retired_pages_pending",), lambda: pynvml.nvmlDeviceGetRetiredPagesPendingStatus(handle), bool)
    ask(("remapped_rows_uncorrectable", "row_remap_pending", "row_remap_failure"),
        lambda: pynvml.nvmlDeviceGetRemappedRows(handle), lambda r: (int(r[1]), bool(r[2]), bool(r[3])))
    ask(("clocks_event_reasons",), lambda: pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle), int)
    ask(("pcie_gen_current",), lambda: pynvml.nvmlDeviceGetCurrPcieLinkGeneration(handle), int)
    ask(("pcie_gen_max",), lambda: pynvml.nvmlDeviceGetMaxPcieLinkGeneration(handle), int)
    ask(("pcie_gen_gpu_max",), lambda: pynvml.nvmlDeviceGetGpuMaxPcieLinkGeneration(handle), int)
    ask(("pcie_width_current",), lambda: pynvml.nvmlDeviceGetCurrPcieLinkWidth(handle), int)
    ask(("pcie_width_max",), lambda: pynvml.nvmlDeviceGetMaxPcieLinkWidth(handle), int)
    ask(("persistence_mode",), lambda: pynvml.nvmlDeviceGetPersistenceMode(handle), bool)
    ask(("mig_enabled",), lambda: pynvml.nvmlDeviceGetMigMode(handle)[0], bool)
    values["unknown"] = unknown
    return values


def _failure(kind: str, error: str) -> dict:
    return {"ok": False, "error_kind": kind, "error": error}


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _error_kind(pynvml, exc) -> str:
    return {
        pynvml.NVML_ERROR_LIBRARY_NOT_FOUND: "library-not-found",
        pynvml.NVML_ERROR_DRIVER_NOT_LOADED: "driver-not-loaded",
        pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH: "mismatch",
        pynvml.NVML_ERROR_NO_PERMISSION: "no-permission",
    }.get(getattr(exc, "value", None), "other")


if __name__ == "__main__":
    init_begun = _begin_nvml_init()  # first: it runs beside every import below
    import json

    sys.path[:] = json.loads(sys.stdin.buffer.read(MAX_PATH_BYTES + 1))  # the parent's, in its order (stdlib included)
    sys.stdout.write(json.dumps(query(init_begun)))
    sys.stdout.flush()
    # The parent reads until this process ends (host/live.py: read_bounded_output): leave now,
    # without the interpreter's finalization and the NVML library's teardown in its destructors
    # (the early init's reference is still held); closing the process closes the driver's files.
    os._exit(0)
