"""All facts about one host, each probed on first use and then kept.

Checks name the facts they need; the engine asks this object for them. A probe that crashes
is remembered as a ``ProbeFailure`` so every check that needs it is reported, not the doctor.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Iterable

from .paths import GpudoctorDirs
from .probes.compat_data import wheel_library_stems
from .probes.cuda_libs import probe_ld_path_libraries
from .probes.dist_metadata import probe_dist_requirements
from .probes.driver import probe_driver
from .probes.health import probe_health
from .probes.kernel_log import probe_kernel_log
from .probes.libcuda import probe_libcuda, probe_triton_libcuda
from .probes.linktest import probe_link
from .probes.packages import probe_packages
from .probes.python_headers import probe_python_headers
from .probes.runtime import probe_runtime
from .probes.system import probe_system
from .probes.toolchain import probe_toolchain, probe_triton_cc
from .threads import start_daemon


class ProbeFailure(Exception):
    def __init__(self, name: str, cause: BaseException) -> None:
        super().__init__(f"probe '{name}' failed: {type(cause).__name__}: {cause}")
        self.name = name


# The facts worth a thread of their own, longest chain first. Under the GIL every extra thread
# costs its start (a wait for a switch while another thread computes) and competes for the
# interpreter, so the quick facts (env, dirs, requirements, runtime, triton_cc) are not here.
# The first three wait on subprocesses: ldconfig then the link test (which also needs
# packages), the compilers' version queries, and NVML's initialization in the driver.
THREADED = ("link", "toolchain", "driver", "triton_libcuda", "libcuda", "packages", "system", "kernel_log")
# The facts probed from other facts (their probes call get() for these): a check that needs one
# waits for these too, so pending() asks about them. tests/doctor/test_facts.py holds this
# equal to what each probe really asks for.
PROBED_FROM = {
    "health": ("driver",),
    "libcuda": ("triton_libcuda",),
    "link": ("packages", "triton_cc", "triton_libcuda"),
    "xformers": ("packages",),
}


class Facts:
    """Lazily computed facts. ``requirements`` holds what the user asked for (--require)."""

    def __init__(self, host, requirements: dict[str, Any] | None = None) -> None:
        self.host = host
        self.requirements = dict(requirements or {})
        self._cache: dict[str, Any] = {}
        self._probes: dict[str, Callable[[], Any]] = {
            "system": lambda: probe_system(host),
            "driver": lambda: probe_driver(host),
            "health": lambda: probe_health(self.get("driver")),  # decoded from the driver's NVML session
            "kernel_log": lambda: probe_kernel_log(host),  # the driver's Xid lines (dmesg, else journalctl -k)
            "packages": lambda: probe_packages(host),
            "toolchain": lambda: probe_toolchain(host),
            # ldconfig's part on its own: the link test needs only that, not the directory scan
            "triton_libcuda": lambda: probe_triton_libcuda(host),
            "libcuda": lambda: probe_libcuda(host, self.get("triton_libcuda")),
            "triton_cc": lambda: probe_triton_cc(host),
            "link": lambda: probe_link(host, self.get("packages"), self.get("triton_cc"), self.get("triton_libcuda")),
            "runtime": lambda: probe_runtime(host),
            "requirements": lambda: self.requirements,
            "dirs": lambda: GpudoctorDirs.from_env(host.env),
            "env": lambda: dict(host.env),
            # issue 15's static checks: CUDA libraries on LD_LIBRARY_PATH, Python.h, xformers' torch pin
            "ld_path_libraries": lambda: probe_ld_path_libraries(host, wheel_library_stems()),
            "python_headers": lambda: probe_python_headers(host),
            "xformers": lambda: probe_dist_requirements(host, self.get("packages"), "xformers"),
        }

        self._locks = {name: threading.Lock() for name in self._probes}
        self._workers: dict[str, threading.Thread] = {}  # the thread probing each fact, if any

    def prefetch_in_background(self, names: Iterable[str]) -> list[threading.Thread]:
        """A daemon thread for each slow fact among ``names`` (THREADED, in that order), started
        from this thread, returning at once: the caller imports or computes something else
        while the probes wait on their subprocesses and NVML. The quick facts are left to get()
        on the caller's thread. A later get() of a name still being probed waits for it
        (per-name locks)."""
        wanted = set(names)
        workers = []
        for name in THREADED:
            if name not in wanted or name in self._cache:
                continue
            worker = self._workers.get(name)
            if worker is None:  # one thread per fact, even when asked twice (preflight, then the engine)
                worker = self._workers[name] = start_daemon(self._quiet_get, name, name=f"gpudoctor-probe-{name}")
            workers.append(worker)
        return workers

    def _quiet_get(self, name: str) -> None:
        try:
            self.get(name)
        except ProbeFailure:
            pass  # remembered; the checks that need it report it

    def pending(self, names: Iterable[str]) -> bool:
        """Whether any of these facts (or a fact it is probed from) is being probed in a thread
        right now: get() would wait. Never waits itself."""
        for name in names:
            if name in self._cache:
                continue
            worker = self._workers.get(name)
            if (worker is not None and worker.is_alive()) or self.pending(PROBED_FROM.get(name, ())):
                return True
        return False

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._probes)

    def gathered(self, name: str) -> Any:
        """The fact if it was already probed (and did not fail), else None: never probes.
        For reporters, which show what the checks looked at and must not run commands."""
        value = self._cache.get(name)
        return None if isinstance(value, ProbeFailure) else value

    def get(self, name: str) -> Any:
        with self._locks[name]:  # per fact, so prefetch threads never probe the same thing twice
            if name not in self._cache:
                try:
                    self._cache[name] = self._probes[name]()
                except (Exception, SystemExit) as exc:  # noqa: BLE001 - a probe bug must not kill the doctor
                    self._cache[name] = ProbeFailure(name, exc)
        value = self._cache[name]
        if isinstance(value, ProbeFailure):
            raise value
        return value
